package memodb

import (
	"testing"

	codec "switchyard/codec/memodb"
)

// BenchmarkRoundTrip is one job through the broker: a client's JOB, the
// worker's RESULT (which also asks for the next job), the client's RESULT,
// over real mangos sockets on 127.0.0.1. The allocations are those of both
// sides, mangos's and the scheduler's included: what matters is the count
// before and after a change.
func BenchmarkRoundTrip(b *testing.B) {
	f := start(b, Config{})
	c, w := f.peer(f.dial()), f.peer(f.dial())
	jobMsg := job("bench", 0, "payload")
	c.send(jobMsg)
	m := w.ask(ready("bench"))
	if m.Type != codec.Job {
		b.Fatalf("got %s, want JOB", m.Type)
	}
	id := m.ID
	res := result(id, "done")
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		w.send(res) // the last job's RESULT: parks the worker
		if m := c.recv(); m.Type != codec.Result {
			b.Fatalf("client got %s", m.Type)
		}
		c.send(jobMsg)
		if m := w.recv(); m.Type != codec.Job {
			b.Fatalf("worker got %s", m.Type)
		}
	}
	b.StopTimer()
	w.send(res)
	c.recv()
}
