package record

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Step is one offered rate of a latency–throughput curve: jobs sent on a
// fixed schedule at Offered jobs/s, each timed from when it was due.
type Step struct {
	Offered float64 `json:"offered_per_s"`
	// Start is when the step's measured window began: the steps of
	// servers run paired interleave.
	Start      time.Time `json:"start,omitzero"`
	JobsPerSec float64   `json:"jobs_per_s"` // finished in the step's window, per second
	Latency    Latency   `json:"latency_us"`
	// Unsent is the jobs due in the step that never left the load
	// generator (its bound on jobs out), Abandoned those out at the end
	// of the grace period: both only past saturation.
	Unsent    int64 `json:"unsent,omitempty"`
	Abandoned int64 `json:"abandoned,omitempty"`
	// Histogram is the step's latencies (µs) as an HdrHistogram, V2
	// compressed and base64 (EncodeHistogram), so that the rounds of a
	// step can be pooled: a step's p99.9 alone rests on its dozen
	// slowest jobs.
	Histogram string `json:"histogram,omitempty"`
}

// EncodeHistogram is h as Step.Histogram keeps it; "" if h is empty.
func EncodeHistogram(h *hdrhistogram.Histogram) string {
	if h == nil || h.TotalCount() == 0 {
		return ""
	}
	b, err := h.Encode(hdrhistogram.V2CompressedEncodingCookieBase)
	if err != nil {
		return "" // only for an unknown version: not this one
	}
	return string(b)
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

// PooledStep is one offered rate of one server's curves, over every
// round that reached it: the rounds' jobs in one histogram.
type PooledStep struct {
	Offered float64
	// Rounds is the rounds whose curve reached the rate, Sustained how
	// many of them sustained it.
	Rounds, Sustained int
	Latency           Latency
}

// PooledCurve pools the curves of scenario on server over the record's
// rounds, one step per offered rate, rising. false if a step lacks its
// histogram (a record from before they were kept): its jobs cannot be
// pooled.
func (r *Record) PooledCurve(scenario, server string) ([]PooledStep, bool) {
	hists := make(map[float64]*hdrhistogram.Histogram)
	steps := make(map[float64]*PooledStep)
	var rates []float64
	for i := range r.Runs {
		run := &r.Runs[i]
		if run.Scenario != scenario || run.Server != server {
			continue
		}
		for _, st := range run.Curve {
			if st.Histogram == "" {
				return nil, false
			}
			h, err := hdrhistogram.Decode([]byte(st.Histogram))
			if err != nil {
				return nil, false
			}
			ps, ok := steps[st.Offered]
			if !ok {
				ps = &PooledStep{Offered: st.Offered}
				steps[st.Offered] = ps
				hists[st.Offered] = h
				rates = append(rates, st.Offered)
			} else {
				hists[st.Offered].Merge(h)
			}
			ps.Rounds++
			if st.Sustained() {
				ps.Sustained++
			}
		}
	}
	if len(rates) == 0 {
		return nil, false
	}
	slices.Sort(rates)
	out := make([]PooledStep, 0, len(rates))
	for _, rate := range rates {
		ps := steps[rate]
		ps.Latency = Summarize(hists[rate])
		out = append(out, *ps)
	}
	return out, true
}

// PooledMarkdown sets each server's pooled curve (PooledCurve) against
// the baseline's, at every offered rate the baseline sustained in every
// round (a round whose curve ended below a rate did not sustain it): the
// rates at which the servers' latencies compare at equal load. Each p99 and p99.9 rests on the jobs of all
// the rounds, several times a single step's. "" without pooled curves.
func (r *Record) PooledMarkdown() string {
	var b strings.Builder
	for _, sc := range r.CurveScenarios() {
		base, ok := r.PooledCurve(sc, Baseline)
		if !ok {
			continue
		}
		rounds := 0
		for _, run := range r.Runs {
			if run.Scenario == sc && run.Server == Baseline && len(run.Curve) > 0 {
				rounds++
			}
		}
		for _, server := range r.curveServers(sc) {
			if server == Baseline {
				continue
			}
			other, ok := r.PooledCurve(sc, server)
			if !ok {
				continue
			}
			byRate := make(map[float64]PooledStep, len(other))
			for _, ps := range other {
				byRate[ps.Offered] = ps
			}
			fmt.Fprintf(&b, "| %s, pooled over rounds | %s sustained | %s sustained | p99 %s | p99 %s | p99.9 %s | p99.9 %s |\n",
				sc, Baseline, server, Baseline, server, Baseline, server)
			b.WriteString("|--:|--:|--:|--:|--:|--:|--:|\n")
			var rates, p99, p999 int
			for _, bs := range base {
				if bs.Sustained < rounds {
					continue
				}
				st, ok := byRate[bs.Offered]
				if !ok {
					continue
				}
				rates++
				mark := func(o, g int64, n *int) string {
					if o <= g {
						*n++
						return FormatMicros(o)
					}
					return "**" + FormatMicros(o) + "**"
				}
				fmt.Fprintf(&b, "| %s | %d of %d | %d of %d | %s | %s | %s | %s |\n", FormatRate(bs.Offered),
					bs.Sustained, bs.Rounds, st.Sustained, st.Rounds,
					FormatMicros(bs.Latency.P99), mark(st.Latency.P99, bs.Latency.P99, &p99),
					FormatMicros(bs.Latency.P999), mark(st.Latency.P999, bs.Latency.P999, &p999))
			}
			fmt.Fprintf(&b, "\n%s's p99 at or under %s's at %d of the %d rates %s sustained in every round, its p99.9 at %d (higher ones in bold).\n\n",
				server, Baseline, p99, rates, Baseline, p999)
		}
	}
	return b.String()
}

// CurveScenarios is the record's scenarios with curves, in order of
// first appearance; curveServers the servers with a curve of sc.
func (r *Record) CurveScenarios() []string {
	var out []string
	for _, run := range r.Runs {
		if len(run.Curve) > 0 && !slices.Contains(out, run.Scenario) {
			out = append(out, run.Scenario)
		}
	}
	return out
}

func (r *Record) curveServers(sc string) []string {
	var out []string
	for _, run := range r.Runs {
		if run.Scenario == sc && len(run.Curve) > 0 && !slices.Contains(out, run.Server) {
			out = append(out, run.Server)
		}
	}
	return out
}
