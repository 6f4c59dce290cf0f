package main

// The metrics endpoints (--metrics-listen) end to end: a real switchyard,
// Gearman traffic from real connections, /metrics read with Prometheus's
// own text parser.

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"switchyard/engine/ops/opstest"
)

// startMetrics starts switchyard with its metrics on a port the kernel
// picks and returns the server and that port's address.
func startMetrics(t *testing.T, extraArgs ...string) (*serverProc, string) {
	t.Helper()
	srv, others := startServerPorts(t, 2, append([]string{"--metrics-listen", "127.0.0.1:0"}, extraArgs...)...)
	return srv, others[0]
}

// metrics is a scrape parsed by Prometheus's text parser.
type metrics = opstest.Families

func scrape(t *testing.T, addr string) metrics {
	t.Helper()
	return opstest.Scrape(t, "http://"+addr+"/metrics")
}

// echo waits until the server has handled everything g sent before it.
func (g *gearConn) echo() {
	g.t.Helper()
	g.send(pEchoReq, "sync")
	g.expect(pEchoRes, "sync")
}

// Known Gearman traffic, and the metrics count it exactly: jobs by
// protocol and outcome, each function's queues, workers and outcomes,
// connections, latencies; gearman-exporter's families agree with the
// admin "status".
func TestE2EMetrics(t *testing.T) {
	t.Parallel()
	srv, maddr := startMetrics(t, "-q", "builtin")
	addr := srv.addr

	c := dialGear(t, addr, "client")
	for range 3 {
		c.submit(pSubmitJobBg, "resize", "", "img")
	}
	c.submit(pSubmitJobLowBg, "resize", "", "later")
	fg := dialGear(t, addr, "foreground client")
	fg.send(pSubmitJob, "mail", "", "m1")
	fg.recv(10 * time.Second) // JOB_CREATED
	fg.send(pSubmitJob, "mail", "", "m2")
	fg.recv(10 * time.Second)

	w := dialGear(t, addr, "resize worker")
	w.send(pCanDo, "resize")
	h := w.grabJob(10 * time.Second)[0]
	w.send(pWorkComplete, h, "done")
	h = w.grabJob(10 * time.Second)[0]
	w.send(pWorkFail, h)
	w.grabJob(10 * time.Second) // and holds it: running
	w.echo()

	m := dialGear(t, addr, "mail worker")
	m.send(pCanDo, "mail")
	h = m.grabJob(10 * time.Second)[0]
	m.send(pWorkException, h, "boom")
	m.echo()
	gone := dialGear(t, addr, "mail worker that dies")
	gone.send(pCanDo, "mail")
	gone.grabJob(10 * time.Second)
	gone.c.Close() // its job goes back to the queue: a retry
	waitStatus(t, addr, "mail", "the dead worker's job back", func(s funcStatus) bool { return s.running == 0 && s.workers == 1 })

	// The admin connections the waits opened may still be closing: wait
	// for the four of the test.
	var got metrics
	waitUntil(t, e2eWaitTimeout, "4 gearman connections", func() (bool, string) {
		got = scrape(t, maddr)
		n, _ := got.Value("switchyard_connections", "protocol=gearman")
		return n == 4, fmt.Sprint(n)
	})
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"switchyard_jobs_submitted_total", []string{"protocol=gearman", "origin=submitted"}, 6},
		{"switchyard_jobs_completed_total", []string{"protocol=gearman", "origin=submitted"}, 1},
		{"switchyard_jobs_failed_total", []string{"protocol=gearman", "origin=submitted"}, 1},
		{"switchyard_jobs_exception_total", []string{"protocol=gearman", "origin=submitted"}, 1},
		{"switchyard_jobs_retried_total", []string{"protocol=gearman", "origin=submitted"}, 1},
		{"switchyard_jobs_timed_out_total", []string{"protocol=gearman", "origin=submitted"}, 0},
		{"switchyard_jobs_submitted_total", []string{"protocol=periodic", "origin=submitted"}, 0},
		{"gearman_jobs", []string{"function=resize"}, 2},
		{"gearman_jobs_running", []string{"function=resize"}, 1},
		{"gearman_jobs_waiting", []string{"function=resize"}, 1},
		{"gearman_workers", []string{"function=resize"}, 1},
		{"gearman_jobs", []string{"function=mail"}, 1},
		{"gearman_jobs_running", []string{"function=mail"}, 0},
		{"gearman_workers", []string{"function=mail"}, 1},
		{"switchyard_function_queued", []string{"function=resize", "priority=low"}, 1},
		{"switchyard_function_queued", []string{"function=resize", "priority=normal"}, 0},
		{"switchyard_function_queued", []string{"function=mail", "priority=normal"}, 1},
		{"switchyard_function_running", []string{"function=resize"}, 1},
		{"switchyard_function_workers", []string{"function=mail"}, 1},
		{"switchyard_function_completed_total", []string{"function=resize"}, 1},
		{"switchyard_function_failed_total", []string{"function=resize"}, 1},
		{"switchyard_function_failed_total", []string{"function=mail"}, 1},
		{"switchyard_functions", nil, 2},
		// Five grabs; four attempts ended (complete, fail, exception, the
		// dead worker's), one still runs.
		{"switchyard_job_queue_wait_seconds", nil, 5},
		{"switchyard_job_run_seconds", nil, 4},
		{"gearman_up", nil, 1},
		{"gearman_version_info", []string{"version=" + version}, 1},
		// The binary the test built in this git checkout knows its commit.
		{"switchyard_build_info", []string{"version=" + version, "revision=" + gitRevision(t), "goversion=" + runtime.Version()}, 1},
	} {
		if v, ok := got.Value(c.name, c.labels...); !ok || v != c.want {
			t.Errorf("%s%v = %v (present: %v), want %v", c.name, c.labels, v, ok, c.want)
		}
	}
	if _, ok := got.Value("switchyard_store_bytes"); ok {
		t.Error("-q builtin has no store, yet switchyard_store_bytes is there")
	}
	// gearman-exporter's families are the admin status, line for line.
	status, raw := adminStatus(t, addr)
	if len(got["gearman_jobs"].GetMetric()) != len(status) {
		t.Errorf("gearman_jobs has %d series, status %d lines:\n%s", len(got["gearman_jobs"].GetMetric()), len(status), raw)
	}
	for fn, st := range status {
		for name, want := range map[string]int{"gearman_jobs": st.queued, "gearman_jobs_running": st.running,
			"gearman_jobs_waiting": st.queued - st.running, "gearman_workers": st.workers} {
			if v, _ := got.Value(name, "function="+fn); v != float64(want) {
				t.Errorf("%s{function=%q} = %v, status says %d", name, fn, v, want)
			}
		}
	}
}

