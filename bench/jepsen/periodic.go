package jepsen

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"time"
)

// Periodic (Lupino's periodic v0.1.x), by hand: a frame is "\0REQ" or
// "\0RES" and a 4-byte big-endian size, then the payload: a message id,
// "\x00\x01", the command byte, and "\x00\x01" and the data if any. The
// first frame of a connection is one byte, the client type.
const (
	pGrabJob   = 1
	pWorkDone  = 3
	pJobAssign = 5
	pCanDo     = 7
	pPing      = 9
	pPong      = 10
	pSubmitJob = 13
	pSuccess   = 16

	pClient = 1
	pWorker = 2
	pSep    = "\x00\x01"
)

func appendPeriodic(dst []byte, msgID string, cmd byte, data string) []byte {
	size := len(msgID) + len(pSep) + 1
	if data != "" {
		size += len(pSep) + len(data)
	}
	dst = append(dst, "\x00REQ"...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(size))
	dst = append(dst, msgID...)
	dst = append(dst, pSep...)
	dst = append(dst, cmd)
	if data != "" {
		dst = append(dst, pSep...)
		dst = append(dst, data...)
	}
	return dst
}

func periodicHandshake(clientType byte) []byte {
	return []byte{0, 'R', 'E', 'Q', 0, 0, 0, 1, clientType}
}

// readPeriodic reads one reply: its message id, its command (0 when the
// reply is data alone: an error's text) and its data.
func readPeriodic(r *bufio.Reader) (msgID string, cmd byte, data []byte, err error) {
	var head [8]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return "", 0, nil, err
	}
	if string(head[:4]) != "\x00RES" {
		return "", 0, nil, fmt.Errorf("periodic: magic %q", head[:4])
	}
	size := binary.BigEndian.Uint32(head[4:])
	if size > 1<<20 {
		return "", 0, nil, fmt.Errorf("periodic: a frame of %d bytes", size)
	}
	payload := make([]byte, size)
	if _, err := io.ReadFull(r, payload); err != nil {
		return "", 0, nil, err
	}
	id, rest, ok := bytes.Cut(payload, []byte(pSep))
	if !ok {
		return "", 0, nil, fmt.Errorf("periodic: a reply without a separator: %q", payload)
	}
	c, data, hasData := bytes.Cut(rest, []byte(pSep))
	switch {
	case hasData && len(c) == 1:
		return string(id), c[0], data, nil
	case !hasData && len(rest) == 1:
		return string(id), rest[0], nil, nil
	}
	return string(id), 0, rest, nil
}

// periodicJob is the JSON of a job, as much of it as the workload uses.
type periodicJob struct {
	ID       int64  `json:"job_id,omitempty"`
	Name     string `json:"name"`
	Func     string `json:"func"`
	Workload string `json:"workload"`
	SchedAt  int64  `json:"sched_at"`
}

// periodicClient submits named jobs through node n, each due now or a
// few seconds ahead, and replaces many of them (a submit of the same
// name) with a later version a few seconds after: while they wait, while
// they run, or once they are done. A name's versions are submitted by
// this client alone, one after another, so that they are ordered.
func (w *Workload) periodicClient(ctx context.Context, proc string, n Node, rng *rand.Rand) {
	type replace struct {
		name string
		v    int
		at   time.Time
	}
	var due []replace
	var c *gconn
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	for k := 0; k < w.cfg.Ops && ctx.Err() == nil; k++ {
		name, v, delay := fmt.Sprintf("%s-%d", proc, k), 1, int64(rng.IntN(4))
		if len(due) > 0 && time.Now().After(due[0].at) {
			name, v, delay = due[0].name, due[0].v, int64(rng.IntN(2))
			due = due[1:]
			k-- // a replace is not a new name
		}
		c = w.periodicSubmit(ctx, proc, c, n, periodicJob{Name: name, Func: periodicFunc, Workload: "v" + strconv.Itoa(v),
			SchedAt: time.Now().Unix() + delay})
		if v < 3 && rng.IntN(3) != 0 {
			due = append(due, replace{name, v + 1, time.Now().Add(time.Duration(rng.IntN(4000)) * time.Millisecond)})
		}
		w.opsDone.Add(1)
		if !pause(ctx, w.cfg.Pace) {
			return
		}
	}
}

