package main

// libgearman (the C library behind gearman(1), PHP's and Python's bindings)
// against the server: testdata/libgearman_client.c and
// testdata/libgearman_worker.c, compiled with gcc by the test.

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// buildC compiles testdata/<name>.c against libgearman into t.TempDir().
func buildC(t *testing.T, name string) string {
	t.Helper()
	gcc := requireTool(t, "gcc")
	if _, err := os.Stat("/usr/include/libgearman/gearman.h"); err != nil {
		missing(t, "libgearman-dev (/usr/include/libgearman/gearman.h)")
	}
	src, err := filepath.Abs(filepath.Join("testdata", name+".c"))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), name)
	r := runCmd(t, 2*e2eCmdTimeout, "", gcc, "-Wall", "-Wextra", "-Werror", "-o", out, src, "-lgearman")
	if r.code != 0 {
		t.Fatalf("gcc %s: %s", name, r)
	}
	return out
}

func TestE2ELibgearmanClientWorker(t *testing.T) {
	t.Parallel()
	client := buildC(t, "libgearman_client")
	worker := buildC(t, "libgearman_worker")
	addr, port, _ := startServer(t)
	p := strconv.Itoa(port)
	handleRE := hostHandleRE(t)

	// A background job while no worker is around: known, not running.
	out := mustRun(t, "", client, p, "bg", "rev", "hello-bg")
	m := regexp.MustCompile(`^handle: (\S+)\nstatus: known=1 running=0 0/0\n$`).FindStringSubmatch(out)
	if m == nil || !handleRE.MatchString(m[1]) {
		t.Fatalf("bg: %q", out)
	}
	bgHandle := m[1]
	if got, want := adminCmd(t, addr, "status"), "rev\t1\t0\t0\n.\n"; got != want {
		t.Errorf("status = %q, want %q", got, want)
	}

	// The worker takes the queued job first, then the client's, one at a
	// time, so its log is in a known order.
	w := startProc(t, "", worker, p, "6")
	steps := []struct {
		mode []string
		want string
	}{
		{[]string{"do"}, "normal: olleh\nhigh: hgih\nlow: wol\n"},
		// Done by now (the worker had it before "hello"): unknown.
		{[]string{"status", bgHandle}, "status: known=0 running=0 0/0\n"},
		{[]string{"fail"}, "fail: GEARMAN_WORK_FAIL\n"},
		// Data and status packets reach the client in the order sent.
		{[]string{"progress"}, "data: chunk1\nstatus: 1/2\ndata: chunk2\nstatus: 2/2\ncomplete: done\n"},
	}
	for _, s := range steps {
		if got := mustRun(t, "", client, append([]string{p}, s.mode...)...); got != s.want {
			t.Errorf("client %s:\n%s\nwant\n%s", strings.Join(s.mode, " "), got, s.want)
		}
	}
	if code := w.wait(t, e2eWaitTimeout); code != 0 {
		t.Fatalf("worker exited %d: %q", code, w.stderr.String())
	}
	if got, want := w.stdout.String(), "rev hello-bg\nrev hello\nrev high\nrev low\nfail x\nprogress x\n"; got != want {
		t.Errorf("worker ran\n%s\nwant\n%s", got, want)
	}
	// An unknown handle is simply unknown.
	if got, want := mustRun(t, "", client, p, "status", "H:nothere:1"), "status: known=0 running=0 0/0\n"; got != want {
		t.Errorf("status of an unknown handle: %q, want %q", got, want)
	}
}

// Many tasks on one client connection, served by two workers at once: the
// results come back interleaved on that connection and each reaches its
// task. Each worker stops after exactly half.
func TestE2ELibgearmanConcurrentTasks(t *testing.T) {
	t.Parallel()
	client := buildC(t, "libgearman_client")
	worker := buildC(t, "libgearman_worker")
	addr, port, _ := startServer(t)
	p := strconv.Itoa(port)

	const n = 60
	w1 := startProc(t, "", worker, p, strconv.Itoa(n/2))
	w2 := startProc(t, "", worker, p, strconv.Itoa(n/2))
	waitWorkers(t, addr, "rev", 2)

	var want strings.Builder
	for i := 0; i < n; i++ {
		d := fmt.Sprintf("task-%03d", i)
		fmt.Fprintf(&want, "%s: %s\n", d, reverse(d))
	}
	if got := mustRun(t, "", client, p, "tasks", strconv.Itoa(n)); got != want.String() {
		t.Errorf("tasks:\n%s\nwant\n%s", got, want.String())
	}
	for i, w := range []*bgProc{w1, w2} {
		if code := w.wait(t, e2eWaitTimeout); code != 0 {
			t.Errorf("worker %d exited %d: %q", i+1, code, w.stderr.String())
		}
		if lines := strings.Count(w.stdout.String(), "\n"); lines != n/2 {
			t.Errorf("worker %d ran %d jobs, want %d", i+1, lines, n/2)
		}
	}
}

func reverse(s string) string {
	b := []byte(s)
	for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
		b[i], b[j] = b[j], b[i]
	}
	return string(b)
}

// TestE2ELibgearmanWorkerTimeout is libgearman's gearman_worker_timeout test
// (tests/libgearman-1.0/client_test.cc): a worker registered with
// CAN_DO_TIMEOUT 5 (1 s) sleeps past it; the client must still get
// GEARMAN_SUCCESS and "slept". switchyard takes the late result as the
// job's. gearmand answers it JOB_NOT_FOUND and hands the job to the same
// worker again, and gets there only when the worker's PRE_SLEEP on a stale
// NO_JOB drops the timeout, which depends on how libgearman's reads split
// the replies: with the job queued before the worker starts it can hang.
func TestE2ELibgearmanWorkerTimeout(t *testing.T) {
	t.Parallel()
	client := buildC(t, "libgearman_client")
	sleeper := buildC(t, "libgearman_sleeper")
	for _, order := range []string{"worker first", "job first"} {
		t.Run(order, func(t *testing.T) {
			if order == "job first" && isGearmand(t) {
				t.Skip("gearmand can leave libgearman's worker asleep with the job in its buffer")
			}
			addr, port, _ := startServer(t)
			p := strconv.Itoa(port)
			var w *bgProc
			if order == "worker first" {
				w = startProc(t, "", sleeper, p, "2", "5")
				waitWorkers(t, addr, "sleep", 1)
			}
			c := startProc(t, "", client, p, "do1", "sleep", "sleep")
			if w == nil {
				waitStatus(t, addr, "sleep", "the job queued", func(s funcStatus) bool { return s.queued == 1 })
				w = startProc(t, "", sleeper, p, "2", "5")
			}
			if code := c.wait(t, e2eCmdTimeout); code != 0 || c.stdout.String() != "sleep: slept\n" {
				t.Fatalf("client: exit %d, %q", code, c.stdout.String())
			}
			w.kill()
		})
	}
}
