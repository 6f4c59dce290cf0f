package controller

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	codec "switchyard/codec/controller"
	"switchyard/sched"
)

// The tests speak the protocol as written in the spec, with their own
// framing: a uint64 little-endian length, the message, raw extra bytes.

func writeMsg(t testing.TB, c io.Writer, m proto.Message, extra []byte) {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	frame := binary.LittleEndian.AppendUint64(nil, uint64(len(b)))
	frame = append(append(frame, b...), extra...)
	if _, err := c.Write(frame); err != nil {
		t.Error(err)
	}
}

func readMsg(c io.Reader, m proto.Message) error {
	var size [8]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return err
	}
	b := make([]byte, binary.LittleEndian.Uint64(size[:]))
	if _, err := io.ReadFull(c, b); err != nil {
		return err
	}
	return proto.Unmarshal(b, m)
}

// clock is a sched.Clock the test moves.
type clock struct {
	mu   sync.Mutex
	mono time.Time
}

func (c *clock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.mono }
func (c *clock) Wall() time.Time { return c.Now() }
func (c *clock) pass(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mono = c.mono.Add(d)
	return c.mono
}

type env struct {
	t     *testing.T
	s     *sched.Sched
	clk   *clock
	srv   *Server
	sock  string
	dir   string
	cl    *sched.Client
	heard chan string // what the client hears: "id:kind:data"
}

func (e *env) Notify(id uint64, u *sched.Update) {
	e.heard <- fmt.Sprintf("%d:%d:%s", id, u.Kind, u.Data)
}

func newEnv(t *testing.T, cfg Config) *env {
	t.Helper()
	// Unix socket paths are short: not t.TempDir, whose name holds the
	// test's.
	dir, err := os.MkdirTemp("", "ctl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	e := &env{t: t, clk: &clock{mono: time.Unix(1e9, 0)}, dir: dir, heard: make(chan string, 16)}
	e.s = sched.New(sched.Config{Clock: e.clk, Tick: -1, JobRetries: 5})
	t.Cleanup(e.s.Close)
	e.sock = filepath.Join(dir, "main.sock")
	cfg.Socket = e.sock
	if cfg.Funcs == nil {
		cfg.Funcs = []string{"controller"}
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 2 * time.Second
	}
	e.srv = New(cfg, e.s, nil)
	if err := e.srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := e.srv.Stop(ctx); err != nil {
			t.Error(err)
		}
	})
	e.cl = e.s.NewClient(e)
	return e
}