// periodicSubmit submits j through n on c (dialled if nil) and records it;
// it returns the connection to use next, nil if it was closed.
func (w *Workload) periodicSubmit(ctx context.Context, proc string, c *gconn, n Node, j periodicJob) *gconn {
	inv := Event{Process: proc, Proto: Periodic, F: "submit", Node: n.ID, Key: j.Name, Value: j.Workload}
	call := w.cfg.Rec.Now()
	if c == nil {
		nc, err := w.dial(ctx, n.Periodic)
		if err == nil {
			nc.SetDeadline(time.Now().Add(w.cfg.Timeout))
			_, err = nc.Write(periodicHandshake(pClient))
			if err != nil {
				nc.Close()
			}
		}
		if err != nil {
			w.cfg.Rec.Op(call, inv, Fail, Event{Error: notSent})
			return nil
		}
		c = &gconn{Conn: nc, r: bufio.NewReader(nc)}
	}
	body, _ := json.Marshal(j)
	c.SetDeadline(time.Now().Add(w.cfg.Timeout))
	if _, err := c.Write(appendPeriodic(nil, "s", pSubmitJob, string(body))); err != nil {
		c.Close()
		w.cfg.Rec.Op(call, inv, Unknown, Event{Error: err.Error()})
		return nil
	}
	id, cmd, data, err := readPeriodic(c.r)
	switch {
	case err != nil:
		c.Close()
		w.cfg.Rec.Op(call, inv, Unknown, Event{Error: err.Error()})
		return nil
	case id != "s":
		c.Close()
		w.oddity("%s: a reply to message %q, want \"s\"", proc, id)
		w.cfg.Rec.Op(call, inv, Unknown, Event{Error: "reply to another message"})
		return nil
	case cmd == pSuccess:
		w.cfg.Rec.Op(call, inv, OK, Event{})
		w.acked(Periodic, n.ID, j.Name, version(j.Workload))
	default:
		w.cfg.Rec.Op(call, inv, Fail, Event{Error: string(data)})
	}
	return c
}

// periodicWorker runs the workload's Periodic jobs through node n: one
// GRAB_JOB waiting at a time, each job recorded with the version of its
// payload and done at once (WORK_DONE, which is not answered).
func (w *Workload) periodicWorker(ctx context.Context, proc string, n Node) {
	for ctx.Err() == nil {
		err := w.periodicWork(ctx, proc, n)
		if ctx.Err() == nil && err != nil && !pause(ctx, reconnectPause) {
			return
		}
	}
}

func (w *Workload) periodicWork(ctx context.Context, proc string, n Node) error {
	nc, err := w.dial(ctx, n.Periodic)
	if err != nil {
		return err
	}
	defer nc.Close()
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	defer stop()
	c := &gconn{Conn: nc, r: bufio.NewReader(nc)}
	out := append(periodicHandshake(pWorker), appendPeriodic(nil, "c", pCanDo, periodicFunc)...)
	grabbed := w.cfg.Rec.Now()
	if _, err := c.Write(appendPeriodic(out, "g", pGrabJob, "")); err != nil {
		return err
	}
	pinged := false
	for {
		c.SetReadDeadline(time.Now().Add(idleRead))
		id, cmd, data, err := readPeriodic(c.r)
		var ne net.Error
		switch {
		case err != nil && !pinged && errors.As(err, &ne) && ne.Timeout():
			// Nothing due: is the connection alive?
			pinged = true
			_, err = c.Write(appendPeriodic(nil, "p", pPing, ""))
		case err != nil:
			return err
		case cmd == pPong:
			pinged = false
		case cmd == pJobAssign && id == "g":
			handle, js, ok := bytes.Cut(data, []byte(pSep))
			var j periodicJob
			if !ok || json.Unmarshal(js, &j) != nil {
				w.oddity("%s: JOB_ASSIGN %q", proc, data)
				return fmt.Errorf("periodic: JOB_ASSIGN %q", data)
			}
			w.cfg.Rec.Op(grabbed, Event{Process: proc, Proto: Periodic, F: "run", Node: n.ID}, OK,
				Event{Key: j.Name, Value: j.Workload, Handle: string(handle)})
			w.ran(Periodic, j.Name, version(j.Workload))
			w.cfg.Rec.Op(w.cfg.Rec.Now(), Event{Process: proc, Proto: Periodic, F: "complete", Node: n.ID, Key: j.Name,
				Value: j.Workload, Handle: string(handle)}, Unknown, Event{})
			out := appendPeriodic(nil, "d", pWorkDone, string(handle))
			grabbed = w.cfg.Rec.Now()
			_, err = c.Write(appendPeriodic(out, "g", pGrabJob, ""))
		default:
			w.oddity("%s: reply %q command %d: %q", proc, id, cmd, data)
			return fmt.Errorf("periodic: reply %q command %d", id, cmd)
		}
		if err != nil {
			return err
		}
	}
}
