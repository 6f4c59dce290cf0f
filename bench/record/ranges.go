package record

import (
	"fmt"
	"slices"
	"strings"
)

// Rounds is how many rounds the record's runs took: the highest Round.
func (r *Record) Rounds() int {
	n := 0
	for _, run := range r.Runs {
		n = max(n, run.Round)
	}
	return n
}

// RangesMarkdown renders a record of several rounds as one row per
// scenario and server: each figure's median over the rounds, then its
// lowest and highest, as a target stated over rounds is read. The ratios
// to the baseline pair each round with the baseline's run of the same
// round, so that both sides of a ratio shared the machine's state. Rounds
// that failed count in `failed` and still in the figures. "" for a
// record of one round.
func (r *Record) RangesMarkdown() string {
	if r.Rounds() < 2 {
		return ""
	}
	type key struct{ scenario, server string }
	var order []key
	runs := map[key][]*Run{}
	for i := range r.Runs {
		run := &r.Runs[i]
		k := key{run.Scenario, run.Server}
		if _, ok := runs[k]; !ok {
			order = append(order, k)
		}
		runs[k] = append(runs[k], run)
	}
	var b strings.Builder
	b.WriteString("| scenario | server | rounds | server CPU µs/job | load CPU µs/job | of ceiling | jobs/s | p50 | p99 | RSS MB | RSS B/job | last/first 10% | vs gearmand jobs/s | vs gearmand p50 | vs gearmand p99 | vs gearmand cpu/job |\n")
	b.WriteString("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, k := range order {
		rs := runs[k]
		failed := 0
		var serverCPU, loadCPU, share, rate, p50, p99, rss, rssPerJob, tenths []float64
		var vsRate, vsP50, vsP99, vsCPU []float64
		for _, run := range rs {
			if run.Error != "" {
				failed++
			}
			serverCPU = appendPositive(serverCPU, run.ServerCPUPerJob)
			loadCPU = appendPositive(loadCPU, run.LoadCPUPerJob)
			share = appendPositive(share, run.OfCeiling)
			rate = appendPositive(rate, run.JobsPerSec)
			p50 = appendPositive(p50, float64(run.Latency.P50))
			p99 = appendPositive(p99, float64(run.Latency.P99))
			rss = appendPositive(rss, run.RSSMB)
			rssPerJob = appendPositive(rssPerJob, run.RSSBytesPerJob)
			tenths = appendPositive(tenths, run.LastVsFirst10)
			base := r.Find(run.Scenario, Baseline, run.Round)
			if base == nil || run.Server == Baseline {
				continue
			}
			vsRate = appendRatio(vsRate, run.JobsPerSec, base.JobsPerSec)
			vsP50 = appendRatio(vsP50, float64(run.Latency.P50), float64(base.Latency.P50))
			vsP99 = appendRatio(vsP99, float64(run.Latency.P99), float64(base.Latency.P99))
			vsCPU = appendRatio(vsCPU, run.ServerCPUPerJob, base.ServerCPUPerJob)
		}
		rounds := fmt.Sprint(len(rs))
		if failed > 0 {
			rounds += fmt.Sprintf(" (%d failed)", failed)
		}
		micros := func(us float64) string { return FormatMicros(int64(us)) }
		mb := func(v float64) string { return fmt.Sprintf("%.1f", v) }
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			k.scenario, k.server, rounds,
			spread(serverCPU, FormatCPU), spread(loadCPU, FormatCPU), spread(share, FormatShare),
			spread(rate, FormatRate), spread(p50, micros), spread(p99, micros),
			spread(rss, mb), spread(rssPerJob, FormatBytes), spread(tenths, FormatTenths),
			spread(vsRate, FormatRatio), spread(vsP50, FormatRatio), spread(vsP99, FormatRatio), spread(vsCPU, FormatRatio))
	}
	return b.String()
}

// appendPositive appends v if it was measured (above 0).
func appendPositive(vs []float64, v float64) []float64 {
	if v > 0 {
		vs = append(vs, v)
	}
	return vs
}

// appendRatio appends a/b if both were measured.
func appendRatio(vs []float64, a, b float64) []float64 {
	if a > 0 && b > 0 {
		vs = append(vs, a/b)
	}
	return vs
}

// spread prints the median of vs, then its range: "29.1k (27.0k-30.2k)";
// the median alone if all are equal, "" for none.
func spread(vs []float64, format func(float64) string) string {
	if len(vs) == 0 {
		return ""
	}
	vs = slices.Clone(vs)
	slices.Sort(vs)
	n := len(vs)
	median := vs[n/2]
	if n%2 == 0 {
		median = (vs[n/2-1] + vs[n/2]) / 2
	}
	lo, hi := format(vs[0]), format(vs[n-1])
	if lo == hi {
		return format(median)
	}
	return fmt.Sprintf("%s (%s-%s)", format(median), lo, hi)
}