// pulse sends one WorkerPulse and returns the answer.
func (e *env) pulse(p *codec.WorkerPulse) *codec.PulseResponse {
	e.t.Helper()
	c, err := net.Dial("unix", e.sock)
	if err != nil {
		e.t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	writeMsg(e.t, c, p, nil)
	var r codec.PulseResponse
	if err := readMsg(c, &r); err != nil {
		e.t.Fatalf("pulse %v: %v", p, err)
	}
	return &r
}

func (e *env) submit(payload string) uint64 {
	e.t.Helper()
	id, err := e.cl.Submit(&sched.SubmitReq{Func: []byte("controller"), Payload: []byte(payload)})
	if err != nil {
		e.t.Fatal(err)
	}
	return id
}

func (e *env) hear() string {
	e.t.Helper()
	select {
	case h := <-e.heard:
		return h
	case <-time.After(10 * time.Second):
		e.t.Fatal("the client heard nothing")
		return ""
	}
}

// control is one ControlMsg a fake worker got, with its extra bytes.
type control struct {
	msg   *codec.ControlMsg
	extra string
}

// fakeWorker is a worker as the spec describes it: registered, listening
// on <dir>/<id>.sock, answering each ControlMsg with what answer says.
type fakeWorker struct {
	e   *env
	id  uint64
	ln  net.Listener
	got chan control

	mu     sync.Mutex
	answer func(control) (*codec.WorkerResponse, string)
	task   atomic.Uint64 // the task it took last, as a real worker reports it
}

func (w *fakeWorker) answers(f func(control) (*codec.WorkerResponse, string)) {
	w.mu.Lock()
	w.answer = f
	w.mu.Unlock()
}

func (e *env) worker(answer func(control) (*codec.WorkerResponse, string)) *fakeWorker {
	e.t.Helper()
	r := e.pulse(&codec.WorkerPulse{Type: codec.PulseType_PULSE_REGISTER, NextPulse: 60})
	if r.Error != codec.ControllerError_CTRL_ERR_OK || r.WorkerId == nil {
		e.t.Fatalf("REGISTER answered %v", r)
	}
	w := &fakeWorker{e: e, id: *r.WorkerId, got: make(chan control, 16), answer: answer}
	ln, err := net.Listen("unix", filepath.Join(e.dir, fmt.Sprint(w.id, ".sock")))
	if err != nil {
		e.t.Fatal(err)
	}
	w.ln = ln
	e.t.Cleanup(func() { ln.Close() })
	go w.serve()
	return w
}

func (w *fakeWorker) serve() {
	for {
		c, err := w.ln.Accept()
		if err != nil {
			return
		}
		var m codec.ControlMsg
		if err := readMsg(c, &m); err != nil {
			c.Close()
			continue
		}
		extra := make([]byte, m.ExtraSize)
		io.ReadFull(c, extra)
		ctl := control{msg: &m, extra: string(extra)}
		// The answer in force when the message came, taken before the
		// test hears of it: a test that changes answers once it has seen
		// a message must not change that message's answer.
		w.mu.Lock()
		answer := w.answer
		w.mu.Unlock()
		w.got <- ctl
		resp, out := answer(ctl)
		if m.Type == codec.ControlType_CTRL_SET_TASK && resp != nil && resp.Error == codec.WorkerError_WORKER_ERR_OK {
			w.task.Store(m.GetTaskId())
		}
		if resp != nil {
			resp.ExtraSize = uint64(len(out))
			writeMsg(w.e.t, c, resp, []byte(out))
		}
		c.Close()
	}
}

func (w *fakeWorker) pulse(typ codec.PulseType, task uint64) codec.ControllerError {
	w.e.t.Helper()
	return w.e.pulse(&codec.WorkerPulse{Type: typ, WorkerId: w.id, TaskId: task, NextPulse: 60}).Error
}

func (w *fakeWorker) next() control {
	w.e.t.Helper()
	select {
	case c := <-w.got:
		return c
	case <-time.After(10 * time.Second):
		w.e.t.Fatalf("worker %d got no ControlMsg", w.id)
		return control{}
	}
}

func ok(task uint64) *codec.WorkerResponse {
	return &codec.WorkerResponse{Error: codec.WorkerError_WORKER_ERR_OK, TaskId: task}
}

// runner takes every task and has its result ready at once.
func runner(c control) (*codec.WorkerResponse, string) {
	switch c.msg.Type {
	case codec.ControlType_CTRL_FETCH:
		return ok(0), "" // the test answers FETCH itself where it matters
	}
	return ok(c.msg.GetTaskId()), ""
}

// Pulses get the spec's answers: ids from 1, UNKNOWN_ID for a worker that
// is not (or no longer) registered, UNKNOWN_TYPE for a type that is none.
func TestPulses(t *testing.T) {
	e := newEnv(t, Config{})
	for want := uint64(1); want <= 3; want++ {
		r := e.pulse(&codec.WorkerPulse{Type: codec.PulseType_PULSE_REGISTER, WorkerId: 77, TaskId: 5})
		if r.Error != codec.ControllerError_CTRL_ERR_OK || r.GetWorkerId() != want {
			t.Fatalf("REGISTER %d answered %v", want, r)
		}
	}
	for _, tc := range []struct {
		p    *codec.WorkerPulse
		want codec.ControllerError
	}{
		{&codec.WorkerPulse{Type: codec.PulseType_PULSE_OK, WorkerId: 2, NextPulse: 30}, codec.ControllerError_CTRL_ERR_OK},
		{&codec.WorkerPulse{Type: codec.PulseType_PULSE_OK, WorkerId: 9}, codec.ControllerError_CTRL_ERR_UNKNOWN_ID},
		{&codec.WorkerPulse{Type: codec.PulseType_PULSE_FETCH_ME, WorkerId: 0}, codec.ControllerError_CTRL_ERR_UNKNOWN_ID},
		{&codec.WorkerPulse{Type: codec.PulseType_PULSE_SHUTDOWN, WorkerId: 3}, codec.ControllerError_CTRL_ERR_OK},
		{&codec.WorkerPulse{Type: codec.PulseType_PULSE_OK, WorkerId: 3}, codec.ControllerError_CTRL_ERR_UNKNOWN_ID},
		{&codec.WorkerPulse{Type: codec.PulseType_PULSE_SHUTDOWN, WorkerId: 3}, codec.ControllerError_CTRL_ERR_UNKNOWN_ID},
		{&codec.WorkerPulse{Type: 9, WorkerId: 1}, codec.ControllerError_CTRL_ERR_UNKNOWN_TYPE},
	} {
		r := e.pulse(tc.p)
		if r.Error != tc.want || r.WorkerId != nil {
			t.Errorf("%v answered %v, want %v and no worker_id", tc.p, r, tc.want)
		}
	}
	if n := e.srv.Workers(); n != 2 {
		t.Fatalf("%d workers registered, want 2", n)
	}
}

// byteWriter writes what it is given a byte per write, so that the server
// gets a frame over many events.
type byteWriter struct{ c net.Conn }

func (w byteWriter) Write(b []byte) (int, error) {
	for i := range b {
		if _, err := w.c.Write(b[i : i+1]); err != nil {
			return i, err
		}
	}
	return len(b), nil
}

// TestPulseInPieces: a pulse whose bytes come one at a time gets the same
// answer as one sent whole.
func TestPulseInPieces(t *testing.T) {
	e := newEnv(t, Config{})
	for _, tc := range []struct {
		p    *codec.WorkerPulse
		want uint64 // worker_id answered, 0 for none
	}{
		{&codec.WorkerPulse{Type: codec.PulseType_PULSE_REGISTER, WorkerId: 77, TaskId: 5, NextPulse: 1 << 40}, 1},
		{&codec.WorkerPulse{Type: codec.PulseType_PULSE_OK, WorkerId: 1, NextPulse: 30}, 0},
		{&codec.WorkerPulse{}, 2}, // REGISTER, all fields default: an empty message
	} {
		c, err := net.Dial("unix", e.sock)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		writeMsg(t, byteWriter{c}, tc.p, nil)
		var r codec.PulseResponse
		if err := readMsg(c, &r); err != nil {
			t.Fatalf("%v: %v", tc.p, err)
		}
		c.Close()
		if r.Error != codec.ControllerError_CTRL_ERR_OK || r.GetWorkerId() != tc.want {
			t.Errorf("%v answered %v, want worker_id %d", tc.p, &r, tc.want)
		}
	}
}

// A Gearman-style foreground job reaches a free worker as SET_TASK (its id
// the task_id, its payload the extra bytes); after FETCH_ME, the FETCH
// result completes it for the client. The worker may go on reporting the
// finished task; a new job follows.
func TestTaskRoundTrip(t *testing.T) {
	e := newEnv(t, Config{})
	var task sync.Map
	w := e.worker(func(c control) (*codec.WorkerResponse, string) {
		if c.msg.Type == codec.ControlType_CTRL_FETCH {
			id, _ := task.Load("id")
			return ok(id.(uint64)), "result of " + fmt.Sprint(id)
		}
		task.Store("id", c.msg.GetTaskId())
		return ok(c.msg.GetTaskId()), ""
	})
	id := e.submit("payload one")
	if got := w.pulse(codec.PulseType_PULSE_OK, 0); got != codec.ControllerError_CTRL_ERR_OK {
		t.Fatal(got)
	}
	c := w.next()
	if c.msg.Type != codec.ControlType_CTRL_SET_TASK || c.msg.GetTaskId() != id || c.extra != "payload one" {
		t.Fatalf("got %v %q, want SET_TASK of %d", c.msg, c.extra, id)
	}
	w.pulse(codec.PulseType_PULSE_OK, id) // running it: no disagreement
	w.pulse(codec.PulseType_PULSE_FETCH_ME, id)
	if c := w.next(); c.msg.Type != codec.ControlType_CTRL_FETCH {
		t.Fatalf("after FETCH_ME: %v", c.msg)
	}
	if got, want := e.hear(), fmt.Sprintf("%d:%d:result of %d", id, sched.Complete, id); got != want {
		t.Fatalf("client heard %q, want %q", got, want)
	}
	w.pulse(codec.PulseType_PULSE_OK, id) // the finished task, still reported
	id2 := e.submit("payload two")
	if c := w.next(); c.msg.Type != codec.ControlType_CTRL_SET_TASK || c.msg.GetTaskId() != id2 {
		t.Fatalf("second task: %v", c.msg)
	}
}

// BUSY sends the task to another worker, first in line; FAILED drops the
// worker and requeues; TASK_FAILED requeues as a retry; a worker whose
// socket is gone is dropped.
func TestTaskErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		answer  func(control) (*codec.WorkerResponse, string)
		dropped bool
	}{
		{"busy", func(control) (*codec.WorkerResponse, string) {
			return &codec.WorkerResponse{Error: codec.WorkerError_WORKER_ERR_BUSY}, ""
		}, false},
		{"failed", func(control) (*codec.WorkerResponse, string) {
			return &codec.WorkerResponse{Error: codec.WorkerError_WORKER_ERR_FAILED}, "details"
		}, true},
		{"task-failed", func(control) (*codec.WorkerResponse, string) {
			return &codec.WorkerResponse{Error: codec.WorkerError_WORKER_ERR_TASK_FAILED}, ""
		}, false},
		{"hangs-up", func(control) (*codec.WorkerResponse, string) { return nil, "" }, true},
		// Hangs up on SET_TASK, then says with GET_STATUS that it did not
		// take it: it stays, the task goes elsewhere.
		{"hangs-up-did-not-take-it", func(c control) (*codec.WorkerResponse, string) {
			if c.msg.Type == codec.ControlType_CTRL_GET_STATUS {
				return ok(0), ""
			}
			return nil, ""
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Config{})
			bad := e.worker(tc.answer)
			id := e.submit("x")
			bad.pulse(codec.PulseType_PULSE_OK, 0)
			if c := bad.next(); c.msg.Type != codec.ControlType_CTRL_SET_TASK || c.msg.GetTaskId() != id {
				t.Fatalf("first worker got %v", c.msg)
			}
			good := e.worker(runner)
			good.pulse(codec.PulseType_PULSE_OK, 0)
			if c := good.next(); c.msg.Type != codec.ControlType_CTRL_SET_TASK || c.msg.GetTaskId() != id {
				t.Fatalf("second worker got %v", c.msg)
			}
			want := codec.ControllerError_CTRL_ERR_OK
			if tc.dropped {
				want = codec.ControllerError_CTRL_ERR_UNKNOWN_ID
			}
			if got := bad.pulse(codec.PulseType_PULSE_OK, 0); got != want {
				t.Fatalf("first worker's next pulse: %v, want %v", got, want)
			}
		})
	}
	t.Run("no-socket", func(t *testing.T) {
		e := newEnv(t, Config{})
		gone := e.worker(runner)
		gone.ln.Close()
		id := e.submit("x")
		gone.pulse(codec.PulseType_PULSE_OK, 0)
		good := e.worker(runner)
		good.pulse(codec.PulseType_PULSE_OK, 0)
		if c := good.next(); c.msg.GetTaskId() != id {
			t.Fatalf("second worker got %v", c.msg)
		}
		if got := gone.pulse(codec.PulseType_PULSE_OK, 0); got != codec.ControllerError_CTRL_ERR_UNKNOWN_ID {
			t.Fatalf("a worker without a socket: %v", got)
		}
	})
}

