package dwork

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/protobuf/proto"

	codec "switchyard/codec/dwork"
	"switchyard/sched"
	"switchyard/sched/storetest"
)

// The tests talk to a real server on 127.0.0.1 (port 0, read back) with
// zmq4 REQ sockets, the way dwork's clients do, over a real scheduler.
// A REQ socket has one request in flight: its reply says the server has
// handled it, which is all the synchronisation the tests need.

// replyTimeout bounds the wait for any reply: a failure, not a pace.
const replyTimeout = 10 * time.Second

type tenv struct {
	t    *testing.T
	s    *sched.Sched
	srv  *Server
	addr string
	logs *observer.ObservedLogs
}

// start runs a server with cfg (on 127.0.0.1:0, origin "hub" unless cfg
// says otherwise) over a scheduler made with scfg.
func start(t *testing.T, cfg Config, scfg sched.Config) *tenv {
	t.Helper()
	s := sched.New(scfg)
	t.Cleanup(s.Close)
	core, logs := observer.New(zapcore.DebugLevel)
	if cfg.Addrs == nil {
		cfg.Addrs = []string{"tcp://127.0.0.1:0"}
	}
	if cfg.Host == "" {
		cfg.Host = "hub"
	}
	srv := New(cfg, s, zap.New(core))
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), replyTimeout)
		defer cancel()
		if err := srv.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return &tenv{t: t, s: s, srv: srv, addr: srv.Addrs()[0].String(), logs: logs}
}

// client is a REQ socket.
type client struct {
	t    testing.TB
	sock zmq4.Socket
}

func (e *tenv) dial() *client {
	e.t.Helper()
	return dialAddr(e.t, e.addr)
}

func dialAddr(t testing.TB, addr string) *client {
	t.Helper()
	sock := zmq4.NewReq(context.Background())
	if err := sock.Dial("tcp://" + addr); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sock.Close() })
	return &client{t: t, sock: sock}
}

// send sends one message.
func (c *client) send(body []byte) {
	c.t.Helper()
	if err := c.sock.Send(zmq4.NewMsg(body)); err != nil {
		c.t.Fatal(err)
	}
}

// recv waits for the reply to what send sent.
func (c *client) recv() []byte {
	c.t.Helper()
	got := make(chan zmq4.Msg, 1)
	errc := make(chan error, 1)
	go func() {
		m, err := c.sock.Recv()
		if err != nil {
			errc <- err
			return
		}
		got <- m
	}()
	select {
	case m := <-got:
		if len(m.Frames) != 1 {
			c.t.Fatalf("reply of %d frames, want 1", len(m.Frames))
		}
		return m.Frames[0]
	case err := <-errc:
		c.t.Fatalf("recv: %v", err)
	case <-time.After(replyTimeout):
		c.t.Fatalf("no reply after %v", replyTimeout)
	}
	return nil
}

// raw sends a message and returns the reply's bytes.
func (c *client) raw(body []byte) []byte {
	c.t.Helper()
	c.send(body)
	return c.recv()
}

// do sends a request and decodes the reply.
func (c *client) do(m *codec.QueryMsg) *codec.QueryMsg {
	c.t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		c.t.Fatal(err)
	}
	return decodeReply(c.t, c.raw(b))
}

func decodeReply(t testing.TB, b []byte) *codec.QueryMsg {
	t.Helper()
	var r codec.QueryMsg
	if err := proto.Unmarshal(b, &r); err != nil {
		t.Fatalf("reply %x: %v", b, err)
	}
	return &r
}

// Requests.

func typ(t codec.QueryMsg_Type) *codec.QueryMsg_Type { return &t }

// task is a TaskMsg named name, waiting for preds.
func task(name string, preds ...string) *codec.TaskMsg {
	m := &codec.TaskMsg{Name: proto.String(name), Origin: proto.String("client")}
	for _, p := range preds {
		m.Pred = append(m.Pred, &codec.TaskMsg_Dep{Name: proto.String(p)})
	}
	return m
}

func createReq(tasks ...*codec.TaskMsg) *codec.QueryMsg {
	return &codec.QueryMsg{Type: typ(codec.QueryMsg_Create), Task: tasks}
}

func stealReq(loc string, n ...int32) *codec.QueryMsg {
	m := &codec.QueryMsg{Type: typ(codec.QueryMsg_Steal), Location: proto.String(loc)}
	if len(n) > 0 {
		m.N = proto.Int32(n[0])
	}
	return m
}

