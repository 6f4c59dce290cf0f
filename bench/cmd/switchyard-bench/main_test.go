package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"switchyard/bench/record"
)

func TestParseFlagsQuick(t *testing.T) {
	tests := []struct {
		name         string
		args         []string
		wantDuration time.Duration // of fg
		wantJobs     int           // of queue-1m
	}{
		{"full defaults", nil, 20 * time.Second, 1_000_000},
		{"quick defaults", []string{"--quick"}, 3 * time.Second, 100_000},
		{"explicit flags beat quick", []string{"--quick", "--fg.duration", "7s", "--queue-1m.jobs=5"}, 7 * time.Second, 5},
		{"explicit flags without quick", []string{"--fg.duration", "7s"}, 7 * time.Second, 1_000_000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts, err := parseFlags(tt.args)
			if err != nil {
				t.Fatal(err)
			}
			if got := opts.params["fg"].Duration; got != tt.wantDuration {
				t.Errorf("fg duration %v, want %v", got, tt.wantDuration)
			}
			if got := opts.params["queue-1m"].Jobs; got != tt.wantJobs {
				t.Errorf("queue-1m jobs %d, want %d", got, tt.wantJobs)
			}
		})
	}
	quick, err := parseFlags([]string{"--quick"})
	if err != nil {
		t.Fatal(err)
	}
	if got := quick.params["periodic-delayed-1m"]; got.Jobs != 100_000 || got.Delay != time.Hour {
		t.Errorf("quick periodic-delayed-1m: %d jobs due %v later, want 100000 an hour later", got.Jobs, got.Delay)
	}
	cl, err := parseFlags([]string{"--interleave", "--cluster-metrics", "--nats-server", "none", "--cluster-failover.kills", "3"})
	if err != nil {
		t.Fatal(err)
	}
	if !cl.interleave || !cl.clusterMetrics || cl.natsServer != "none" || cl.params["cluster-failover"].Kills != 3 {
		t.Errorf("cluster flags: %+v, kills %d", cl, cl.params["cluster-failover"].Kills)
	}
	if def, _ := parseFlags(nil); def.natsServer != defaultNATSServer || def.interleave || def.params["cluster-failover"].Kills != 20 {
		t.Errorf("cluster defaults: %+v", def)
	}
	for _, bad := range [][]string{{"--rounds", "0"}, {"stray"}, {"--fg.jobs", "3"}, {"--cluster-bg.kills", "3"}} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("parseFlags(%q) accepted", bad)
		}
	}
}

// TestCeilingEndToEnd builds the bench and runs the ceiling scenarios for a
// moment: the binary must start itself as the echo server, run only the
// echo scenarios against it, and print their rows.
func TestCeilingEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the bench; skipped with -short")
	}
	bin := filepath.Join(t.TempDir(), "switchyard-bench")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "--scenarios", "ceiling,ceiling-sync", "--gearmand", "none", "--out", "",
		"--ceiling.duration", "300ms", "--ceiling.warmup", "50ms",
		"--ceiling-sync.duration", "300ms", "--ceiling-sync.warmup", "50ms")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	for _, row := range []string{"| ceiling | echo |", "| ceiling-sync | echo |"} {
		if !strings.Contains(string(out), row) {
			t.Errorf("no %q row in:\n%s", row, out)
		}
	}
	if strings.Contains(string(out), "| switchyard |") {
		t.Errorf("switchyard ran an echo scenario:\n%s", out)
	}
}

// TestPeriodicNeedsTheFlag: against a switchyard without --periodic-listen,
// --controller-socket or --dwork-listen (here: a binary that is not a
// server at all) a Periodic, controller or dwork scenario is an error row,
// not a crash, and no gearmand row.
func TestPeriodicNeedsTheFlag(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the bench; skipped with -short")
	}
	bin := filepath.Join(t.TempDir(), "switchyard-bench")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	truePath, err := exec.LookPath("true")
	if err != nil {
		t.Skip(err)
	}
	cmd := exec.Command(bin, "--scenarios", "periodic-submit,controller,dwork-wide,mixed", "--switchyard", truePath, "--out", "")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	for _, want := range []string{"| periodic-submit | switchyard |", "has no --periodic-listen", "| controller | switchyard |", "has no --controller-socket",
		"| dwork-wide | switchyard |", "has no --dwork-listen", "| mixed | switchyard |"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "| gearmand |") {
		t.Errorf("gearmand ran a Periodic, controller, dwork or mixed scenario:\n%s", out)
	}
}