// TASK_FAILED from a FETCH is a retry of the task, on another worker.
func TestFetchTaskFailed(t *testing.T) {
	e := newEnv(t, Config{})
	id := e.submit("x")
	w := e.worker(func(c control) (*codec.WorkerResponse, string) {
		return &codec.WorkerResponse{Error: codec.WorkerError_WORKER_ERR_BUSY}, ""
	})
	w.pulse(codec.PulseType_PULSE_OK, 0)
	w.next() // SET_TASK: BUSY
	// Busy until its next pulse, which frees it: it gets the task again.
	w.answers(func(c control) (*codec.WorkerResponse, string) {
		if c.msg.Type == codec.ControlType_CTRL_FETCH {
			return &codec.WorkerResponse{Error: codec.WorkerError_WORKER_ERR_TASK_FAILED, TaskId: id}, "it broke"
		}
		return ok(c.msg.GetTaskId()), ""
	})
	// The protocol acknowledges no BUSY: a pulse sent as the controller
	// reads it may come first. The worker pulses until it has the task,
	// as a real one does, every pulse interval.
	var c control
	for i := 0; ; i++ {
		w.pulse(codec.PulseType_PULSE_OK, w.task.Load())
		select {
		case c = <-w.got:
		case <-time.After(50 * time.Millisecond): // a pulse interval
			if i < 200 {
				continue
			}
			t.Fatal("a pulse did not free the busy worker")
		}
		break
	}
	if c.msg.GetTaskId() != id {
		t.Fatalf("got %v", c.msg)
	}
	other := e.worker(runner)
	other.pulse(codec.PulseType_PULSE_OK, 0)
	w.pulse(codec.PulseType_PULSE_FETCH_ME, id)
	w.next() // FETCH: TASK_FAILED
	if c := other.next(); c.msg.Type != codec.ControlType_CTRL_SET_TASK || c.msg.GetTaskId() != id {
		t.Fatalf("the failed task's retry went to %v", c.msg)
	}
}