func doneReq(loc string, names ...string) *codec.QueryMsg {
	m := &codec.QueryMsg{Type: typ(codec.QueryMsg_Transfer), Location: proto.String(loc)}
	for _, n := range names {
		m.Task = append(m.Task, task(n))
	}
	return m
}

func lookupReq(name string) *codec.QueryMsg {
	return &codec.QueryMsg{Type: typ(codec.QueryMsg_Lookup), Name: proto.String(name)}
}

func exitReq(loc string) *codec.QueryMsg {
	return &codec.QueryMsg{Type: typ(codec.QueryMsg_Exit), Location: proto.String(loc)}
}

// Checks.

// wantType fails unless r is a reply of type want with nothing else.
func wantType(t *testing.T, what string, r *codec.QueryMsg, want codec.QueryMsg_Type) {
	t.Helper()
	if !proto.Equal(r, &codec.QueryMsg{Type: &want}) {
		t.Fatalf("%s: reply %v, want only type %v", what, r, want)
	}
}

// wantStolen fails unless r hands out exactly the tasks names, in that
// order, each with origin "hub" and one log entry {Stolen, a time between
// from and to in µs}.
func wantStolen(t *testing.T, what string, r *codec.QueryMsg, from, to time.Time, names ...string) {
	t.Helper()
	if r.GetType() != codec.QueryMsg_Transfer || r.Name != nil || r.N != nil || r.Location != nil {
		t.Fatalf("%s: reply %v, want Transfer with tasks %v", what, r, names)
	}
	var got []string
	for _, tk := range r.Task {
		got = append(got, tk.GetName())
		if tk.GetOrigin() != "hub" || len(tk.Pred) != 0 || len(tk.Succ) != 0 || len(tk.Log) != 1 ||
			tk.Log[0].GetState() != codec.TaskMsg_Stolen {
			t.Fatalf("%s: task %v, want origin hub and one Stolen log entry", what, tk)
		}
		if at := tk.Log[0].GetTime(); at < from.UnixMicro() || at > to.UnixMicro() {
			t.Fatalf("%s: stolen at %d µs, want between %d and %d", what, at, from.UnixMicro(), to.UnixMicro())
		}
	}
	if !slices.Equal(got, names) {
		t.Fatalf("%s: stole %v, want %v", what, got, names)
	}
}

// noN is steal's n for a Steal without n.
const noN = math.MinInt32

// steal steals for loc and checks it gets names (none: NotFound).
func (c *client) steal(t *testing.T, loc string, n int32, names ...string) {
	t.Helper()
	var req *codec.QueryMsg
	if n == noN {
		req = stealReq(loc)
	} else {
		req = stealReq(loc, n)
	}
	from := time.Now()
	r := c.do(req)
	what := "steal by " + loc
	if len(names) == 0 {
		wantType(t, what, r, codec.QueryMsg_NotFound)
		return
	}
	wantStolen(t, what, r, from, time.Now(), names...)
}

// lookup checks where Lookup says name ran ("": NotFound).
func (c *client) lookup(t *testing.T, name, loc string) {
	t.Helper()
	r := c.do(lookupReq(name))
	if loc == "" {
		wantType(t, "lookup "+name, r, codec.QueryMsg_NotFound)
		return
	}
	want := &codec.QueryMsg{Type: typ(codec.QueryMsg_OK), Name: proto.String(name), Location: proto.String(loc)}
	if !proto.Equal(r, want) {
		t.Fatalf("lookup %s: %v, want %v", name, r, want)
	}
}

