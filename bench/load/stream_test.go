package load

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// flakyServer answers background submits with JOB_CREATED, every fifth
// with ERROR, and closes each connection after perConn answers: what a
// cluster node does to a client around a change of leader.
func flakyServer(t *testing.T, perConn int) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	var n atomic.Int64
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer conn.Close()
				r := bufio.NewReader(conn)
				w := bufio.NewWriter(conn)
				defer w.Flush()
				for range perConn {
					var hdr [headerSize]byte
					if _, err := io.ReadFull(r, hdr[:]); err != nil {
						return
					}
					if _, err := r.Discard(int(binary.BigEndian.Uint32(hdr[8:12]))); err != nil {
						return
					}
					if typ := binary.BigEndian.Uint32(hdr[4:8]); typ != typeSubmitJobBg {
						t.Errorf("packet type %d, want SUBMIT_JOB_BG", typ)
						return
					}
					if n.Add(1)%5 == 0 {
						writeRes(w, typeError, "QUEUE_ERROR", "not committed")
					} else {
						writeRes(w, typeJobCreated, "H:fake:1")
					}
					if r.Buffered() == 0 {
						w.Flush()
					}
				}
			})
		}
	})
	return ln.Addr().String()
}

func TestStreamReconnectsAndMarks(t *testing.T) {
	tests := []struct {
		name     string
		perConn  int
		inflight int
	}{
		{"closed often, pipelined", 7, 4},
		{"closed often, one at a time", 3, 1},
		{"long connections", 1000, 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := flakyServer(t, tt.perConn)
			// No address at first: the stream waits for one.
			var known atomic.Bool
			s := &Stream{Addr: func() string {
				if known.Load() {
					return addr
				}
				return ""
			}, Function: "f", Payload: []byte("p"), InFlight: tt.inflight}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { s.Run(ctx); close(done) }()
			defer func() { cancel(); <-done }()
			if _, ok := s.AckedSince(); ok {
				t.Error("acked since a mark never made")
			}
			known.Store(true)
			waitFor(t, "200 acknowledgements", func() bool { return s.Counts().Acked >= 200 })
			mark := time.Now()
			s.Mark(mark)
			waitFor(t, "an acknowledgement after the mark", func() bool { _, ok := s.AckedSince(); return ok })
			at, _ := s.AckedSince()
			if at.Before(mark) {
				t.Errorf("acked at %v, before the mark %v", at, mark)
			}
			c := s.Counts()
			if c.Errors == 0 || c.Acked < 4*c.Errors-8 {
				t.Errorf("counts %+v: want one ERROR in five answers", c)
			}
			if tt.perConn < 200 && c.Conns < 200/int64(tt.perConn) {
				t.Errorf("counts %+v: want a connection per %d answers", c, tt.perConn)
			}
		})
	}
}

// waitFor polls cond for at most 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after 10 s", what)
		}
		time.Sleep(time.Millisecond) // polling, not synchronising
	}
}