// A pulse whose task_id is not the task the worker holds gets it a
// RESTART; it is dropped and its task goes to another worker.
func TestTaskMismatchRestarts(t *testing.T) {
	e := newEnv(t, Config{})
	w := e.worker(runner)
	id := e.submit("x")
	w.pulse(codec.PulseType_PULSE_OK, 0)
	w.next() // SET_TASK
	w.pulse(codec.PulseType_PULSE_OK, id+1000)
	if c := w.next(); c.msg.Type != codec.ControlType_CTRL_RESTART {
		t.Fatalf("after a wrong task_id: %v", c.msg)
	}
	other := e.worker(runner)
	other.pulse(codec.PulseType_PULSE_OK, 0)
	if c := other.next(); c.msg.GetTaskId() != id {
		t.Fatalf("the restarted worker's task went to %v", c.msg)
	}
	if got := w.pulse(codec.PulseType_PULSE_OK, 0); got != codec.ControllerError_CTRL_ERR_UNKNOWN_ID {
		t.Fatalf("the restarted worker's pulse: %v", got)
	}
}

// next_pulse is an exact deadline: a worker not heard from by then is
// gone within one tick of it, and its task goes to another worker.
func TestPulseDeadline(t *testing.T) {
	e := newEnv(t, Config{})
	w := e.worker(runner)
	id := e.submit("x")
	w.e.pulse(&codec.WorkerPulse{Type: codec.PulseType_PULSE_OK, WorkerId: w.id, NextPulse: 2})
	w.next() // SET_TASK
	other := e.worker(runner)
	other.pulse(codec.PulseType_PULSE_OK, 0)
	e.s.Advance(e.clk.pass(1999 * time.Millisecond))
	if got := w.pulse(codec.PulseType_PULSE_OK, id); got != codec.ControllerError_CTRL_ERR_OK {
		t.Fatalf("a pulse before the deadline: %v", got)
	}
	// That pulse said 60 s; the next says 2 s again, from now.
	w.e.pulse(&codec.WorkerPulse{Type: codec.PulseType_PULSE_OK, WorkerId: w.id, TaskId: id, NextPulse: 2})
	e.s.Advance(e.clk.pass(1999 * time.Millisecond))
	select {
	case c := <-other.got:
		t.Fatalf("the task moved before the deadline: %v", c.msg)
	default:
	}
	e.s.Advance(e.clk.pass(time.Millisecond)) // one tick: the deadline
	if c := other.next(); c.msg.GetTaskId() != id {
		t.Fatalf("other got %v", c.msg)
	}
	if got := w.pulse(codec.PulseType_PULSE_OK, id); got != codec.ControllerError_CTRL_ERR_UNKNOWN_ID {
		t.Fatalf("a pulse after the deadline: %v", got)
	}
}

