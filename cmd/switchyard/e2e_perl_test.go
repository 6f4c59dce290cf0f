package main

// Perl's Gearman::Client and Gearman::Worker (libgearman-client-perl), a
// pure-Perl implementation of the protocol: testdata/perl_client.pl and
// testdata/perl_worker.pl.

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// requirePerl returns the perl binary and the path of testdata/<script>.
func requirePerl(t *testing.T, script string) (string, string) {
	t.Helper()
	perl := requireTool(t, "perl")
	if r := runCmd(t, e2eCmdTimeout, "", perl, "-MGearman::Client", "-MGearman::Worker", "-e", "1"); r.code != 0 {
		missing(t, "libgearman-client-perl (Gearman::Client)")
	}
	p, err := filepath.Abs(filepath.Join("testdata", script))
	if err != nil {
		t.Fatal(err)
	}
	return perl, p
}

func TestE2EPerlClientWorker(t *testing.T) {
	t.Parallel()
	perl, client := requirePerl(t, "perl_client.pl")
	_, worker := requirePerl(t, "perl_worker.pl")
	_, port, _ := startServer(t)
	p := strconv.Itoa(port)

	// dispatch_background while no worker is around, then get_status.
	out := mustRun(t, "", perl, client, p, "bg", "rev", "hello-bg")
	re := regexp.MustCompile(`^handle: 127\.0\.0\.1:` + p + `//(` + hostHandlePattern(t) + `)\nstatus: known=1 running=0\n$`)
	m := re.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("bg: %q, want %s", out, re)
	}
	bgHandle := "127.0.0.1:" + p + "//" + m[1]
	// get_job_server_status sends "status\n" (LF only).
	if got, want := mustRun(t, "", perl, client, p, "server-status"), "rev queued=1 running=0 capable=0\n"; got != want {
		t.Errorf("server-status = %q, want %q", got, want)
	}

	const tasks = 10
	w := startProc(t, "", perl, worker, p, strconv.Itoa(1+4+1+tasks))
	var taskWant, taskLog strings.Builder
	for i := 0; i < tasks; i++ {
		d := fmt.Sprintf("task-%03d", i)
		fmt.Fprintf(&taskWant, "%s: %s\n", d, reverse(d))
		fmt.Fprintf(&taskLog, "rev %s\n", d)
	}
	steps := []struct {
		args []string
		want string
	}{
		{[]string{"do"}, "normal: olleh\nhigh: hgih\nlow: wol\nuniq: qinu\n"},
		{[]string{"status", bgHandle}, "status: known=0 running=0\n"},
		{[]string{"fail"}, "fail: undef on_fail=1\n"},
		{[]string{"taskset", strconv.Itoa(tasks)}, taskWant.String()},
	}
	for _, s := range steps {
		if got := mustRun(t, "", perl, append([]string{client, p}, s.args...)...); got != s.want {
			t.Errorf("client %s:\n%s\nwant\n%s", strings.Join(s.args, " "), got, s.want)
		}
	}
	// stop_if ends the worker after exactly its count.
	if code := w.wait(t, e2eWaitTimeout); code != 0 {
		t.Fatalf("worker exited %d: %q", code, w.stderr.String())
	}
	wantLog := "rev hello-bg\nrev hello\nrev high\nrev low\nrev uniq\nfail x\n" + taskLog.String()
	if got := w.stdout.String(); got != wantLog {
		t.Errorf("worker ran\n%s\nwant\n%s", got, wantLog)
	}
}

// One taskset, two Perl workers sharing the work, each stopping after half.
func TestE2EPerlTasksetTwoWorkers(t *testing.T) {
	t.Parallel()
	perl, client := requirePerl(t, "perl_client.pl")
	_, worker := requirePerl(t, "perl_worker.pl")
	addr, port, _ := startServer(t)
	p := strconv.Itoa(port)

	const n = 40
	w1 := startProc(t, "", perl, worker, p, strconv.Itoa(n/2))
	w2 := startProc(t, "", perl, worker, p, strconv.Itoa(n/2))
	waitWorkers(t, addr, "rev", 2)
	var want strings.Builder
	for i := 0; i < n; i++ {
		d := fmt.Sprintf("task-%03d", i)
		fmt.Fprintf(&want, "%s: %s\n", d, reverse(d))
	}
	if got := mustRun(t, "", perl, client, p, "taskset", strconv.Itoa(n)); got != want.String() {
		t.Errorf("taskset:\n%s\nwant\n%s", got, want.String())
	}
	for i, w := range []*bgProc{w1, w2} {
		if code := w.wait(t, e2eWaitTimeout); code != 0 {
			t.Errorf("worker %d exited %d: %q", i+1, code, w.stderr.String())
		}
		if got := strings.Count(w.stdout.String(), "\n"); got != n/2 {
			t.Errorf("worker %d ran %d jobs, want %d", i+1, got, n/2)
		}
	}
}

// TestE2EPerlWorkerTimeout is p-alik/perl-Gearman's t/14-sleep.t in small:
// two workers whose timeout (1 s) every job overruns. The client gets the
// first attempt's result and no worker dies of a JOB_NOT_FOUND for the
// other attempt. gearmand answers every late result JOB_NOT_FOUND, kills
// the workers that way and never ends the job (t/14-sleep.t hangs there).
func TestE2EPerlWorkerTimeout(t *testing.T) {
	if isGearmand(t) {
		t.Skip("gearmand never ends a job that overruns every worker's timeout")
	}
	t.Parallel()
	perl, client := requirePerl(t, "perl_client.pl")
	_, sleeper := requirePerl(t, "perl_sleeper.pl")
	addr, port, _ := startServer(t)
	p := strconv.Itoa(port)
	w1 := startProc(t, "", perl, sleeper, p)
	w2 := startProc(t, "", perl, sleeper, p)
	waitWorkers(t, addr, "sleep", 2)
	for i := 0; i < 2; i++ {
		if out := mustRun(t, "", perl, client, p, "sleep", "2"); out != "sleep: slept\n" {
			t.Fatalf("job %d: %q", i, out)
		}
	}
	// Both attempts of the last job are over once each worker has said so.
	waitUntil(t, e2eWaitTimeout, "every attempt to end", func() (bool, string) {
		n := strings.Count(w1.stdout.String(), "slept") + strings.Count(w2.stdout.String(), "slept")
		return n >= 4, fmt.Sprintf("%d attempts ended", n)
	})
	if !w1.running() || !w2.running() {
		t.Fatalf("a worker died:\n%s\n%s", w1.stderr.String(), w2.stderr.String())
	}
	waitWorkers(t, addr, "sleep", 2)
}