// A diamond run by two hosts: a; b and c after a; d after b and c. Each
// task is stolen only once its predecessors are done, completions from
// either host free the successors, and Lookup says who ran what.
func TestDiamondTwoLocations(t *testing.T) {
	e := start(t, Config{}, sched.Config{})
	c := e.dial()
	wantType(t, "create", c.do(createReq(task("a"), task("b", "a"), task("c", "a"), task("d", "b", "c"))), codec.QueryMsg_OK)

	c.steal(t, "h1", 4, "a")
	c.steal(t, "h2", 4)
	c.lookup(t, "a", "h1")
	c.lookup(t, "b", "")
	wantType(t, "a done", c.do(doneReq("h1", "a")), codec.QueryMsg_OK)
	c.steal(t, "h1", 1, "b")
	c.steal(t, "h2", noN, "c")
	c.steal(t, "h1", 4) // d waits for b and c
	wantType(t, "c done", c.do(doneReq("h2", "c")), codec.QueryMsg_OK)
	c.steal(t, "h2", 4) // and still for b
	wantType(t, "b done", c.do(doneReq("h1", "b")), codec.QueryMsg_OK)
	c.steal(t, "h2", 4, "d")
	wantType(t, "d done", c.do(doneReq("h2", "d")), codec.QueryMsg_OK)
	c.steal(t, "h1", 4)
	for name, loc := range map[string]string{"a": "h1", "b": "h1", "c": "h2", "d": "h2"} {
		c.lookup(t, name, loc)
	}
	if n := e.s.Len(); n != 0 {
		t.Fatalf("%d jobs left", n)
	}
}

// Create on a name that waits adds its new predecessors; on a finished
// one it does nothing, and a predecessor that does not exist (yet) counts
// as done, as with the real hub.
func TestCreateAddsPredecessors(t *testing.T) {
	e := start(t, Config{}, sched.Config{})
	c := e.dial()
	wantType(t, "create", c.do(createReq(task("p"), task("q"), task("s", "p", "nobody"))), codec.QueryMsg_OK)
	wantType(t, "more preds", c.do(createReq(task("s", "q"))), codec.QueryMsg_OK)
	c.steal(t, "h", 10, "p", "q")
	wantType(t, "p done", c.do(doneReq("h", "p")), codec.QueryMsg_OK)
	c.steal(t, "h", 10) // s now waits for q too
	wantType(t, "q done", c.do(doneReq("h", "q")), codec.QueryMsg_OK)
	c.steal(t, "h", 10, "s")
	wantType(t, "s done", c.do(doneReq("h", "s")), codec.QueryMsg_OK)
	wantType(t, "late create", c.do(createReq(task("s"), task("p", "q"))), codec.QueryMsg_OK)
	c.steal(t, "h", 10)
	c.lookup(t, "s", "h")
}

// Steal hands out up to n tasks in the order they were created: n absent
// is 1, n of 0 or less is none.
func TestStealN(t *testing.T) {
	e := start(t, Config{}, sched.Config{})
	c := e.dial()
	wantType(t, "create", c.do(createReq(task("t1"), task("t2"), task("t3"), task("t4"), task("t5"))), codec.QueryMsg_OK)
	for _, tc := range []struct {
		n    int32
		want []string
	}{
		{0, nil},
		{-5, nil},
		{3, []string{"t1", "t2", "t3"}},
		{noN, []string{"t4"}},
		{10, []string{"t5"}},
		{10, nil},
	} {
		c.steal(t, "h", tc.n, tc.want...)
	}
}

// Exit gives back what the host holds, ahead of what waits, in the order
// it was stolen; a host that is not known, or has stolen nothing, gets
// NotFound.
func TestExitRequeues(t *testing.T) {
	e := start(t, Config{}, sched.Config{})
	c := e.dial()
	wantType(t, "create", c.do(createReq(task("t1"), task("t2"), task("t3"), task("t4"))), codec.QueryMsg_OK)
	c.steal(t, "h1", 2, "t1", "t2")
	c.steal(t, "h2", 1, "t3")
	wantType(t, "exit h1", c.do(exitReq("h1")), codec.QueryMsg_OK)
	wantType(t, "exit h1 again", c.do(exitReq("h1")), codec.QueryMsg_NotFound)
	wantType(t, "exit unknown", c.do(exitReq("nobody")), codec.QueryMsg_NotFound)
	c.steal(t, "idle", 0)
	wantType(t, "exit of a host that never stole", c.do(exitReq("idle")), codec.QueryMsg_NotFound)
	c.lookup(t, "t1", "")
	c.steal(t, "h3", 10, "t1", "t2", "t4")
	// h1's completion of a task it gave back, now h3's, still counts.
	wantType(t, "late completion", c.do(doneReq("h1", "t1")), codec.QueryMsg_OK)
	c.lookup(t, "t1", "h3")
	c.lookup(t, "t3", "h2")
	if w := e.s.Funcs(); len(w) != 1 || w[0].Workers != 2 {
		t.Fatalf("functions %+v, want dwork with 2 workers (h2, h3)", w)
	}
}

