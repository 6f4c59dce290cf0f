package report

import (
	"encoding/xml"
	"io"
	"strings"
	"testing"

	"switchyard/bench/record"
)

func loadFixtures(t *testing.T) *Series {
	t.Helper()
	records, err := record.ReadDir("testdata")
	if err != nil {
		t.Fatal(err)
	}
	if len(records) != 2 {
		t.Fatalf("want 2 fixture records, got %d", len(records))
	}
	return Collect(records)
}

func TestCollect(t *testing.T) {
	s := loadFixtures(t)
	if got := strings.Join(s.Scenarios, ","); got != "fg,queue-1m,ceiling,conns-10k,mixed" {
		t.Errorf("scenarios %s", got)
	}
	if got := strings.Join(s.Servers, ","); got != "switchyard,gearmand,echo" {
		t.Errorf("servers %s", got)
	}
	tests := []struct {
		scenario, server string
		record           int
		want             *Point
	}{
		// Two rounds averaged; CPU per job (in a schema 1 record's extras)
		// over the rounds that have it.
		{"fg", "switchyard", 0, &Point{JobsPerSec: 31000, P99Micros: 6000, ServerCPUPerJob: 30, LoadCPUPerJob: 41}},
		{"fg", "gearmand", 0, &Point{JobsPerSec: 14500, P99Micros: 10000, ServerCPUPerJob: 62}},
		{"queue-1m", "gearmand", 0, &Point{JobsPerSec: 90000, P99Micros: 9000, Failed: true}},
		// A queue's figures, kept in a schema 1 record's extras.
		{"queue-1m", "switchyard", 0, &Point{JobsPerSec: 200000, P99Micros: 5000, LastVsFirst10: 0.57, RSSBytesPerJob: 290}},
		{"fg", "switchyard", 1, &Point{JobsPerSec: 45000, P99Micros: 4000, ServerCPUPerJob: 25, LoadCPUPerJob: 40, OfCeiling: 0.9}},
		{"mixed", "switchyard", 1, &Point{JobsPerSec: 15000, ServerCPUPerJob: 120, LoadCPUPerJob: 200}},
		{"fg", "gearmand", 1, nil},
		{"conns-10k", "switchyard", 0, nil},
	}
	for _, tt := range tests {
		got := s.Point(tt.scenario, tt.server, tt.record)
		if (got == nil) != (tt.want == nil) || (got != nil && *got != *tt.want) {
			t.Errorf("Point(%s, %s, %d) = %+v, want %+v", tt.scenario, tt.server, tt.record, got, tt.want)
		}
	}
}

