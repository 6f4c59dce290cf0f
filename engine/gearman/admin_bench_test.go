package gearman

import (
	"fmt"
	"testing"

	"switchyard/engine/internal/gnetloop"
	"switchyard/sched"
)

type nopListener struct{}

func (nopListener) Notify(uint64, *sched.Update) {}

// BenchmarkListing builds the big admin listings of issue 7: 300k queued
// jobs of one function (one shard), 100k functions, 100k connections.
func BenchmarkListing(b *testing.B) {
	s := sched.New(sched.Config{Tick: -1})
	defer s.Close()
	srv := New(Config{HandlePrefix: "H:bench"}, s, nil)
	c := s.NewClient(nopListener{})
	for i := 0; i < 300_000; i++ {
		req := sched.SubmitReq{Func: []byte("f"), Unique: fmt.Appendf(nil, "u%d", i), Payload: []byte("x"), Background: true}
		if _, err := c.Submit(&req); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; i < 100_000; i++ {
		s.CreateFunc(fmt.Appendf(nil, "fn%d", i))
	}
	conns := make([]*conn, 100_000) // idle connections, as "workers" sees them
	for i := range conns {
		conns[i] = &conn{Conn: new(gnetloop.Conn), srv: srv, ip: "127.0.0.1"}
	}
	for _, bm := range []struct {
		name  string
		build func([]byte) []byte
	}{
		{"show_jobs/300k", func(dst []byte) []byte { return srv.appendJobs(dst, false) }},
		{"show_unique_jobs/300k", func(dst []byte) []byte { return srv.appendJobs(dst, true) }},
		{"status/100k_funcs", func(dst []byte) []byte { return srv.appendStatus(dst, false) }},
		{"workers/100k_conns", func(dst []byte) []byte { return srv.appendWorkersOf(dst, conns) }},
	} {
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				bm.build(nil)
			}
		})
	}
}