// Lookup: running (where), ended (where it ran), waiting or unknown
// (NotFound).
func TestLookup(t *testing.T) {
	e := start(t, Config{}, sched.Config{})
	c := e.dial()
	wantType(t, "create", c.do(createReq(task("run"), task("end"), task("wait"), task("blocked", "wait"))), codec.QueryMsg_OK)
	c.steal(t, "h1", 2, "run", "end")
	wantType(t, "end done", c.do(doneReq("h2", "end")), codec.QueryMsg_OK)
	for _, tc := range []struct{ name, loc string }{
		{"run", "h1"},
		{"end", "h1"}, // ran on h1, whoever reported it
		{"wait", ""},
		{"blocked", ""},
		{"unknown", ""},
		{"", ""},
	} {
		c.lookup(t, tc.name, tc.loc)
	}
}

// A completion naming tasks no host holds lists them back with NotFound,
// and completes the others.
func TestTransferNotFound(t *testing.T) {
	e := start(t, Config{}, sched.Config{})
	c := e.dial()
	wantType(t, "create", c.do(createReq(task("held"), task("queued"))), codec.QueryMsg_OK)
	c.steal(t, "h", 1, "held")
	req := doneReq("h", "unknown", "held", "queued")
	req.Task[0].Log = []*codec.TaskMsg_LogMsg{{State: codec.TaskMsg_Done.Enum(), Time: proto.Int64(7)}}
	r := c.do(req)
	want := &codec.QueryMsg{Type: typ(codec.QueryMsg_NotFound), Task: []*codec.TaskMsg{req.Task[0], req.Task[2]}}
	if !proto.Equal(r, want) {
		t.Fatalf("reply %v, want %v", r, want)
	}
	c.lookup(t, "held", "h")
	again := doneReq("h", "held")
	if r := c.do(again); !proto.Equal(r, &codec.QueryMsg{Type: typ(codec.QueryMsg_NotFound), Task: again.Task}) {
		t.Fatalf("completed again: %v, want NotFound listing it", r)
	}
}

// What a Gearman worker does, through sched: a worker of the dwork function
// runs a dwork task (its payload is the name), and completing it frees
// the task's successors for dwork hosts.
func TestOtherWorkerRunsTask(t *testing.T) {
	e := start(t, Config{Func: "dag"}, sched.Config{})
	c := e.dial()
	wantType(t, "create", c.do(createReq(task("first"), task("second", "first"))), codec.QueryMsg_OK)
	w := e.s.NewWorker(nopWaker{})
	defer w.Close()
	w.CanDo([]byte("dag"), 0)
	j := w.Grab()
	if j == nil || j.Unique() != "first" || string(j.Payload()) != "first" {
		t.Fatalf("the other worker grabbed %v, want the task first with payload first", j)
	}
	// Running, on no dwork host: its worker has no name.
	r := c.do(lookupReq("first"))
	if want := (&codec.QueryMsg{Type: typ(codec.QueryMsg_OK), Name: proto.String("first"), Location: proto.String("")}); !proto.Equal(r, want) {
		t.Fatalf("lookup of a task another worker runs: %v, want %v", r, want)
	}
	done := doneReq("h", "first")
	if r := c.do(done); !proto.Equal(r, &codec.QueryMsg{Type: typ(codec.QueryMsg_NotFound), Task: done.Task}) {
		t.Fatalf("dwork completion of a task another worker runs: %v, want NotFound listing it", r)
	}
	c.steal(t, "h", 5)
	if err := w.Update(j.ID(), &sched.Update{Kind: sched.Complete}); err != nil {
		t.Fatal(err)
	}
	c.steal(t, "h", 5, "second")
}

// A job of the dwork function without a unique has no task name: Steal
// fails it rather than hand out a task nobody can complete.
func TestStealFailsUnnamedJob(t *testing.T) {
	e := start(t, Config{}, sched.Config{})
	cl := e.s.NewClient(nil)
	if _, err := cl.Submit(&sched.SubmitReq{Func: []byte(DefaultFunc), Payload: []byte("x"), Background: true}); err != nil {
		t.Fatal(err)
	}
	c := e.dial()
	wantType(t, "create", c.do(createReq(task("named"))), codec.QueryMsg_OK)
	c.steal(t, "h", 5, "named")
	if n := e.s.Len(); n != 1 {
		t.Fatalf("%d jobs left, want only the named one, held", n)
	}
	if e.logs.FilterMessageSnippet("has no unique").Len() != 1 {
		t.Fatal("no log line for the job without a unique")
	}
}

