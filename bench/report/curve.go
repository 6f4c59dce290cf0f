package report

import (
	"fmt"
	"math"
	"strings"

	"switchyard/bench/record"
)

// LatestCurves returns the newest record with a latency–throughput curve,
// or nil.
func LatestCurves(s *Series) *record.Record {
	for i := len(s.Records) - 1; i >= 0; i-- {
		for _, run := range s.Records[i].Runs {
			if len(run.Curve) > 0 {
				return s.Records[i]
			}
		}
	}
	return nil
}

// curvePercentiles are the panels of the curve chart.
var curvePercentiles = []struct {
	title string
	value func(record.Latency) int64
}{
	{"p50", func(l record.Latency) int64 { return l.P50 }},
	{"p99", func(l record.Latency) int64 { return l.P99 }},
	{"p99.9", func(l record.Latency) int64 { return l.P999 }},
}

// CurveSVG draws the latest record's latency–throughput curves: for each
// scenario with one, a panel each for p50, p99 and p99.9 against the
// offered rate, one line per server (and round), latency on a log scale
// (past saturation it grows by orders of magnitude), the knee's p99 bound
// dashed on the p99 panel. A step the server did not sustain is a hollow
// point. "" when no record has a curve.
func CurveSVG(s *Series) string {
	rec := LatestCurves(s)
	if rec == nil {
		return ""
	}
	scenarios := rec.CurveScenarios()
	width := len(curvePercentiles) * cellW
	height := headerH + len(scenarios)*cellH
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n",
		width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="20" font-size="15" font-weight="bold">latency against offered rate, open loop: %s</text>`+"\n", marginLeft, esc(rec.Label()))
	x := marginLeft
	for _, srv := range s.Servers {
		if !hasCurve(rec, srv) {
			continue // the echo process, a cluster: in the history, not here
		}
		c := colorOf(s.Servers, srv)
		fmt.Fprintf(&b, `<line x1="%d" y1="38" x2="%d" y2="38" stroke="%s" stroke-width="2"/><circle cx="%d" cy="38" r="3" fill="%s"/>`,
			x, x+20, c, x+10, c)
		fmt.Fprintf(&b, `<text x="%d" y="42">%s</text>`+"\n", x+26, esc(srv))
		x += 40 + 7*len(srv)
	}
	fmt.Fprintf(&b, `<circle cx="%d" cy="38" r="3" fill="white" stroke="#444"/><text x="%d" y="42">not sustained</text>`+"\n", x+10, x+18)
	for row, sc := range scenarios {
		var runs []*record.Run
		for i := range rec.Runs {
			if rec.Runs[i].Scenario == sc && len(rec.Runs[i].Curve) > 0 {
				runs = append(runs, &rec.Runs[i])
			}
		}
		for col := range curvePercentiles {
			curvePanel(&b, s, sc, runs, col, col*cellW, headerH+row*cellH)
		}
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// hasCurve reports whether server has a run with a curve in rec.
func hasCurve(rec *record.Record, server string) bool {
	for i := range rec.Runs {
		if rec.Runs[i].Server == server && len(rec.Runs[i].Curve) > 0 {
			return true
		}
	}
	return false
}

// curvePanel draws one percentile of one scenario's curves with its
// top-left corner at (left, top).
func curvePanel(b *strings.Builder, s *Series, scenario string, runs []*record.Run, col, left, top int) {
	pc := curvePercentiles[col]
	x0, y0 := left+marginLeft, top+marginTop
	fmt.Fprintf(b, `<text x="%d" y="%d"><tspan font-weight="bold">%s</tspan><tspan dx="8" fill="#555">%s latency against offered jobs/s</tspan></text>`+"\n",
		x0, top+16, esc(scenario), pc.title)
	xMax, yMin, yMax := 0.0, math.Inf(1), 0.0
	for _, run := range runs {
		for _, st := range run.Curve {
			xMax = math.Max(xMax, st.Offered)
			if v := float64(pc.value(st.Latency)); v > 0 {
				yMin, yMax = math.Min(yMin, v), math.Max(yMax, v)
			}
		}
	}
	if col == 1 {
		yMin, yMax = math.Min(yMin, record.KneeP99Micros), math.Max(yMax, record.KneeP99Micros)
	}
	if math.IsInf(yMin, 1) {
		yMin, yMax = 1, 10
	}
	// Whole decades, so that the grid lines are round.
	lo, hi := math.Floor(math.Log10(yMin)), math.Ceil(math.Log10(yMax))
	if hi <= lo {
		hi = lo + 1
	}
	xMax = niceCeil(xMax * 1.05)
	xOf := func(v float64) float64 { return float64(x0) + v/xMax*plotW }
	yOf := func(us float64) float64 {
		return float64(y0+plotH) - (math.Log10(math.Max(us, 1))-lo)/(hi-lo)*plotH
	}
	for d := lo; d <= hi; d++ {
		y := yOf(math.Pow(10, d))
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e5e5e5"/>`, x0, y, x0+plotW, y)
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end" fill="#555">%s</text>`+"\n", x0-6, y+4, esc(record.FormatMicros(int64(math.Pow(10, d)))))
	}
	const xTicks = 4
	for k := 0; k <= xTicks; k++ {
		v := xMax * float64(k) / xTicks
		fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%s</text>`+"\n", xOf(v), y0+plotH+14, esc(record.FormatRate(v)))
	}
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999"/>`+"\n", x0, y0, plotW, plotH)
	if col == 1 {
		y := yOf(record.KneeP99Micros)
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#c00" stroke-dasharray="4 3"><title>knee bound: p99 %s</title></line>`+"\n",
			x0, y, x0+plotW, y, esc(record.FormatMicros(record.KneeP99Micros)))
	}
	for _, run := range runs {
		c := colorOf(s.Servers, run.Server)
		var pts []string
		for _, st := range run.Curve {
			if v := pc.value(st.Latency); v > 0 {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", xOf(st.Offered), yOf(float64(v))))
			}
		}
		if len(pts) > 1 {
			fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", c, strings.Join(pts, " "))
		}
		for _, st := range run.Curve {
			v := pc.value(st.Latency)
			if v <= 0 {
				continue
			}
			fill := c
			if !st.Sustained() {
				fill = "white"
			}
			fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s" stroke="%s"><title>%s round %d: %s/s offered, %s/s done, %s %s</title></circle>`+"\n",
				xOf(st.Offered), yOf(float64(v)), fill, c, esc(run.Server), run.Round, esc(record.FormatRate(st.Offered)),
				esc(record.FormatRate(st.JobsPerSec)), pc.title, esc(record.FormatMicros(v)))
		}
	}
}
