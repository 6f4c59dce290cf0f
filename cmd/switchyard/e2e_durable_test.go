package main

// The durable queue end to end: background jobs acknowledged by a real
// switchyard process survive a restart and a kill -9, under the handles
// they were given, and run once afterwards.

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// streamSubmits pipelines SUBMIT_JOB_BG for uniques prefix0, prefix1, ...
// (at most max) and reports each acknowledged one on acked, in order, with
// its handle. It stops when the connection dies; the error is why.
func streamSubmits(addr, fn, prefix string, max int, acked chan<- [2]string) error {
	defer close(acked)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	go func() {
		w := bufio.NewWriter(c)
		for i := 0; i < max; i++ {
			body := fn + "\x00" + fmt.Sprint(prefix, i) + "\x00payload"
			var h [12]byte
			copy(h[:], "\x00REQ")
			binary.BigEndian.PutUint32(h[4:], pSubmitJobBg)
			binary.BigEndian.PutUint32(h[8:], uint32(len(body)))
			w.Write(h[:])
			w.WriteString(body)
			if i%64 == 63 {
				if w.Flush() != nil {
					return
				}
			}
		}
		w.Flush()
	}()
	r := bufio.NewReader(c)
	for i := 0; i < max; i++ {
		var h [12]byte
		if _, err := io.ReadFull(r, h[:]); err != nil {
			return err
		}
		body := make([]byte, binary.BigEndian.Uint32(h[8:]))
		if _, err := io.ReadFull(r, body); err != nil {
			return err
		}
		if typ := binary.BigEndian.Uint32(h[4:]); typ != pJobCreated {
			return fmt.Errorf("submit %d answered type %d %q", i, typ, body)
		}
		acked <- [2]string{fmt.Sprint(prefix, i), string(body)}
	}
	return nil
}

// drain runs every queued job of fn to completion and returns unique ->
// handle, failing on a job handed out twice.
func drain(t *testing.T, addr, fn string) map[string]string {
	t.Helper()
	w := dialGear(t, addr, "drainer")
	w.send(pCanDo, fn)
	got := map[string]string{}
	for {
		w.send(pGrabJobUniq)
		p := w.recv(10 * time.Second)
		if p.typ == pNoJob {
			return got
		}
		if p.typ != pJobAssignUniq {
			t.Fatalf("GRAB_JOB_UNIQ answered %v", p)
		}
		a := strings.SplitN(string(p.body), "\x00", 4)
		if _, dup := got[a[2]]; dup {
			t.Fatalf("job %s handed out twice", a[2])
		}
		got[a[2]] = a[0]
		w.send(pWorkComplete, a[0], "done")
	}
}

// A clean restart keeps every background job under its handle.
func TestE2EDurableRestart(t *testing.T) {
	t.Parallel()
	if isGearmand(t) {
		t.Skip("gearmand's builtin queue keeps nothing across a restart")
	}
	data := filepath.Join(t.TempDir(), "data")
	srv := startServerProc(t, "--data-dir", data)
	c := dialGear(t, srv.addr, "client")
	want := map[string]string{}
	for i := 0; i < 50; i++ {
		u := fmt.Sprint("u", i)
		want[u] = c.submit(pSubmitJobBg, "durable", u, "x")
	}
	srv.stop()
	srv = startServerProc(t, "--data-dir", data)
	got := drain(t, srv.addr, "durable")
	if len(got) != len(want) {
		t.Fatalf("%d jobs after the restart, want %d", len(got), len(want))
	}
	for u, h := range want {
		if got[u] != h {
			t.Fatalf("job %s: handle %q after the restart, %q before", u, got[u], h)
		}
	}
	srv.stop()
	srv = startServerProc(t, "--data-dir", data)
	if left := drain(t, srv.addr, "durable"); len(left) != 0 {
		t.Fatalf("%d finished jobs came back", len(left))
	}
}

// kill -9 in the middle of a stream of submissions, 20 times: every job
// that was acknowledged runs exactly once afterwards, under its handle;
// jobs the server took but did not acknowledge may run too.
func TestE2EDurableKill9(t *testing.T) {
	t.Parallel()
	if isGearmand(t) {
		t.Skip("gearmand's builtin queue keeps nothing across a restart")
	}
	data := filepath.Join(t.TempDir(), "data")
	srv := startServerProc(t, "--data-dir", data)
	for round := 0; round < 20; round++ {
		prefix := fmt.Sprintf("r%d-", round)
		acked := make(chan [2]string, 1024)
		streamErr := make(chan error, 1)
		go func() { streamErr <- streamSubmits(srv.addr, "kill9", prefix, 20000, acked) }()
		ack := map[string]string{}
		killAt := 50 + round*37 // acknowledgements before the kill
		for a := range acked {
			ack[a[0]] = a[1]
			if len(ack) == killAt {
				srv.cmd.Process.Signal(syscall.SIGKILL)
				<-srv.done
			}
		}
		if err := <-streamErr; err == nil && len(ack) < killAt {
			t.Fatalf("round %d: the stream ended after %d acknowledgements", round, len(ack))
		}
		srv = startServerProc(t, "--data-dir", data)
		got := drain(t, srv.addr, "kill9")
		for u, h := range ack {
			if got[u] != h {
				t.Fatalf("round %d: acknowledged job %s (%s) came back as %q", round, u, h, got[u])
			}
		}
		for u := range got {
			if !strings.HasPrefix(u, prefix) {
				t.Fatalf("round %d: job %s of an earlier round ran again", round, u)
			}
		}
	}
}
