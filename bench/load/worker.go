package load

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"time"
)

// Worker serves one function, or several, on one connection until its
// context ends.
//
// With Grab 1 it behaves like a libgearman worker: GRAB_JOB; on JOB_ASSIGN
// it answers WORK_COMPLETE and grabs again; on NO_JOB it sends PRE_SLEEP and
// waits for the server's NOOP before grabbing again. With Grab > 1 it keeps
// that many GRAB_JOBs outstanding (a pipelined worker) and sleeps only once
// every one of them came back NO_JOB.
type Worker struct {
	Addr     string
	Function string
	// Functions, when set, are served instead of Function: a CAN_DO each.
	Functions []string
	Grab      int
	// Result is the WORK_COMPLETE payload; nil echoes the job's payload.
	Result []byte
	// Jobs, when set, is counted down once per job done.
	Jobs *Countdown
	// Pool, when set, gets a token back per job assigned (Client.Pool).
	Pool *Pool
	// Ready, when set, is called once the server has registered the worker,
	// i.e. when the answer to its first GRAB_JOB arrives.
	Ready func()
	// Seen, when set, is called with each job's payload (valid during the
	// call only).
	Seen func(payload []byte)
	// Dial, when set, opens the connection (from another network
	// namespace); nil is net.Dialer's.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// WorkerResult is what one worker connection did.
type WorkerResult struct {
	Jobs int64
}

// Run connects and works until ctx is done.
func (wk *Worker) Run(ctx context.Context) (WorkerResult, error) {
	dial := wk.Dial
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	conn, err := dial(ctx, "tcp", wk.Addr)
	if err != nil {
		return WorkerResult{}, err
	}
	defer conn.Close()
	var cancelled atomic.Bool
	stop := context.AfterFunc(ctx, func() {
		cancelled.Store(true)
		_ = conn.SetDeadline(time.Unix(1, 0)) // unblock the read or write
	})
	defer stop()
	res, err := wk.loop(conn)
	if cancelled.Load() {
		err = nil // how a worker is told to stop
	}
	return res, err
}

func (wk *Worker) loop(conn net.Conn) (WorkerResult, error) {
	var res WorkerResult
	grab := max(wk.Grab, 1)
	r := newPacketReader(conn, 64<<10)
	w := bufio.NewWriterSize(conn, 64<<10)
	functions := wk.Functions
	if len(functions) == 0 {
		functions = []string{wk.Function}
	}
	for _, f := range functions {
		if err := writePacket(w, typeCanDo, []byte(f)); err != nil {
			return res, err
		}
	}
	grabbing := 0 // GRAB_JOBs sent and not answered
	sendGrabs := func(n int) error {
		for range n {
			if err := writePacket(w, typeGrabJob); err != nil {
				return err
			}
			grabbing++
		}
		return nil
	}
	if err := sendGrabs(grab); err != nil {
		return res, err
	}
	if err := w.Flush(); err != nil {
		return res, err
	}
	ready := wk.Ready
	sleeping := false
	for {
		typ, body, err := r.next()
		if err != nil {
			return res, err
		}
		switch typ {
		case typeJobAssign:
			grabbing--
			wk.Pool.Put()
			handle, rest := splitArg(body)
			_, payload := splitArg(rest) // function name, then the payload
			if wk.Seen != nil {
				wk.Seen(payload)
			}
			result := wk.Result
			if result == nil {
				result = payload
			}
			if err := writePacket(w, typeWorkComplete, handle, result); err != nil {
				return res, err
			}
			res.Jobs++
			wk.Jobs.Dec()
			if err := sendGrabs(1); err != nil {
				return res, err
			}
		case typeNoJob:
			grabbing--
			if grabbing == 0 {
				if err := writePacket(w, typePreSleep); err != nil {
					return res, err
				}
				sleeping = true
			}
		case typeNoop:
			// A NOOP while awake is a leftover wake-up: nothing to do.
			if sleeping {
				sleeping = false
				if err := sendGrabs(grab); err != nil {
					return res, err
				}
			}
		case typeError:
			return res, serverError(body)
		default:
			return res, fmt.Errorf("worker: unexpected packet type %d", typ)
		}
		if ready != nil && (typ == typeJobAssign || typ == typeNoJob) {
			ready()
			ready = nil
		}
		if !r.complete() {
			if err := w.Flush(); err != nil {
				return res, err
			}
		}
	}
}
