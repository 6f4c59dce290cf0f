package gearman

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"testing"

	codec "switchyard/codec/gearman"
	"switchyard/sched"
)

// BenchmarkLargeResult runs jobs one at a time whose result is large,
// over real sockets: a client and a worker that sleeps between jobs, on
// different event loops (gnet hands connections to its loops in turn), so
// every result crosses loops. The peers reuse their buffers: B/op and
// allocs/op are the server's.
func BenchmarkLargeResult(b *testing.B) {
	for _, n := range []int{256 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("%dKiB", n>>10), func(b *testing.B) { benchLargeResult(b, n) })
	}
}

// BenchmarkRoundTrip is BenchmarkLargeResult with a result of 16 bytes:
// what one foreground job costs the server, its result crossing loops.
func BenchmarkRoundTrip(b *testing.B) { benchLargeResult(b, 16) }

func benchLargeResult(b *testing.B, n int) {
	s := sched.New(sched.Config{})
	defer s.Close()
	srv := New(Config{Addrs: []string{"tcp://127.0.0.1:0"}, Loops: 2, HandlePrefix: "H:b"}, s, nil)
	if err := srv.Start(); err != nil {
		b.Fatal(err)
	}
	defer srv.Stop(b.Context())
	addr := srv.Addrs()[0].String()
	w, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	done := make(chan error, 1)
	go func() { done <- benchWorker(w, make([]byte, n)) }()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()

	submit := codec.AppendPacket(nil, codec.Req, codec.SubmitJob, []byte("f"), nil, []byte("x"))
	hdr, body := make([]byte, codec.HeaderSize), make([]byte, n+64)
	b.SetBytes(int64(n))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Write(submit); err != nil {
			b.Fatal(err)
		}
		for _, want := range []codec.Type{codec.JobCreated, codec.WorkComplete} {
			if t, _, err := readPacketInto(c, hdr, body); err != nil || t != want {
				b.Fatalf("client got type %d (%v), want %d", t, err, want)
			}
		}
	}
	w.Close()
	<-done
	if srv.loop.Wakes() == 0 {
		b.Fatal("client and worker on one loop: no result crossed loops")
	}
}

// benchWorker serves jobs as a libgearman worker does (PRE_SLEEP, NOOP,
// GRAB_JOB), answering each with result, until its connection closes.
func benchWorker(w net.Conn, result []byte) error {
	sleep := codec.AppendPacket(nil, codec.Req, codec.PreSleep)
	grab := codec.AppendPacket(nil, codec.Req, codec.GrabJob)
	if _, err := w.Write(append(codec.AppendPacket(nil, codec.Req, codec.CanDo, []byte("f")), sleep...)); err != nil {
		return err
	}
	hdr, body, out := make([]byte, codec.HeaderSize), make([]byte, 4096), make([]byte, 0, 64)
	for {
		t, m, err := readPacketInto(w, hdr, body)
		if err != nil {
			return err
		}
		switch t {
		case codec.Noop:
			_, err = w.Write(grab)
		case codec.NoJob:
			_, err = w.Write(sleep)
		case codec.JobAssign:
			handle := body[:bytes.IndexByte(body[:m], 0)]
			var start int
			out, start = codec.Begin(out[:0], codec.Req, codec.WorkComplete)
			out = append(append(out, handle...), 0)
			out = codec.EndTail(out, start, len(result))
			if _, err = w.Write(out); err == nil {
				if _, err = w.Write(result); err == nil {
					_, err = w.Write(grab)
				}
			}
		}
		if err != nil {
			return err
		}
	}
}

// readPacketInto reads one packet's header into hdr and its body into
// body, which must hold it, and returns its type and body length.
func readPacketInto(r io.Reader, hdr, body []byte) (codec.Type, int, error) {
	if _, err := io.ReadFull(r, hdr); err != nil {
		return 0, 0, err
	}
	m := int(binary.BigEndian.Uint32(hdr[8:]))
	if m > len(body) {
		return 0, 0, fmt.Errorf("a %d-byte packet", m)
	}
	_, err := io.ReadFull(r, body[:m])
	return codec.Type(binary.BigEndian.Uint32(hdr[4:])), m, err
}
