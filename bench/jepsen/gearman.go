package jepsen

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"time"
)

// Gearman, spoken here by hand (so that no server code is on the client
// side): a packet is "\0REQ" or "\0RES", a type and a size (4 bytes
// each, big-endian), then the arguments, NUL-separated.
const (
	gCanDo          = 1
	gPreSleep       = 4
	gNoop           = 6
	gJobCreated     = 8
	gNoJob          = 10
	gWorkComplete   = 13
	gSubmitJobBg    = 18
	gError          = 19
	gGrabJobUniq    = 30
	gJobAssignUniq  = 31
	gSubmitJobEpoch = 36
)

// gearmanArgs is how many arguments each response the workload reads has.
var gearmanArgs = map[uint32]int{gNoop: 0, gJobCreated: 1, gNoJob: 0, gError: 2, gJobAssignUniq: 4}

func appendGearman(dst []byte, typ uint32, args ...string) []byte {
	size := len(args) - 1
	for _, a := range args {
		size += len(a)
	}
	size = max(size, 0)
	dst = append(dst, "\x00REQ"...)
	dst = binary.BigEndian.AppendUint32(dst, typ)
	dst = binary.BigEndian.AppendUint32(dst, uint32(size))
	for i, a := range args {
		if i > 0 {
			dst = append(dst, 0)
		}
		dst = append(dst, a...)
	}
	return dst
}

// readGearman reads one response packet.
func readGearman(r *bufio.Reader) (typ uint32, args []string, err error) {
	var head [12]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return 0, nil, err
	}
	if string(head[:4]) != "\x00RES" {
		return 0, nil, fmt.Errorf("gearman: magic %q", head[:4])
	}
	typ = binary.BigEndian.Uint32(head[4:])
	size := binary.BigEndian.Uint32(head[8:])
	if size > 1<<20 {
		return 0, nil, fmt.Errorf("gearman: a packet of %d bytes", size)
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, nil, err
	}
	n, ok := gearmanArgs[typ]
	if !ok {
		return typ, nil, fmt.Errorf("gearman: unexpected packet type %d", typ)
	}
	for i := 0; i < n; i++ {
		if i == n-1 {
			args = append(args, string(body))
			break
		}
		j := bytes.IndexByte(body, 0)
		if j < 0 {
			return typ, nil, fmt.Errorf("gearman: packet type %d with %d arguments, want %d", typ, len(args)+1, n)
		}
		args = append(args, string(body[:j]))
		body = body[j+1:]
	}
	return typ, args, nil
}

type gconn struct {
	net.Conn
	r *bufio.Reader
}

// gearmanClient submits background jobs through node nodes[home], each
// with a unique of its own; one in four is a delayed job (SUBMIT_JOB_EPOCH,
// a few seconds ahead) submitted again at once, with no delay, through the
// next node: the second must coalesce into the first, which waits.
func (w *Workload) gearmanClient(ctx context.Context, proc string, home int, rng *rand.Rand) {
	conns := make([]*gconn, len(w.cfg.Nodes))
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	for k := 0; k < w.cfg.Ops && ctx.Err() == nil; k++ {
		u := fmt.Sprintf("%s-%d", proc, k)
		if rng.IntN(4) == 0 {
			epoch := time.Now().Add(2 * time.Second).Unix()
			w.gearmanSubmit(ctx, proc, conns, home, u, epoch)
			w.gearmanSubmit(ctx, proc, conns, (home+1)%len(w.cfg.Nodes), u, 0)
		} else {
			w.gearmanSubmit(ctx, proc, conns, home, u, 0)
		}
		w.opsDone.Add(1)
		if !pause(ctx, w.cfg.Pace) {
			return
		}
	}
}

