package ops

import (
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"switchyard/engine/ops/opstest"
	"switchyard/sched"
)

// /healthz is 503 until the server is ready, 200 while it is, and 503
// again once it stops; a stopping server is never ready again.
func TestHealthz(t *testing.T) {
	sc := sched.New(sched.Config{Tick: -1})
	defer sc.Close()
	srv := startOps(t, Config{Sched: sc})
	url := "http://" + srv.Addr().String() + "/healthz"
	for _, step := range []struct {
		name  string
		do    func()
		code  int
		words string
	}{
		{"before ready", func() {}, 503, "starting\n"},
		{"ready", func() { srv.SetReady(true) }, 200, "ok\n"},
		{"stopping", func() { srv.SetReady(false) }, 503, "stopping\n"},
		{"ready again after a stop", func() { srv.SetReady(true) }, 503, "stopping\n"},
	} {
		step.do()
		if code, body := opstest.Get(t, url); code != step.code || body != step.words {
			t.Errorf("%s: %d %q, want %d %q", step.name, code, body, step.code, step.words)
		}
	}
}

// A job store that takes no writes makes a ready server unhealthy, saying
// why, until it takes them again; a server not ready says that first.
func TestHealthzStore(t *testing.T) {
	sc := sched.New(sched.Config{Tick: -1})
	defer sc.Close()
	var mu sync.Mutex
	failure := ""
	srv := startOps(t, Config{Sched: sc, Store: func() StoreStats {
		mu.Lock()
		defer mu.Unlock()
		return StoreStats{Failure: failure}
	}})
	url := "http://" + srv.Addr().String() + "/healthz"
	set := func(f string) {
		mu.Lock()
		failure = f
		mu.Unlock()
	}
	for _, step := range []struct {
		name  string
		do    func()
		code  int
		words string
	}{
		{"starting, the store down", func() { set("no space left on device") }, 503, "starting\n"},
		{"ready, the store down", func() { srv.SetReady(true) }, 503, "store failed: no space left on device\n"},
		{"the store back", func() { set("") }, 200, "ok\n"},
		{"stopping, the store down", func() { set("disk full"); srv.SetReady(false) }, 503, "stopping\n"},
	} {
		step.do()
		if code, body := opstest.Get(t, url); code != step.code || body != step.words {
			t.Errorf("%s: %d %q, want %d %q", step.name, code, body, step.code, step.words)
		}
	}
}

// The profiler is on Start's listener, and not in Handler, which may be
// mounted on a listener open to more than operators.
func TestPprofOnlyOnItsListener(t *testing.T) {
	sc := sched.New(sched.Config{Tick: -1})
	defer sc.Close()
	srv := startOps(t, Config{Sched: sc})
	own := "http://" + srv.Addr().String()
	mounted := httptest.NewServer(srv.Handler())
	defer mounted.Close()
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/goroutine?debug=1"} {
		if code, body := opstest.Get(t, own+path); code != 200 || body == "" {
			t.Errorf("%s on the metrics listener: %d", path, code)
		}
		if code, _ := opstest.Get(t, mounted.URL+path); code != 404 {
			t.Errorf("%s through Handler: %d, want 404", path, code)
		}
	}
	if _, body := opstest.Get(t, own+"/debug/pprof/"); !strings.Contains(body, "goroutine") {
		t.Errorf("the profiler's index lists no goroutine profile:\n%s", body)
	}
	// Handler serves the rest as Start's listener does.
	for _, path := range []string{"/metrics", "/healthz"} {
		a, _ := opstest.Get(t, own+path)
		b, _ := opstest.Get(t, mounted.URL+path)
		if a != b {
			t.Errorf("%s: %d on the listener, %d through Handler", path, a, b)
		}
	}
}
