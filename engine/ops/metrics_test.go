package ops

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"switchyard/engine/ops/opstest"
	"switchyard/sched"
)

type nopWaker struct{}

func (nopWaker) Wake(any) {}

type nopListener struct{}

func (nopListener) Notify(uint64, *sched.Update) {}

func startOps(t *testing.T, cfg Config) *Server {
	t.Helper()
	s := New(cfg)
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Stop(ctx)
	})
	return s
}

// The metrics say what the scheduler holds and counted, exactly, and
// gearman-exporter's families say what its status would.
func TestMetrics(t *testing.T) {
	sc := sched.New(sched.Config{Tick: -1, Latency: true})
	defer sc.Close()
	names := map[sched.Source]string{1: "one", 2: "two"}
	srv := startOps(t, Config{Sched: sc, Version: "9.9.9", Revision: "abc123+dirty",
		Protocol: func(src sched.Source) string { return names[src] },
		Restored: func(src sched.Source) bool { return src == 4 },
		Store: func() StoreStats {
			var h sched.Histogram
			h.Observe(3 * time.Millisecond)
			n, sum, b := Cumulative(&h)
			return StoreStats{Bytes: 12345, Syncs: n, SyncSeconds: sum, SyncBuckets: b, Failure: "disk full", WriteErrors: 2}
		}})
	srv.AddConns(Conns{Protocol: "one", Open: func() int { return 7 }})

	one, two, three := sc.NewClient(nopListener{}), sc.NewClient(nopListener{}), sc.NewClient(nopListener{})
	one.SetSource(1)
	two.SetSource(2)
	three.SetSource(3) // named by nobody
	restored := sc.NewClient(nopListener{})
	restored.SetSource(4)
	submit := func(c *sched.Client, fn string, p sched.Priority) {
		if _, err := c.Submit(&sched.SubmitReq{Func: []byte(fn), Priority: p, Background: true}); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		submit(one, "resize", sched.High)
	}
	submit(one, "resize", sched.Low)
	submit(two, "resize", sched.Normal)
	submit(three, "mail\xff", sched.Normal)
	submit(restored, "held", sched.Normal)
	if err := sc.Pause([]byte("held")); err != nil {
		t.Fatal(err)
	}
	w := sc.NewWorker(nopWaker{})
	w.CanDo([]byte("resize"), 0)
	w.CanDo([]byte("idle"), 0)
	for _, k := range []sched.UpdateKind{sched.Complete, sched.Fail, sched.Exception} {
		j := w.Grab() // high first: source one's
		if err := w.Update(j.ID(), &sched.Update{Kind: k}); err != nil {
			t.Fatal(err)
		}
	}
	w.Grab() // running: two's normal job
	submit(one, "full", sched.Normal)
	sc.SetMaxQueue([]byte("full"), [3]int{1, 1, 1})
	if _, err := one.Submit(&sched.SubmitReq{Func: []byte("full"), Background: true}); err != sched.ErrQueueFull {
		t.Fatal(err)
	}

	fams := opstest.Scrape(t, "http://"+srv.Addr().String()+"/metrics")
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"gearman_up", nil, 1},
		{"gearman_version_info", []string{"version=9.9.9"}, 1},
		{"switchyard_build_info", []string{"version=9.9.9", "revision=abc123+dirty", "goversion=" + runtime.Version()}, 1},
		{"gearman_jobs", []string{"function=resize"}, 2},
		{"gearman_jobs_running", []string{"function=resize"}, 1},
		{"gearman_jobs_waiting", []string{"function=resize"}, 1},
		{"gearman_workers", []string{"function=resize"}, 1},
		{"gearman_workers", []string{"function=idle"}, 1},
		{"gearman_jobs", []string{`function=mail\xff`}, 1},
		{"switchyard_function_queued", []string{"function=resize", "priority=high"}, 0},
		{"switchyard_function_queued", []string{"function=resize", "priority=normal"}, 0},
		{"switchyard_function_queued", []string{"function=resize", "priority=low"}, 1},
		{"switchyard_function_running", []string{"function=resize"}, 1},
		{"switchyard_function_workers", []string{"function=idle"}, 1},
		{"switchyard_function_completed_total", []string{"function=resize"}, 1},
		{"switchyard_function_failed_total", []string{"function=resize"}, 2},
		{"switchyard_functions", nil, 5},
		{"switchyard_jobs_submitted_total", []string{"protocol=", "origin=restored"}, 1},
		{"switchyard_function_paused", []string{"function=held"}, 1},
		{"switchyard_function_paused", []string{"function=resize"}, 0},
		{"switchyard_jobs_submitted_total", []string{"protocol=one", "origin=submitted"}, 5},
		{"switchyard_jobs_submitted_total", []string{"protocol=two", "origin=submitted"}, 1},
		{"switchyard_jobs_submitted_total", []string{"protocol=3", "origin=submitted"}, 1},
		{"switchyard_jobs_completed_total", []string{"protocol=one", "origin=submitted"}, 1},
		{"switchyard_jobs_failed_total", []string{"protocol=one", "origin=submitted"}, 1},
		{"switchyard_jobs_exception_total", []string{"protocol=one", "origin=submitted"}, 1},
		{"switchyard_jobs_completed_total", []string{"protocol=two", "origin=submitted"}, 0},
		{"switchyard_jobs_retried_total", []string{"protocol=one", "origin=submitted"}, 0},
		{"switchyard_jobs_timed_out_total", []string{"protocol=one", "origin=submitted"}, 0},
		{"switchyard_job_queue_wait_seconds", nil, 4},
		{"switchyard_job_run_seconds", nil, 3},
		{"switchyard_connections", []string{"protocol=one"}, 7},
		{"switchyard_store_bytes", nil, 12345},
		{"switchyard_store_sync_seconds", nil, 1},
		{"switchyard_store_up", nil, 0},
		{"switchyard_store_write_errors_total", nil, 2},
		{"switchyard_submits_refused_total", []string{"reason=queue_full"}, 1},
		{"switchyard_submits_refused_total", []string{"reason=store"}, 0},
		{"switchyard_submits_refused_total", []string{"reason=ended"}, 0},
	} {
		got, ok := fams.Value(c.name, c.labels...)
		if !ok || got != c.want {
			t.Errorf("%s%v = %v (there: %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	// The low job waits, since its submit above.
	if age, ok := fams.Value("switchyard_function_oldest_job_age_seconds", "function=resize"); !ok || age <= 0 || age > 60 {
		t.Errorf("oldest job age of resize: %v %v", age, ok)
	}
	if age, _ := fams.Value("switchyard_function_oldest_job_age_seconds", "function=idle"); age != 0 {
		t.Errorf("oldest job age of a function with none waiting: %v", age)
	}
	if _, ok := fams.Value("switchyard_jobs_submitted_total", "protocol=0", "origin=submitted"); ok {
		t.Error("a source with no name and nothing counted is listed")
	}
	for _, name := range []string{"process_cpu_seconds_total", "go_goroutines"} {
		if fams[name] == nil {
			t.Errorf("no %s", name)
		}
	}
	// The exporter's families exactly as it declares them.
	for name, help := range map[string]string{
		"gearman_jobs":         "number of jobs queued or running",
		"gearman_jobs_running": "number of running jobs",
		"gearman_jobs_waiting": "number of jobs waiting for an available worker",
		"gearman_workers":      "number of capable workers",
		"gearman_up":           "is gearman up",
		"gearman_version_info": "gearman version",
	} {
		if f := fams[name]; f == nil || f.GetHelp() != help || f.GetType() != dto.MetricType_GAUGE {
			t.Errorf("%s: %v", name, f)
		}
	}
	// Buckets are cumulative, in seconds: the store's 3ms sync is at most
	// 5ms and more than 2.5ms.
	h := fams["switchyard_store_sync_seconds"].Metric[0].Histogram
	for _, b := range h.Bucket {
		want := uint64(0)
		if b.GetUpperBound() >= 0.005 {
			want = 1
		}
		if b.GetCumulativeCount() != want {
			t.Errorf("sync bucket le=%g holds %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), want)
		}
	}
}

func TestLabelValue(t *testing.T) {
	for in, want := range map[string]string{
		"resize":         "resize",
		"ünïcode":        "ünïcode",
		"a\xffb":         `a\xffb`,
		"\x80\xc3":       `\x80\xc3`,
		"x\xe2\x82":      `x\xe2\x82`,
		"ok\xe2\x82\xac": "ok€",
	} {
		if got := labelValue(in); got != want {
			t.Errorf("labelValue(%q) = %q, want %q", in, got, want)
		}
	}
}

// A scrape of many functions stays correct: every function is listed
// once, across FuncsChunked's chunks.
func TestMetricsManyFunctions(t *testing.T) {
	sc := sched.New(sched.Config{Tick: -1})
	defer sc.Close()
	const n = 10000
	for i := range n {
		sc.CreateFunc(fmt.Appendf(nil, "f%05d", i))
	}
	srv := startOps(t, Config{Sched: sc})
	fams := opstest.Scrape(t, "http://"+srv.Addr().String()+"/metrics")
	if got := len(fams["gearman_jobs"].GetMetric()); got != n {
		t.Errorf("%d gearman_jobs series, want %d", got, n)
	}
	if v, _ := fams.Value("switchyard_functions"); v != n {
		t.Errorf("switchyard_functions = %v", v)
	}
	if !strings.HasPrefix(fams["gearman_jobs"].Metric[0].Label[0].GetValue(), "f") {
		t.Error("bad label")
	}
}

// With FuncHistograms each function that has had a job taken has its
// queue wait and run time histograms; without, none.
func TestMetricsFuncHistograms(t *testing.T) {
	for _, on := range []bool{true, false} {
		sc := sched.New(sched.Config{Tick: -1, Latency: true, FuncHistograms: on})
		defer sc.Close()
		srv := startOps(t, Config{Sched: sc, FuncHistograms: on})
		c := sc.NewClient(nopListener{})
		w := sc.NewWorker(nopWaker{})
		w.CanDo([]byte("resize\xff"), 0)
		for range 3 {
			c.Submit(&sched.SubmitReq{Func: []byte("resize\xff"), Background: true})
			j := w.Grab()
			w.Update(j.ID(), &sched.Update{Kind: sched.Complete})
		}
		c.Submit(&sched.SubmitReq{Func: []byte("never-taken"), Background: true})
		fams := opstest.Scrape(t, "http://"+srv.Addr().String()+"/metrics")
		for _, name := range []string{"switchyard_function_queue_wait_seconds", "switchyard_function_run_seconds"} {
			f := fams[name]
			if !on {
				if f != nil {
					t.Errorf("%s served without FuncHistograms", name)
				}
				continue
			}
			if f == nil || len(f.Metric) != 1 {
				t.Fatalf("%s: %v", name, f)
			}
			m := f.Metric[0]
			h := m.Histogram
			if m.Label[0].GetValue() != `resize\xff` || h.GetSampleCount() != 3 || len(h.Bucket) != len(sched.LatencyBounds)+1 {
				t.Errorf("%s: %v", name, m)
			}
			prev := uint64(0)
			for _, b := range h.Bucket {
				if b.GetCumulativeCount() < prev {
					t.Errorf("%s: buckets not cumulative: %v", name, h.Bucket)
				}
				prev = b.GetCumulativeCount()
			}
		}
	}
}
