package report

import (
	"encoding/xml"
	"io"
	"strings"
	"testing"
	"time"

	"switchyard/bench/record"
)

// withCurves is the fixtures and, newest, a record of fg-curve on both
// servers: switchyard's 3 steps (the last not sustained), gearmand's 2
// (the last not sustained).
func withCurves(t *testing.T) *Series {
	t.Helper()
	s := loadFixtures(t)
	lat := func(p99 int64) record.Latency {
		return record.Latency{Count: 100, P50: p99 / 4, P99: p99, P999: 2 * p99, Max: 3 * p99}
	}
	rec := &record.Record{Schema: record.SchemaVersion, Time: time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC), Commit: "3333333",
		Runs: []record.Run{
			{Scenario: "fg-curve", Server: "switchyard", Round: 1, JobsPerSec: 2600, Latency: lat(800), Curve: []record.Step{
				{Offered: 2000, JobsPerSec: 2000, Latency: lat(500)}, {Offered: 2600, JobsPerSec: 2600, Latency: lat(800)},
				{Offered: 3380, JobsPerSec: 3000, Latency: lat(900_000)}}},
			{Scenario: "fg-curve", Server: "gearmand", Round: 1, JobsPerSec: 2000, Latency: lat(1500), Curve: []record.Step{
				{Offered: 2000, JobsPerSec: 2000, Latency: lat(1500)}, {Offered: 2600, JobsPerSec: 2100, Unsent: 40, Latency: lat(2_000_000)}}},
		}}
	return Collect(append(s.Records, rec))
}

func TestCurveSVG(t *testing.T) {
	if got := CurveSVG(loadFixtures(t)); got != "" {
		t.Errorf("a curve chart without curves:\n%s", got)
	}
	svg := CurveSVG(withCurves(t))
	dec := xml.NewDecoder(strings.NewReader(svg))
	counts := map[string]int{}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("curve SVG is not well-formed XML: %v\n%s", err, svg)
		}
		if el, ok := tok.(xml.StartElement); ok {
			counts[el.Name.Local]++
		}
	}
	// 5 steps in each of the 3 panels, and the legend's 2 servers with
	// curves (not the history's echo) and hollow point; a line per server
	// per panel.
	if got, want := counts["circle"], 3*5+2+1; got != want {
		t.Errorf("%d circles, want %d", got, want)
	}
	if strings.Contains(svg, ">echo<") {
		t.Error("the legend lists echo, which has no curve")
	}
	if got := counts["polyline"]; got != 2*3 {
		t.Errorf("%d polylines, want 6", got)
	}
	for _, want := range []string{
		"latency against offered rate, open loop: 2026-11-03 10:00 3333333",
		`stroke-dasharray="4 3"><title>knee bound: p99 10.0ms</title>`,
		// Not sustained: hollow.
		`fill="white" stroke="#e8710a"><title>gearmand round 1: 2.60k/s offered, 2.10k/s done, p99 2.00s</title>`,
		`fill="#1f77b4" stroke="#1f77b4"><title>switchyard round 1: 2.60k/s offered, 2.60k/s done, p99.9 1.60ms</title>`,
		">p50 latency against offered jobs/s<",
	} {
		if !strings.Contains(svg, want) {
			t.Errorf("curve SVG lacks %q", want)
		}
	}
}

func TestMarkdownCurves(t *testing.T) {
	if md := Markdown(loadFixtures(t)); strings.Contains(md, "curve.svg") {
		t.Error("README links a curve chart no record has")
	}
	md := Markdown(withCurves(t))
	for _, want := range []string{
		"## Latency against offered rate: 2026-11-03 10:00 3333333\n\n![p50, p99 and p99.9 against the offered rate, per server](curve.svg)",
		"| fg-curve | switchyard | 1 | 3.38k | 3.00k | 225ms | 900ms | 1.80s | 2.70s | no (0 unsent, 0 abandoned) |",
		"| fg-curve | switchyard | 1 | 2.60k | 200µs | 800µs | 1.60ms | 1.30x |",
		// The knee is the fg-curve row of the latest run's table.
		"| fg-curve | switchyard | - | - |  | 2.60k | 200µs | 800µs |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("README lacks %q:\n%s", want, md)
		}
	}
}
