package load

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"strings"
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

// recordingServer answers every background submit with JOB_CREATED and
// keeps, per connection, the submits' uniques and payloads.
func recordingServer(t *testing.T) (string, func() [][][2]string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	var mu sync.Mutex
	var conns [][][2]string
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			i := len(conns)
			conns = append(conns, nil)
			mu.Unlock()
			wg.Go(func() {
				defer conn.Close()
				r := bufio.NewReader(conn)
				for {
					var hdr [headerSize]byte
					if _, err := io.ReadFull(r, hdr[:]); err != nil {
						return
					}
					body := make([]byte, binary.BigEndian.Uint32(hdr[8:12]))
					if _, err := io.ReadFull(r, body); err != nil {
						return
					}
					args := bytes.SplitN(body, []byte{0}, 3)
					mu.Lock()
					conns[i] = append(conns[i], [2]string{string(args[1]), string(args[2])})
					mu.Unlock()
					w := bufio.NewWriter(conn)
					writeRes(w, typeJobCreated, "H:fake:1")
					w.Flush()
				}
			})
		}
	})
	return ln.Addr().String(), func() [][][2]string {
		mu.Lock()
		defer mu.Unlock()
		out := make([][][2]string, len(conns))
		for i, c := range conns {
			out[i] = append([][2]string(nil), c...)
		}
		return out
	}
}

// With Unique, every submit is a job of its own (unique Unique-n, its
// payload starting with it), and Acked lists those acknowledged; with
// PerConn, each connection carries that many.
func TestStreamUniquePerConn(t *testing.T) {
	addr, seen := recordingServer(t)
	s := &Stream{Addr: func() string { return addr }, Function: "f", Payload: bytes.Repeat([]byte("x"), 32),
		InFlight: 2, Unique: "u1", PerConn: 3, Gaps: &AckGaps{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	waitFor(t, "30 acknowledgements", func() bool { return s.Counts().Acked >= 30 })
	cancel()
	<-done
	acked := map[string]bool{}
	for _, u := range s.Acked() {
		if acked[u] {
			t.Errorf("%s acknowledged twice", u)
		}
		acked[u] = true
	}
	conns := seen()
	submits := 0
	for i, c := range conns {
		if len(c) > 3 || len(c) < 3 && i < len(conns)-1 {
			t.Errorf("connection %d carried %d submits, want 3", i, len(c))
		}
		for _, sub := range c {
			submits++
			if got := UniqueOf([]byte(sub[1])); got != sub[0] || len(sub[1]) != 32 || !strings.HasPrefix(sub[0], "u1-") {
				t.Errorf("unique %q, payload %q", sub[0], sub[1])
			}
		}
	}
	if len(acked) != int(s.Counts().Acked) || len(acked) > submits || len(acked) < 30 {
		t.Errorf("%d acknowledged uniques, %d acknowledgements, %d submits", len(acked), s.Counts().Acked, submits)
	}
	if d, _, _ := s.Gaps.Longest(); d <= 0 {
		t.Errorf("longest gap %v", d)
	}
}

// AckGaps keeps the longest time between two acknowledgements, of any
// stream, in whatever order they report.
func TestAckGaps(t *testing.T) {
	var g AckGaps
	t0 := time.Unix(1000, 0)
	g.Start(t0)
	for _, ms := range []int{1, 2, 8, 5, 9, 20, 21} {
		g.ack(t0.Add(time.Duration(ms) * time.Millisecond))
	}
	d, from, to := g.Longest()
	if d != 11*time.Millisecond || !from.Equal(t0.Add(9*time.Millisecond)) || !to.Equal(t0.Add(20*time.Millisecond)) {
		t.Errorf("longest %v from %v to %v", d, from, to)
	}
	g.Start(t0.Add(time.Second))
	if d, _, _ := g.Longest(); d != 0 {
		t.Errorf("after Start: %v", d)
	}
}
