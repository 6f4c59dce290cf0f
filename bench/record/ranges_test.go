package record

import (
	"strings"
	"testing"
)

func TestRangesMarkdown(t *testing.T) {
	run := func(scenario, server string, round int, rate float64, p50, p99 int64, cpu float64, err string) Run {
		return Run{Scenario: scenario, Server: server, Round: round, JobsPerSec: rate,
			Latency: Latency{P50: p50, P99: p99}, ServerCPUPerJob: cpu, LoadCPUPerJob: 2 * cpu, Error: err}
	}
	rec := &Record{Runs: []Run{
		run("fg", "switchyard", 1, 30000, 200, 2000, 30, ""),
		run("fg", "gearmand", 1, 10000, 400, 4000, 60, ""),
		run("fg", "switchyard", 2, 20000, 300, 3000, 40, ""),
		run("fg", "gearmand", 2, 10000, 300, 6000, 40, ""),
		run("fg", "switchyard", 3, 25000, 250, 2500, 35, ""),
		run("fg", "gearmand", 3, 12500, 500, 5000, 70, ""),
		run("periodic-run", "switchyard", 1, 7000, 500, 3000, 100, ""),
		run("periodic-run", "switchyard", 2, 7000, 500, 3000, 100, "i/o timeout"),
		run("queue-1m", "switchyard", 1, 200000, 400, 3000, 3, ""),
		run("queue-1m", "switchyard", 2, 220000, 400, 3000, 3, ""),
		run("queue-1m", "switchyard", 3, 210000, 400, 3000, 3, ""),
	}}
	for i, q := range []struct{ rss, perJob, tenths float64 }{{226, 206.4, 0.92}, {225.5, 205.9, 1.1}, {226.2, 206.6, 0.85}} {
		r := &rec.Runs[8+i]
		r.RSSMB, r.RSSBytesPerJob, r.LastVsFirst10 = q.rss, q.perJob, q.tenths
	}
	rec.Runs[0].OfCeiling = 0.6
	rec.Runs[2].OfCeiling = 0.8
	rec.Runs[4].OfCeiling = 0.7
	got := strings.Split(strings.TrimSpace(rec.RangesMarkdown()), "\n")
	want := []string{
		"| scenario | server | rounds | server CPU µs/job | load CPU µs/job | of ceiling | jobs/s | p50 | p99 | RSS MB | RSS B/job | last/first 10% | vs gearmand jobs/s | vs gearmand p50 | vs gearmand p99 | vs gearmand cpu/job |",
		"|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
		// Ratios per round: jobs/s 3, 2, 2; p50 0.5, 1, 0.5; p99 0.5, 0.5, 0.5; cpu 0.5, 1, 0.5.
		"| fg | switchyard | 3 | 35.0 (30.0-40.0) | 70.0 (60.0-80.0) | 70% (60%-80%) | 25.0k (20.0k-30.0k) | 250µs (200µs-300µs) | 2.50ms (2.00ms-3.00ms) |  |  |  | 2.00x (2.00x-3.00x) | 0.50x (0.50x-1.00x) | 0.50x | 0.50x (0.50x-1.00x) |",
		"| fg | gearmand | 3 | 60.0 (40.0-70.0) | 120 (80.0-140) |  | 10.0k (10.0k-12.5k) | 400µs (300µs-500µs) | 5.00ms (4.00ms-6.00ms) |  |  |  |  |  |  |  |",
		"| periodic-run | switchyard | 2 (1 failed) | 100 | 200 |  | 7.00k | 500µs | 3.00ms |  |  |  |  |  |  |  |",
		// A queue's RSS, RSS per job and last tenth against its first, as the target over rounds reads them.
		"| queue-1m | switchyard | 3 | 3.00 | 6.00 |  | 210k (200k-220k) | 400µs | 3.00ms | 226.0 (225.5-226.2) | 206 (206-207) | 0.92x (0.85x-1.10x) |  |  |  |  |",
	}
	if len(got) != len(want) {
		t.Fatalf("got %d lines:\n%s", len(got), strings.Join(got, "\n"))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d:\n got %s\nwant %s", i, got[i], want[i])
		}
	}
	if s := (&Record{Runs: rec.Runs[:2]}).RangesMarkdown(); s != "" {
		t.Errorf("one round: %q, want none", s)
	}
	if n := rec.Rounds(); n != 3 {
		t.Errorf("Rounds() = %d, want 3", n)
	}
}

func TestSpread(t *testing.T) {
	for _, tc := range []struct {
		vs   []float64
		want string
	}{
		{nil, ""},
		{[]float64{5}, "5.00"},
		{[]float64{3, 1, 2}, "2.00 (1.00-3.00)"},
		{[]float64{4, 1, 2, 3}, "2.50 (1.00-4.00)"},
		{[]float64{7, 7}, "7.00"},
	} {
		if got := spread(tc.vs, FormatCPU); got != tc.want {
			t.Errorf("spread(%v) = %q, want %q", tc.vs, got, tc.want)
		}
	}
}