// With a durable store, Create is answered once every task is on disk
// (OK), or Error if one could not be stored; other requests are served
// meanwhile.
func TestCreateWaitsForStore(t *testing.T) {
	gate := storetest.NewGate(16)
	e := start(t, Config{}, sched.Config{Store: gate})
	c, other := e.dial(), e.dial()
	req, _ := proto.Marshal(createReq(task("x"), task("y", "x")))
	c.send(req)
	<-gate.Queued
	<-gate.Queued
	other.steal(t, "h", 5, "x")
	gate.Answer(nil)
	gate.Answer(nil)
	wantType(t, "create", decodeReply(t, c.recv()), codec.QueryMsg_OK)

	c.send(req) // both exist: each submit waits for the store again
	<-gate.Queued
	<-gate.Queued
	gate.Answer(nil)
	gate.Answer(errors.New("disk full"))
	wantType(t, "create, one not stored", decodeReply(t, c.recv()), codec.QueryMsg_Error)
}

// errorReply is the whole reply to anything ill-formed.
var errorReply = codec.Append(nil, &codec.QueryMsg{Type: typ(codec.QueryMsg_Error)})

// Every request the rules refuse gets {type: Error}, and the connection
// goes on.
func TestIllFormed(t *testing.T) {
	e := start(t, Config{}, sched.Config{})
	c := e.dial()
	long := strings.Repeat("n", codec.MaxName+1)
	bad := func(f func(m *codec.QueryMsg)) []byte {
		m := &codec.QueryMsg{}
		f(m)
		b, err := proto.MarshalOptions{AllowPartial: true}.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	withTask := func(tp codec.QueryMsg_Type, loc bool, f func(tk *codec.TaskMsg)) []byte {
		return bad(func(m *codec.QueryMsg) {
			m.Type = typ(tp)
			tk := task("t", "p")
			tk.Log = []*codec.TaskMsg_LogMsg{{State: codec.TaskMsg_Done.Enum(), Time: proto.Int64(1)}}
			f(tk)
			m.Task = []*codec.TaskMsg{tk}
			if loc {
				m.Location = proto.String("h")
			}
		})
	}
	for _, tc := range []struct {
		name string
		msg  []byte
	}{
		{"empty message", nil},
		{"not protobuf", []byte{0xff, 0xff, 0xff}},
		{"truncated", []byte{0x12, 0x05, 0x0a}},
		{"over MaxMessage", append(bytes.Repeat([]byte{0x1a, 0x00}, codec.MaxMessage/2), 0x08, 0x00)},
		{"no type", bad(func(m *codec.QueryMsg) { m.Location = proto.String("h") })},
		{"unknown type", bad(func(m *codec.QueryMsg) { m.Type = typ(99); m.Location = proto.String("h") })},
		{"NotFound", bad(func(m *codec.QueryMsg) { m.Type = typ(codec.QueryMsg_NotFound) })},
		{"OK", bad(func(m *codec.QueryMsg) { m.Type = typ(codec.QueryMsg_OK) })},
		{"Error", bad(func(m *codec.QueryMsg) { m.Type = typ(codec.QueryMsg_Error) })},
		{"Create without task", bad(func(m *codec.QueryMsg) { m.Type = typ(codec.QueryMsg_Create) })},
		{"Create with name", bad(func(m *codec.QueryMsg) { *m = *createReq(task("t")); m.Name = proto.String("x") })},
		{"Create with n", bad(func(m *codec.QueryMsg) { *m = *createReq(task("t")); m.N = proto.Int32(1) })},
		{"Create with location", bad(func(m *codec.QueryMsg) { *m = *createReq(task("t")); m.Location = proto.String("h") })},
		{"Create of an empty name", bad(func(m *codec.QueryMsg) { *m = *createReq(task("")) })},
		{"Create over MaxTasks", bad(func(m *codec.QueryMsg) {
			*m = *createReq()
			for range codec.MaxTasks + 1 {
				m.Task = append(m.Task, task("t"))
			}
		})},
		{"task without name", withTask(codec.QueryMsg_Create, false, func(tk *codec.TaskMsg) { tk.Name = nil })},
		{"task without origin", withTask(codec.QueryMsg_Create, false, func(tk *codec.TaskMsg) { tk.Origin = nil })},
		{"task name over MaxName", withTask(codec.QueryMsg_Create, false, func(tk *codec.TaskMsg) { tk.Name = &long })},
		{"pred without name", withTask(codec.QueryMsg_Create, false, func(tk *codec.TaskMsg) { tk.Pred[0].Name = nil })},
		{"succ without name", withTask(codec.QueryMsg_Create, false, func(tk *codec.TaskMsg) { tk.Succ = []*codec.TaskMsg_Dep{{}} })},
		{"log without state", withTask(codec.QueryMsg_Transfer, true, func(tk *codec.TaskMsg) { tk.Log[0].State = nil })},
		{"log of unknown state", withTask(codec.QueryMsg_Transfer, true, func(tk *codec.TaskMsg) { tk.Log[0].State = codec.TaskMsg_State(42).Enum() })},
		{"log without time", withTask(codec.QueryMsg_Transfer, true, func(tk *codec.TaskMsg) { tk.Log[0].Time = nil })},
		{"Steal without location", bad(func(m *codec.QueryMsg) { m.Type = typ(codec.QueryMsg_Steal) })},
		{"Steal with task", bad(func(m *codec.QueryMsg) { *m = *stealReq("h"); m.Task = []*codec.TaskMsg{task("t")} })},
		{"Steal with name", bad(func(m *codec.QueryMsg) { *m = *stealReq("h"); m.Name = proto.String("t") })},
		{"Steal location over MaxLocation", bad(func(m *codec.QueryMsg) { *m = *stealReq(strings.Repeat("h", codec.MaxLocation+1)) })},
		{"Transfer without task", bad(func(m *codec.QueryMsg) { *m = *doneReq("h") })},
		{"Transfer without location", bad(func(m *codec.QueryMsg) { *m = *doneReq("h", "t"); m.Location = nil })},
		{"Transfer with n", bad(func(m *codec.QueryMsg) { *m = *doneReq("h", "t"); m.N = proto.Int32(1) })},
		{"Lookup without name", bad(func(m *codec.QueryMsg) { m.Type = typ(codec.QueryMsg_Lookup) })},
		{"Lookup with location", bad(func(m *codec.QueryMsg) { *m = *lookupReq("t"); m.Location = proto.String("h") })},
		{"Lookup name over MaxName", bad(func(m *codec.QueryMsg) { *m = *lookupReq(long) })},
		{"Exit without location", bad(func(m *codec.QueryMsg) { m.Type = typ(codec.QueryMsg_Exit) })},
		{"Exit with task", bad(func(m *codec.QueryMsg) { *m = *exitReq("h"); m.Task = []*codec.TaskMsg{task("t")} })},
		{"Exit with n", bad(func(m *codec.QueryMsg) { *m = *exitReq("h"); m.N = proto.Int32(1) })},
	} {
		if got := c.raw(tc.msg); !bytes.Equal(got, errorReply) {
			t.Errorf("%s: reply %x, want %x (Error)", tc.name, got, errorReply)
		}
	}
	wantType(t, "a good request after them", c.do(stealReq("h")), codec.QueryMsg_NotFound)
	if n := e.s.Len(); n != 0 {
		t.Fatalf("%d jobs made by ill-formed requests", n)
	}
	if n := e.logs.FilterMessageSnippet("answered Error").Len(); n < 30 {
		t.Fatalf("%d log lines for ill-formed requests", n)
	}
}

// A message over the hard limit closes its connection before it is read
// (and is logged); everyone else is served on.
func TestOversizeMessageClosesConnection(t *testing.T) {
	e := start(t, Config{}, sched.Config{})
	c := e.dial()
	for _, tc := range []struct {
		name string
		msg  []byte
	}{
		{"a frame claiming 2^40 bytes", longFrame(0, 1<<40)},
		{"a frame claiming 2^63-1 bytes", longFrame(0, 1<<63-1)},
		{"a frame one byte over", longFrame(0, hardMaxMessage+1)},
		{"frames adding up to one byte over", slices.Concat(longFrame(zmtpMore, hardMaxMessage-8),
			make([]byte, hardMaxMessage-8), longFrame(0, 9))},
		{"too many frames", bytes.Repeat([]byte{zmtpMore, 0}, maxFrames+1)},
	} {
		raw := dialZMTP(t, e.addr)
		raw.Write(tc.msg)
		if err := waitClosed(raw); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		wantType(t, "another client", c.do(stealReq("h")), codec.QueryMsg_NotFound)
	}
	if n := e.logs.FilterMessage("dwork: connection closed").Len(); n != 5 {
		t.Fatalf("%d log lines for closed connections, want 5", n)
	}
}

// zmq4 passes a peer's ZMTP commands (a libzmq heartbeat's PING) on as
// messages: they are no requests, and get no reply; the next request is
// answered as ever.
func TestCommandsAreNotRequests(t *testing.T) {
	e := start(t, Config{}, sched.Config{})
	raw := dialZMTP(t, e.addr)
	req, _ := proto.Marshal(stealReq("h"))
	var msg []byte
	msg = append(msg, command("PING", []byte{0, 10, 'c', 't', 'x'})...)
	msg = append(msg, shortFrame(zmtpMore, 0)...) // a DEALER speaking as a REQ: the delimiter,
	msg = append(msg, shortFrame(0, len(req))...) // then the request
	msg = append(msg, req...)
	if _, err := raw.Write(msg); err != nil {
		t.Fatal(err)
	}
	raw.SetReadDeadline(time.Now().Add(replyTimeout))
	want := append(append(shortFrame(zmtpMore, 0), shortFrame(0, 2)...), 0x08, byte(codec.QueryMsg_NotFound))
	got := make([]byte, len(want))
	if _, err := io.ReadFull(raw, got); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read %x, %v; want the delimiter and NotFound, %x", got, err, want)
	}
}

