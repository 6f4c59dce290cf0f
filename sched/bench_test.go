package sched

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

type nopListener struct{}

func (nopListener) Notify(uint64, *Update) {}

type nopWaker struct{}

func (nopWaker) Wake(any) {}

// prefill queues n background jobs for f.
func prefill(b *testing.B, s *Sched, f string, n int) {
	c := s.NewClient(nopListener{})
	req := SubmitReq{Func: []byte(f), Payload: make([]byte, 64), Background: true}
	for i := 0; i < n; i++ {
		if _, err := c.Submit(&req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRoundTrip is one foreground job through submit, grab and
// complete, with 0 or 1e6 other jobs queued for another function.
func BenchmarkRoundTrip(b *testing.B) {
	for _, queued := range []int{0, 1_000_000} {
		b.Run(fmt.Sprint("queued=", queued), func(b *testing.B) {
			s := New(Config{Tick: -1})
			defer s.Close()
			prefill(b, s, "other", queued)
			roundTrips(b, s)
		})
	}
}

// roundTrips runs b.N foreground jobs of function f through s, one at a
// time: submit, grab, complete.
func roundTrips(b *testing.B, s *Sched) {
	c := s.NewClient(nopListener{})
	w := s.NewWorker(nopWaker{})
	w.CanDo([]byte("f"), 0)
	req := SubmitReq{Func: []byte("f"), Payload: make([]byte, 64)}
	u := Update{Kind: Complete, Data: []byte("result")}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.Submit(&req); err != nil {
			b.Fatal(err)
		}
		j := w.Grab()
		if err := w.Update(j.ID(), &u); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSubmitBackground measures queueing onto a function that already
// holds 0 or 1e6 jobs: the cost must not grow with the queue.
func BenchmarkSubmitBackground(b *testing.B) {
	for _, queued := range []int{0, 1_000_000} {
		b.Run(fmt.Sprint("queued=", queued), func(b *testing.B) {
			s := New(Config{Tick: -1})
			defer s.Close()
			prefill(b, s, "f", queued)
			c := s.NewClient(nopListener{})
			req := SubmitReq{Func: []byte("f"), Payload: make([]byte, 64), Background: true}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := c.Submit(&req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGrabComplete drains a queue of 1e6 background jobs.
func BenchmarkGrabComplete(b *testing.B) { benchGrabComplete(b, Config{Tick: -1}) }

// benchGrabComplete drains a queue of 1e6 background jobs of a scheduler
// made with cfg, filling it again whenever it runs dry.
func benchGrabComplete(b *testing.B, cfg Config) {
	s := New(cfg)
	defer s.Close()
	prefill(b, s, "f", 1_000_000)
	w := s.NewWorker(nopWaker{})
	w.CanDo([]byte("f"), 0)
	u := Update{Kind: Complete}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		j := w.Grab()
		if j == nil {
			b.StopTimer()
			prefill(b, s, "f", 1_000_000)
			b.StartTimer()
			j = w.Grab()
		}
		w.Update(j.ID(), &u)
	}
}

// BenchmarkGrabCompleteLease is BenchmarkGrabComplete with a lease that
// holds, as a cluster leader's does (an atomic load and a clock reading
// per grab, engine/cluster's Node.Lease): what the lease costs a grab.
// BenchmarkGrabComplete, with none, is what a nil Lease costs.
func BenchmarkGrabCompleteLease(b *testing.B) {
	var until atomic.Int64
	until.Store(time.Now().Add(time.Hour).UnixNano())
	benchGrabComplete(b, Config{Tick: -1, Lease: func() bool { return time.Now().UnixNano() < until.Load() }})
}

// BenchmarkParallelRoundTrip runs round trips on 16 functions from all
// procs at once: shards keep them from contending.
func BenchmarkParallelRoundTrip(b *testing.B) {
	s := New(Config{Tick: -1})
	defer s.Close()
	var next atomic.Int32
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		f := []byte(fmt.Sprint("f", next.Add(1)%16))
		c := s.NewClient(nopListener{})
		w := s.NewWorker(nopWaker{})
		w.CanDo(f, 0)
		req := SubmitReq{Func: f, Payload: make([]byte, 64)}
		u := Update{Kind: Complete}
		for pb.Next() {
			c.Submit(&req)
			if j := w.Grab(); j != nil {
				w.Update(j.ID(), &u)
			}
		}
	})
}

// BenchmarkRoundTripLatency is BenchmarkRoundTrip's empty case with
// Config.Latency: the cost of timing each job's wait and run.
func BenchmarkRoundTripLatency(b *testing.B) {
	s := New(Config{Tick: -1, Latency: true})
	defer s.Close()
	roundTrips(b, s)
}

// uuidKey writes the i-th of a run of distinct 36-byte uniques, shaped as
// the UUIDs libgearman sends, into u.
func uuidKey(u *[36]byte, i uint64) []byte {
	const hex = "0123456789abcdef"
	copy(u[:], "8f14e45f-ceea-467a-9af0-000000000000")
	for k := 35; i > 0; k-- {
		u[k] = hex[i&15]
		i >>= 4
	}
	return u[:]
}

// BenchmarkQueueUnique queues b.N background jobs on one function, each
// with a unique of its own shaped as a UUID and a 64-byte payload, as the
// queue-1m scenario does; -benchtime 1000000x queues its million. heapB/job
// is the live heap each queued job holds once they are all queued.
func BenchmarkQueueUnique(b *testing.B) {
	s := New(Config{Tick: -1})
	defer s.Close()
	c := s.NewClient(nopListener{})
	var u [36]byte
	req := SubmitReq{Func: []byte("f"), Payload: make([]byte, 64), Background: true}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		req.Unique = uuidKey(&u, uint64(i))
		if _, err := c.Submit(&req); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(b.N), "heapB/job")
	runtime.KeepAlive(s)
}