// Bad input on the main socket: a frame that does not decode gets FAILED;
// a huge length and silence are closed; the controller serves on.
func TestMainSocketBadInput(t *testing.T) {
	e := newEnv(t, Config{Timeout: 300 * time.Millisecond})
	dial := func() net.Conn {
		c, err := net.Dial("unix", e.sock)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		return c
	}
	c := dial()
	c.Write(append(binary.LittleEndian.AppendUint64(nil, 3), 0xff, 0xff, 0xff))
	var r codec.PulseResponse
	if err := readMsg(c, &r); err != nil || r.Error != codec.ControllerError_CTRL_ERR_FAILED {
		t.Fatalf("garbage pulse: %v, %v", &r, err)
	}
	c.Close()
	for name, b := range map[string][]byte{
		"huge":    binary.LittleEndian.AppendUint64(nil, 1<<40),
		"partial": binary.LittleEndian.AppendUint64(nil, 10)[:5],
		"nothing": nil,
	} {
		c := dial()
		c.Write(b)
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			t.Errorf("%s: want the connection closed, got %v", name, err)
		}
		c.Close()
	}
	if r := e.pulse(&codec.WorkerPulse{Type: codec.PulseType_PULSE_REGISTER}); r.GetWorkerId() != 1 {
		t.Fatalf("after bad input: %v", r)
	}
}

