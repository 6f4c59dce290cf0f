package record

import (
	"fmt"
	"math"
	"strings"
)

// Step is one offered rate of a latency–throughput curve: jobs sent on a
// fixed schedule at Offered jobs/s, each timed from when it was due.
type Step struct {
	Offered    float64 `json:"offered_per_s"`
	JobsPerSec float64 `json:"jobs_per_s"` // finished in the step's window, per second
	Latency    Latency `json:"latency_us"`
	// Unsent is the jobs due in the step that never left the load
	// generator (its bound on jobs out), Abandoned those out at the end
	// of the grace period: both only past saturation.
	Unsent    int64 `json:"unsent,omitempty"`
	Abandoned int64 `json:"abandoned,omitempty"`
}

// KeptUpShare is how much of the offered rate a step must finish for the
// server to have sustained it.
const KeptUpShare = 0.95

// KneeP99Micros is the p99 bound of the knee: the highest offered rate
// sustained with p99 at or under it. 10 ms: twice the closed-loop fg's
// p99 on the machine the bench was written on, well past what either
// server shows at a rate it sustains, and short of a backlog's seconds.
const KneeP99Micros = 10_000

// Sustained reports whether the server kept up with the step's rate:
// finished KeptUpShare of it, nothing left unsent or abandoned.
func (s Step) Sustained() bool {
	return s.Offered > 0 && s.JobsPerSec >= KeptUpShare*s.Offered && s.Unsent == 0 && s.Abandoned == 0
}

// Knee is the highest offered rate of the curve that was sustained with
// p99 at or under boundMicros, and false if none was.
func Knee(curve []Step, boundMicros int64) (Step, bool) {
	var knee Step
	found := false
	for _, s := range curve {
		if s.Sustained() && s.Latency.P99 <= boundMicros && (!found || s.Offered > knee.Offered) {
			knee, found = s, true
		}
	}
	return knee, found
}

// Saturation is the highest offered rate of the curve that was
// sustained, whatever its latency, and false if none was.
func Saturation(curve []Step) (Step, bool) {
	return Knee(curve, math.MaxInt64)
}

// CurveMarkdown renders the record's curves side by side, one row per
// offered rate, and a row for each server's knee.
func (r *Record) CurveMarkdown() string {
	var runs []*Run
	for i := range r.Runs {
		if len(r.Runs[i].Curve) > 0 {
			runs = append(runs, &r.Runs[i])
		}
	}
	if len(runs) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("| scenario | server | round | offered/s | jobs/s | p50 | p99 | p99.9 | max | sustained |\n")
	b.WriteString("|---|---|--:|--:|--:|--:|--:|--:|--:|---|\n")
	for _, run := range runs {
		for _, s := range run.Curve {
			sustained := "yes"
			if !s.Sustained() {
				sustained = fmt.Sprintf("no (%d unsent, %d abandoned)", s.Unsent, s.Abandoned)
			}
			fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s |\n", run.Scenario, run.Server, run.Round,
				FormatRate(s.Offered), FormatRate(s.JobsPerSec), FormatMicros(s.Latency.P50), FormatMicros(s.Latency.P99),
				FormatMicros(s.Latency.P999), FormatMicros(s.Latency.Max), sustained)
		}
	}
	b.WriteString("\n")
	b.WriteString(KneeMarkdown(runs))
	return b.String()
}

// KneeMarkdown is a table of the runs' knees, each with its ratio to the
// baseline's of the same scenario and round.
func KneeMarkdown(runs []*Run) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| knee (highest rate sustained with p99 ≤ %s) | server | round | offered/s | p50 | p99 | p99.9 | vs %s | highest sustained/s |\n", FormatMicros(KneeP99Micros), Baseline)
	b.WriteString("|---|---|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, run := range runs {
		sat := "none"
		if s, ok := Saturation(run.Curve); ok {
			sat = FormatRate(s.Offered)
		}
		knee, ok := Knee(run.Curve, KneeP99Micros)
		if !ok {
			fmt.Fprintf(&b, "| %s | %s | %d | none |  |  |  |  | %s |\n", run.Scenario, run.Server, run.Round, sat)
			continue
		}
		vs := ""
		for _, base := range runs {
			if base.Server == Baseline && base.Scenario == run.Scenario && base.Round == run.Round && run.Server != Baseline {
				if bk, ok := Knee(base.Curve, KneeP99Micros); ok {
					vs = fmt.Sprintf("%.2fx", knee.Offered/bk.Offered)
				}
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %s | %s | %s | %s |\n", run.Scenario, run.Server, run.Round, FormatRate(knee.Offered),
			FormatMicros(knee.Latency.P50), FormatMicros(knee.Latency.P99), FormatMicros(knee.Latency.P999), vs, sat)
	}
	return b.String()
}