// gearmanSubmit submits unique u through node i (at epoch, if not 0) and
// records it.
func (w *Workload) gearmanSubmit(ctx context.Context, proc string, conns []*gconn, i int, u string, epoch int64) {
	n := w.cfg.Nodes[i]
	inv := Event{Process: proc, Proto: Gearman, F: "submit", Node: n.ID, Key: u}
	if epoch != 0 {
		inv.Value = "epoch " + strconv.FormatInt(epoch, 10)
	}
	call := w.cfg.Rec.Now()
	c := conns[i]
	if c == nil {
		nc, err := w.dial(ctx, n.Gearman)
		if err != nil {
			w.cfg.Rec.Op(call, inv, Fail, Event{Error: notSent})
			return
		}
		c = &gconn{Conn: nc, r: bufio.NewReader(nc)}
		conns[i] = c
	}
	drop := func() {
		c.Close()
		conns[i] = nil
	}
	var pkt []byte
	if epoch != 0 {
		pkt = appendGearman(nil, gSubmitJobEpoch, gearmanFunc, u, strconv.FormatInt(epoch, 10), u)
	} else {
		pkt = appendGearman(nil, gSubmitJobBg, gearmanFunc, u, u)
	}
	c.SetDeadline(time.Now().Add(w.cfg.Timeout))
	if _, err := c.Write(pkt); err != nil {
		drop()
		w.cfg.Rec.Op(call, inv, Unknown, Event{Error: err.Error()})
		return
	}
	typ, args, err := readGearman(c.r)
	switch {
	case err != nil:
		drop()
		w.cfg.Rec.Op(call, inv, Unknown, Event{Error: err.Error()})
	case typ == gJobCreated:
		w.cfg.Rec.Op(call, inv, OK, Event{Handle: args[0]})
		w.acked(Gearman, n.ID, u, 0)
	case typ == gError:
		w.cfg.Rec.Op(call, inv, Fail, Event{Error: args[0] + " " + args[1]})
	default:
		drop()
		w.oddity("%s: a submit answered with packet type %d", proc, typ)
		w.cfg.Rec.Op(call, inv, Unknown, Event{Error: fmt.Sprintf("packet type %d", typ)})
	}
}

// gearmanWorker runs the workload's Gearman jobs through node n, as
// libgearman's workers do (GRAB_JOB_UNIQ; NO_JOB, PRE_SLEEP, NOOP),
// recording each job it is given and its completion.
func (w *Workload) gearmanWorker(ctx context.Context, proc string, n Node) {
	for ctx.Err() == nil {
		err := w.gearmanWork(ctx, proc, n)
		if ctx.Err() == nil && err != nil && !pause(ctx, reconnectPause) {
			return
		}
	}
}

// idleRead bounds a worker's wait for a packet while it sleeps (it grabs
// again after it) and while a grab is answered (past it the connection is
// taken as dead).
const idleRead = 2 * time.Second

func (w *Workload) gearmanWork(ctx context.Context, proc string, n Node) error {
	nc, err := w.dial(ctx, n.Gearman)
	if err != nil {
		return err
	}
	defer nc.Close()
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	defer stop()
	c := &gconn{Conn: nc, r: bufio.NewReader(nc)}
	if _, err := c.Write(appendGearman(nil, gCanDo, gearmanFunc)); err != nil {
		return err
	}
	grabbing := false
	var grabbed int64
	grab := func() error {
		grabbing, grabbed = true, w.cfg.Rec.Now()
		_, err := c.Write(appendGearman(nil, gGrabJobUniq))
		return err
	}
	if err := grab(); err != nil {
		return err
	}
	for {
		c.SetReadDeadline(time.Now().Add(idleRead))
		typ, args, err := readGearman(c.r)
		var ne net.Error
		switch {
		case err != nil && !grabbing && errors.As(err, &ne) && ne.Timeout():
			err = grab() // asleep with nothing said: look again
		case err != nil:
			return err
		case typ == gNoop:
			if !grabbing {
				err = grab()
			}
		case typ == gNoJob:
			grabbing = false
			_, err = c.Write(appendGearman(nil, gPreSleep))
		case typ == gJobAssignUniq:
			grabbing = false
			handle, unique := args[0], args[2]
			w.cfg.Rec.Op(grabbed, Event{Process: proc, Proto: Gearman, F: "run", Node: n.ID}, OK,
				Event{Key: unique, Handle: handle, Value: args[3]})
			w.ran(Gearman, unique, 0)
			w.cfg.Rec.Op(w.cfg.Rec.Now(), Event{Process: proc, Proto: Gearman, F: "complete", Node: n.ID, Key: unique, Handle: handle}, Unknown, Event{})
			if _, err = c.Write(appendGearman(nil, gWorkComplete, handle, "")); err == nil {
				err = grab()
			}
		default:
			w.oddity("%s: packet type %d", proc, typ)
			return fmt.Errorf("gearman: packet type %d", typ)
		}
		if err != nil {
			return err
		}
	}
}
