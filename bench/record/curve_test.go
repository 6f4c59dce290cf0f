package record

import (
	"strings"
	"testing"
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
	for _, want := range []string{
		"| fg-curve | switchyard | 1 | 2.60k | 2.60k | 300µs | 600µs | 1.20ms | 1.80ms | yes |",
		"| fg-curve | switchyard | 1 | 3.38k | 2.90k |",
		"| no (0 unsent, 0 abandoned) |",
		"| no (7 unsent, 3 abandoned) |",
		"| knee (highest rate sustained with p99 ≤ 10.0ms) | server | round | offered/s |",
		"| fg-curve | switchyard | 1 | 2.60k | 300µs | 600µs | 1.20ms | 1.30x | 2.60k |",
		"| fg-curve | gearmand | 1 | 2.00k | 350µs | 700µs | 1.40ms |  | 2.00k |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("curve table lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "| fg | ") {
		t.Errorf("a run without a curve in the curve table:\n%s", md)
	}
	if (&Record{Runs: r.Runs[:1]}).CurveMarkdown() != "" {
		t.Error("a record without curves has a curve table")
	}
}
