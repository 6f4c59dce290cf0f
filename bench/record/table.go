package record

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Baseline is the server every other one is compared with.
const Baseline = "gearmand"

// Markdown renders the record's runs as a markdown table, one row per run,
// in the order they ran, led by what each job cost: the server's CPU, the
// load generator's and, for the scenarios an echo process bounds, how near
// the bound it came. Runs of other servers carry their ratios to the
// baseline run of the same scenario and round. A run with parts (mixed)
// is followed by a table of them.
func (r *Record) Markdown() string {
	var b strings.Builder
	b.WriteString("| scenario | server | server CPU µs/job | load CPU µs/job | of ceiling | jobs/s | p50 | p99 | p99.9 | max | RSS MB | RSS B/job | last/first 10% | CPU s | vs gearmand | notes |\n")
	b.WriteString("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|---|\n")
	for _, run := range r.Runs {
		vs := ""
		if base := r.Find(run.Scenario, Baseline, run.Round); base != nil && run.Server != Baseline {
			vs = Compare(FiguresOf(&run), FiguresOf(base))
		}
		notes := FormatExtra(run.Extra)
		if run.Error != "" {
			notes = strings.TrimSpace("**error**: " + oneLine(run.Error, 120) + " " + notes)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.1f | %s | %s | %.2f | %s | %s |\n",
			run.Scenario, run.Server, FormatCPU(run.ServerCPUPerJob), FormatCPU(run.LoadCPUPerJob), FormatShare(run.OfCeiling),
			FormatRate(run.JobsPerSec), FormatMicros(run.Latency.P50), FormatMicros(run.Latency.P99),
			FormatMicros(run.Latency.P999), FormatMicros(run.Latency.Max),
			run.RSSMB, FormatBytes(run.RSSBytesPerJob), FormatTenths(run.LastVsFirst10), run.CPUSeconds, vs, notes)
	}
	for _, run := range r.Runs {
		if len(run.Parts) > 0 {
			b.WriteString("\n")
			b.WriteString(run.PartsMarkdown())
		}
	}
	return b.String()
}

// PartsMarkdown renders a run's parts as a markdown table, led by a line
// that names the run.
func (run *Run) PartsMarkdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "`%s` on %s, round %d: each load alone, then all at once\n\n", run.Scenario, run.Server, run.Round)
	b.WriteString("| load | alone jobs/s | mixed jobs/s | mixed vs alone | alone p99 | mixed p99 | alone server CPU µs/job | alone load CPU µs/job |\n")
	b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, p := range run.Parts {
		vs := ""
		if p.Alone.JobsPerSec > 0 {
			vs = FormatShare(p.Mixed.JobsPerSec / p.Alone.JobsPerSec)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", p.Name,
			FormatRate(p.Alone.JobsPerSec), FormatRate(p.Mixed.JobsPerSec), vs,
			FormatMicros(p.Alone.Latency.P99), FormatMicros(p.Mixed.Latency.P99),
			FormatCPU(p.Alone.ServerCPUPerJob), FormatCPU(p.Alone.LoadCPUPerJob))
	}
	return b.String()
}

// Figures are what Compare sets side by side.
type Figures struct {
	JobsPerSec      float64
	P99             float64 // µs
	ServerCPUPerJob float64 // µs
}

// FiguresOf returns a run's figures for Compare.
func FiguresOf(run *Run) Figures {
	return Figures{JobsPerSec: run.JobsPerSec, P99: float64(run.Latency.P99), ServerCPUPerJob: run.ServerCPUPerJob}
}

// Compare says how a run does against the baseline's: throughput ratio
// (higher is better), p99 ratio and server CPU per job ratio (lower is
// better). A figure of 0 means none was measured.
func Compare(f, base Figures) string {
	var parts []string
	if base.JobsPerSec > 0 {
		parts = append(parts, FormatRatio(f.JobsPerSec/base.JobsPerSec)+" jobs/s")
	}
	if base.P99 > 0 && f.P99 > 0 {
		parts = append(parts, FormatRatio(f.P99/base.P99)+" p99")
	}
	if base.ServerCPUPerJob > 0 && f.ServerCPUPerJob > 0 {
		parts = append(parts, FormatRatio(f.ServerCPUPerJob/base.ServerCPUPerJob)+" cpu/job")
	}
	return strings.Join(parts, ", ")
}

