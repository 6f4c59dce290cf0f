package main

// The "shutdown" admin command, which only switchyard has and only with
// --admin-shutdown (without it, see TestE2EAdminShutdown).

import (
	"bufio"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
)

// skipGearmand skips a test of an option gearmand 1.1.20 does not have.
func skipGearmand(t *testing.T) {
	t.Helper()
	if isGearmand(t) {
		t.Skip("gearmand 1.1.20 has no shutdown command")
	}
}

// holdJob connects a worker for "f" and a foreground client, and has the
// worker take the client's job. It returns both connections and the handle.
func holdJob(t *testing.T, addr string) (w, c *gearConn, handle string) {
	t.Helper()
	w = dialGear(t, addr, "worker")
	w.send(pCanDo, "f")
	c = dialGear(t, addr, "client")
	handle = c.submit(pSubmitJob, "f", "", "payload")
	if got := w.grabJob(10 * time.Second); got[0] != handle || got[2] != "payload" {
		t.Fatalf("worker got %q, want the job %s", got, handle)
	}
	return w, c, handle
}

// waitRefused waits until connecting to addr is refused.
func waitRefused(t *testing.T, addr string) {
	t.Helper()
	waitUntil(t, e2eWaitTimeout, "new connections to be refused", func() (bool, string) {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return false, "accepted"
		}
		return errors.Is(err, syscall.ECONNREFUSED), err.Error()
	})
}

// sendAdmin sends one admin command on an open connection and reads the
// reply line.
func sendAdmin(t *testing.T, c net.Conn, cmd string) string {
	t.Helper()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, cmd+"\r\n"); err != nil {
		t.Fatalf("%q: %v", cmd, err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("%q: %v after %q", cmd, err, line)
	}
	return line
}

// Plain "shutdown" stops at once, whatever is running: the client of the
// job in hand is disconnected without a result.
func TestE2EAdminShutdownNow(t *testing.T) {
	t.Parallel()
	skipGearmand(t)
	srv := startServerProc(t, "--admin-shutdown", "--shutdown-timeout", "600")
	w, c, _ := holdJob(t, srv.addr)
	if got := adminCmd(t, srv.addr, "shutdown"); got != "OK\r\n" {
		t.Fatalf("shutdown -> %q", got)
	}
	code, ok := srv.exited(10 * time.Second)
	if !ok {
		t.Fatal("server still running 10s after shutdown")
	}
	if code != 0 {
		t.Errorf("exit status %d after shutdown, want 0", code)
	}
	for _, g := range []*gearConn{w, c} {
		if err := g.waitClosed(5 * time.Second); err != nil {
			t.Errorf("%s: connection after shutdown: %v", g.name, err)
		}
	}
}

// "shutdown graceful" refuses new connections and hands out no new job, but
// keeps serving the open connections until the running job is over, then
// exits 0. What ends the wait: the worker's result, --shutdown-timeout, a
// signal, or a plain "shutdown".
func TestE2EAdminShutdownGraceful(t *testing.T) {
	t.Parallel()
	skipGearmand(t)
	tests := []struct {
		name    string
		timeout string // --shutdown-timeout
		end     func(t *testing.T, srv *serverProc, w *gearConn, admin net.Conn, handle string)
		result  bool // the client gets WORK_COMPLETE
		atLeast time.Duration
		log     string // in the server's output
	}{
		{name: "job completes", timeout: "600", result: true, log: "no job running",
			end: func(t *testing.T, _ *serverProc, w *gearConn, _ net.Conn, h string) {
				w.send(pWorkComplete, h, "done")
			}},
		{name: "timeout", timeout: "1", atLeast: time.Second, log: "stopping with jobs still running",
			end: func(*testing.T, *serverProc, *gearConn, net.Conn, string) {}},
		{name: "SIGTERM", timeout: "600", log: "stopping at once",
			end: func(t *testing.T, srv *serverProc, _ *gearConn, _ net.Conn, _ string) {
				if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "plain shutdown", timeout: "600", log: "stopping at once on admin request",
			end: func(t *testing.T, _ *serverProc, _ *gearConn, admin net.Conn, _ string) {
				if got := sendAdmin(t, admin, "shutdown"); got != "OK\r\n" {
					t.Fatalf("shutdown while draining -> %q", got)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := startServerProc(t, "--admin-shutdown", "--shutdown-timeout", tt.timeout)
			w, c, h := holdJob(t, srv.addr)
			c.submit(pSubmitJobBg, "f", "", "queued")
			admin, err := net.Dial("tcp", srv.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer admin.Close()

			start := time.Now()
			if got := sendAdmin(t, admin, "shutdown graceful"); got != "OK\r\n" {
				t.Fatalf("shutdown graceful -> %q", got)
			}
			waitRefused(t, srv.addr)
			// The open connections are served; the queued job is not
			// handed out.
			w.send(pGrabJob)
			if p := w.recv(10 * time.Second); p.typ != pNoJob {
				t.Fatalf("GRAB_JOB while draining: %v, want NO_JOB", p)
			}
			c.send(pEchoReq, "still served")
			c.expect(pEchoRes, "still served")
			if _, exited := srv.exited(0); exited {
				t.Fatal("server exited while a job runs")
			}

			tt.end(t, srv, w, admin, h)
			if tt.result {
				c.expect(pWorkComplete, h+"\x00done")
			}
			code, ok := srv.exited(10 * time.Second)
			if !ok {
				t.Fatal("server still running 10s after the wait should have ended")
			}
			if code != 0 {
				t.Errorf("exit status %d, want 0", code)
			}
			if d := time.Since(start); d < tt.atLeast {
				t.Errorf("exited %v after shutdown graceful, want at least %v", d, tt.atLeast)
			}
			if err := c.waitClosed(5 * time.Second); err != nil {
				t.Errorf("client: connection after exit: %v", err)
			}
			out := srv.stderr.String()
			if !strings.Contains(out, tt.log) {
				t.Errorf("server output lacks %q", tt.log)
			}
			if strings.Contains(out, "\terror\t") {
				t.Errorf("server logged errors:\n%s", out)
			}
		})
	}
}
