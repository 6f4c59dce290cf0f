package load

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	codec "switchyard/codec/controller"
)

// The hand-written frames are the ones switchyard's codec writes and reads.
func TestControllerFramesMatchTheCodec(t *testing.T) {
	for _, p := range []*codec.WorkerPulse{
		{},
		{Type: codec.PulseType_PULSE_OK, WorkerId: 7, TaskId: 1 << 40, NextPulse: 2},
		{Type: codec.PulseType_PULSE_FETCH_ME, WorkerId: 300, TaskId: 5},
	} {
		got := appendWorkerPulse(nil, uint64(p.Type), p.WorkerId, p.TaskId, p.NextPulse)
		if want := codec.AppendWorkerPulse(nil, p); !bytes.Equal(got, want) {
			t.Errorf("pulse %v: %x, codec writes %x", p, got, want)
		}
	}
	for _, r := range []struct {
		code, task uint64
		extra      string
	}{{0, 0, ""}, {workerErrOK, 12345, "result"}, {workerErrBusy, 3, ""}} {
		got := appendWorkerResponse(nil, r.code, r.task, []byte(r.extra))
		want := codec.AppendWorkerResponse(nil, &codec.WorkerResponse{Error: codec.WorkerError(r.code), TaskId: r.task}, []byte(r.extra))
		if !bytes.Equal(got, want) {
			t.Errorf("response %v: %x, codec writes %x", r, got, want)
		}
	}
	id := uint64(99)
	for _, m := range []*codec.ControlMsg{{Type: codec.ControlType_CTRL_SET_TASK, TaskId: &id}, {Type: codec.ControlType_CTRL_FETCH}} {
		frame := codec.AppendControlMsg(nil, m, []byte("payload"))
		msg, err := readCtlMsg(bytes.NewReader(frame), new([]byte))
		if err != nil {
			t.Fatal(err)
		}
		f, err := parseCtlFields(msg)
		if err != nil || f.v[1] != uint64(m.Type) || f.v[2] != 7 || f.v[3] != m.GetTaskId() {
			t.Errorf("ControlMsg %v read as %v, %v", m, f, err)
		}
	}
	var worker uint64 = 4
	r := codec.AppendPulseResponse(nil, &codec.PulseResponse{WorkerId: &worker})
	msg, _ := readCtlMsg(bytes.NewReader(r), new([]byte))
	if f, err := parseCtlFields(msg); err != nil || f.v[1] != 0 || f.v[2] != 4 || !f.has[2] {
		t.Errorf("PulseResponse read as %v, %v", f, err)
	}
	if _, err := parseCtlFields([]byte{0x08}); err == nil {
		t.Error("a truncated varint parsed")
	}
}

// fakeController answers pulses on a main socket the way the spec has it
// and lets the test push ControlMsgs to the workers.
type fakeController struct {
	t      *testing.T
	dir    string
	sock   string
	ln     net.Listener
	pulses chan *codec.WorkerPulse // every pulse but REGISTER
	mu     sync.Mutex
	nextID uint64
	answer func(*codec.WorkerPulse) codec.ControllerError
}

func startFakeController(t *testing.T) *fakeController {
	t.Helper()
	dir, err := os.MkdirTemp("", "ctl") // unix socket paths are short
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	fc := &fakeController{t: t, dir: dir, sock: filepath.Join(dir, "main.sock"), pulses: make(chan *codec.WorkerPulse, 1024)}
	if fc.ln, err = net.Listen("unix", fc.sock); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fc.ln.Close() })
	go func() {
		for {
			c, err := fc.ln.Accept()
			if err != nil {
				return
			}
			fc.serve(c)
		}
	}()
	return fc
}

func (fc *fakeController) serve(c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	var buf []byte
	msg, err := readCtlMsg(c, &buf)
	if err != nil {
		return
	}
	var p codec.WorkerPulse
	if err := codec.Unmarshal(msg, &p); err != nil {
		return
	}
	var r codec.PulseResponse
	fc.mu.Lock()
	if p.Type == codec.PulseType_PULSE_REGISTER {
		fc.nextID++
		id := fc.nextID
		r.WorkerId = &id
	} else if fc.answer != nil {
		r.Error = fc.answer(&p)
	}
	fc.mu.Unlock()
	if p.Type != codec.PulseType_PULSE_REGISTER {
		select {
		case fc.pulses <- &p:
		default:
		}
	}
	c.Write(codec.AppendPulseResponse(nil, &r))
}

// send pushes one ControlMsg to worker id and returns its answer.
func (fc *fakeController) send(id uint64, typ codec.ControlType, task uint64, extra string) (*codec.WorkerResponse, string) {
	fc.t.Helper()
	c, err := net.Dial("unix", filepath.Join(fc.dir, fmt.Sprint(id, ".sock")))
	if err != nil {
		fc.t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	m := &codec.ControlMsg{Type: typ}
	if task != 0 {
		m.TaskId = &task
	}
	c.Write(codec.AppendControlMsg(nil, m, []byte(extra)))
	var buf []byte
	msg, err := readCtlMsg(c, &buf)
	if err != nil {
		fc.t.Fatalf("%v to worker %d: %v", typ, id, err)
	}
	var r codec.WorkerResponse
	if err := codec.Unmarshal(msg, &r); err != nil {
		fc.t.Fatal(err)
	}
	out := make([]byte, r.ExtraSize)
	if _, err := io.ReadFull(c, out); err != nil {
		fc.t.Fatal(err)
	}
	return &r, string(out)
}

// waitPulse waits for a pulse that match accepts.
func (fc *fakeController) waitPulse(match func(*codec.WorkerPulse) bool) *codec.WorkerPulse {
	fc.t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case p := <-fc.pulses:
			if match(p) {
				return p
			}
		case <-timeout:
			fc.t.Fatal("no such pulse")
			return nil
		}
	}
}