// FormatCPU prints µs of CPU per job with three significant digits, "-"
// for none measured.
func FormatCPU(us float64) string {
	if us <= 0 || math.IsNaN(us) || math.IsInf(us, 0) {
		return "-"
	}
	return trimFloat(us)
}

// FormatBytes prints a size in whole bytes, "" for none measured.
func FormatBytes(n float64) string {
	if n <= 0 || math.IsNaN(n) || math.IsInf(n, 0) {
		return ""
	}
	return fmt.Sprintf("%.0f", n)
}

// FormatTenths prints a queue's last tenth against its first as a ratio
// (FormatRatio), "" for none measured.
func FormatTenths(x float64) string {
	if x <= 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return ""
	}
	return FormatRatio(x)
}

// FormatShare prints a fraction as a whole percentage, "" for 0 (none).
func FormatShare(x float64) string {
	if x <= 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return ""
	}
	return fmt.Sprintf("%.0f%%", 100*x)
}

// FormatRatio prints a ratio with two or three significant digits: 0.31x, 12.5x, 140x.
func FormatRatio(x float64) string {
	switch {
	case math.IsInf(x, 0) || math.IsNaN(x):
		return "n/a"
	case x >= 100:
		return fmt.Sprintf("%.0fx", x)
	case x >= 10:
		return fmt.Sprintf("%.1fx", x)
	default:
		return fmt.Sprintf("%.2fx", x)
	}
}

// FormatRate prints a rate with three significant digits: 950, 12.3k, 1.25M.
func FormatRate(x float64) string {
	switch {
	case x >= 1e6:
		return trimFloat(x/1e6) + "M"
	case x >= 1e3:
		return trimFloat(x/1e3) + "k"
	default:
		return trimFloat(x)
	}
}

// FormatMicros prints a latency in microseconds in a readable unit.
func FormatMicros(us int64) string {
	switch {
	case us == 0:
		return "-"
	case us < 1000:
		return fmt.Sprintf("%dµs", us)
	case us < 1_000_000:
		return trimFloat(float64(us)/1e3) + "ms"
	default:
		return trimFloat(float64(us)/1e6) + "s"
	}
}

// trimFloat prints x with three significant digits.
func trimFloat(x float64) string {
	switch {
	case x == 0:
		return "0"
	case x >= 100:
		return fmt.Sprintf("%.0f", x)
	case x >= 10:
		return fmt.Sprintf("%.1f", x)
	default:
		return fmt.Sprintf("%.2f", x)
	}
}

// FormatExtra prints scenario-specific figures, sorted by name, in a unit
// read from the name's suffix: "_jobs_per_s", "_mb", "_s", "_pct", "_x"
// (a ratio).
func FormatExtra(extra map[string]float64) string {
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		v := extra[k]
		var s string
		switch {
		case strings.HasSuffix(k, "_jobs_per_s"):
			k, s = strings.TrimSuffix(k, "_jobs_per_s"), FormatRate(v)+"/s"
		case strings.HasSuffix(k, "_us"):
			k, s = strings.TrimSuffix(k, "_us"), FormatMicros(int64(v))
		case strings.HasSuffix(k, "_mb"):
			k, s = strings.TrimSuffix(k, "_mb"), fmt.Sprintf("%.1f MB", v)
		case strings.HasSuffix(k, "_pct"):
			k, s = strings.TrimSuffix(k, "_pct"), fmt.Sprintf("%.0f%%", v)
		case strings.HasSuffix(k, "_s"):
			k, s = strings.TrimSuffix(k, "_s"), trimFloat(v)+" s"
		case strings.HasSuffix(k, "_x"):
			k, s = strings.TrimSuffix(k, "_x"), FormatRatio(v)
		default:
			s = trimFloat(v)
		}
		parts = append(parts, strings.ReplaceAll(k, "_", " ")+" "+s)
	}
	return strings.Join(parts, ", ")
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return strings.ReplaceAll(s, "|", "\\|")
}