// A worker socket that accepts and never answers costs one Timeout: the
// worker is dropped and its task goes to another.
func TestWorkerSilent(t *testing.T) {
	e := newEnv(t, Config{Timeout: 200 * time.Millisecond})
	silent := e.worker(nil)
	silent.ln.Close()
	ln, err := net.Listen("unix", filepath.Join(e.dir, fmt.Sprint(silent.id, ".sock")))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c // held open, never answered
		}
	}()
	id := e.submit("x")
	silent.pulse(codec.PulseType_PULSE_OK, 0)
	defer (<-accepted).Close()
	good := e.worker(runner)
	good.pulse(codec.PulseType_PULSE_OK, 0)
	if c := good.next(); c.msg.GetTaskId() != id {
		t.Fatalf("got %v", c.msg)
	}
	if got := silent.pulse(codec.PulseType_PULSE_OK, 0); got != codec.ControllerError_CTRL_ERR_UNKNOWN_ID {
		t.Fatalf("silent worker: %v", got)
	}
}

// Start removes the worker sockets a dead controller left, and nothing
// else; a live main socket is an error.
func TestStartCleansDirectory(t *testing.T) {
	dir, err := os.MkdirTemp("", "ctl")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	stale, err := net.Listen("unix", filepath.Join(dir, "7.sock"))
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close()
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("keep"), 0o644)
	s := sched.New(sched.Config{})
	defer s.Close()
	srv := New(Config{Socket: filepath.Join(dir, "main.sock"), Funcs: []string{"f"}}, s, nil)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Stop(context.Background())
	if _, err := os.Stat(filepath.Join(dir, "7.sock")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stale worker socket: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "notes.txt")); err != nil {
		t.Fatal(err)
	}
	again := New(Config{Socket: filepath.Join(dir, "main.sock"), Funcs: []string{"f"}}, s, nil)
	if err := again.Start(); err == nil || !strings.Contains(err.Error(), "another server") {
		t.Fatalf("second controller on a live socket: %v", err)
	}
}

