package load

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"

	"switchyard/engine/memodb"
	"switchyard/sched"
)

// startMemodb serves MemoDB on a real scheduler for the test's length and
// returns its URL.
func startMemodb(t *testing.T) string {
	t.Helper()
	s := sched.New(sched.Config{})
	t.Cleanup(s.Close)
	srv := memodb.New(memodb.Config{Addrs: []string{"tcp://127.0.0.1:0"}}, s, zap.NewNop())
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop(context.Background()) })
	return srv.Addrs()[0]
}

// RunMemodb against the MemoDB frontend in this process: every context
// runs jobs, every result is the job's payload, and a phase's budget is
// run to the job. (Counted, not timed: a 200 ms window once measured no
// job at all on a loaded machine, each 1 MiB round trip taking longer.)
func TestRunMemodb(t *testing.T) {
	url := startMemodb(t)
	for _, tc := range []struct {
		name                       string
		clients, inflight, workers int
		payload                    int
		jobs                       int64
	}{
		{"one of each", 1, 1, 1, 0, 20},
		{"many contexts", 2, 8, 4, 64, 200},
		{"large payloads", 1, 2, 2, 1 << 20, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ph := &Phase{Start: time.Now(), Budget: NewBudget(tc.jobs)}
			res, err := RunMemodb(context.Background(), Memodb{
				URL: url, Service: "load " + tc.name, Clients: tc.clients, InFlight: tc.inflight,
				Workers: tc.workers, Payload: make([]byte, tc.payload), TimeoutMS: 10_000,
			}, ph)
			if err != nil {
				t.Fatal(err)
			}
			if res.Measured != tc.jobs || res.Finished != tc.jobs || res.Ran != tc.jobs ||
				res.Latency.TotalCount() != tc.jobs {
				t.Fatalf("%+v (latencies %d), want %d jobs", res, res.Latency.TotalCount(), tc.jobs)
			}
		})
	}
}

// A phase with an End stops the clients then: the run comes back (the
// count of jobs in the window depends on the machine; what is counted
// must agree).
func TestRunMemodbWindow(t *testing.T) {
	url := startMemodb(t)
	ph := &Phase{Start: time.Now(), End: time.Now().Add(100 * time.Millisecond)}
	res, err := RunMemodb(context.Background(), Memodb{URL: url, Service: "window", Clients: 1, InFlight: 2,
		Workers: 1, TimeoutMS: 10_000}, ph)
	if err != nil {
		t.Fatal(err)
	}
	if res.Measured > res.Finished || res.Ran < res.Finished || res.Latency.TotalCount() != res.Measured {
		t.Fatalf("%+v (latencies %d)", res, res.Latency.TotalCount())
	}
}
