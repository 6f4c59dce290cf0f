package ops

import (
	"bufio"
	"net/http"
	"strings"
	"testing"

	"switchyard/sched"
)

// /api/failures lists every function's failures kept, newest first;
// /api/function one function's row, its first waiting jobs in the order
// a worker takes them, and its failures.
func TestAPIFailuresAndFunction(t *testing.T) {
	sc := sched.New(sched.Config{Tick: -1, Latency: true, Failures: 2})
	defer sc.Close()
	srv := New(Config{Sched: sc, Protocol: func(sched.Source) string { return "gearman" }})
	c := sc.NewClient(nopListener{})
	w := sc.NewWorker(nopWaker{})
	w.SetName("host-7")
	w.CanDo([]byte("resize"), 0)
	w.CanDo([]byte("mail"), 0)
	fail := func(fn, text string) {
		id, err := c.Submit(&sched.SubmitReq{Func: []byte(fn), Background: true})
		if err != nil {
			t.Fatal(err)
		}
		if j := w.Grab(); j == nil || j.ID() != id {
			t.Fatal("no job")
		}
		w.Update(id, &sched.Update{Kind: sched.Exception, Reason: "WORK_EXCEPTION", Data: []byte(text)})
	}
	fail("resize", "one")
	fail("resize", "two")
	fail("resize", "three") // the ring keeps 2
	fail("mail", "smtp down")
	var p failurePage
	getJSON(t, srv, "/api/failures", &p)
	var texts []string
	for _, f := range p.Failures {
		texts = append(texts, f.Function+":"+f.Text)
	}
	if got := strings.Join(texts, ","); p.Total != 3 ||
		got != "mail:WORK_EXCEPTION: smtp down,resize:WORK_EXCEPTION: three,resize:WORK_EXCEPTION: two" {
		t.Fatalf("failures %d: %s", p.Total, got)
	}
	if f := p.Failures[0]; f.Kind != "exception" || f.Worker != "host-7" || f.Protocol != "gearman" || f.At.IsZero() {
		t.Errorf("%+v", f)
	}
	getJSON(t, srv, "/api/failures?q=mail&limit=5", &p)
	if p.Total != 1 || len(p.Failures) != 1 {
		t.Errorf("q=mail: %+v", p)
	}

	for _, prio := range []sched.Priority{sched.Low, sched.High} {
		c.Submit(&sched.SubmitReq{Func: []byte("resize"), Priority: prio, Background: true, Unique: []byte{'u', byte('0' + prio)}})
	}
	sc.Pause([]byte("resize"))
	var d funcDetail
	getJSON(t, srv, "/api/function?name=resize", &d)
	if f := d.Function; f.Name != "resize" || !f.Paused || !f.Stuck || f.Total != 2 || f.Failed != 3 || !(f.Oldest > 0) {
		t.Errorf("resize: %+v", f)
	}
	if len(d.Waiting) != 2 || d.Waiting[0].Priority != "high" || d.Waiting[1].Unique != "u2" || len(d.Failures) != 2 {
		t.Errorf("waiting %+v, failures %+v", d.Waiting, d.Failures)
	}
	if p := d.Function.Wait.P50; !(p >= 0) {
		t.Errorf("resize's recent wait p50: %v", p)
	}
	rec := getStatus(t, srv, "/api/function?name=nobody")
	if rec != http.StatusNotFound {
		t.Errorf("an unknown function: %d", rec)
	}
}

// Asked for OpenMetrics, /metrics answers in it: every counter family
// named without its _total, its samples with it, and "# EOF" last.
func TestMetricsOpenMetrics(t *testing.T) {
	sc := sched.New(sched.Config{Tick: -1, Latency: true})
	defer sc.Close()
	sc.NewClient(nopListener{}).Submit(&sched.SubmitReq{Func: []byte("f"), Background: true})
	srv := startOps(t, Config{Sched: sc, Protocol: func(sched.Source) string { return "gearman" }})
	for _, tc := range []struct {
		accept, ctype string
	}{
		{"application/openmetrics-text; version=1.0.0,text/plain;version=0.0.4;q=0.5", "application/openmetrics-text"},
		{"text/plain", "text/plain"},
		{"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited", "text/plain"},
	} {
		req, _ := http.NewRequest("GET", "http://"+srv.Addr().String()+"/metrics", nil)
		req.Header.Set("Accept", tc.accept)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, tc.ctype) {
			t.Errorf("Accept %q: Content-Type %q", tc.accept, ct)
			continue
		}
		om := tc.ctype == "application/openmetrics-text"
		if last := lines[len(lines)-1]; (last == "# EOF") != om {
			t.Errorf("Accept %q: last line %q", tc.accept, last)
		}
		if !om {
			continue
		}
		types := map[string]string{}
		seen := map[string]bool{}
		for _, l := range lines {
			if f := strings.Fields(l); len(f) == 4 && f[1] == "TYPE" {
				// The Go collector's gauge go_memstats_alloc_bytes and
				// counter go_memstats_alloc_bytes_total share a name in
				// OpenMetrics, as client_golang's own handler serves them.
				if seen[f[2]] && f[2] != "go_memstats_alloc_bytes" {
					t.Errorf("family %s twice", f[2])
				}
				seen[f[2]] = true
				types[f[2]] = f[3]
				if f[3] == "counter" && strings.HasSuffix(f[2], "_total") {
					t.Errorf("OpenMetrics counter family %s ends in _total", f[2])
				}
			}
		}
		for _, fam := range []string{"switchyard_function_completed", "switchyard_jobs_submitted"} {
			if types[fam] != "counter" {
				t.Errorf("%s: %q", fam, types[fam])
			}
		}
		if !strings.Contains(strings.Join(lines, "\n"), "\nswitchyard_function_completed_total{function=\"f\"} 0\n") {
			t.Error("no sample of switchyard_function_completed_total")
		}
	}
}
