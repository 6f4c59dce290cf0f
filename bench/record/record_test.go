package record

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

func TestSummarize(t *testing.T) {
	tests := []struct {
		name   string
		values []int64 // microseconds, each recorded once
		want   Latency
	}{
		{"empty", nil, Latency{}},
		{"one value", []int64{250}, Latency{Count: 1, Mean: 250, P50: 250, P99: 250, P999: 250, Max: 250}},
		{"1..1000", seq(1, 1000), Latency{Count: 1000, Mean: 500.5, P50: 500, P99: 990, P999: 999, Max: 1000}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := hdrhistogram.New(1, 60_000_000, 3)
			for _, v := range tt.values {
				if err := h.RecordValue(v); err != nil {
					t.Fatal(err)
				}
			}
			if got := Summarize(h); got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
	if got := Summarize(nil); got != (Latency{}) {
		t.Errorf("Summarize(nil) = %+v", got)
	}
}

func TestSummarizeOutlier(t *testing.T) {
	// 999 fast jobs and one slow one: p99 stays fast, max and p99.9 do not.
	h := hdrhistogram.New(1, 60_000_000, 3)
	h.RecordValues(100, 999)
	h.RecordValue(2_000_000)
	got := Summarize(h)
	if got.P50 != 100 || got.P99 != 100 || got.P999 != 100 || got.Max < 1_999_000 {
		t.Errorf("got %+v", got)
	}
	h.RecordValue(2_000_000) // 2 of 1001: now above the 99.9th percentile
	if got := Summarize(h); got.P999 < 1_999_000 {
		t.Errorf("p99.9 = %d with 2 slow jobs of 1001", got.P999)
	}
}

func seq(from, to int64) []int64 {
	var s []int64
	for v := from; v <= to; v++ {
		s = append(s, v)
	}
	return s
}

func sampleRecord() *Record {
	return &Record{
		Schema:  SchemaVersion,
		Time:    time.Date(2026, 11, 22, 17, 4, 5, 0, time.UTC),
		Commit:  "05b35ed-dirty",
		Command: []string{"bin/switchyard-bench", "--quick"},
		Quick:   true,
		Machine: Machine{Hostname: "h", NumCPU: 2, CPUModel: "AMD EPYC", Kernel: "6.1", MemoryMB: 24105, GoVersion: "go1.26"},
		LoadAvg: []float64{0.25, 1.5},
		Servers: []Server{{Name: "switchyard", Path: "bin/switchyard", Version: "switchyard 0.1.0", Args: []string{"-p", "PORT"}}},
		Runs: []Run{
			{Scenario: "fg", Server: "switchyard", Round: 1, Params: map[string]string{"clients": "4"},
				Jobs: 90000, Seconds: 3, JobsPerSec: 30000,
				Latency: Latency{Count: 90000, Mean: 2100.5, P50: 2000, P99: 5000, P999: 8000, Max: 12000},
				RSSMB:   12.5, PeakRSSMB: 13, CPUSeconds: 2.9, LoadCPU: 3.1,
				ServerCPUPerJob: 31.3, LoadCPUPerJob: 40.5, OfCeiling: 0.62},
			{Scenario: "fg", Server: "gearmand", Round: 1, Jobs: 45000, Seconds: 3, JobsPerSec: 15000,
				Latency: Latency{Count: 45000, P50: 4000, P99: 10000, P999: 12000, Max: 15000}, RSSMB: 11, CPUSeconds: 3.9,
				ServerCPUPerJob: 62.5, LoadCPUPerJob: 41, OfCeiling: 0.3125},
			{Scenario: "queue-1m", Server: "switchyard", Round: 1, JobsPerSec: 200000, RSSMB: 42.25,
				LastVsFirst10: 0.954, RSSBytesPerJob: 236.6,
				Extra: map[string]float64{"drain_jobs_per_s": 40000, "rss_full_mb": 42.25, "drain_s": 2.5},
				Error: "drain: 10 of 20 jobs\ndone | late"},
			{Scenario: "mixed", Server: "switchyard", Round: 1, Jobs: 3000, Seconds: 2, JobsPerSec: 1500, ServerCPUPerJob: 120, LoadCPUPerJob: 200,
				Parts: []Part{
					{Name: "gearman-fg", Alone: Share{Jobs: 4000, JobsPerSec: 2000, Latency: Latency{Count: 4000, P99: 900}, ServerCPUPerJob: 25, LoadCPUPerJob: 30},
						Mixed: Share{Jobs: 1000, JobsPerSec: 500, Latency: Latency{Count: 1000, P99: 2500}}},
					{Name: "dwork", Alone: Share{JobsPerSec: 0}, Mixed: Share{Jobs: 2000, JobsPerSec: 1000}},
				}},
		},
	}
}

func TestWriteReadRoundTrip(t *testing.T) {
	dir := t.TempDir()
	rec := sampleRecord()
	path, err := rec.Write(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "20261122T170405Z-05b35ed-dirty.json"); path != want {
		t.Errorf("path %q, want %q", path, want)
	}
	got, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, rec) {
		t.Errorf("round trip changed the record:\ngot  %+v\nwant %+v", got, rec)
	}

	older := sampleRecord()
	older.Time = rec.Time.Add(-time.Hour)
	older.Commit = "1234567"
	if _, err := older.Write(dir); err != nil {
		t.Fatal(err)
	}
	all, err := ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[0].Commit != "1234567" || all[1].Commit != "05b35ed-dirty" {
		t.Errorf("ReadDir did not return both records oldest first: %v", all)
	}
}

func TestMarkdown(t *testing.T) {
	md := sampleRecord().Markdown()
	lines := strings.Split(strings.TrimSpace(md), "\n")
	if len(lines) != 2+4+1+1+1+2+2 {
		t.Fatalf("want a header, a separator, 4 rows, then the parts' line and table, got:\n%s", md)
	}
	if want := "| scenario | server | server CPU µs/job | load CPU µs/job | of ceiling | jobs/s |"; !strings.HasPrefix(lines[0], want) {
		t.Errorf("header %s, want it to lead with %s", lines[0], want)
	}
	if want := "| RSS MB | RSS B/job | last/first 10% | CPU s |"; !strings.Contains(lines[0], want) {
		t.Errorf("header %s, want a queue's RSS per job and last tenth against its first beside its RSS: %s", lines[0], want)
	}
	wantRows := []string{
		"| fg | switchyard | 31.3 | 40.5 | 62% | 30.0k | 2.00ms | 5.00ms | 8.00ms | 12.0ms | 12.5 |  |  | 2.90 | 2.00x jobs/s, 0.50x p99, 0.50x cpu/job |  |",
		"| fg | gearmand | 62.5 | 41.0 | 31% | 15.0k | 4.00ms | 10.0ms | 12.0ms | 15.0ms | 11.0 |  |  | 3.90 |  |  |",
		"| queue-1m | switchyard | - | - |  | 200k | - | - | - | - | 42.2 | 237 | 0.95x | 0.00 |  | **error**: drain: 10 of 20 jobs done \\| late drain 40.0k/s, drain 2.50 s, rss full 42.2 MB |",
		"| mixed | switchyard | 120 | 200 |  | 1.50k | - | - | - | - | 0.0 |  |  | 0.00 |  |  |",
		"",
		"`mixed` on switchyard, round 1: each load alone, then all at once",
		"",
		"| load | alone jobs/s | mixed jobs/s | mixed vs alone | alone p99 | mixed p99 | alone server CPU µs/job | alone load CPU µs/job |",
		"|---|--:|--:|--:|--:|--:|--:|--:|",
		"| gearman-fg | 2.00k | 500 | 25% | 900µs | 2.50ms | 25.0 | 30.0 |",
		"| dwork | 0 | 1.00k |  | - | - | - | - |",
	}
	for i, want := range wantRows {
		if lines[2+i] != want {
			t.Errorf("line %d:\ngot  %s\nwant %s", 2+i, lines[2+i], want)
		}
	}
}

func TestReadUpgradesSchema1(t *testing.T) {
	// A schema 1 record kept CPU per job in Extra, for the scenarios that
	// measured it; it must read as a current one does.
	dir := t.TempDir()
	old := `{"schema": 1, "time": "2026-11-23T12:53:41Z", "commit": "fab558e", "runs": [
	  {"scenario": "periodic-run", "server": "switchyard", "round": 1, "jobs_per_s": 215000, "cpu_s": 10.7,
	   "extra": {"cpu_us_per_job": 4.58, "load_cpu_us_per_job": 4.0, "submit_p99_ms": 1.89}},
	  {"scenario": "controller-pulses", "server": "switchyard", "round": 1, "jobs_per_s": 1000,
	   "extra": {"cpu_us_per_pulse": 12.5, "load_cpu_us_per_pulse": 30}},
	  {"scenario": "fg", "server": "gearmand", "round": 1, "jobs_per_s": 15100, "cpu_s": 24}]}`
	path := filepath.Join(dir, "old.json")
	if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []Run{
		{Scenario: "periodic-run", Server: "switchyard", Round: 1, JobsPerSec: 215000, CPUSeconds: 10.7,
			ServerCPUPerJob: 4.58, LoadCPUPerJob: 4, Extra: map[string]float64{"submit_p99_ms": 1.89}},
		{Scenario: "controller-pulses", Server: "switchyard", Round: 1, JobsPerSec: 1000, ServerCPUPerJob: 12.5, LoadCPUPerJob: 30},
		{Scenario: "fg", Server: "gearmand", Round: 1, JobsPerSec: 15100, CPUSeconds: 24},
	}
	if got.Schema != SchemaVersion || !reflect.DeepEqual(got.Runs, want) {
		t.Errorf("read schema %d, runs\n%+v\nwant schema %d, runs\n%+v", got.Schema, got.Runs, SchemaVersion, want)
	}
	// A current record's extras are left alone, whatever their names.
	cur := sampleRecord()
	cur.Runs[0].Extra = map[string]float64{"cpu_us_per_job": 1}
	if path, err = cur.Write(dir); err != nil {
		t.Fatal(err)
	}
	if got, err := Read(path); err != nil || got.Runs[0].Extra["cpu_us_per_job"] != 1 || got.Runs[0].ServerCPUPerJob != 31.3 {
		t.Errorf("a schema %d record changed on reading: %+v, %v", SchemaVersion, got.Runs[0], err)
	}
}

// TestReadUpgradesSchema2: schema 2 kept a queue's last tenth against
// its first as a percentage and its RSS per job in Extra; they read as
// the Run fields they are now, and the other extras stay.
func TestReadUpgradesSchema2(t *testing.T) {
	dir := t.TempDir()
	old := `{"schema": 2, "time": "2026-11-23T19:43:38Z", "commit": "db465ef", "runs": [
	  {"scenario": "queue-1m", "server": "switchyard", "round": 1, "jobs_per_s": 477000, "rss_mb": 259.1,
	   "extra": {"last10_vs_first10_pct": 63, "rss_full_mb": 259.1, "submit_first10_jobs_per_s": 238000}},
	  {"scenario": "periodic-delayed-1m", "server": "switchyard", "round": 1, "jobs_per_s": 240000,
	   "extra": {"last_vs_first_step_pct": 101, "rss_bytes_per_job": 435}},
	  {"scenario": "fg", "server": "switchyard", "round": 1, "jobs_per_s": 20000, "server_cpu_us_per_job": 40,
	   "extra": {"cpu_us_per_job": 1}}]}`
	path := filepath.Join(dir, "old.json")
	if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []Run{
		{Scenario: "queue-1m", Server: "switchyard", Round: 1, JobsPerSec: 477000, RSSMB: 259.1, LastVsFirst10: 0.63,
			Extra: map[string]float64{"rss_full_mb": 259.1, "submit_first10_jobs_per_s": 238000}},
		{Scenario: "periodic-delayed-1m", Server: "switchyard", Round: 1, JobsPerSec: 240000, LastVsFirst10: 1.01, RSSBytesPerJob: 435},
		// Moved at schema 1 only: a schema 2 record's extra of that name is its own.
		{Scenario: "fg", Server: "switchyard", Round: 1, JobsPerSec: 20000, ServerCPUPerJob: 40, Extra: map[string]float64{"cpu_us_per_job": 1}},
	}
	if got.Schema != SchemaVersion || !reflect.DeepEqual(got.Runs, want) {
		t.Errorf("read schema %d, runs\n%+v\nwant schema %d, runs\n%+v", got.Schema, got.Runs, SchemaVersion, want)
	}
}

func TestFormat(t *testing.T) {
	tests := []struct{ got, want string }{
		{FormatRate(950), "950"},
		{FormatRate(12345), "12.3k"},
		{FormatRate(1_250_000), "1.25M"},
		{FormatRate(0.5), "0.50"},
		{FormatRate(0), "0"},
		{FormatMicros(0), "-"},
		{FormatMicros(85), "85µs"},
		{FormatMicros(1234), "1.23ms"},
		{FormatMicros(65_200), "65.2ms"},
		{FormatMicros(2_500_000), "2.50s"},
		{FormatRatio(0.314), "0.31x"},
		{FormatRatio(12.46), "12.5x"},
		{FormatRatio(140.2), "140x"},
		{Compare(Figures{30000, 5000, 0}, Figures{15000, 10000, 0}), "2.00x jobs/s, 0.50x p99"},
		{Compare(Figures{30000, 0, 0}, Figures{15000, 10000, 0}), "2.00x jobs/s"},
		{Compare(Figures{30000, 5000, 20}, Figures{0, 0, 40}), "0.50x cpu/job"},
		{Compare(Figures{30000, 5000, 20}, Figures{15000, 10000, 0}), "2.00x jobs/s, 0.50x p99"},
		{FormatCPU(0), "-"},
		{FormatCPU(3.634), "3.63"},
		{FormatCPU(1234.4), "1234"},
		{FormatBytes(0), ""},
		{FormatBytes(236.6), "237"},
		{FormatTenths(0), ""},
		{FormatTenths(0.954), "0.95x"},
		{FormatTenths(1.32), "1.32x"},
		{FormatShare(0), ""},
		{FormatShare(0.644), "64%"},
		{FormatShare(1.2), "120%"},
		{FormatExtra(map[string]float64{"idle_conns": 10000, "open_conns_s": 1.284, "rss_idle_mb": 20.61}), "idle conns 10000, open conns 1.28 s, rss idle 20.6 MB"},
		{FormatExtra(map[string]float64{"of_bg_durable_pct": 41.26, "vs_jetstream_x": 1.514, "vs_jetstream_p99_x": 0.5}), "of bg durable 41%, vs jetstream p99 0.50x, vs jetstream 1.51x"},
		{FormatExtra(nil), ""},
		{FormatExtra(map[string]float64{"pacer_lag_p99_us": 1500, "offered_jobs_per_s": 4000}), "offered 4.00k/s, pacer lag p99 1.50ms"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

func TestLabelAndScenarios(t *testing.T) {
	rec := sampleRecord()
	if got, want := rec.Label(), "2026-11-22 17:04 05b35ed-dirty (quick)"; got != want {
		t.Errorf("Label() = %q, want %q", got, want)
	}
	if got := rec.Scenarios(); !reflect.DeepEqual(got, []string{"fg", "queue-1m", "mixed"}) {
		t.Errorf("Scenarios() = %q", got)
	}
	if rec.Find("fg", "gearmand", 1) == nil || rec.Find("fg", "gearmand", 2) != nil {
		t.Error("Find does not match scenario, server and round")
	}
}

func TestBusy(t *testing.T) {
	tests := []struct {
		cpus int
		load []float64
		want bool
	}{
		{2, nil, false},
		{2, []float64{0.3, 1.5}, false},
		{2, []float64{1.6, 0.2}, true},
		{8, []float64{4, 5.9}, false},
		{0, []float64{0.9}, true}, // CPUs unknown: one
	}
	for _, tt := range tests {
		r := &Record{Machine: Machine{NumCPU: tt.cpus}, LoadAvg: tt.load}
		if got := r.Busy(); got != tt.want {
			t.Errorf("%d CPUs, load %v: Busy() = %v, want %v", tt.cpus, tt.load, got, tt.want)
		}
	}
}

func TestMachineParsing(t *testing.T) {
	cpuinfo := "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\nflags\t\t: fpu\n\nprocessor\t: 1\nmodel name\t: AMD EPYC 7B13\n"
	if got := cpuModel(strings.NewReader(cpuinfo)); got != "AMD EPYC 7B13" {
		t.Errorf("cpuModel = %q", got)
	}
	if got := cpuModel(strings.NewReader("processor : 0\n")); got != "" {
		t.Errorf("cpuModel without a model name = %q", got)
	}
	for in, want := range map[string]float64{"0.52 0.58 0.59 1/467 12345\n": 0.52, "12.75 3 1 2/3 4": 12.75, "": -1, "x 1 2": -1} {
		if got := parseLoadAvg(in); got != want {
			t.Errorf("parseLoadAvg(%q) = %v, want %v", in, got, want)
		}
	}
	if got := LoadAvg(); got < 0 {
		t.Errorf("LoadAvg() = %v: /proc/loadavg unread", got)
	}
	meminfo := "MemTotal:       24683520 kB\nMemFree:        23968000 kB\n"
	if got := memTotalMB(strings.NewReader(meminfo)); got != 24105 {
		t.Errorf("memTotalMB = %d", got)
	}
}

func TestGitCommitDirty(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"}, args...)...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q")
	os.WriteFile(filepath.Join(dir, "a"), []byte("a"), 0o644)
	git("add", "a")
	git("commit", "-qm", "a")
	// Results written outside the tree: nothing to exclude, and clean.
	if got := GitCommit(dir, t.TempDir()); strings.HasSuffix(got, "-dirty") || got == "unknown" {
		t.Errorf("a clean tree with results elsewhere: %q", got)
	}
	os.MkdirAll(filepath.Join(dir, "results"), 0o755)
	os.WriteFile(filepath.Join(dir, "results", "r.json"), []byte("{}"), 0o644)
	for _, out := range []string{"results", filepath.Join(dir, "results"), ""} {
		got := GitCommit(dir, out)
		if wantDirty := out == ""; strings.HasSuffix(got, "-dirty") != wantDirty || got == "unknown" {
			t.Errorf("GitCommit with results in %q = %q, want dirty %v", out, got, wantDirty)
		}
	}
	os.WriteFile(filepath.Join(dir, "a"), []byte("changed"), 0o644)
	if got := GitCommit(dir, t.TempDir()); !strings.HasSuffix(got, "-dirty") {
		t.Errorf("a changed file with results elsewhere: %q, want dirty", got)
	}
}
