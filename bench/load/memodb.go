package load

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"go.nanomsg.org/mangos/v3"
	reqsock "go.nanomsg.org/mangos/v3/protocol/req"
	_ "go.nanomsg.org/mangos/v3/transport/tcp" // tcp:// URLs

	codec "switchyard/codec/memodb"
)

// Memodb is a MemoDB load: clients and workers as bcdb's are, REQ sockets
// over NNG (mangos), each carrying many contexts. A client context sends
// a JOB and waits for its RESULT, again and again; a worker context sends
// READY, answers each JOB at once with a RESULT carrying the job's payload,
// and each HEARTBEAT with a HEARTBEAT.
type Memodb struct {
	URL     string
	Service string
	// Clients is the client sockets; InFlight the contexts on each, one
	// job at a time each.
	Clients, InFlight int
	// Workers is the worker contexts, all on one socket.
	Workers int
	Payload []byte
	// TimeoutMS is the JOBs' timeout.
	TimeoutMS uint64
}

// MemodbResult is what the clients saw.
type MemodbResult struct {
	Measured, Finished int64
	Ran                int64 // JOBs the workers got
	Latency            *hdrhistogram.Histogram
}

// dialMemodb opens a REQ socket to url that never resends (a lost reply
// is an error here, not something to paper over).
func dialMemodb(url string) (mangos.Socket, error) {
	s, err := reqsock.NewSocket()
	if err != nil {
		return nil, err
	}
	for name, v := range map[string]any{
		mangos.OptionRetryTime:   time.Duration(0),
		mangos.OptionMaxRecvSize: 0, // no limit: results as large as payloads
	} {
		if err := s.SetOption(name, v); err != nil {
			s.Close()
			return nil, err
		}
	}
	if err := s.Dial(url); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// RunMemodb runs the workers, then the clients for phase ph (until its
// End, or its Budget is spent), and returns once the clients are done and
// the workers stopped.
func RunMemodb(ctx context.Context, cfg Memodb, ph *Phase) (MemodbResult, error) {
	res := MemodbResult{Latency: NewLatencyHistogram()}
	wsock, err := dialMemodb(cfg.URL)
	if err != nil {
		return res, fmt.Errorf("workers: %w", err)
	}
	var ran atomic.Int64
	var stopping atomic.Bool
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	fail := func(err error) {
		mu.Lock()
		if len(errs) < 3 {
			errs = append(errs, err)
		}
		mu.Unlock()
	}
	ready := codec.AppendReady(nil, []string{cfg.Service})
	for range cfg.Workers {
		c, err := wsock.OpenContext()
		if err != nil {
			wsock.Close()
			return res, err
		}
		wg.Go(func() {
			var m codec.Message
			out := ready
			for {
				if err := c.Send(out); err != nil {
					if !stopping.Load() {
						fail(fmt.Errorf("worker send: %w", err))
					}
					return
				}
				b, err := c.Recv()
				if err != nil {
					if !stopping.Load() {
						fail(fmt.Errorf("worker receive: %w", err))
					}
					return
				}
				if err := codec.Decode(b, codec.Reply, &m); err != nil {
					fail(fmt.Errorf("worker: %w", err))
					return
				}
				switch m.Type {
				case codec.Job:
					ran.Add(1)
					out = append(codec.AppendResult(out[:0:0], m.ID), m.Payload...)
				case codec.Heartbeat:
					out = codec.AppendHeartbeat(out[:0:0], m.ID)
				default:
					fail(fmt.Errorf("worker got %s", m.Type))
					return
				}
			}
		})
	}

	jobMsg := append(codec.AppendJob(nil, nil, cfg.Service, cfg.TimeoutMS), cfg.Payload...)
	var measured, finished atomic.Int64
	var cwg sync.WaitGroup
	var hmu sync.Mutex
	var csocks []mangos.Socket
	for range cfg.Clients {
		s, err := dialMemodb(cfg.URL)
		if err != nil {
			fail(fmt.Errorf("client: %w", err))
			break
		}
		csocks = append(csocks, s)
		for range cfg.InFlight {
			c, err := s.OpenContext()
			if err != nil {
				fail(err)
				break
			}
			cwg.Go(func() {
				h := NewLatencyHistogram()
				defer func() {
					hmu.Lock()
					res.Latency.Merge(h)
					hmu.Unlock()
				}()
				var m codec.Message
				for {
					sent, ok := ph.next(ctx)
					if !ok {
						return
					}
					if err := c.Send(jobMsg); err != nil {
						fail(fmt.Errorf("client send: %w", err))
						return
					}
					b, err := c.Recv()
					if err != nil {
						fail(fmt.Errorf("client receive: %w", err))
						return
					}
					done := time.Now()
					if err := codec.Decode(b, codec.Reply, &m); err != nil || m.Type != codec.Result || len(m.Payload) != len(cfg.Payload) {
						fail(fmt.Errorf("client got % x (%v)", b[:min(len(b), 32)], err))
						return
					}
					finished.Add(1)
					if ph.counts(sent, done) {
						measured.Add(1)
						recordLatency(h, done.Sub(sent))
					}
				}
			})
		}
	}
	cwg.Wait()
	for _, s := range csocks {
		s.Close()
	}
	stopping.Store(true)
	wsock.Close() // the parked workers' receives end
	wg.Wait()
	res.Measured, res.Finished, res.Ran = measured.Load(), finished.Load(), ran.Load()
	return res, errors.Join(errs...)
}