func TestDurableArgs(t *testing.T) {
	sy := []string{"-L", "127.0.0.1", "-p", "0", "-q", "builtin", "--periodic-listen", "off"}
	if got, want := durableArgs("switchyard", sy, "/d"), []string{"-L", "127.0.0.1", "-p", "0", "--periodic-listen", "off", "-q", "durable", "--data-dir", "/d"}; !slices.Equal(got, want) {
		t.Errorf("switchyard: %q, want %q", got, want)
	}
	if sy[4] != "-q" {
		t.Error("durableArgs changed its argument")
	}
	gd := []string{"-L", "127.0.0.1", "-p", "0"}
	if got, want := durableArgs("gearmand", gd, "/d"), []string{"-L", "127.0.0.1", "-p", "0", "-q", "libsqlite3", "--libsqlite3-db", "/d/queue.db"}; !slices.Equal(got, want) {
		t.Errorf("gearmand: %q, want %q", got, want)
	}
}

// TestDurableRestartEndToEnd builds switchyard and the bench and runs
// queue-1m-durable with a small queue: between the fill and the drain the
// server is killed and restarted on its data, the row reports how long the
// restart took, and the drain finds every acknowledged job (a missing one
// would leave it waiting, and the row would be an error). The record and
// the row carry the queue's last tenth against its first and its RSS.
func TestDurableRestartEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the bench and the server; skipped with -short")
	}
	dir := t.TempDir()
	bin, server := buildBoth(t, dir)
	results := filepath.Join(dir, "results")
	out, stderr, rec := runBench(t, bin, results, "--scenarios", "queue-1m-durable", "--switchyard", server, "--gearmand", "none",
		"--queue-1m-durable.jobs", "3000", "--queue-1m-durable.clients", "2", "--queue-1m-durable.workers", "2",
		"--queue-1m-durable.settle", "10ms", "--queue-1m-durable.timeout", "1m")
	row := ""
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "| queue-1m-durable | switchyard |") {
			row = l
		}
	}
	if row == "" || strings.Contains(row, "error") || !strings.Contains(row, " restart ") || !strings.Contains(row, " drain ") {
		t.Errorf("no queue-1m-durable row with a restart and a drain, and no error, in:\n%s\n%s", out, stderr)
	}
	t.Log(row)
	run := rec.Find("queue-1m-durable", "switchyard", 1)
	if run == nil || run.LastVsFirst10 <= 0 || run.RSSMB <= 0 || run.Extra["rss_idle_mb"] <= 0 {
		t.Fatalf("queue-1m-durable's record: %+v", run)
	}
	// The row shows them where the header says.
	cells := strings.Split(row, " | ")
	header := strings.Split(strings.Split(string(out), "\n")[0], " | ")
	for name, want := range map[string]string{"last/first 10%": record.FormatTenths(run.LastVsFirst10),
		"RSS B/job": record.FormatBytes(run.RSSBytesPerJob), "RSS MB": fmt.Sprintf("%.1f", run.RSSMB)} {
		i := slices.Index(header, name)
		if i < 0 || i >= len(cells) || cells[i] != want {
			t.Errorf("column %q (%d): row %q, want %q", name, i, row, want)
		}
	}
}

// TestMixedEndToEnd builds switchyard and the bench and runs ceiling, fg and
// mixed for a moment: switchyard gets every listener, each on its own
// loopback address, and the record has fg's fraction of the ceiling, CPU
// per job, and mixed's parts.
func TestMixedEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the bench and the server; skipped with -short")
	}
	dir := t.TempDir()
	bin, server := buildBoth(t, dir)
	results := filepath.Join(dir, "results")
	out, _, rec := runBench(t, bin, results, "--scenarios", "ceiling,fg,mixed", "--switchyard", server, "--gearmand", "none",
		"--ceiling.duration", "500ms", "--ceiling.warmup", "100ms", "--fg.duration", "500ms", "--fg.warmup", "100ms",
		"--mixed.duration", "500ms", "--mixed.warmup", "100ms", "--mixed.jobs", "300", "--mixed.pulse", "200ms")
	ceiling, fg, mixed := rec.Find("ceiling", "echo", 1), rec.Find("fg", "switchyard", 1), rec.Find("mixed", "switchyard", 1)
	if ceiling == nil || fg == nil || mixed == nil {
		t.Fatalf("runs missing from the record:\n%s", out)
	}
	for _, run := range []*record.Run{ceiling, fg, mixed} {
		if run.Error != "" || run.LoadCPUPerJob <= 0 {
			t.Errorf("%s: error %q, load generator CPU per job %v", run.Scenario, run.Error, run.LoadCPUPerJob)
		}
	}
	if want := fg.JobsPerSec / ceiling.JobsPerSec; fg.OfCeiling != want || ceiling.OfCeiling != 0 || mixed.OfCeiling != 0 {
		t.Errorf("of ceiling: fg %v (want %v), ceiling %v, mixed %v", fg.OfCeiling, want, ceiling.OfCeiling, mixed.OfCeiling)
	}
	if len(mixed.Parts) != 6 {
		t.Errorf("mixed has %d parts, want 6: %+v", len(mixed.Parts), mixed.Parts)
	}
	// mixed ran, so the server had every listener, each TCP one on a
	// loopback address of its own; its parts are printed under the rows.
	for _, want := range []string{"| load | alone jobs/s |", "| memodb |", "| dwork |"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
}

