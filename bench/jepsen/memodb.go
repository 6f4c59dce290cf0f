package jepsen

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"time"

	codec "switchyard/codec/memodb"
)

// MemoDB: NNG's REQ protocol over TCP (SP), by hand, carrying the
// protocol's CBOR headers (codec/memodb's encoding, the deterministic
// one). A connection starts with an 8-byte header each way ("\0SP\0", the
// protocol: REQ 48, REP 49, two reserved bytes); a message is its length
// (8 bytes, big-endian), then a 4-byte request id with its top bit set,
// then the body. The reply carries the request's id.

var (
	spReq = [8]byte{0, 'S', 'P', 0, 0, 48, 0, 0}
	spRep = [8]byte{0, 'S', 'P', 0, 0, 49, 0, 0}
)

type spConn struct {
	*gconn
	id uint32
}

func (w *Workload) dialSP(ctx context.Context, addr string) (*spConn, error) {
	nc, err := w.dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	nc.SetDeadline(time.Now().Add(w.cfg.Timeout))
	c := &spConn{gconn: &gconn{Conn: nc, r: bufio.NewReader(nc)}, id: uint32(time.Now().UnixNano())}
	var peer [8]byte
	if _, err := nc.Write(spReq[:]); err == nil {
		_, err = io.ReadFull(c.r, peer[:])
	}
	if err == nil && peer != spRep {
		err = fmt.Errorf("memodb: SP header %q", peer)
	}
	if err != nil {
		nc.Close()
		return nil, err
	}
	return c, nil
}

// request sends body as a new request; its reply comes from reply.
func (c *spConn) request(body []byte) error {
	c.id++
	msg := binary.BigEndian.AppendUint64(nil, uint64(4+len(body)))
	msg = binary.BigEndian.AppendUint32(msg, c.id|1<<31)
	_, err := c.Write(append(msg, body...))
	return err
}

// reply reads the reply to the last request, skipping late replies to
// earlier ones.
func (c *spConn) reply(deadline time.Time) ([]byte, error) {
	c.SetReadDeadline(deadline)
	for {
		var head [12]byte
		if _, err := io.ReadFull(c.r, head[:]); err != nil {
			return nil, err
		}
		size := binary.BigEndian.Uint64(head[:8])
		if size < 4 || size > 1<<20 {
			return nil, fmt.Errorf("memodb: a message of %d bytes", size)
		}
		body := make([]byte, size-4)
		if _, err := io.ReadFull(c.r, body); err != nil {
			return nil, err
		}
		if binary.BigEndian.Uint32(head[8:]) == c.id|1<<31 {
			return body, nil
		}
	}
}

// memodbClient calls jobs of the workload's service through node n, one at
// a time, each with a payload of its own; the answer must be that job's
// result.
func (w *Workload) memodbClient(ctx context.Context, proc string, n Node) {
	var c *spConn
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	for k := 0; k < w.cfg.Ops && ctx.Err() == nil; k++ {
		key := fmt.Sprintf("%s-%d", proc, k)
		inv := Event{Process: proc, Proto: Memodb, F: "call", Node: n.ID, Key: key}
		call := w.cfg.Rec.Now()
		if c == nil {
			var err error
			if c, err = w.dialSP(ctx, n.Memodb); err != nil {
				w.cfg.Rec.Op(call, inv, Fail, Event{Error: notSent})
				c = nil
				pause(ctx, w.cfg.Pace)
				continue
			}
		}
		deadline := time.Now().Add(w.cfg.Timeout)
		c.SetDeadline(deadline)
		body := append(codec.AppendJob(nil, nil, memodbFunc, 0), key...)
		err := c.request(body)
		var rep []byte
		if err == nil {
			rep, err = c.reply(deadline)
		}
		var m codec.Message
		switch {
		case err != nil:
			c.Close()
			c = nil
			w.cfg.Rec.Op(call, inv, Unknown, Event{Error: err.Error()})
		case codec.Decode(rep, codec.Reply, &m) != nil || m.Type != codec.Result || len(m.ID) != 0:
			c.Close()
			c = nil
			w.oddity("%s: a job answered %q", proc, rep)
			w.cfg.Rec.Op(call, inv, Unknown, Event{Error: "not a result"})
		default:
			w.cfg.Rec.Op(call, inv, OK, Event{Value: string(m.Payload)})
			w.acked(Memodb, n.ID, key, 0)
		}
		w.opsDone.Add(1)
		if !pause(ctx, w.cfg.Pace) {
			return
		}
	}
}

// MemoHeartbeat is the --memodb-heartbeat the workload's servers must
// run with: an idle worker hears from the server this often, so that a
// worker that hears nothing for longer (and the workload's timeout) knows
// its connection dead.
const MemoHeartbeat = time.Second

// memodbWorker runs the workload's MemoDB jobs through node n: READY, then
// each JOB answered with its RESULT, HEARTBEAT with HEARTBEAT, and
// DISCONNECT with a new READY.
func (w *Workload) memodbWorker(ctx context.Context, proc string, n Node) {
	for ctx.Err() == nil {
		err := w.memodbWork(ctx, proc, n)
		if ctx.Err() == nil && err != nil && !pause(ctx, reconnectPause) {
			return
		}
	}
}

func (w *Workload) memodbWork(ctx context.Context, proc string, n Node) error {
	c, err := w.dialSP(ctx, n.Memodb)
	if err != nil {
		return err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	c.SetDeadline(time.Time{})
	ready := codec.AppendReady(nil, []string{memodbFunc})
	sent := w.cfg.Rec.Now()
	if err := c.request(ready); err != nil {
		return err
	}
	for {
		rep, err := c.reply(time.Now().Add(MemoHeartbeat + w.cfg.Timeout))
		if err != nil {
			return err
		}
		var m codec.Message
		if err := codec.Decode(rep, codec.Reply, &m); err != nil {
			w.oddity("%s: %q: %v", proc, rep, err)
			return err
		}
		var next []byte
		switch m.Type {
		case codec.Job:
			key := string(m.Payload)
			w.cfg.Rec.Op(sent, Event{Process: proc, Proto: Memodb, F: "run", Node: n.ID}, OK, Event{Key: key})
			w.ran(Memodb, key, 0)
			w.cfg.Rec.Op(w.cfg.Rec.Now(), Event{Process: proc, Proto: Memodb, F: "complete", Node: n.ID, Key: key}, Unknown, Event{})
			next = append(codec.AppendResult(nil, m.ID), MemoResult(key)...)
		case codec.Heartbeat:
			next = codec.AppendHeartbeat(nil, m.ID)
		case codec.Disconnect:
			next = ready
		default:
			w.oddity("%s: a %v to a worker", proc, m.Type)
			return fmt.Errorf("memodb: a %v to a worker", m.Type)
		}
		sent = w.cfg.Rec.Now()
		if err := c.request(next); err != nil {
			return err
		}
	}
}
