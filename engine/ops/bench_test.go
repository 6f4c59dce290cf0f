package ops

import (
	"fmt"
	"io"
	"net/http/httptest"
	"slices"
	"testing"

	"switchyard/engine/workerline"
	"switchyard/sched"
)

// BenchmarkScrape is one /metrics of 10,000 functions, each with a
// worker and a job.
func BenchmarkScrape(b *testing.B) {
	sc := sched.New(sched.Config{Tick: -1})
	defer sc.Close()
	c := sc.NewClient(nopListener{})
	w := sc.NewWorker(nopWaker{})
	for i := range 10000 {
		fn := fmt.Appendf(nil, "function-%05d", i)
		w.CanDo(fn, 0)
		c.Submit(&sched.SubmitReq{Func: fn, Background: true})
	}
	h := New(Config{Sched: sc}).Handler()
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		io.Copy(io.Discard, rec.Body)
	}
}

// BenchmarkAPIFunctions is one page of /api/functions out of 100,000
// functions: the whole list copied, searched or sorted, one page written.
func BenchmarkAPIFunctions(b *testing.B) {
	sc := sched.New(sched.Config{Tick: -1})
	defer sc.Close()
	for i := range 100000 {
		sc.CreateFunc(fmt.Appendf(nil, "function-%06d", i))
	}
	h := New(Config{Sched: sc}).Handler()
	for _, q := range []string{"", "q=0042", "sort=total&desc=1&offset=50000"} {
		b.Run(q, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest("GET", "/api/functions?"+q, nil))
				if rec.Code != 200 {
					b.Fatal(rec.Code)
				}
			}
		})
	}
}

// BenchmarkAPIConnections is one page of /api/connections out of 100,000
// workers, one in ten holding a job: the lists gathered, searched or
// sorted, one page written.
func BenchmarkAPIConnections(b *testing.B) {
	sc := sched.New(sched.Config{Tick: -1, Latency: true})
	defer sc.Close()
	c := sc.NewClient(nopListener{})
	list := make([]workerline.Worker, 100000)
	for i := range list {
		w := sc.NewWorker(nopWaker{})
		fn := fmt.Appendf(nil, "function-%03d", i%1000)
		w.CanDo(fn, 0)
		if i%10 == 0 {
			c.Submit(&sched.SubmitReq{Func: fn, Background: true})
			w.Grab()
		}
		list[i] = workerline.Worker{FD: i, Peer: "10.0.0.1", ID: fmt.Sprint("host-", i), Funcs: []string{string(fn)}, Sched: w}
	}
	srv := New(Config{Sched: sc})
	srv.AddConns(Conns{Protocol: "gearman", Open: func() int { return len(list) }, List: func() []workerline.Worker {
		return slices.Clone(list) // as a protocol's listing copies
	}})
	h := srv.Handler()
	for _, q := range []string{"", "q=host-4242", "sort=held_for&desc=1", "sort=idle&desc=1&offset=50000"} {
		b.Run(q, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest("GET", "/api/connections?"+q, nil))
				if rec.Code != 200 {
					b.Fatal(rec.Code)
				}
			}
		})
	}
}