// The durable queue reports its size and syncs.
func TestE2EMetricsStore(t *testing.T) {
	t.Parallel()
	srv, maddr := startMetrics(t)
	c := dialGear(t, srv.addr, "client")
	for range 10 {
		c.submit(pSubmitJobBg, "kept", "", strings.Repeat("x", 1000))
	}
	got := scrape(t, maddr)
	if v, _ := got.Value("switchyard_store_bytes"); v < 10*1000 {
		t.Errorf("switchyard_store_bytes = %v after ten 1000-byte jobs", v)
	}
	// Each acknowledged background submit waited for a sync.
	if v, _ := got.Value("switchyard_store_sync_seconds"); v < 1 {
		t.Errorf("switchyard_store_sync_seconds counts %v syncs", v)
	}
	if v, _ := got.Value("switchyard_jobs_submitted_total", "protocol=gearman", "origin=submitted"); v != 10 {
		t.Errorf("%v submitted", v)
	}
}

// --max-memory takes GOMEMLIMIT's units beside its own: the budget the
// binary reports is the same for 256MiB and 256M; 256MB stops the start,
// naming the forms.
func TestE2EMaxMemoryUnits(t *testing.T) {
	t.Parallel()
	if isGearmand(t) {
		t.Skip("--max-memory is switchyard's")
	}
	for _, v := range []string{"256MiB", "256M"} {
		_, maddr := startMetrics(t, "-q", "builtin", "--max-memory", v)
		if got, _ := scrape(t, maddr).Value("switchyard_memory_budget_bytes"); got != 256<<20 {
			t.Errorf("--max-memory %s: switchyard_memory_budget_bytes %v, want %d", v, got, 256<<20)
		}
	}
	r := runCmd(t, e2eCmdTimeout, "", serverBinary(t), "-L", "127.0.0.1", "-p", "0", "-l", "stderr", "--max-memory", "256MB")
	if r.code != 1 || !strings.Contains(r.stderr, "MiB") || !strings.Contains(r.stderr, "256M or 256MiB") {
		t.Errorf("--max-memory 256MB: %v", r)
	}
}

