package record

import (
	"strings"
	"testing"

	"github.com/HdrHistogram/hdrhistogram-go"
)

func step(offered, done float64, p99 int64) Step {
	return Step{Offered: offered, JobsPerSec: done, Latency: Latency{Count: 1, P50: p99 / 2, P99: p99, P999: p99 * 2, Max: p99 * 3}}
}

func TestKnee(t *testing.T) {
	tests := []struct {
		name  string
		curve []Step
		want  float64 // 0: none
	}{
		{"no curve", nil, 0},
		{"the last sustained under the bound", []Step{step(1000, 1000, 500), step(1300, 1299, 900), step(1690, 1400, 900_000)}, 1300},
		{"the highest under the bound, though a lower one was over", []Step{step(1000, 1000, 500), step(1300, 1300, 20_000), step(1690, 1690, 800)}, 1690},
		{"sustained needs 95% of the offered rate", []Step{step(1000, 949, 500)}, 0},
		{"and nothing unsent", []Step{{Offered: 1000, JobsPerSec: 1000, Unsent: 1, Latency: Latency{P99: 10}}}, 0},
		{"p99 at the bound is under it", []Step{step(1000, 1000, KneeP99Micros)}, 1000},
	}
	// Saturation: the highest sustained, whatever its p99.
	if s, ok := Saturation([]Step{step(1000, 1000, 500), step(1300, 1300, 900_000), step(1690, 1400, 900)}); !ok || s.Offered != 1300 {
		t.Errorf("saturation %v (%v), want 1300", s.Offered, ok)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			knee, ok := Knee(tt.curve, KneeP99Micros)
			if ok != (tt.want > 0) || knee.Offered != tt.want {
				t.Errorf("knee %v (%v), want %v", knee.Offered, ok, tt.want)
			}
		})
	}
}

func TestCurveMarkdown(t *testing.T) {
	r := &Record{Runs: []Run{
		{Scenario: "fg", Server: "switchyard", Round: 1},
		{Scenario: "fg-curve", Server: "switchyard", Round: 1, Curve: []Step{step(2000, 2000, 400), step(2600, 2600, 600), step(3380, 2900, 2_000_000)}},
		{Scenario: "fg-curve", Server: Baseline, Round: 1, Curve: []Step{step(2000, 2000, 700), {Offered: 2600, JobsPerSec: 2000, Unsent: 7, Abandoned: 3, Latency: Latency{P99: 3_000_000}}}},
	}}
	md := r.CurveMarkdown()
	mustContain(t, "curve table", md,
		"| fg-curve | switchyard | 1 | 2.60k | 2.60k | 300µs | 600µs | 1.20ms | 1.80ms | yes |",
		"| fg-curve | switchyard | 1 | 3.38k | 2.90k |",
		"| no (0 unsent, 0 abandoned) |",
		"| no (7 unsent, 3 abandoned) |",
		"| knee (highest rate sustained with p99 ≤ 10.0ms) | server | round | offered/s |",
		"| fg-curve | switchyard | 1 | 2.60k | 300µs | 600µs | 1.20ms | 1.30x | 2.60k |",
		"| fg-curve | gearmand | 1 | 2.00k | 350µs | 700µs | 1.40ms |  | 2.00k |",
	)
	if strings.Contains(md, "| fg | ") {
		t.Errorf("a run without a curve in the curve table:\n%s", md)
	}
	if (&Record{Runs: r.Runs[:1]}).CurveMarkdown() != "" {
		t.Error("a record without curves has a curve table")
	}
}

// hist is a histogram of n jobs at each of the latencies (µs).
func hist(t *testing.T, n int64, latencies ...int64) string {
	t.Helper()
	h := hdrhistogram.New(1, 60_000_000, 3)
	for _, v := range latencies {
		if err := h.RecordValues(v, n); err != nil {
			t.Fatal(err)
		}
	}
	return EncodeHistogram(h)
}

