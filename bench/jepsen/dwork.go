package jepsen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/transport"
	"google.golang.org/protobuf/proto"

	codec "switchyard/codec/dwork"
)

// dwork, over ZeroMQ (zmq4) with the messages of dwork's .proto: each
// request on a REQ socket of its own, as dwork's dquery opens a connection
// a command. The sockets dial through the workload's Dialer (from the
// clients' namespace) by a zmq4 transport of this package's, whose
// addresses name the Dialer: "jepsen-dwork://TOKEN/HOST:PORT".

const dworkTransport = "jepsen-dwork"

var (
	registerDwork = sync.OnceValue(func() error { return zmq4.RegisterTransport(dworkTransport, dworkDialTransport{}) })
	dworkDialers  sync.Map // token -> dworkDialer
	dworkTokens   atomic.Int64
	quiet         = log.New(io.Discard, "", 0)
)

type dworkDialer struct {
	dial    Dialer
	timeout time.Duration
}

// dworkDialTransport dials with the Dialer its address names, and bounds
// the whole connection's life (the ZMTP handshake, a request, its reply)
// by the workload's timeout.
type dworkDialTransport struct{}

func (dworkDialTransport) Dial(ctx context.Context, _ transport.Dialer, addr string) (net.Conn, error) {
	token, hostPort, _ := strings.Cut(addr, "/")
	v, ok := dworkDialers.Load(token)
	if !ok {
		return nil, fmt.Errorf("dwork: no dialer %q", token)
	}
	d := v.(dworkDialer)
	ctx, cancel := context.WithTimeout(ctx, d.timeout) // zmq4's has none
	defer cancel()
	c, err := d.dial(ctx, "tcp", hostPort)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(d.timeout))
	// Closed when its time is up: zmq4 leaves a connection whose ZMTP
	// handshake failed open (Socket.Dial returns without closing it), and
	// a peer that never sees it close waits out its own handshake timeout
	// on it. The dwork server greets one connection at a time: under loss,
	// a few such leaked connections each held its accept loop for 10 s,
	// every later client gave up (and leaked) behind them, and dwork
	// served no one again (bench/jepsen's loss schedule).
	time.AfterFunc(d.timeout, func() { c.Close() })
	return c, nil
}

func (dworkDialTransport) Listen(context.Context, string) (net.Listener, error) {
	return nil, errors.New("dwork: the workload's transport only dials")
}

func (dworkDialTransport) Addr(ep string) (string, error) { return ep, nil }

// errNotSent: the request never left (its socket did not connect).
var errNotSent = errors.New(notSent)

// dworkDo sends one request on a REQ socket of its own through addr and
// returns the reply.
func (w *Workload) dworkDo(ctx context.Context, addr string, req *codec.QueryMsg) (*codec.QueryMsg, error) {
	if err := registerDwork(); err != nil {
		return nil, err
	}
	w.dworkOnce.Do(func() {
		w.dworkToken = strconv.FormatInt(dworkTokens.Add(1), 10)
		dworkDialers.Store(w.dworkToken, dworkDialer{dial: w.cfg.Dial, timeout: w.cfg.Timeout})
	})
	ctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
	defer cancel()
	sock := zmq4.NewReq(context.Background(), zmq4.WithLogger(quiet), zmq4.WithDialerTimeout(w.cfg.Timeout), zmq4.WithDialerMaxRetries(0))
	defer sock.Close()
	stop := context.AfterFunc(ctx, func() { sock.Close() }) // zmq4's Recv does not watch a context
	defer stop()
	if err := sock.Dial(dworkTransport + "://" + w.dworkToken + "/" + addr); err != nil {
		return nil, fmt.Errorf("%w: %v", errNotSent, err)
	}
	b, err := proto.Marshal(req)
	if err != nil {
		return nil, err
	}
	if err := sock.Send(zmq4.NewMsg(b)); err != nil {
		return nil, err
	}
	msg, err := sock.Recv()
	if err != nil {
		return nil, err
	}
	if len(msg.Frames) != 1 {
		return nil, fmt.Errorf("dwork: a reply of %d frames", len(msg.Frames))
	}
	var rep codec.QueryMsg
	if err := proto.Unmarshal(msg.Frames[0], &rep); err != nil {
		return nil, fmt.Errorf("dwork: reply: %w", err)
	}
	return &rep, nil
}

func dworkType(t codec.QueryMsg_Type) *codec.QueryMsg_Type { return &t }

// outcome is an operation's completion from a request's error: not sent,
// or unknown.
func outcome(err error) (Type, Event) {
	if errors.Is(err, errNotSent) {
		return Fail, Event{Error: err.Error()} // "not sent: why"
	}
	return Unknown, Event{Error: err.Error()}
}

