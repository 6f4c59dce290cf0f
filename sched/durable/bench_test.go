package durable

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/sched"
)

func benchRecord(id uint64) *sched.Record {
	return &sched.Record{ID: id, Func: "bench-bg", Payload: make([]byte, 64)}
}

// BenchmarkEncode is the per-submit cost of a record, outside any lock,
// and of giving its buffer back, as the writer does once it is in a batch.
func BenchmarkEncode(b *testing.B) {
	s := &Store{}
	r := benchRecord(1)
	b.ReportAllocs()
	for b.Loop() {
		recycle(s.Encode(r))
	}
}

// BenchmarkPutInFlight is bg-durable without the network: 4 submitters,
// each with 64 records outstanding, a new Put for each one answered. It
// is bound by how fast answers come back, which group commit and fsync
// latency decide; it reports the records per commit and per fsync.
func BenchmarkPutInFlight(b *testing.B) {
	for _, mode := range []Sync{SyncBatch, SyncNever} {
		b.Run(map[Sync]string{SyncBatch: "batch", SyncNever: "never"}[mode], func(b *testing.B) {
			s, fs := openSyncs(b, b.TempDir(), mode)
			const submitters, inflight = 4, 64
			var next atomic.Uint64
			left := int64(b.N)
			var mu sync.Mutex   // guards left
			r := benchRecord(0) // encoded for each Put, which keeps it
			b.ReportAllocs()
			b.ResetTimer()
			cpu := cpuTime()
			var wg sync.WaitGroup
			for range submitters {
				wg.Go(func() {
					answers := make(chan error, inflight)
					out := 0
					for {
						mu.Lock()
						take := left > 0
						if take {
							left--
						}
						mu.Unlock()
						if !take && out == 0 {
							return
						}
						if take && out < inflight {
							s.Put(next.Add(1), s.Encode(r), func(err error) { answers <- err })
							out++
							continue
						}
						if !take {
							for ; out > 0; out-- {
								if err := <-answers; err != nil {
									b.Error(err)
								}
							}
							return
						}
						if err := <-answers; err != nil {
							b.Error(err)
						}
						s.Put(next.Add(1), s.Encode(r), func(err error) { answers <- err })
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			reportCPU(b, cpu)
			b.ReportMetric(float64(b.N)/float64(s.batches.Load()), "records/commit")
			if n := fs.ended.Load(); n > 0 {
				b.ReportMetric(float64(b.N)/float64(n), "records/fsync")
			}
			s.Close()
		})
	}
}

// BenchmarkPutFlood queues records from every core as fast as Put takes
// them and waits for the last: the store's throughput when batches are as
// large as the load makes them.
func BenchmarkPutFlood(b *testing.B) {
	s, err := Open(b.TempDir(), SyncBatch)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var next atomic.Uint64
	var wg sync.WaitGroup
	r := benchRecord(0) // encoded for each Put, which keeps it
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			wg.Add(1)
			s.Put(next.Add(1), s.Encode(r), func(error) { wg.Done() })
		}
	})
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/float64(s.batches.Load()), "records/commit")
}

// BenchmarkSubmitStored is a frontend's background submit against the
// store, as an event loop makes it: Submit returns at once and Stored
// answers later. It counts the submit's own cost (allocations included)
// and ends once every answer is in.
func BenchmarkSubmitStored(b *testing.B) {
	st, err := Open(b.TempDir(), SyncBatch)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	s := sched.New(sched.Config{Tick: -1, Store: st})
	defer s.Close()
	c := s.NewClient(nil)
	var wg sync.WaitGroup
	req := sched.SubmitReq{Func: []byte("bench-bg"), Payload: make([]byte, 64), Background: true,
		Stored: func(uint64, error) { wg.Done() }}
	b.ReportAllocs()
	cpu := cpuTime()
	for b.Loop() {
		wg.Add(1)
		if _, err := c.Submit(&req); err != nil {
			b.Fatal(err)
		}
	}
	wg.Wait()
	reportCPU(b, cpu)
}

// reportCPU reports the CPU used since start per op, as cpu-ns/op.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}