// Drain (shutdown graceful) hands out nothing more but takes completions;
// Stop gives back what the hosts hold, first in line.
func TestDrainAndStop(t *testing.T) {
	e := start(t, Config{}, sched.Config{})
	c := e.dial()
	wantType(t, "create", c.do(createReq(task("t1"), task("t2"), task("t3"), task("t4"))), codec.QueryMsg_OK)
	c.steal(t, "h", 3, "t1", "t2", "t3")
	e.srv.Drain(context.Background())
	c.steal(t, "h", 3)
	wantType(t, "completion while draining", c.do(doneReq("h", "t2")), codec.QueryMsg_OK)
	ctx, cancel := context.WithTimeout(context.Background(), replyTimeout)
	defer cancel()
	if err := e.srv.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	w := e.s.NewWorker(nopWaker{})
	defer w.Close()
	w.CanDo([]byte(DefaultFunc), 0)
	var got []string
	for j := w.Grab(); j != nil; j = w.Grab() {
		got = append(got, j.Unique())
	}
	if want := []string{"t1", "t3", "t4"}; !slices.Equal(got, want) {
		t.Fatalf("after Stop the queue holds %v, want %v", got, want)
	}
}

// dworkStat is the dwork function's counts in the scheduler.
func dworkStat(s *sched.Sched) sched.FuncStat {
	for _, f := range s.Funcs() {
		if f.Name == DefaultFunc {
			return f
		}
	}
	return sched.FuncStat{}
}

