package load

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"

	"switchyard/engine/memodb"
	"switchyard/sched"
)

// RunMemodb against the MemoDB frontend in this process: every context
// runs jobs, every result is the job's payload, and the phase's bounds
// hold.
func TestRunMemodb(t *testing.T) {
	s := sched.New(sched.Config{})
	defer s.Close()
	srv := memodb.New(memodb.Config{Addrs: []string{"tcp://127.0.0.1:0"}}, s, zap.NewNop())
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Stop(context.Background())
	for _, tc := range []struct {
		name                       string
		clients, inflight, workers int
		payload                    int
	}{
		{"one of each", 1, 1, 1, 0},
		{"many contexts", 2, 8, 4, 64},
		{"large payloads", 1, 2, 2, 1 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now().Add(20 * time.Millisecond)
			ph := &Phase{Start: start, End: start.Add(200 * time.Millisecond)}
			res, err := RunMemodb(context.Background(), Memodb{
				URL: srv.Addrs()[0], Service: "load " + tc.name, Clients: tc.clients, InFlight: tc.inflight,
				Workers: tc.workers, Payload: make([]byte, tc.payload), TimeoutMS: 10_000,
			}, ph)
			if err != nil {
				t.Fatal(err)
			}
			if res.Measured <= 0 || res.Finished < res.Measured || res.Ran < res.Finished ||
				res.Latency.TotalCount() != res.Measured {
				t.Fatalf("%+v (latencies %d)", res, res.Latency.TotalCount())
			}
		})
	}
}
