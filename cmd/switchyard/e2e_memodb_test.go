package main

// The MemoDB frontend (--memodb-listen) end to end: a real switchyard
// process and a real C peer, Debian's nngcat (nng-utils), as a MemoDB
// client sending a JOB and as a MemoDB worker (a REQ socket sending READY,
// then RESULT), with the CBOR messages built here and passed as files.
// nngcat sends its file once, prints the one reply raw and exits.
//
// gearmand has no MemoDB frontend: run against it, these tests skip.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.nanomsg.org/mangos/v3"
	reqsock "go.nanomsg.org/mangos/v3/protocol/req"

	codec "switchyard/codec/memodb"
)

// nngcatTimeout bounds one nngcat exchange: a failure, not a pace.
const nngcatTimeout = 20 * time.Second

func requireNngcat(t *testing.T) string {
	t.Helper()
	if isGearmand(t) {
		t.Skip("gearmand has no MemoDB frontend")
	}
	return requireTool(t, "nngcat")
}

// startMemodb starts switchyard with a MemoDB listener on a port the
// kernel picks and returns the server and that listener's URL.
func startMemodb(t *testing.T, extraArgs ...string) (*serverProc, string) {
	t.Helper()
	srv, others := startServerPorts(t, 2, append([]string{"--memodb-listen", "tcp://127.0.0.1:0"}, extraArgs...)...)
	return srv, "tcp://" + others[0]
}

// nngcatReq starts nngcat as a REQ socket sending msg (from a file) to url;
// wait returns the reply it printed.
func nngcatReq(t *testing.T, bin, url string, msg []byte) (wait func() []byte) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "msg.cbor")
	if err := os.WriteFile(file, msg, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), nngcatTimeout)
	cmd := exec.CommandContext(ctx, bin, "--req", "--dial", url, "--raw", "--file", file,
		"--recv-timeout", "15", "--recv-maxsz", "0")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	return func() []byte {
		t.Helper()
		defer cancel()
		if err := cmd.Wait(); err != nil {
			t.Fatalf("nngcat: %v\n%s", err, errOut.String())
		}
		return out.Bytes()
	}
}

// decodeReply decodes what nngcat printed.
func decodeReply(t *testing.T, b []byte, want codec.Type) codec.Message {
	t.Helper()
	var m codec.Message
	if err := codec.Decode(b, codec.Reply, &m); err != nil {
		t.Fatalf("nngcat printed % x: %v", b, err)
	}
	if m.Type != want {
		t.Fatalf("nngcat got %s %+v, want %s", m.Type, m, want)
	}
	return m
}

// nngcat as a client and as a worker, and each with Gearman on the other
// side: a MemoDB client's job run by a Gearman worker, a Gearman client's
// job run by a MemoDB worker, a MemoDB client's job run by a MemoDB
// worker; every result reaches the client that asked.
func TestE2EMemodbNngcat(t *testing.T) {
	t.Parallel()
	nngcat := requireNngcat(t)
	srv, url := startMemodb(t, "--memodb-heartbeat", "1s")

	t.Run("nngcat client, Gearman worker", func(t *testing.T) {
		g := dialGear(t, srv.addr, "gearman worker")
		g.send(pCanDo, "upper")
		wait := nngcatReq(t, nngcat, url, append(codec.AppendJob(nil, nil, "upper", 30000), "from nngcat"...))
		job := g.grabJob(nngcatTimeout)
		if job[1] != "upper" || job[2] != "from nngcat" {
			t.Fatalf("the Gearman worker got %q", job)
		}
		g.send(pWorkComplete, job[0], "FROM NNGCAT")
		m := decodeReply(t, wait(), codec.Result)
		if len(m.ID) != 0 || string(m.Payload) != "FROM NNGCAT" {
			t.Fatalf("nngcat's result: %+v", m)
		}
	})

	t.Run("Gearman client, nngcat worker", func(t *testing.T) {
		c := dialGear(t, srv.addr, "gearman client")
		handle := c.submit(pSubmitJob, "lower", "", "FROM GEARMAN")
		held := nngcatHold(t, nngcat, url, codec.AppendReady(nil, []string{"lower"}))
		m := held.job("lower", 0, "FROM GEARMAN")
		// The RESULT from another nngcat, another connection: the id is
		// what names the worker. Its reply is a HEARTBEAT, a second on.
		hb := decodeReply(t, nngcatReq(t, nngcat, url, append(codec.AppendResult(nil, m.ID), "from nngcat"...))(), codec.Heartbeat)
		if !bytes.Equal(hb.ID, m.ID) {
			t.Fatalf("HEARTBEAT to %x, want %x", hb.ID, m.ID)
		}
		c.expect(pWorkComplete, handle+"\x00from nngcat")
		// The worker's last message came on the RESULT's connection, which
		// is closed by now: the worker is gone (though the first nngcat is
		// still connected), and its id unknown.
		waitStatus(t, srv.addr, "lower", "no worker", func(s funcStatus) bool { return s.workers == 0 })
		decodeReply(t, nngcatReq(t, nngcat, url, codec.AppendHeartbeat(nil, m.ID))(), codec.Disconnect)
	})

	t.Run("nngcat client, nngcat worker", func(t *testing.T) {
		held := nngcatHold(t, nngcat, url, codec.AppendReady(nil, []string{"echo", "other"}))
		client := nngcatReq(t, nngcat, url, append(codec.AppendJob(nil, nil, "echo", 5000), "\x82\x01\x02"...))
		m := held.job("echo", 5000, "\x82\x01\x02")
		done := nngcatReq(t, nngcat, url, append(codec.AppendResultDisconnecting(nil, m.ID), "\x82\x00\xf5"...))
		decodeReply(t, done(), codec.Disconnect)
		r := decodeReply(t, client(), codec.Result)
		if string(r.Payload) != "\x82\x00\xf5" {
			t.Fatalf("nngcat's result: % x", r.Payload)
		}
	})
}

