package report

import (
	"fmt"
	"html"
	"math"
	"strings"

	"switchyard/bench/record"
)

// Chart geometry, in SVG user units (pixels).
const (
	plotW        = 360 // plot area of one panel
	plotH        = 140
	marginLeft   = 64 // y-axis labels
	marginRight  = 40 // room for the last x label
	marginTop    = 26 // panel title
	marginBottom = 36 // x-axis labels: date and commit
	headerH      = 56 // chart title and legend
	cellW        = marginLeft + plotW + marginRight
	cellH        = marginTop + plotH + marginBottom
	maxXLabels   = 8
	xPad         = 12 // keeps the first and last points off the axes
)

var serverColors = map[string]string{"switchyard": "#1f77b4", record.Baseline: "#e8710a"}

var otherColors = []string{"#2ca02c", "#9467bd", "#8c564b", "#7f7f7f"}

func colorOf(servers []string, name string) string {
	if c, ok := serverColors[name]; ok {
		return c
	}
	n := 0
	for _, s := range servers {
		if s == name {
			break
		}
		if _, ok := serverColors[s]; !ok {
			n++
		}
	}
	return otherColors[n%len(otherColors)]
}

// metric is one panel's figure.
type metric struct {
	title  string
	value  func(*Point) (v float64, ok bool) // ok false: not measured, no point
	format func(float64) string
}

var metrics = []metric{
	{"server CPU µs/job (lower is better)", func(p *Point) (float64, bool) { return p.ServerCPUPerJob, p.ServerCPUPerJob > 0 }, func(v float64) string {
		if v == 0 {
			return "0"
		}
		return record.FormatCPU(v)
	}},
	{"jobs/s (higher is better)", func(p *Point) (float64, bool) { return p.JobsPerSec, true }, record.FormatRate},
	{"p99 latency (lower is better)", func(p *Point) (float64, bool) { return p.P99Micros, true }, func(v float64) string {
		if v == 0 {
			return "0"
		}
		return record.FormatMicros(int64(math.Round(v)))
	}},
}

// point returns scenario's point on server in record i for m, or nil.
func (m metric) point(s *Series, scenario, server string, i int) (*Point, float64) {
	p := s.Point(scenario, server, i)
	if p == nil {
		return nil, 0
	}
	v, ok := m.value(p)
	if !ok {
		return nil, 0
	}
	return p, v
}

// SVG draws, for each scenario, one panel each for the server's CPU per
// job, jobs/s and p99, with one line per server across the records. Quick
// runs are hollow points.
func SVG(s *Series) string {
	width := len(metrics) * cellW
	height := headerH + max(len(s.Scenarios), 1)*cellH
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n",
		width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="20" font-size="15" font-weight="bold">switchyard benchmark history (%d runs)</text>`+"\n", marginLeft, len(s.Records))
	x := marginLeft
	for _, srv := range s.Servers {
		c := colorOf(s.Servers, srv)
		fmt.Fprintf(&b, `<line x1="%d" y1="38" x2="%d" y2="38" stroke="%s" stroke-width="2"/><circle cx="%d" cy="38" r="3" fill="%s"/>`,
			x, x+20, c, x+10, c)
		fmt.Fprintf(&b, `<text x="%d" y="42">%s</text>`+"\n", x+26, esc(srv))
		x += 40 + 7*len(srv)
	}
	fmt.Fprintf(&b, `<circle cx="%d" cy="38" r="3" fill="white" stroke="#444"/><text x="%d" y="42">quick run</text>`+"\n", x+10, x+18)
	for row, sc := range s.Scenarios {
		for col, m := range metrics {
			panel(&b, s, sc, m, col*cellW, headerH+row*cellH)
		}
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// panel draws one metric of one scenario with its top-left corner at
// (left, top).
func panel(b *strings.Builder, s *Series, scenario string, m metric, left, top int) {
	x0, y0 := left+marginLeft, top+marginTop // plot area's top-left
	fmt.Fprintf(b, `<text x="%d" y="%d"><tspan font-weight="bold">%s</tspan><tspan dx="8" fill="#555">%s</tspan></text>`+"\n",
		x0, top+16, esc(scenario), esc(m.title))

	yMax := 0.0
	for _, srv := range s.Servers {
		for i := range s.Records {
			if p, v := m.point(s, scenario, srv, i); p != nil {
				yMax = math.Max(yMax, v)
			}
		}
	}
	yMax = niceCeil(yMax * 1.05)
	yOf := func(v float64) float64 { return float64(y0+plotH) - v/yMax*plotH }
	n := len(s.Records)
	xOf := func(i int) float64 {
		if n == 1 {
			return float64(x0) + plotW/2
		}
		return float64(x0+xPad) + float64(i)*float64(plotW-2*xPad)/float64(n-1)
	}

	// Grid and y labels.
	const gridLines = 4
	for k := 0; k <= gridLines; k++ {
		v := yMax * float64(k) / gridLines
		y := yOf(v)
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e5e5e5"/>`, x0, y, x0+plotW, y)
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end" fill="#555">%s</text>`+"\n", x0-6, y+4, esc(m.format(v)))
	}
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999"/>`+"\n", x0, y0, plotW, plotH)

	// X labels: date over commit, for at most maxXLabels records.
	step := (n + maxXLabels - 1) / maxXLabels
	for i := 0; i < n; i += max(step, 1) {
		rec := s.Records[i]
		fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%s<tspan x="%.1f" dy="12">%s</tspan></text>`+"\n",
			xOf(i), y0+plotH+14, rec.Time.UTC().Format("01-02 15:04"), xOf(i), esc(rec.Commit))
	}

	// One line per server, broken where a record lacks the point.
	for _, srv := range s.Servers {
		c := colorOf(s.Servers, srv)
		var line []string
		flush := func() {
			if len(line) > 1 {
				fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", c, strings.Join(line, " "))
			}
			line = line[:0]
		}
		for i := range s.Records {
			p, v := m.point(s, scenario, srv, i)
			if p == nil {
				flush()
				continue
			}
			line = append(line, fmt.Sprintf("%.1f,%.1f", xOf(i), yOf(v)))
		}
		flush()
		for i, rec := range s.Records {
			p, v := m.point(s, scenario, srv, i)
			if p == nil {
				continue
			}
			fill := c
			if rec.Quick {
				fill = "white"
			}
			note := ""
			if p.Failed {
				note = " (error)"
			}
			fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s" stroke="%s"><title>%s %s: %s%s</title></circle>`+"\n",
				xOf(i), yOf(v), fill, c, esc(rec.Label()), esc(srv), esc(m.format(v)), note)
		}
	}
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten, so that axis
// labels are round numbers.
func niceCeil(v float64) float64 {
	if v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 1
	}
	pow := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*pow*(1+1e-9) {
			return m * pow
		}
	}
	return 10 * pow
}

func esc(s string) string { return html.EscapeString(s) }