func TestMarkdown(t *testing.T) {
	md := Markdown(loadFixtures(t))
	for _, want := range []string{
		"## Latest run: 2026-11-02 10:00 2222222-dirty (quick)",
		"Command: `bin/switchyard-bench --quick --gearmand none`",
		"Load average (1 min) at the start and the end: 0.40, 7.25: **taken under load**",
		"| conns-10k | switchyard | - | - |  | 20.0k |",
		"| fg | switchyard | 25.0 | 40.0 | 90% | 45.0k |",
		"| memodb | 15.0k | 10.0k | 67% | 1.20ms | 3.00ms | 40.0 | 90.0 |",
		"![jobs/s, p99 and server CPU per job per scenario over runs](history.svg)",
		"### fg\n\n| run | switchyard CPU µs/job | switchyard jobs/s | switchyard p99 | switchyard of ceiling | " +
			"gearmand CPU µs/job | gearmand jobs/s | gearmand p99 | gearmand of ceiling | vs gearmand |",
		// newest first; the quick run has no gearmand
		"| 2026-11-02 10:00 2222222-dirty (quick) | 25.0 | 45.0k | 4.00ms | 90% |  |  |  |  |  |\n" +
			"| 2026-11-01 10:00 1111111 | 30.0 | 31.0k | 6.00ms |  | 62.0 | 14.5k | 10.0ms |  | 2.14x jobs/s, 0.60x p99, 0.48x cpu/job |",
		// No ceiling column where no run has one, no column of a server that never ran it;
		// a queue's last tenth against its first and RSS per job where a run has them.
		"### queue-1m\n\n| run | switchyard CPU µs/job | switchyard jobs/s | switchyard p99 | switchyard last/first 10% | switchyard RSS B/job | " +
			"gearmand CPU µs/job | gearmand jobs/s | gearmand p99 | gearmand last/first 10% | gearmand RSS B/job | vs gearmand |\n" +
			"| --- | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --- |\n" +
			"| 2026-11-01 10:00 1111111 | - | 200k | 5.00ms | 0.57x | 290 | - | 90.0k (error) | 9.00ms |  |  | 2.22x jobs/s, 0.56x p99 |\n\n",
		"### conns-10k\n\n| run | switchyard CPU µs/job | switchyard jobs/s | switchyard p99 | vs gearmand |\n",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("README lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "Over the") {
		t.Errorf("README of a one-round latest run has a table of rounds:\n%s", md)
	}
	// The older fixture ran fg twice on each server: as the latest run, its
	// rounds are summed up before every run is listed.
	older := loadFixtures(t).Records[:1]
	if md := Markdown(Collect(older)); !strings.Contains(md, "Over the 2 rounds, median (lowest-highest)") ||
		!strings.Contains(md, "| fg | switchyard | 2 |") {
		t.Errorf("README of a two-round latest run lacks its table of rounds:\n%s", md)
	}
	if empty := Markdown(Collect(nil)); !strings.Contains(empty, "No results yet") {
		t.Errorf("README without records:\n%s", empty)
	}
}

func TestSVG(t *testing.T) {
	svg := SVG(loadFixtures(t))
	// Well-formed XML: the fixture's "<&>" must have been escaped.
	dec := xml.NewDecoder(strings.NewReader(svg))
	counts := map[string]int{}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v\n%s", err, svg)
		}
		if el, ok := tok.(xml.StartElement); ok {
			counts[el.Name.Local]++
		}
	}
	// Points of jobs/s and of p99: fg has 2+1, queue-1m 1+1, ceiling,
	// conns-10k and mixed 1 each. Of server CPU per job, only the runs that
	// measured it: fg's 2+1, ceiling's and mixed's.
	if got, want := counts["circle"], 2*(3+2+1+1+1)+(3+1+1)+3+1; got != want {
		t.Errorf("%d circles, want %d (points plus legend: 3 servers and quick)", got, want)
	}
	// Lines join consecutive points of a server: only switchyard's fg has
	// two, in each of the 3 panels.
	if got := counts["polyline"]; got != 3 {
		t.Errorf("%d polylines, want 3", got)
	}
	for _, want := range []string{`fill="white"`, "<title>2026-11-01 10:00 1111111 gearmand: 90.0k (error)</title>", ">queue-1m<",
		"<title>2026-11-01 10:00 1111111 gearmand: 62.0</title>", "server CPU µs/job (lower is better)"} {
		if !strings.Contains(svg, want) {
			t.Errorf("SVG lacks %q", want)
		}
	}
}

func TestNiceCeil(t *testing.T) {
	tests := []struct{ in, want float64 }{
		{0, 1}, {-3, 1}, {0.7, 1}, {1, 1}, {1.01, 2}, {3, 5}, {7.5, 10}, {12, 20}, {45000, 50000}, {200000, 200000},
	}
	for _, tt := range tests {
		if got := niceCeil(tt.in); got != tt.want {
			t.Errorf("niceCeil(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

// TestMarkdownNodes: a latest run whose runs have nodes (cluster-scale)
// gets their table, each node's CPU of its quota and a short one marked.
func TestMarkdownNodes(t *testing.T) {
	rec := &record.Record{Runs: []record.Run{{Scenario: "cluster-scale", Server: "switchyard-cluster-3", Round: 1, JobsPerSec: 30000,
		Extra: map[string]float64{"vs_single_x": 0.75, "drain_jobs_per_s": 20000, "machine_idle_cpus": 0.1, "short_nodes": 1},
		Nodes: []record.Node{{Name: "n1", Role: "leader", Quota: 0.3, CPUs: 0.3, Throttled: 0.9}, {Name: "n2", Role: "follower", Quota: 0.3, CPUs: 0.15, Short: true}}}}}
	md := Markdown(Collect([]*record.Record{rec}))
	for _, want := range []string{"Each server process of the scenarios that give every one a CPU quota", "| cluster-scale | switchyard-cluster-3 | 1 | 30.0k | 0.75x |",
		"n1 leader 0.30/0.30 thr 90%; n2 follower 0.15/0.30*"} {
		if !strings.Contains(md, want) {
			t.Errorf("README lacks %q:\n%s", want, md)
		}
	}
	if md := Markdown(loadFixtures(t)); strings.Contains(md, "CPU quota of its own") {
		t.Errorf("README of runs without nodes has a table of nodes:\n%s", md)
	}
}