// TestPairedCurveEndToEnd runs fg-curve for a moment on switchyard and
// gearmand at once, two rounds: both servers' curves are in the record,
// step for step at the same rates, their steps taken in turn, each
// server first at every other step; every step keeps its histogram, and
// the output sets the pooled steps side by side.
func TestPairedCurveEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the bench and the servers; skipped with -short")
	}
	const gearmand = "/usr/sbin/gearmand"
	if _, err := os.Stat(gearmand); err != nil {
		if os.Getenv("SWITCHYARD_E2E_REQUIRED") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	dir := t.TempDir()
	bin, server := buildBoth(t, dir)
	results := filepath.Join(dir, "results")
	// From 20,000 jobs/s, 1.15x a step passes both servers here within
	// a few steps; a step is 150 ms.
	out, stderr, rec := runBench(t, bin, results, "--scenarios", "fg-curve", "--switchyard", server, "--gearmand", gearmand, "--rounds", "2",
		"--fg-curve.rate", "20000", "--fg-curve.clients", "2", "--fg-curve.workers", "2",
		"--fg-curve.duration", "150ms", "--fg-curve.warmup", "50ms")
	for round := 1; round <= 2; round++ {
		sy, gd := rec.Find("fg-curve", "switchyard", round), rec.Find("fg-curve", "gearmand", round)
		if sy == nil || gd == nil || sy.Error != "" || gd.Error != "" {
			t.Fatalf("round %d: switchyard %+v, gearmand %+v\n%s", round, sy, gd, stderr)
		}
		n := min(len(sy.Curve), len(gd.Curve))
		if n < 2 {
			t.Fatalf("round %d: curves of %d and %d steps", round, len(sy.Curve), len(gd.Curve))
		}
		for i := range n {
			a, b := sy.Curve[i], gd.Curve[i]
			if a.Offered != b.Offered || a.Histogram == "" || b.Histogram == "" || a.Start.IsZero() || b.Start.IsZero() {
				t.Errorf("round %d step %d: %v and %v jobs/s, histograms %t %t, starts %v %v", round, i,
					a.Offered, b.Offered, a.Histogram != "", b.Histogram != "", a.Start, b.Start)
			}
			// Each step on one server, then on the other: switchyard
			// first in round 1, gearmand in round 2, at every step (so
			// that the servers strictly alternate); the next step after
			// both.
			if (round == 1) != a.Start.Before(b.Start) {
				t.Errorf("round %d step %d: switchyard's began %v, gearmand's %v: not in turn", round, i, a.Start, b.Start)
			}
			if i+1 < n && (sy.Curve[i+1].Start.Before(b.Start) || gd.Curve[i+1].Start.Before(a.Start)) {
				t.Errorf("round %d: step %d began before step %d was over on both servers", round, i+1, i)
			}
		}
	}
	if !strings.Contains(string(out), "| fg-curve, pooled over rounds | gearmand sustained | switchyard sustained |") {
		t.Errorf("no pooled table in:\n%s", out)
	}
}

// buildBoth builds the bench and the server into dir.
func buildBoth(t *testing.T, dir string) (bin, server string) {
	t.Helper()
	bin, server = filepath.Join(dir, "switchyard-bench"), filepath.Join(dir, "switchyard")
	for _, b := range [][2]string{{bin, "."}, {server, "switchyard/cmd/switchyard"}} {
		if out, err := exec.Command("go", "build", "-o", b[0], b[1]).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", b[1], err, out)
		}
	}
	return bin, server
}

// runBench runs the bench with args and --out results, fails the test if
// it fails, and returns its output, its stderr and the one record it
// wrote.
func runBench(t *testing.T, bin, results string, args ...string) (out []byte, stderr string, rec *record.Record) {
	t.Helper()
	cmd := exec.Command(bin, append(args, "--out", results)...)
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v\n%s\n%s", err, out, errOut.String())
	}
	paths, err := filepath.Glob(filepath.Join(results, "*.json"))
	if err != nil || len(paths) != 1 {
		t.Fatalf("records %v, %v; want one\n%s", paths, err, errOut.String())
	}
	if rec, err = record.Read(paths[0]); err != nil {
		t.Fatal(err)
	}
	return out, errOut.String(), rec
}
