package scenario

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"switchyard/bench/harness"
	"switchyard/bench/record"
)

func TestCurveRates(t *testing.T) {
	rates := curveRates(1000)
	if len(rates) != curveSteps || rates[0] != 1000 || rates[1] != 1150 || rates[2] != 1323 {
		t.Fatalf("curve rates %v", rates)
	}
	for i := 1; i < len(rates); i++ {
		if rates[i] <= rates[i-1] {
			t.Errorf("rates not rising: %v", rates)
		}
	}
}

// TestOpenLoopAgainstSwitchyard runs the open-loop scenarios for a moment
// against one switchyard with Gearman, HTTP, Periodic and MemoDB on: each
// wires its load generator to its listener, times jobs from their due
// times and records the offered rate; the curve steps up until the
// server falls behind. It checks the wiring, not how fast.
func TestOpenLoopAgainstSwitchyard(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server; skipped with -short")
	}
	bin := buildSwitchyard(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv, err := harness.Start(ctx, harness.Config{
		Name:      "switchyard",
		Path:      bin,
		Listeners: 4,
		Args: []string{"-L", "127.0.0.1", "-p", "0", "-l", "stderr", "-q", "builtin", "--controller-socket", "off",
			"--periodic-listen", "tcp://127.0.0.2:0", "--dwork-listen", "off", "--memodb-listen", "tcp://127.0.0.4:0", "--metrics-listen", "off",
			"-r", "http", "--http-port", "0"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := srv.Stop(); err != nil {
			t.Error(err)
		}
	}()
	target := Target{Addr: srv.Addr, Usage: srv.Usage}
	for _, addr := range srv.Others {
		switch host, _, _ := net.SplitHostPort(addr); host {
		case "127.0.0.1":
			target.HTTPAddr = addr
		case "127.0.0.2":
			target.PeriodicAddr = addr
		case "127.0.0.4":
			target.MemodbURL = "tcp://" + addr
		}
	}
	if target.HTTPAddr == "" || target.PeriodicAddr == "" || target.MemodbURL == "" {
		t.Fatalf("listeners %v: want HTTP, Periodic and MemoDB", srv.Others)
	}

	p := Params{Rate: 500, Clients: 2, Workers: 2, Grab: 1, Payload: 64, Duration: 500 * time.Millisecond, Warmup: 100 * time.Millisecond}
	for _, sc := range []*Scenario{fgRate, httpRate, memodbRate, periodicRate} {
		t.Run(sc.Name, func(t *testing.T) {
			run := sc.Run(ctx, target, p)
			if run.Error != "" {
				t.Fatalf("run failed: %s\nserver output:\n%s", run.Error, srv.Output())
			}
			// 500 jobs/s for half a second: about 250 jobs measured,
			// however slow the machine (a job due late still counts).
			if run.Jobs <= 0 || run.Jobs > 300 || run.Latency.Count != run.Jobs || run.Latency.P50 <= 0 ||
				run.Latency.Max < run.Latency.P999 || run.Extra["offered_jobs_per_s"] != 500 || run.JobsPerSec <= 0 {
				t.Errorf("implausible run: %+v", run)
			}
		})
	}
	t.Run("rate 0", func(t *testing.T) {
		q := p
		q.Rate = 0
		if run := fgRate.Run(ctx, target, q); !strings.Contains(run.Error, "rate 0") {
			t.Errorf("ran at rate 0: %+v", run)
		}
	})
	t.Run(fgCurve.Name, func(t *testing.T) {
		// From 5,000 jobs/s, 16 steps reach 250k: past any server here.
		q := Params{Rate: 5000, Clients: 2, Workers: 2, Grab: 1, Payload: 64, Duration: 200 * time.Millisecond, Warmup: 50 * time.Millisecond}
		run := fgCurve.Run(ctx, target, q)
		if run.Error != "" {
			t.Fatalf("run failed: %s\nserver output:\n%s", run.Error, srv.Output())
		}
		n := len(run.Curve)
		if n < 2 || run.Curve[n-1].Sustained() || run.Curve[n-2].Sustained() || run.Extra["steps"] != float64(n) {
			t.Fatalf("curve %+v: want steps up to two not sustained", run.Curve)
		}
		if run.Extra["warm_jobs"] <= 0 {
			t.Errorf("no unmeasured first step before the curve: extras %v", run.Extra)
		}
		for i, st := range run.Curve {
			if st.Offered != float64(curveRates(5000)[i]) || st.Latency.Count <= 0 {
				t.Errorf("step %d: %+v", i, st)
			}
		}
		if knee, ok := record.Knee(run.Curve, record.KneeP99Micros); ok != (run.Extra["knee_jobs_per_s"] > 0) || (ok && run.JobsPerSec != knee.Offered) {
			t.Errorf("knee %+v (%v), run %v jobs/s, extras %v", knee, ok, run.JobsPerSec, run.Extra)
		}
	})
	if err := srv.Alive(); err != nil {
		t.Error(err)
	}
}