// A worker registers, listens, pulses with its task_id, takes a task,
// asks to be fetched at once and hands the payload back; a second task
// while it holds one is BUSY; at Stop each says SHUTDOWN.
func TestControllerWorkers(t *testing.T) {
	fc := startFakeController(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := StartControllerWorkers(ctx, ControllerWorkers{Socket: fc.sock, Workers: 3, Pulse: 50 * time.Millisecond, NextPulse: 1})
	if err != nil {
		t.Fatal(err)
	}
	pool.Measure(&Phase{Start: time.Now()})
	// Each pulses OK, as free workers.
	seen := map[uint64]bool{}
	for len(seen) < 3 {
		p := fc.waitPulse(func(p *codec.WorkerPulse) bool { return p.Type == codec.PulseType_PULSE_OK })
		if p.TaskId != 0 || p.NextPulse != 1 || p.WorkerId < 1 || p.WorkerId > 3 {
			t.Fatalf("pulse %v", p)
		}
		seen[p.WorkerId] = true
	}

	r, _ := fc.send(2, codec.ControlType_CTRL_SET_TASK, 7, "the payload")
	if r.Error != codec.WorkerError_WORKER_ERR_OK || r.TaskId != 7 {
		t.Fatalf("SET_TASK answered %v", r)
	}
	fc.waitPulse(func(p *codec.WorkerPulse) bool {
		return p.Type == codec.PulseType_PULSE_FETCH_ME && p.WorkerId == 2 && p.TaskId == 7
	})
	if r, _ := fc.send(2, codec.ControlType_CTRL_SET_TASK, 8, "another"); r.Error != codec.WorkerError_WORKER_ERR_BUSY {
		t.Fatalf("a second SET_TASK answered %v", r)
	}
	if r, _ := fc.send(2, codec.ControlType_CTRL_GET_STATUS, 0, ""); r.Error != codec.WorkerError_WORKER_ERR_OK || r.TaskId != 7 {
		t.Fatalf("GET_STATUS answered %v", r)
	}
	// Its OK pulses report the task it holds.
	fc.waitPulse(func(p *codec.WorkerPulse) bool {
		return p.Type == codec.PulseType_PULSE_OK && p.WorkerId == 2 && p.TaskId == 7
	})
	r, result := fc.send(2, codec.ControlType_CTRL_FETCH, 0, "")
	if r.Error != codec.WorkerError_WORKER_ERR_OK || r.TaskId != 7 || result != "the payload" {
		t.Fatalf("FETCH answered %v %q", r, result)
	}
	if r, _ := fc.send(2, codec.ControlType_CTRL_FETCH, 0, ""); r.Error != codec.WorkerError_WORKER_ERR_NO_FETCH {
		t.Fatalf("a second FETCH answered %v", r)
	}
	// Then none: the result is handed over.
	fc.waitPulse(func(p *codec.WorkerPulse) bool {
		return p.Type == codec.PulseType_PULSE_OK && p.WorkerId == 2 && p.TaskId == 0
	})

	res, err := pool.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if res.Registered != 3 || res.Tasks != 1 || res.Results != 1 || res.FetchMes != 1 || res.Busy != 1 || res.NoFetch != 1 ||
		res.Statuses != 1 || res.Pulses < 2 || res.Measured == 0 || res.PulseLatency.TotalCount() != res.Measured {
		t.Errorf("result %+v", res)
	}
	shutdown := map[uint64]bool{}
	for len(shutdown) < 3 {
		p := fc.waitPulse(func(p *codec.WorkerPulse) bool { return p.Type == codec.PulseType_PULSE_SHUTDOWN })
		shutdown[p.WorkerId] = true
	}
	if _, err := os.Stat(filepath.Join(fc.dir, "2.sock")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("worker socket left behind: %v", err)
	}
}

// RESTART stops a worker, and a pulse answered UNKNOWN_ID stops another;
// Stop says so.
func TestControllerWorkersDropped(t *testing.T) {
	fc := startFakeController(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := StartControllerWorkers(ctx, ControllerWorkers{Socket: fc.sock, Workers: 2, Pulse: 20 * time.Millisecond, NextPulse: 1})
	if err != nil {
		t.Fatal(err)
	}
	fc.send(1, codec.ControlType_CTRL_RESTART, 0, "")
	fc.mu.Lock()
	fc.answer = func(p *codec.WorkerPulse) codec.ControllerError {
		if p.WorkerId == 2 && p.Type == codec.PulseType_PULSE_OK {
			return codec.ControllerError_CTRL_ERR_UNKNOWN_ID
		}
		return codec.ControllerError_CTRL_ERR_OK
	}
	fc.mu.Unlock()
	fc.waitPulse(func(p *codec.WorkerPulse) bool { return p.WorkerId == 2 })
	time.Sleep(50 * time.Millisecond) // more pulses it must not send
	res, err := pool.Stop()
	if res.Restarted != 1 || res.Unknown != 1 || err == nil ||
		!strings.Contains(err.Error(), "RESTART") || !strings.Contains(err.Error(), "UNKNOWN_ID") {
		t.Errorf("result %+v, error %v", res, err)
	}
}

// A registration that fails leaves nothing running.
func TestControllerWorkersRegisterFails(t *testing.T) {
	dir := t.TempDir()
	_, err := StartControllerWorkers(context.Background(), ControllerWorkers{Socket: filepath.Join(dir, "none.sock"), Workers: 3, Pulse: time.Second, NextPulse: 2})
	if err == nil || !strings.Contains(err.Error(), "0 of 3 registered") {
		t.Fatalf("got %v", err)
	}
}
