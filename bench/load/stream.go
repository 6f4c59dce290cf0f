package load

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"net"
	"strconv"
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
	// Dial, when set, opens its connections (from another network
	// namespace); nil is net.Dialer's.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Unique, when set, makes every job a unique one: the n-th submit's
	// unique is Unique-n (from 1), and its payload starts with it and a
	// space (UniqueOf), so that a worker draining the jobs tells them
	// apart. Acked lists those acknowledged. Unique has no space.
	Unique string
	// Gaps, when set, is told of every acknowledgement.
	Gaps *AckGaps
	// PerConn, when set, is how many submits a connection carries: once
	// they are answered, the stream closes it and opens another at once,
	// as short-lived clients do (a script that submits a job and exits).
	PerConn int
	// Idle bounds the wait for an answer before the connection is given
	// up and another made; 0 is streamIdle.
	Idle time.Duration

	mu         sync.Mutex
	acked      int64
	errors     int64 // ERROR answers (a submit the cluster could not commit)
	conns      int64 // connections made
	mark       time.Time
	ackedSince time.Time // the first ack of a submit written after mark
	seq        uint64    // submits written, with Unique
	ackedSeqs  []uint64  // those acknowledged, with Unique
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
		if addr := s.Addr(); addr != "" && s.session(ctx, addr) {
			continue // done with its submits: the next connection at once
		}
		select {
		case <-ctx.Done():
		case <-time.After(streamRetry):
		}
	}
}

// session is one connection: it submits and reads answers until either
// fails or ctx ends, or PerConn submits are answered (then it returns
// true).
func (s *Stream) session(ctx context.Context, addr string) bool {
	dctx, cancel := context.WithTimeout(ctx, time.Second)
	conn, err := s.dial(dctx, addr)
	cancel()
	if err != nil {
		return false
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
	seqs := make([]uint64, s.InFlight)    // and of their sequence numbers, with Unique
	head, n, written := 0, 0, 0
	var unique, payload []byte
	fill := func() error {
		now := time.Now()
		for ; n < s.InFlight && (s.PerConn == 0 || written < s.PerConn); n, written = n+1, written+1 {
			payload = s.Payload
			if s.Unique != "" {
				s.mu.Lock()
				s.seq++
				seqs[(head+n)%len(seqs)] = s.seq
				unique = strconv.AppendUint(append(append(unique[:0], s.Unique...), '-'), s.seq, 10)
				s.mu.Unlock()
				payload = append(append(append(payload[:0:0], unique...), ' '), s.Payload[min(len(unique)+1, len(s.Payload)):]...)
			}
			if err := writePacket(w, typeSubmitJobBg, []byte(s.Function), unique, payload); err != nil {
				return err
			}
			sent[(head+n)%len(sent)] = now
		}
		return w.Flush()
	}
	if fill() != nil {
		return false
	}
	for {
		_ = conn.SetReadDeadline(time.Now().Add(cmp.Or(s.Idle, streamIdle)))
		typ, _, err := r.next()
		if err != nil {
			return false
		}
		if n == 0 {
			return false // an answer to nothing: not a Gearman server's
		}
		at, seq := sent[head], seqs[head]
		head, n = (head+1)%len(sent), n-1
		now := time.Now()
		if typ == typeJobCreated && s.Gaps != nil {
			s.Gaps.ack(now)
		}
		s.mu.Lock()
		switch typ {
		case typeJobCreated:
			s.acked++
			if s.Unique != "" {
				s.ackedSeqs = append(s.ackedSeqs, seq)
			}
			if !s.mark.IsZero() && s.ackedSince.IsZero() && !at.Before(s.mark) {
				s.ackedSince = now
			}
		case typeError:
			s.errors++
		default:
			s.mu.Unlock()
			return false
		}
		s.mu.Unlock()
		if s.PerConn > 0 && written == s.PerConn && n == 0 {
			return true
		}
		if r.complete() {
			continue
		}
		if fill() != nil {
			return false
		}
	}
}

func (s *Stream) dial(ctx context.Context, addr string) (net.Conn, error) {
	if s.Dial != nil {
		return s.Dial(ctx, "tcp", addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

// UniqueOf is the unique a Stream with Unique put at the start of a
// job's payload.
func UniqueOf(payload []byte) string {
	if i := bytes.IndexByte(payload, ' '); i >= 0 {
		return string(payload[:i])
	}
	return string(payload)
}

// Acked lists the uniques of the jobs acknowledged so far (with Unique).
func (s *Stream) Acked() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, len(s.ackedSeqs))
	for i, n := range s.ackedSeqs {
		out[i] = s.Unique + "-" + strconv.FormatUint(n, 10)
	}
	return out
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

// AckGaps follows acknowledgements from any number of streams and keeps
// the longest time between two of them: how long a failover left every
// client without one.
type AckGaps struct {
	mu       sync.Mutex
	last     time.Time
	longest  time.Duration
	from, to time.Time
}

// Start counts gaps from t, forgetting those before.
func (g *AckGaps) Start(t time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.last, g.longest, g.from, g.to = t, 0, time.Time{}, time.Time{}
}

func (g *AckGaps) ack(now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.last.IsZero() {
		g.last = now
		return
	}
	if d := now.Sub(g.last); d > g.longest {
		g.longest, g.from, g.to = d, g.last, now
	}
	if now.After(g.last) {
		g.last = now
	}
}

// Longest is the longest time with no acknowledgement so far, and when it
// began and ended.
func (g *AckGaps) Longest() (d time.Duration, from, to time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.longest, g.from, g.to
}
