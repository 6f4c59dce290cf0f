package load

import (
	"bufio"
	"context"
	"net"
	"sync"
	"time"
)

// Stream submits background jobs through one server address, keeping
// InFlight submits waiting for JOB_CREATED, and reconnects whenever its
// connection fails or is closed: the flow of submits that a cluster's
// failover interrupts. Addr is asked again at every connection (a node
// that takes the lead listens on new ports).
//
// It notes when the first submit written after a moment (Mark) is
// acknowledged: after the kill of a leader, how long a client that
// reconnects takes to have a job accepted again.
type Stream struct {
	Addr     func() string
	Function string
	Payload  []byte
	InFlight int

	mu         sync.Mutex
	acked      int64
	errors     int64 // ERROR answers (a submit the cluster could not commit)
	conns      int64 // connections made
	mark       time.Time
	ackedSince time.Time // the first ack of a submit written after mark
}

// streamRetry is how long a Stream waits after a failed connection before
// it dials again: short against the failover it measures.
const streamRetry = 10 * time.Millisecond

// streamIdle bounds the wait for an answer to outstanding submits before
// the connection is given up and another made.
const streamIdle = 3 * time.Second

// Run submits until ctx ends.
func (s *Stream) Run(ctx context.Context) {
	for ctx.Err() == nil {
		if addr := s.Addr(); addr != "" {
			s.session(ctx, addr)
		}
		select {
		case <-ctx.Done():
		case <-time.After(streamRetry):
		}
	}
}

// session is one connection: it submits and reads answers until either
// fails or ctx ends.
func (s *Stream) session(ctx context.Context, addr string) {
	d := net.Dialer{Timeout: time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	s.mu.Lock()
	s.conns++
	s.mu.Unlock()

	r := newPacketReader(conn, 64<<10)
	w := bufio.NewWriterSize(conn, 64<<10)
	sent := make([]time.Time, s.InFlight) // a ring of submit times, oldest first
	head, n := 0, 0
	fill := func() error {
		now := time.Now()
		for ; n < s.InFlight; n++ {
			if err := writePacket(w, typeSubmitJobBg, []byte(s.Function), nil, s.Payload); err != nil {
				return err
			}
			sent[(head+n)%len(sent)] = now
		}
		return w.Flush()
	}
	if fill() != nil {
		return
	}
	for {
		_ = conn.SetReadDeadline(time.Now().Add(streamIdle))
		typ, _, err := r.next()
		if err != nil {
			return
		}
		if n == 0 {
			return // an answer to nothing: not a Gearman server's
		}
		at := sent[head]
		head, n = (head+1)%len(sent), n-1
		now := time.Now()
		s.mu.Lock()
		switch typ {
		case typeJobCreated:
			s.acked++
			if !s.mark.IsZero() && s.ackedSince.IsZero() && !at.Before(s.mark) {
				s.ackedSince = now
			}
		case typeError:
			s.errors++
		default:
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		if r.complete() {
			continue
		}
		if fill() != nil {
			return
		}
	}
}

// Mark starts watching for the first acknowledgement of a submit written
// at t or later.
func (s *Stream) Mark(t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mark, s.ackedSince = t, time.Time{}
}

// AckedSince returns when the first submit written after the mark was
// acknowledged, if it has been.
func (s *Stream) AckedSince() (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ackedSince, !s.ackedSince.IsZero()
}

// StreamCounts are what a Stream has done so far.
type StreamCounts struct {
	Acked, Errors, Conns int64
}

// Counts returns what the stream has done so far.
func (s *Stream) Counts() StreamCounts {
	s.mu.Lock()
	defer s.mu.Unlock()
	return StreamCounts{Acked: s.acked, Errors: s.errors, Conns: s.conns}
}