// --metrics-listen off opens no port (startServerPorts wants exactly
// one); an explicit address that is taken stops the start.
func TestE2EMetricsListen(t *testing.T) {
	t.Parallel()
	srv, _ := startServerPorts(t, 1, "--metrics-listen", "off")
	if strings.Contains(srv.stderr.String(), `"metrics":`) {
		t.Errorf("metrics listening with --metrics-listen off:\n%s", srv.stderr)
	}

	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	r := runCmd(t, e2eCmdTimeout, "", serverBinary(t), "-L", "127.0.0.1", "-p", "0", "-l", "stderr", "-q", "builtin",
		"--periodic-listen", "off", "--controller-socket", "off", "--dwork-listen", "off", "--memodb-listen", "off",
		"--metrics-listen", taken.Addr().String())
	if r.code != 1 || !strings.Contains(r.stderr, "metrics: listen tcp "+taken.Addr().String()) {
		t.Errorf("a taken --metrics-listen: %v", r)
	}
}

// The default address is best effort: taken, the server runs without
// the endpoints, and says so.
func TestStartOpsDefaultTaken(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	// At the notice level, which --verbose's default (ERROR) shows.
	core, logs := observer.New(noticeLevel)
	s := &server{log: zap.New(core)}
	if err := s.startOps(taken.Addr().String(), false, nil); s.ops != nil || err != nil {
		t.Fatalf("startOps on a taken default: %v, %v", s.ops, err)
	}
	if logs.FilterMessageSnippet("metrics is off").Len() != 1 {
		t.Errorf("no notice: %v", logs.All())
	}
	if err := s.startOps(taken.Addr().String(), true, nil); err == nil {
		t.Error("startOps on a taken explicit address: no error")
	}
}