// dworkClient creates small task graphs through node n: a, then b after
// a, then c after a and b, each Create on its own (predecessors are made
// first, as dwork wants).
func (w *Workload) dworkClient(ctx context.Context, proc string, n Node) {
	for g := 0; g < w.cfg.Ops && ctx.Err() == nil; g++ {
		base := fmt.Sprintf("%s-%d-", proc, g)
		for _, t := range []struct {
			name string
			deps []string
		}{{"a", nil}, {"b", []string{"a"}}, {"c", []string{"a", "b"}}} {
			task := &codec.TaskMsg{Name: proto.String(base + t.name), Origin: proto.String("jepsen")}
			var deps []string
			for _, d := range t.deps {
				deps = append(deps, base+d)
				task.Pred = append(task.Pred, &codec.TaskMsg_Dep{Name: proto.String(base + d)})
			}
			inv := Event{Process: proc, Proto: Dwork, F: "create", Node: n.ID, Key: base + t.name, Deps: deps}
			call := w.cfg.Rec.Now()
			rep, err := w.dworkDo(ctx, n.Dwork, &codec.QueryMsg{Type: dworkType(codec.QueryMsg_Create), Task: []*codec.TaskMsg{task}})
			switch {
			case err != nil:
				typ, done := outcome(err)
				w.cfg.Rec.Op(call, inv, typ, done)
			case rep.GetType() == codec.QueryMsg_OK:
				w.cfg.Rec.Op(call, inv, OK, Event{})
				w.acked(Dwork, n.ID, base+t.name, 0)
			default:
				w.cfg.Rec.Op(call, inv, Fail, Event{Error: rep.GetType().String()})
			}
		}
		w.opsDone.Add(1)
		if !pause(ctx, w.cfg.Pace) {
			return
		}
	}
}

// DworkHostTimeout is the nodes' --dwork-host-timeout. A Steal delayed
// in the network can reach the server after the Exit its host sent when
// the Steal timed out: the task it hands out is then held for a host that
// has given it up, and only the host's silence gives it back (the loss
// schedule lost two tasks so, the second waiting for the first). So a
// host takes a new name after each Exit, and the old one, silent, times
// out.
const DworkHostTimeout = 3 * time.Second

// stealIdle is a host's pause after a Steal that found nothing.
const stealIdle = 50 * time.Millisecond

// dworkHost steals tasks through node n as a host named proc, one at a
// time, and reports each complete. A Steal or a completion whose answer
// is lost may leave a task held by the host on the server, which nothing
// would give back: the host then sends Exit (until answered), and what it
// held runs again.
func (w *Workload) dworkHost(ctx context.Context, proc string, n Node) {
	incarnation := 0
	loc := proto.String(proc)
	exit := func() { // and a new name: see DworkHostTimeout
		w.dworkExit(ctx, proc, loc, n)
		incarnation++
		loc = proto.String(fmt.Sprintf("%s.%d", proc, incarnation))
	}
	for ctx.Err() == nil {
		call := w.cfg.Rec.Now()
		rep, err := w.dworkDo(ctx, n.Dwork, &codec.QueryMsg{Type: dworkType(codec.QueryMsg_Steal), Location: loc, N: proto.Int32(1)})
		if err != nil {
			exit()
			continue
		}
		if rep.GetType() != codec.QueryMsg_Transfer || len(rep.Task) == 0 {
			if rep.GetType() != codec.QueryMsg_NotFound {
				w.oddity("%s: Steal answered %v", proc, rep.GetType())
			}
			pause(ctx, stealIdle)
			continue
		}
		for _, t := range rep.Task {
			w.cfg.Rec.Op(call, Event{Process: proc, Proto: Dwork, F: "run", Node: n.ID}, OK, Event{Key: t.GetName()})
			w.ran(Dwork, t.GetName(), 0)
		}
		for _, t := range rep.Task {
			inv := Event{Process: proc, Proto: Dwork, F: "complete", Node: n.ID, Key: t.GetName()}
			call := w.cfg.Rec.Now()
			done := &codec.TaskMsg{Name: t.Name, Origin: t.Origin}
			rep, err := w.dworkDo(ctx, n.Dwork, &codec.QueryMsg{Type: dworkType(codec.QueryMsg_Transfer), Location: loc, Task: []*codec.TaskMsg{done}})
			switch {
			case err != nil:
				typ, ev := outcome(err)
				w.cfg.Rec.Op(call, inv, typ, ev)
				exit()
			case rep.GetType() == codec.QueryMsg_OK:
				w.cfg.Rec.Op(call, inv, OK, Event{})
			default:
				// NotFound: no host holds it (the leader changed since
				// the Steal): it runs again.
				w.cfg.Rec.Op(call, inv, Fail, Event{Error: rep.GetType().String()})
			}
		}
	}
}

// dworkExit sends Exit for the host until it is answered, each attempt
// recorded ("exit": ok, whether the server knew the host or not).
func (w *Workload) dworkExit(ctx context.Context, proc string, loc *string, n Node) {
	for ctx.Err() == nil {
		inv := Event{Process: proc, Proto: Dwork, F: "exit", Node: n.ID}
		call := w.cfg.Rec.Now()
		rep, err := w.dworkDo(ctx, n.Dwork, &codec.QueryMsg{Type: dworkType(codec.QueryMsg_Exit), Location: loc})
		if err == nil {
			w.cfg.Rec.Op(call, inv, OK, Event{Value: rep.GetType().String()})
			return
		}
		typ, ev := outcome(err)
		w.cfg.Rec.Op(call, inv, typ, ev)
		pause(ctx, reconnectPause)
	}
}
