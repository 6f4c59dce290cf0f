package main

// Workers that die holding a job, job retries (-j), and exceptions.
//
// A worker that disconnects before finishing gives its job back: the server
// queues it again and the next worker gets it, while the client keeps
// waiting. With -j N the job fails after N assignments whose worker died: a
// waiting client gets WORK_FAIL (gearman(1) prints "Job failed" on stderr and
// exits 1), a background job is dropped.

import (
	"strconv"
	"strings"
	"testing"
)

// rawWorker connects, registers fn and grabs until it holds a job.
func rawWorker(t *testing.T, addr, name, fn string) (*gearConn, []string) {
	t.Helper()
	w := dialGear(t, addr, name)
	w.send(pCanDo, fn)
	return w, w.grabJob(e2eWaitTimeout)
}

func TestE2EFailoverWorkerDies(t *testing.T) {
	t.Parallel()
	requireTool(t, "gearman")
	handleRE := hostHandleRE(t)

	cases := []struct {
		name string
		// die starts a worker for "slow", waits until it holds the job and
		// kills it.
		die func(t *testing.T, addr string, port int)
	}{
		{"raw worker closes", func(t *testing.T, addr string, port int) {
			w, job := rawWorker(t, addr, "worker 1", "slow")
			if !handleRE.MatchString(job[0]) || job[1] != "slow" || job[2] != "payload" {
				t.Fatalf("JOB_ASSIGN %q", job)
			}
			if got, want := adminCmd(t, addr, "status"), "slow\t1\t1\t1\n.\n"; got != want {
				t.Errorf("status while assigned = %q, want %q", got, want)
			}
			w.c.Close()
		}},
		{"gearman -w killed", func(t *testing.T, addr string, port int) {
			w := startGearman(t, port, "-w", "-f", "slow", "--", "sh", "-c", "echo started >&2; exec sleep 60")
			waitUntil(t, e2eWaitTimeout, "the job command to start", func() (bool, string) {
				return strings.Contains(w.stderr.String(), "started"), w.stderr.String()
			})
			if got, want := adminCmd(t, addr, "status"), "slow\t1\t1\t1\n.\n"; got != want {
				t.Errorf("status while assigned = %q, want %q", got, want)
			}
			w.kill()
			w.wait(t, e2eWaitTimeout)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			addr, port, _ := startServer(t)
			client := startGearman(t, port, "-f", "slow", "payload")
			c.die(t, addr, port)
			// Back in the queue, nobody on it, the client still waiting.
			waitStatus(t, addr, "slow", "requeued", func(s funcStatus) bool { return s == funcStatus{1, 0, 0} })
			if !client.running() {
				t.Fatalf("client exited when the worker died: %q %q", client.stdout.String(), client.stderr.String())
			}
			w2 := startGearman(t, port, "-w", "-c", "1", "-f", "slow", "--", "rev")
			if code := client.wait(t, e2eWaitTimeout); code != 0 || client.stdout.String() != "daolyap" {
				t.Errorf("client exited %d with %q %q, want \"daolyap\"", code, client.stdout.String(), client.stderr.String())
			}
			if code := w2.wait(t, e2eWaitTimeout); code != 0 {
				t.Errorf("second worker exited %d", code)
			}
		})
	}
}

func TestE2EFailoverJobRetries(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		retries int
		client  string // "gearman", "raw" or "background"
	}{
		{"j1 gearman", 1, "gearman"},
		{"j2 gearman", 2, "gearman"},
		{"j3 raw client", 3, "raw"},
		{"j1 background", 1, "background"},
		{"j2 background", 2, "background"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			addr, port, _ := startServer(t, "-j", strconv.Itoa(c.retries))
			var client *bgProc
			var raw *gearConn
			var handle string
			switch c.client {
			case "gearman":
				requireTool(t, "gearman")
				client = startGearman(t, port, "-f", "slow", "payload")
			case "raw":
				raw = dialGear(t, addr, "client")
				handle = raw.submit(pSubmitJob, "slow", "", "payload")
			case "background":
				raw = dialGear(t, addr, "client")
				handle = raw.submit(pSubmitJobBg, "slow", "", "payload")
			}
			for i := 1; i <= c.retries; i++ {
				w, job := rawWorker(t, addr, "worker "+strconv.Itoa(i), "slow")
				if job[1] != "slow" || job[2] != "payload" || (handle != "" && job[0] != handle) {
					t.Fatalf("attempt %d: JOB_ASSIGN %q", i, job)
				}
				w.c.Close()
				if i < c.retries {
					waitStatus(t, addr, "slow", "requeued", func(s funcStatus) bool { return s == funcStatus{1, 0, 0} })
				}
			}
			switch c.client {
			case "gearman":
				code := client.wait(t, e2eWaitTimeout)
				if code != 1 || client.stdout.String() != "" || client.stderr.String() != "Job failed\n" {
					t.Errorf("client exited %d, stdout %q, stderr %q; want 1, \"\", \"Job failed\\n\"",
						code, client.stdout.String(), client.stderr.String())
				}
			case "raw":
				raw.expect(pWorkFail, handle)
			}
			// The job is gone.
			waitStatus(t, addr, "slow", "the job gone", func(s funcStatus) bool { return s == funcStatus{0, 0, 0} })
			if got := adminCmd(t, addr, "show jobs"); got != ".\n" {
				t.Errorf("show jobs = %q", got)
			}
			// A new worker finds nothing.
			w := dialGear(t, addr, "late worker")
			w.send(pCanDo, "slow")
			w.send(pGrabJob)
			w.expect(pNoJob, "")
		})
	}
}

// WORK_EXCEPTION reaches the clients that asked for exceptions (OPTION_REQ
// "exceptions"), or all of them under --exceptions. Other clients get
// WORK_FAIL instead; gearmand 1.1.20 sends that WORK_FAIL with a NUL after
// the handle (the exception's separator). Either way the job is over.
func TestE2EWorkException(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		server   []string
		option   bool
		wantType uint32
		wantBody string // after the handle
	}{
		{"no option", nil, false, pWorkFail, "\x00"},
		{"option requested", nil, true, pWorkException, "\x00boom"},
		{"--exceptions", []string{"--exceptions"}, false, pWorkException, "\x00boom"},
		{"--exceptions and option", []string{"--exceptions"}, true, pWorkException, "\x00boom"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			addr, _, _ := startServer(t, c.server...)
			cl := dialGear(t, addr, "client")
			if c.option {
				cl.send(pOptionReq, "exceptions")
				cl.expect(pOptionRes, "exceptions")
			}
			h := cl.submit(pSubmitJob, "exc", "", "payload")
			w, job := rawWorker(t, addr, "worker", "exc")
			if job[0] != h || job[2] != "payload" {
				t.Fatalf("JOB_ASSIGN %q for %q", job, h)
			}
			w.send(pWorkException, h, "boom")
			cl.expect(c.wantType, h+c.wantBody)
			// The job is over: a second result is refused, nothing is left
			// to grab.
			w.send(pWorkFail, h)
			w.expect(pError, "JOB_NOT_FOUND\x00Job given in work result not found")
			w.send(pGrabJob)
			w.expect(pNoJob, "")
			cl.send(pEchoReq, "still here")
			cl.expect(pEchoRes, "still here")
			if got, want := adminCmd(t, addr, "status"), "exc\t0\t0\t1\n.\n"; got != want {
				t.Errorf("status = %q, want %q", got, want)
			}
		})
	}
}