// /healthz is 200 once the server is up and 503 from the moment it
// begins to stop, while it finishes its running jobs; the profiler is on
// the metrics listener.
func TestE2EHealthz(t *testing.T) {
	t.Parallel()
	srv, maddr := startMetrics(t, "--admin-shutdown", "--shutdown-timeout", "600")
	if code, body := opstest.Get(t, "http://"+maddr+"/healthz"); code != 200 || body != "ok\n" {
		t.Fatalf("/healthz of a running server: %d %q", code, body)
	}
	if code, body := opstest.Get(t, "http://"+maddr+"/debug/pprof/cmdline"); code != 200 || !strings.Contains(body, "--metrics-listen") {
		t.Errorf("/debug/pprof/cmdline: %d %q", code, body)
	}

	w, c, h := holdJob(t, srv.addr)
	admin, err := net.Dial("tcp", srv.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if got := sendAdmin(t, admin, "shutdown graceful"); got != "OK\r\n" {
		t.Fatalf("shutdown graceful -> %q", got)
	}
	waitUntil(t, e2eWaitTimeout, "/healthz 503 while draining", func() (bool, string) {
		code, body := opstest.Get(t, "http://"+maddr+"/healthz")
		return code == 503 && body == "stopping\n", fmt.Sprint(code, " ", body)
	})
	if _, exited := srv.exited(0); exited {
		t.Fatal("server exited while a job runs")
	}
	w.send(pWorkComplete, h, "done")
	c.expect(pWorkComplete, h+"\x00done")
	if code, ok := srv.exited(10 * time.Second); !ok || code != 0 {
		t.Errorf("exit %d (exited: %v) after the job", code, ok)
	}
}

// Jobs submitted over gearmand's HTTP protocol are counted under
// protocol "http", and its open connections too.
func TestE2EMetricsHTTP(t *testing.T) {
	t.Parallel()
	srv, _ := startServerPorts(t, 3, "-r", "http", "--http-port", "0", "--metrics-listen", "127.0.0.1:0")
	// Three listeners: the log lines say which is which.
	addrOf := func(what string) string {
		re := regexp.MustCompile(`\slistening\s+\{.*"` + what + `": \["([^"]+)"\]`)
		var addr string
		waitUntil(t, e2eWaitTimeout, "a "+what+" listening line", func() (bool, string) {
			out := srv.stderr.String()
			m := re.FindStringSubmatch(out)
			if m != nil {
				addr = m[1]
			}
			return m != nil, out
		})
		return addr
	}
	haddr, maddr := addrOf("http"), addrOf("metrics")
	for _, u := range []string{"a", "b"} {
		a, err := sendHTTP(haddr, httpPost("counted", "X-Gearman-Background: true\r\nX-Gearman-Unique: "+u+"\r\n", "x"), e2eWaitTimeout)
		if err != nil || a.command != "JOB_CREATED" {
			t.Fatalf("submit: %v %v", a, err)
		}
	}
	// One connection stays open through the scrape; the two above are
	// closed, and net/http has seen them close once their replies came.
	open, err := net.Dial("tcp", haddr)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	var got metrics
	waitUntil(t, e2eWaitTimeout, "one open http connection", func() (bool, string) {
		got = scrape(t, maddr)
		n, _ := got.Value("switchyard_connections", "protocol=http")
		return n == 1, fmt.Sprint(n)
	})
	if v, _ := got.Value("switchyard_jobs_submitted_total", "protocol=http", "origin=submitted"); v != 2 {
		t.Errorf("switchyard_jobs_submitted_total{protocol=http} = %v, want 2", v)
	}
	if v, _ := got.Value("switchyard_jobs_submitted_total", "protocol=gearman", "origin=submitted"); v != 0 {
		t.Errorf("switchyard_jobs_submitted_total{protocol=gearman} = %v, want 0", v)
	}
}

// The Metrics section of docs/operating.md names every family a server
// with a job store serves (but the Go client's process_* and go_*), each
// with its labels.
func TestE2EMetricsDocumented(t *testing.T) {
	t.Parallel()
	if isGearmand(t) {
		t.Skip("gearmand has no metrics")
	}
	srv, maddr := startMetrics(t)
	c := dialGear(t, srv.addr, "client")
	c.submit(pSubmitJobBg, "documented", "", "x") // a function, for the per-function families
	page, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "operating.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(page), "\n## Metrics\n")
	if !ok {
		t.Fatal(`docs/operating.md has no "## Metrics" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	documented := map[string]string{} // name: its labels, sorted, comma-separated
	for _, m := range regexp.MustCompile("`([a-z_]+)(?:\\{([a-z_,]+)\\})?` \\| (?:gauge|counter|histogram)").FindAllStringSubmatch(section, -1) {
		labels := strings.Split(m[2], ",")
		slices.Sort(labels)
		documented[m[1]] = strings.Trim(strings.Join(labels, ","), ",")
	}
	if len(documented) < 30 {
		t.Fatalf("the Metrics tables of docs/operating.md list only %d families: %v", len(documented), documented)
	}
	fams := scrape(t, maddr)
	for name, fam := range fams {
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") {
			continue
		}
		var labels []string
		for _, m := range fam.Metric {
			for _, l := range m.Label {
				if !slices.Contains(labels, l.GetName()) {
					labels = append(labels, l.GetName())
				}
			}
		}
		slices.Sort(labels)
		want, ok := documented[name]
		if !ok {
			t.Errorf("docs/operating.md's Metrics section does not list %s", name)
		} else if got := strings.Join(labels, ","); got != want {
			t.Errorf("%s: served with labels {%s}, docs/operating.md says {%s}", name, got, want)
		}
	}
}