// waitStat polls, for at most within, until the dwork function's counts
// are running tasks held and workers hosts.
func (e *tenv) waitStat(within time.Duration, what string, running, workers int) {
	e.t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(time.Millisecond) {
		st := dworkStat(e.s)
		if st.Running == running && st.Workers == workers {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: %+v after %v, want %d running, %d workers", what, st, within, running, workers)
		}
	}
}

// waitConns waits until the server counts want open connections: zmq4
// dials and closes on goroutines of its own.
func (e *tenv) waitConns(want int) {
	e.t.Helper()
	for deadline := time.Now().Add(replyTimeout); e.srv.Conns() != want; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			e.t.Fatalf("Conns() = %d, want %d", e.srv.Conns(), want)
		}
	}
}

// A host is its name, not a connection, as with dwork's hub: dquery
// steals in one process and completes in the next, each on a connection
// of its own that closes when it exits. The host keeps what it stole
// across its connections closing, until it completes it or sends Exit.
func TestHostIsItsName(t *testing.T) {
	e := start(t, Config{}, sched.Config{})
	c := e.dial()
	wantType(t, "create", c.do(createReq(task("t1"), task("t2"), task("t3", "t1"))), codec.QueryMsg_OK)
	c.sock.Close()

	steal := e.dial()
	steal.steal(t, "h1", 1, "t1")
	steal.sock.Close()
	e.waitConns(0)
	e.srv.sweep() // the upkeep a second would do: it takes nobody
	if st := dworkStat(e.s); st.Running != 1 || st.Workers != 1 {
		t.Fatalf("after h1's connection closed: %+v, want h1 holding t1", st)
	}

	complete := e.dial()
	wantType(t, "t1 done, from another connection", complete.do(doneReq("h1", "t1")), codec.QueryMsg_OK)
	complete.lookup(t, "t1", "h1")
	complete.steal(t, "h1", 1, "t2") // ready before t3 (the scheduler's FIFO; see docs/dwork.md)
	complete.sock.Close()

	exit := e.dial()
	wantType(t, "h1 exits", exit.do(exitReq("h1")), codec.QueryMsg_OK)
	exit.steal(t, "h2", 5, "t2", "t3")
	if n := e.logs.FilterMessageSnippet("taken as exited").Len(); n != 0 {
		t.Errorf("%d log lines say a host was taken as exited", n)
	}
}