// Whatever a worker answers that is not a WorkerResponse as the spec has
// it drops the worker, and its task goes to another: nothing wedges.
func TestWorkerBadAnswers(t *testing.T) {
	frame := func(m proto.Message, extra string) []byte {
		b, _ := proto.Marshal(m)
		out := binary.LittleEndian.AppendUint64(nil, uint64(len(b)))
		return append(append(out, b...), extra...)
	}
	for name, answer := range map[string][]byte{
		"huge length":     binary.LittleEndian.AppendUint64(nil, 1<<62),
		"not protobuf":    append(binary.LittleEndian.AppendUint64(nil, 2), 0xff, 0xff),
		"unknown error":   frame(&codec.WorkerResponse{Error: 42}, ""),
		"NO_FETCH to SET": frame(&codec.WorkerResponse{Error: codec.WorkerError_WORKER_ERR_NO_FETCH}, ""),
		"short extra":     frame(&codec.WorkerResponse{ExtraSize: 10}, "abc"),
		"extra too big":   frame(&codec.WorkerResponse{ExtraSize: 1 << 30}, ""),
		"half a prefix":   {1, 0, 0},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, Config{MaxExtra: 1 << 20})
			bad := e.worker(nil)
			bad.ln.Close()
			ln, err := net.Listen("unix", filepath.Join(e.dir, fmt.Sprint(bad.id, ".sock")))
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			go func() {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				var m codec.ControlMsg
				if readMsg(c, &m) == nil {
					io.ReadFull(c, make([]byte, m.ExtraSize))
					c.Write(answer)
				}
			}()
			id := e.submit("x")
			bad.pulse(codec.PulseType_PULSE_OK, 0)
			good := e.worker(runner)
			good.pulse(codec.PulseType_PULSE_OK, 0)
			if c := good.next(); c.msg.GetTaskId() != id {
				t.Fatalf("second worker got %v", c.msg)
			}
			if got := bad.pulse(codec.PulseType_PULSE_OK, 0); got != codec.ControllerError_CTRL_ERR_UNKNOWN_ID {
				t.Fatalf("the worker that answered %q: %v", name, got)
			}
		})
	}
}

// A SET_TASK that went unanswered, where GET_STATUS says the worker has the
// task after all: it keeps it, and its result completes the job.
func TestSetTaskUnansweredButTaken(t *testing.T) {
	e := newEnv(t, Config{})
	var task atomic.Uint64
	w := e.worker(func(c control) (*codec.WorkerResponse, string) {
		switch c.msg.Type {
		case codec.ControlType_CTRL_SET_TASK:
			task.Store(c.msg.GetTaskId())
			return nil, "" // took it, said nothing
		case codec.ControlType_CTRL_GET_STATUS:
			return ok(task.Load()), ""
		}
		return ok(task.Load()), "done"
	})
	id := e.submit("x")
	w.pulse(codec.PulseType_PULSE_OK, 0)
	if c := w.next(); c.msg.Type != codec.ControlType_CTRL_SET_TASK {
		t.Fatalf("got %v", c.msg)
	}
	if c := w.next(); c.msg.Type != codec.ControlType_CTRL_GET_STATUS {
		t.Fatalf("after an unanswered SET_TASK: %v", c.msg)
	}
	w.pulse(codec.PulseType_PULSE_FETCH_ME, id)
	w.next() // FETCH
	if got, want := e.hear(), fmt.Sprintf("%d:%d:done", id, sched.Complete); got != want {
		t.Fatalf("client heard %q, want %q", got, want)
	}
}

