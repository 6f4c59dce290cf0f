package main

import (
	"encoding/binary"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	codec "switchyard/codec/controller"
)

// ctlSend writes m, length-prefixed, and extra.
func ctlSend(t *testing.T, c net.Conn, m proto.Message, extra []byte) {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(b)))
	if _, err := c.Write(append(append(out, b...), extra...)); err != nil {
		t.Fatal(err)
	}
}

func ctlRecv(t *testing.T, c net.Conn, m proto.Message) {
	t.Helper()
	var size [8]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, binary.LittleEndian.Uint64(size[:]))
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatal(err)
	}
	if err := proto.Unmarshal(b, m); err != nil {
		t.Fatal(err)
	}
}

func ctlPulse(t *testing.T, sock string, p *codec.WorkerPulse) *codec.PulseResponse {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	ctlSend(t, c, p, nil)
	var r codec.PulseResponse
	ctlRecv(t, c, &r)
	return &r
}

// A Gearman client's job runs on a Worker–Controller worker: pushed as
// SET_TASK, fetched after FETCH_ME, and its result reaches the client as
// WORK_COMPLETE. The worker shows in "workers" and "status".
func TestE2EControllerRunsGearmanJob(t *testing.T) {
	t.Parallel()
	if isGearmand(t) {
		t.Skip("gearmand has no Worker-Controller protocol")
	}
	dir, err := os.MkdirTemp("", "sy-ctl") // short: unix socket paths are
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "run", "main.sock") // its directory is made
	srv := startServerProc(t, "--controller-socket", sock, "--controller-func", "resize")

	r := ctlPulse(t, sock, &codec.WorkerPulse{Type: codec.PulseType_PULSE_REGISTER, NextPulse: 60})
	if r.GetError() != codec.ControllerError_CTRL_ERR_OK || r.GetWorkerId() != 1 {
		t.Fatalf("REGISTER: %v", r)
	}
	ln, err := net.Listen("unix", filepath.Join(dir, "run", "1.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctlPulse(t, sock, &codec.WorkerPulse{Type: codec.PulseType_PULSE_OK, WorkerId: 1, NextPulse: 60})

	if out := adminCmd(t, srv.addr, "workers"); !strings.Contains(out, "worker-1 : resize\n") {
		t.Fatalf("workers:\n%s", out)
	}
	if out := adminCmd(t, srv.addr, "status"); !strings.Contains(out, "resize\t0\t0\t1\n") {
		t.Fatalf("status:\n%s", out)
	}

	client := dialGear(t, srv.addr, "client")
	handle := client.submit(pSubmitJob, "resize", "", "picture")

	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	var m codec.ControlMsg
	ctlRecv(t, c, &m)
	extra := make([]byte, m.GetExtraSize())
	io.ReadFull(c, extra)
	if m.GetType() != codec.ControlType_CTRL_SET_TASK || string(extra) != "picture" {
		t.Fatalf("got %v %q", &m, extra)
	}
	task := m.GetTaskId()
	ctlSend(t, c, &codec.WorkerResponse{TaskId: task}, nil)
	c.Close()

	ctlPulse(t, sock, &codec.WorkerPulse{Type: codec.PulseType_PULSE_FETCH_ME, WorkerId: 1, TaskId: task, NextPulse: 60})
	c, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	ctlRecv(t, c, &m)
	if m.GetType() != codec.ControlType_CTRL_FETCH {
		t.Fatalf("after FETCH_ME: %v", &m)
	}
	ctlSend(t, c, &codec.WorkerResponse{TaskId: task, ExtraSize: 9}, []byte("thumbnail"))
	c.Close()
	client.expect(pWorkComplete, handle+"\x00thumbnail")

	// SHUTDOWN: gone from the listings; its pulses are unknown.
	ctlPulse(t, sock, &codec.WorkerPulse{Type: codec.PulseType_PULSE_SHUTDOWN, WorkerId: 1})
	if r := ctlPulse(t, sock, &codec.WorkerPulse{Type: codec.PulseType_PULSE_OK, WorkerId: 1}); r.GetError() != codec.ControllerError_CTRL_ERR_UNKNOWN_ID {
		t.Fatalf("after SHUTDOWN: %v", r)
	}
	if out := adminCmd(t, srv.addr, "workers"); strings.Contains(out, "worker-1") {
		t.Fatalf("workers after SHUTDOWN:\n%s", out)
	}
}

// The first pulse after REGISTER with a task_id other than 0 (the worker
// was given nothing: a task of an earlier life) gets the worker a RESTART,
// and it is removed: its pulses are unknown, the listings drop it.
func TestE2EControllerFirstPulseRestart(t *testing.T) {
	t.Parallel()
	if isGearmand(t) {
		t.Skip("gearmand has no Worker-Controller protocol")
	}
	dir, err := os.MkdirTemp("", "sy-ctl") // short: unix socket paths are
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "main.sock")
	srv := startServerProc(t, "--controller-socket", sock, "--controller-func", "resize")
	r := ctlPulse(t, sock, &codec.WorkerPulse{Type: codec.PulseType_PULSE_REGISTER, NextPulse: 60})
	if r.GetError() != codec.ControllerError_CTRL_ERR_OK || r.GetWorkerId() != 1 {
		t.Fatalf("REGISTER: %v", r)
	}
	ln, err := net.Listen("unix", filepath.Join(dir, "1.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ln.(*net.UnixListener).SetDeadline(time.Now().Add(10 * time.Second))
	ctlPulse(t, sock, &codec.WorkerPulse{Type: codec.PulseType_PULSE_OK, WorkerId: 1, TaskId: 7, NextPulse: 60})
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	var m codec.ControlMsg
	ctlRecv(t, c, &m)
	if m.GetType() != codec.ControlType_CTRL_RESTART {
		t.Fatalf("after a first pulse with task_id 7: %v, want RESTART", &m)
	}
	ctlSend(t, c, &codec.WorkerResponse{}, nil)
	c.Close()
	if r := ctlPulse(t, sock, &codec.WorkerPulse{Type: codec.PulseType_PULSE_OK, WorkerId: 1, NextPulse: 60}); r.GetError() != codec.ControllerError_CTRL_ERR_UNKNOWN_ID {
		t.Fatalf("after RESTART: %v", r)
	}
	if out := adminCmd(t, srv.addr, "workers"); strings.Contains(out, "worker-1") {
		t.Fatalf("workers after RESTART:\n%s", out)
	}
}