// goneWithin bounds how soon a dead peer is gone, end to end: issue 24
// asks for a second; the server's part takes milliseconds, the rest is the
// peer's exit and the admin round trips on a loaded machine.
const goneWithin = 2 * time.Second

// A MemoDB worker killed while it runs a job (nngcat, SIGKILL) is gone
// within about a second: "workers" and "status" no longer count it, and
// its job, back in the queue, runs on another worker, whose result reaches
// the nngcat client. The other worker is a mangos REQ socket: an nngcat
// sends one request per process.
func TestE2EMemodbWorkerKilledMidJob(t *testing.T) {
	t.Parallel()
	nngcat := requireNngcat(t)
	srv, url := startMemodb(t, "--memodb-heartbeat", "60s")
	client := nngcatReq(t, nngcat, url, append(codec.AppendJob(nil, nil, "mid", 0), "work"...))
	held := nngcatHold(t, nngcat, url, codec.AppendReady(nil, []string{"mid"}))
	held.job("mid", 0, "work")
	waitStatus(t, srv.addr, "mid", "the job running on the worker", func(s funcStatus) bool { return s == funcStatus{1, 1, 1} })
	if out := adminCmd(t, srv.addr, "workers"); !strings.Contains(out, " memodb worker-") {
		t.Fatalf("workers:\n%s", out)
	}

	held.kill()
	waitWithin(t, goneWithin, "the killed worker gone, its job queued", []int{srv.cmd.Process.Pid}, func() (bool, string) {
		m, raw := adminStatus(t, srv.addr)
		workers := adminCmd(t, srv.addr, "workers")
		return m["mid"] == funcStatus{1, 0, 0} && !strings.Contains(workers, " memodb "), raw + workers
	})

	sock, err := reqsock.NewSocket()
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	sock.SetOption(mangos.OptionRetryTime, time.Duration(0)) // each request once
	sock.SetOption(mangos.OptionRecvDeadline, nngcatTimeout)
	if err := sock.Dial(url); err != nil {
		t.Fatal(err)
	}
	if err := sock.Send(codec.AppendReady(nil, []string{"mid"})); err != nil {
		t.Fatal(err)
	}
	b, err := sock.Recv()
	if err != nil {
		t.Fatal(err)
	}
	m := decodeReply(t, b, codec.Job)
	if string(m.Payload) != "work" {
		t.Fatalf("the other worker's JOB: %+v", m)
	}
	if err := sock.Send(append(codec.AppendResult(nil, m.ID), "done"...)); err != nil {
		t.Fatal(err)
	}
	if r := decodeReply(t, client(), codec.Result); string(r.Payload) != "done" {
		t.Fatalf("the client's result: %+v", r)
	}
}

// heldNngcat is an nngcat worker that sends READY, prints the reply and
// then waits a minute (--interval) before it would send READY again: a
// worker running the job it was sent, connected all the while.
type heldNngcat struct {
	t    *testing.T
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  []byte        // what it printed so far
	done chan struct{} // closed once it has exited
}

func nngcatHold(t *testing.T, bin, url string, msg []byte) *heldNngcat {
	t.Helper()
	file := filepath.Join(t.TempDir(), "msg.cbor")
	if err := os.WriteFile(file, msg, 0o600); err != nil {
		t.Fatal(err)
	}
	h := &heldNngcat{t: t, done: make(chan struct{})}
	h.cmd = exec.Command(bin, "--req", "--dial", url, "--raw", "--file", file,
		"--count", "2", "--interval", "60", "--recv-timeout", "15", "--recv-maxsz", "0")
	stdout, err := h.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		var b [4096]byte
		for {
			n, err := stdout.Read(b[:])
			h.mu.Lock()
			h.out = append(h.out, b[:n]...)
			h.mu.Unlock()
			if err != nil {
				break
			}
		}
		h.cmd.Wait()
		close(h.done)
	}()
	t.Cleanup(h.kill)
	return h
}

// kill kills it (SIGKILL) and waits for it to exit.
func (h *heldNngcat) kill() {
	h.cmd.Process.Kill()
	<-h.done
}

// job waits until it has printed the whole JOB for service, with timeout
// ms and payload, that the server sent it, and returns it decoded.
func (h *heldNngcat) job(service string, ms uint64, payload string) codec.Message {
	h.t.Helper()
	n := len(codec.AppendJob(nil, make([]byte, codec.IDLen), service, ms)) + len(payload)
	var out []byte
	waitUntil(h.t, nngcatTimeout, "nngcat's JOB", func() (bool, string) {
		h.mu.Lock()
		defer h.mu.Unlock()
		out = h.out
		return len(out) >= n, fmt.Sprintf("% x", out)
	})
	m := decodeReply(h.t, out, codec.Job)
	if len(m.ID) != codec.IDLen || m.Service != service || m.Timeout != ms || string(m.Payload) != payload {
		h.t.Fatalf("nngcat's JOB: %+v", m)
	}
	return m
}