// fakeClock is the handler's clock in a test: it moves only when told.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) now() time.Time  { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) set(t time.Time) { c.ns.Store(t.UnixNano()) }
func (e *tenv) useClock(c *fakeClock) {
	e.srv.hmu.Lock()
	e.srv.h.now = c.now
	e.srv.hmu.Unlock()
}

// --dwork-host-timeout: a host that names itself in no request for the
// timeout is taken as exited, its tasks first in line, with a log line;
// any request naming it (a Steal that finds nothing, a completion) keeps
// it. /api/connections's listing (ListHosts) says when each host was last
// heard from, and no longer lists one taken as exited.
func TestHostTimeout(t *testing.T) {
	e := start(t, Config{HostTimeout: time.Minute}, sched.Config{})
	clock := &fakeClock{}
	t0 := time.Unix(1_800_000_000, 0)
	clock.set(t0)
	e.useClock(clock)
	c := e.dial()
	wantType(t, "create", c.do(createReq(task("t1"), task("t2"))), codec.QueryMsg_OK)
	c.steal(t, "h1", 1, "t1")
	c.steal(t, "h2", 1, "t2")

	at := func(d time.Duration, exited int) {
		t.Helper()
		clock.set(t0.Add(d))
		if n := e.srv.sweep(); n != exited {
			t.Fatalf("at %v: %d hosts taken as exited, want %d", d, n, exited)
		}
	}
	at(59*time.Second, 0)
	c.steal(t, "h1", 1) // nothing to steal, but h1 is heard from at 59s
	hosts := e.srv.ListHosts()
	if len(hosts) != 2 || hosts[0].ID != "h1" || !hosts[0].Heard.Equal(t0.Add(59*time.Second)) ||
		hosts[1].ID != "h2" || !hosts[1].Heard.Equal(t0) || hosts[0].Sched == nil || hosts[0].FD != -1 {
		t.Fatalf("ListHosts: %+v, want h1 heard at 59s then h2 at 0s", hosts)
	}
	at(60*time.Second, 1) // h2, silent a minute
	if n := e.logs.FilterMessageSnippet("taken as exited").FilterField(zap.String("location", "h2")).Len(); n != 1 {
		t.Errorf("%d log lines say h2 was taken as exited, want 1", n)
	}
	if st := dworkStat(e.s); st.Running != 1 || st.Workers != 1 {
		t.Fatalf("after h2's timeout: %+v, want h1 alone, holding t1", st)
	}
	r := c.do(doneReq("h2", "t2")) // too late: t2 is queued again
	if r.GetType() != codec.QueryMsg_NotFound || len(r.Task) != 1 {
		t.Fatalf("h2's late completion: %v, want NotFound listing t2", r)
	}
	c.steal(t, "h3", 1, "t2")
	clock.set(t0.Add(118 * time.Second))
	wantType(t, "t1 done by h1 at 118s", c.do(doneReq("h1", "t1")), codec.QueryMsg_OK)
	at(119*time.Second, 0)
	at(120*time.Second, 1) // h3, silent since 60s
	at(177*time.Second, 0)
	c.steal(t, "h1", 0) // a Steal of none: h1 is heard from at 177s
	at(236*time.Second, 0)
	at(237*time.Second, 1) // h1, silent since 177s, holding nothing
	if hosts := e.srv.ListHosts(); len(hosts) != 0 {
		t.Fatalf("ListHosts after every timeout: %+v", hosts)
	}
}