// The task_id check, pulse by pulse: a worker holding a task that reports
// none is restarted; one that reports the task it finished, while it holds
// none or while its next one is being pushed, is not.
func TestTaskIDCheck(t *testing.T) {
	t.Run("reports none while holding one", func(t *testing.T) {
		e := newEnv(t, Config{})
		w := e.worker(func(c control) (*codec.WorkerResponse, string) {
			if c.msg.Type == codec.ControlType_CTRL_FETCH {
				return &codec.WorkerResponse{Error: codec.WorkerError_WORKER_ERR_NO_FETCH}, ""
			}
			return ok(c.msg.GetTaskId()), ""
		})
		x := e.submit("x")
		w.pulse(codec.PulseType_PULSE_OK, 0)
		w.next() // SET_TASK
		// A pulse sent during the push may still say 0. The FETCH that a
		// FETCH_ME brings comes after the push is over: past it, 0 is wrong.
		w.pulse(codec.PulseType_PULSE_FETCH_ME, x)
		if c := w.next(); c.msg.Type != codec.ControlType_CTRL_FETCH {
			t.Fatalf("got %v", c.msg)
		}
		w.pulse(codec.PulseType_PULSE_OK, 0)
		if c := w.next(); c.msg.Type != codec.ControlType_CTRL_RESTART {
			t.Fatalf("got %v", c.msg)
		}
	})
	t.Run("the first pulse after REGISTER reports one", func(t *testing.T) {
		e := newEnv(t, Config{})
		w := e.worker(runner)
		x := e.submit("x")
		// It was given nothing: a task_id is a task of an earlier life.
		w.pulse(codec.PulseType_PULSE_OK, x+1000)
		if c := w.next(); c.msg.Type != codec.ControlType_CTRL_RESTART {
			t.Fatalf("got %v, want RESTART", c.msg)
		}
		if got := w.pulse(codec.PulseType_PULSE_OK, 0); got != codec.ControllerError_CTRL_ERR_UNKNOWN_ID {
			t.Fatalf("the restarted worker's pulse: %v", got)
		}
		other := e.worker(runner)
		other.pulse(codec.PulseType_PULSE_OK, 0)
		if c := other.next(); c.msg.Type != codec.ControlType_CTRL_SET_TASK || c.msg.GetTaskId() != x {
			t.Fatalf("the queued task went to %v", c.msg)
		}
		select {
		case c := <-w.got:
			t.Fatalf("the restarted worker got %v after its RESTART", c.msg)
		default:
		}
	})
	t.Run("the first pulse after REGISTER reports none", func(t *testing.T) {
		e := newEnv(t, Config{})
		w := e.worker(runner)
		x := e.submit("x")
		w.pulse(codec.PulseType_PULSE_OK, 0)
		if c := w.next(); c.msg.Type != codec.ControlType_CTRL_SET_TASK || c.msg.GetTaskId() != x {
			t.Fatalf("got %v, want SET_TASK %d", c.msg, x)
		}
	})
	t.Run("reports the finished one during the next push", func(t *testing.T) {
		e := newEnv(t, Config{})
		release := make(chan struct{})
		var first atomic.Uint64
		w := e.worker(func(c control) (*codec.WorkerResponse, string) {
			switch {
			case c.msg.Type == codec.ControlType_CTRL_FETCH:
				return ok(first.Load()), "r"
			case first.Load() == 0:
				first.Store(c.msg.GetTaskId())
			default:
				<-release // the second SET_TASK's answer waits for the pulse
			}
			return ok(c.msg.GetTaskId()), ""
		})
		x := e.submit("x")
		w.pulse(codec.PulseType_PULSE_OK, 0)
		w.next()
		w.pulse(codec.PulseType_PULSE_FETCH_ME, x)
		w.next() // FETCH
		e.hear()
		y := e.submit("y")
		w.next() // SET_TASK y, unanswered until the pulse is in
		w.pulse(codec.PulseType_PULSE_OK, x)
		close(release)
		// Then it reports y, with a result: the next message is FETCH, not
		// the RESTART the late pulse would have earned.
		w.answers(func(c control) (*codec.WorkerResponse, string) { return ok(y), "r" })
		w.pulse(codec.PulseType_PULSE_FETCH_ME, y)
		if c := w.next(); c.msg.Type != codec.ControlType_CTRL_FETCH {
			t.Fatalf("got %v", c.msg)
		}
	})
}