func TestPooledCurve(t *testing.T) {
	// Two rounds of 1,000 jobs a step. At 2,000/s, round 1 had a stall
	// of 3 jobs at 5 ms: its 0.3%, and still 0.15% of the rounds pooled,
	// so the pooled p99.9 is the stall's, and the p99 round 2's 300 µs.
	runs := []Run{
		{Scenario: "fg-curve", Server: Baseline, Round: 1, Curve: []Step{
			{Offered: 2000, JobsPerSec: 2000, Histogram: hist(t, 1, append(repeat(997, 300), 5000, 5000, 5000)...)},
			{Offered: 2300, JobsPerSec: 2300, Histogram: hist(t, 1000, 400)},
		}},
		{Scenario: "fg-curve", Server: "switchyard", Round: 1, Curve: []Step{
			{Offered: 2000, JobsPerSec: 2000, Histogram: hist(t, 1000, 200)},
			{Offered: 2300, JobsPerSec: 2300, Histogram: hist(t, 1000, 300)},
		}},
		{Scenario: "fg-curve", Server: Baseline, Round: 2, Curve: []Step{
			{Offered: 2000, JobsPerSec: 2000, Histogram: hist(t, 1000, 300)},
			{Offered: 2300, JobsPerSec: 1000, Histogram: hist(t, 1000, 90_000)}, // not sustained
		}},
		{Scenario: "fg-curve", Server: "switchyard", Round: 2, Curve: []Step{
			{Offered: 2000, JobsPerSec: 2000, Histogram: hist(t, 1000, 250)},
			{Offered: 2300, JobsPerSec: 2300, Histogram: hist(t, 1000, 8000)},
		}},
	}
	r := &Record{Runs: runs}
	base, ok := r.PooledCurve("fg-curve", Baseline)
	if !ok || len(base) != 2 {
		t.Fatalf("pooled %+v (%v)", base, ok)
	}
	if s := base[0]; s.Offered != 2000 || s.Rounds != 2 || s.Sustained != 2 || s.Latency.Count != 2000 || s.Latency.P999 < 4990 || s.Latency.P99 > 310 {
		t.Errorf("2,000/s pooled %+v", s)
	}
	if s := base[1]; s.Rounds != 2 || s.Sustained != 1 || s.Latency.Count != 2000 {
		t.Errorf("2,300/s pooled %+v", s)
	}
	md := r.PooledMarkdown()
	mustContain(t, "pooled table", md,
		"| fg-curve, pooled over rounds | gearmand sustained | switchyard sustained | p99 gearmand | p99 switchyard | p99.9 gearmand | p99.9 switchyard |",
		"| 2.00k | 2 of 2 | 2 of 2 | 300µs | 250µs | 5.00ms | 250µs |",
		"switchyard's p99 at or under gearmand's at 1 of the 1 rates gearmand sustained in every round, its p99.9 at 1",
	)
	if strings.Contains(md, "| 2.30k |") {
		t.Errorf("a rate gearmand did not sustain in every round is compared:\n%s", md)
	}
	// A rate only round 1 reached (round 2 ended below it) is not one
	// gearmand sustained in every round.
	runs[0].Curve = append(runs[0].Curve, Step{Offered: 2645, JobsPerSec: 2645, Histogram: hist(t, 1000, 500)})
	runs[1].Curve = append(runs[1].Curve, Step{Offered: 2645, JobsPerSec: 2645, Histogram: hist(t, 1000, 400)})
	if md := r.PooledMarkdown(); strings.Contains(md, "| 2.65k |") {
		t.Errorf("a rate one round of gearmand never reached is compared:\n%s", md)
	}
	runs[0].Curve, runs[1].Curve = runs[0].Curve[:2], runs[1].Curve[:2]

	// A higher latency is in bold.
	runs[3].Curve[0].Histogram = hist(t, 1000, 350)
	if md := r.PooledMarkdown(); !strings.Contains(md, "| 300µs | **350µs** |") || !strings.Contains(md, "at 0 of the 1 rates") {
		t.Errorf("switchyard's higher p99 not marked:\n%s", md)
	}
	// A record from before steps kept their histograms has no pool.
	runs[0].Curve[1].Histogram = ""
	if _, ok := r.PooledCurve("fg-curve", Baseline); ok {
		t.Error("pooled a step without its histogram")
	}
	if md := r.PooledMarkdown(); md != "" {
		t.Errorf("pooled table without histograms:\n%s", md)
	}
}

func repeat(n int, v int64) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// mustContain fails the test for each of wants that text (what, for the
// message) lacks.
func mustContain(t *testing.T, what, text string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(text, want) {
			t.Errorf("%s lacks %q:\n%s", what, want, text)
		}
	}
}
