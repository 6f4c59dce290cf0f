// Package record is the result of one benchmark run as it is stored
// (bench/results/<UTC time>-<commit>.json) and printed (a markdown table).
package record

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// SchemaVersion is bumped when a field changes meaning, so that the report
// can tell old records from new ones. 2: the server's and the load
// generator's CPU per job are Run fields; schema 1 kept them, for some
// scenarios, in Extra (Read moves them). 3: so are a queue's last tenth
// against its first and its RSS per job, which schema 2 kept in Extra as
// percentages ("last10_vs_first10_pct", periodic-delayed-1m's
// "last_vs_first_step_pct") and "rss_bytes_per_job" (Read moves them).
const SchemaVersion = 3

// Record is one invocation of the bench command.
type Record struct {
	Schema  int       `json:"schema"`
	Time    time.Time `json:"time"`   // start of the run, UTC
	Commit  string    `json:"commit"` // short hash, "-dirty" appended if the tree had changes
	Command []string  `json:"command"`
	Quick   bool      `json:"quick"`
	Machine Machine   `json:"machine"`
	// LoadAvg is the machine's 1-minute load average when the run began
	// and when it ended (/proc/loadavg): well above nothing, other work
	// shared the CPUs with the servers and the load generator.
	LoadAvg []float64 `json:"load_avg,omitempty"`
	Servers []Server  `json:"servers"`
	Runs    []Run     `json:"runs"`
}

// Machine is where the run happened.
type Machine struct {
	Hostname  string `json:"hostname"`
	NumCPU    int    `json:"nproc"`
	CPUModel  string `json:"cpu_model"`
	Kernel    string `json:"kernel"`
	MemoryMB  int64  `json:"memory_mb"`
	GoVersion string `json:"go_version"`
}

// Server is one server binary under test.
type Server struct {
	Name    string `json:"name"`
	Path    string `json:"path"`
	Version string `json:"version"`
	// Args as run ("-p 0": the kernel picks the port; older records have
	// PORT there). switchyard's end in "--periodic-listen off" (and, since
	// the Worker–Controller scenarios, "--controller-socket off", since
	// the MemoDB one "--memodb-listen off", since the metrics
	// "--metrics-listen off") for the Gearman scenarios; its
	// Periodic scenarios have tcp://127.0.0.1:0, its controller ones a
	// main.sock in a fresh directory, its MemoDB one tcp://127.0.0.1:0.
	// Since schema 2 each protocol has a loopback address of its own
	// (Periodic 127.0.0.2, dwork 127.0.0.3, MemoDB 127.0.0.4), so that the
	// mixed scenario's server, with them all on, tells its ports apart.
	Args []string `json:"args"`
}

// Run is one scenario against one server.
type Run struct {
	Scenario string            `json:"scenario"`
	Server   string            `json:"server"`
	Round    int               `json:"round"` // 1-based repetition
	Params   map[string]string `json:"params"`

	Jobs       int64   `json:"jobs"`        // jobs measured
	Seconds    float64 `json:"seconds"`     // measured time
	JobsPerSec float64 `json:"jobs_per_s"`  // the scenario's headline rate
	Latency    Latency `json:"latency_us"`  // per job, see the scenario for what is timed
	RSSMB      float64 `json:"rss_mb"`      // server RSS at the end of the load
	PeakRSSMB  float64 `json:"peak_rss_mb"` // server's RSS high-water mark
	CPUSeconds float64 `json:"cpu_s"`       // server CPU (user+sys) during the scenario
	LoadCPU    float64 `json:"load_cpu_s"`  // the load generator's own CPU during the scenario

	// ServerCPUPerJob is the server's user+system time per job, µs, and
	// LoadCPUPerJob the load generator's (this process's), over the
	// stretch whose jobs JobsPerSec counts; 0 when not measured.
	ServerCPUPerJob float64 `json:"server_cpu_us_per_job,omitempty"`
	LoadCPUPerJob   float64 `json:"load_cpu_us_per_job,omitempty"`
	// OfCeiling is JobsPerSec over that of the echo scenario that bounds
	// it (Scenario.Ceiling) in the same record and round; 0 when the run
	// has no such bound or the record no such run.
	OfCeiling float64 `json:"of_ceiling,omitempty"`
	// For the scenarios that fill a large queue (queue-1m,
	// queue-1m-durable, periodic-delayed-1m): LastVsFirst10 is the submit
	// rate of the last tenth of the jobs over that of the first (below 1,
	// a job cost more the longer the queue), and RSSBytesPerJob the
	// server's RSS with the queue full, less its RSS before the fill, over
	// the jobs queued: what a queued job costs in memory. 0 when not
	// measured.
	LastVsFirst10  float64 `json:"last10_vs_first10,omitempty"`
	RSSBytesPerJob float64 `json:"rss_bytes_per_job,omitempty"`
	// Parts are the loads of a run that puts several on the server at
	// once (the mixed scenario), each alone and with the others.
	Parts []Part `json:"parts,omitempty"`
	// Curve is a latency–throughput curve (fg-curve): one step per
	// offered rate, from well under saturation to past it.
	Curve []Step `json:"curve,omitempty"`
	// Nodes are the server processes of a run that gives each a CPU
	// budget (cluster-scale), each with what it got of the machine.
	Nodes []Node `json:"nodes,omitempty"`

	// Extra holds scenario-specific figures, e.g. "drain_jobs_per_s".
	Extra map[string]float64 `json:"extra,omitempty"`
	// Error is set when the run failed; the figures are then partial.
	Error string `json:"error,omitempty"`
}

// Part is one load of a run that puts several on one server: its figures
// with the server to itself and with the other loads at the same time.
type Part struct {
	Name  string `json:"name"`
	Alone Share  `json:"alone"`
	Mixed Share  `json:"mixed"`
}

// Share is one part's figures over one measured stretch.
type Share struct {
	Jobs       int64   `json:"jobs"`
	JobsPerSec float64 `json:"jobs_per_s"`
	Latency    Latency `json:"latency_us"`
	// The server's and the load generator's CPU per job, µs: alone only,
	// as a process's CPU cannot be told apart by load.
	ServerCPUPerJob float64 `json:"server_cpu_us_per_job,omitempty"`
	LoadCPUPerJob   float64 `json:"load_cpu_us_per_job,omitempty"`
}

// Latency is a summary of an HDR histogram, in microseconds.
type Latency struct {
	Count int64   `json:"count"`
	Mean  float64 `json:"mean"`
	P50   int64   `json:"p50"`
	P99   int64   `json:"p99"`
	P999  int64   `json:"p99_9"`
	Max   int64   `json:"max"`
}

// Summarize summarizes a histogram recorded in microseconds.
func Summarize(h *hdrhistogram.Histogram) Latency {
	if h == nil || h.TotalCount() == 0 {
		return Latency{}
	}
	return Latency{
		Count: h.TotalCount(),
		Mean:  h.Mean(),
		P50:   h.ValueAtQuantile(50),
		P99:   h.ValueAtQuantile(99),
		P999:  h.ValueAtQuantile(99.9),
		Max:   h.Max(),
	}
}

// FileName is the record's name in the results directory:
// 20060102T150405Z-<commit>.json.
func (r *Record) FileName() string {
	return r.Time.UTC().Format("20060102T150405Z") + "-" + r.Commit + ".json"
}

// Write stores the record in dir and returns the file's path.
func (r *Record) Write(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, r.FileName())
	return path, os.WriteFile(path, append(data, '\n'), 0o644)
}

// Read loads one record.
func Read(path string) (*Record, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Record
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	r.upgrade()
	return &r, nil
}

// movedFromExtra are the Extra keys in which older schemas kept figures
// that are now Run fields: below which schema, the field each fills, and
// how many of the old unit make the new.
var movedFromExtra = []struct {
	below int
	key   string
	dst   func(*Run) *float64
	per   float64
}{
	{2, "cpu_us_per_job", func(r *Run) *float64 { return &r.ServerCPUPerJob }, 1},
	{2, "load_cpu_us_per_job", func(r *Run) *float64 { return &r.LoadCPUPerJob }, 1},
	{2, "cpu_us_per_pulse", func(r *Run) *float64 { return &r.ServerCPUPerJob }, 1},
	{2, "load_cpu_us_per_pulse", func(r *Run) *float64 { return &r.LoadCPUPerJob }, 1},
	{3, "last10_vs_first10_pct", func(r *Run) *float64 { return &r.LastVsFirst10 }, 100},
	{3, "last_vs_first_step_pct", func(r *Run) *float64 { return &r.LastVsFirst10 }, 100},
	{3, "rss_bytes_per_job", func(r *Run) *float64 { return &r.RSSBytesPerJob }, 1},
}

// upgrade brings an older record to the current schema, so that the report
// reads every record alike.
func (r *Record) upgrade() {
	if r.Schema >= SchemaVersion {
		return
	}
	for i := range r.Runs {
		run := &r.Runs[i]
		for _, m := range movedFromExtra {
			if v, ok := run.Extra[m.key]; ok && r.Schema < m.below {
				*m.dst(run) = v / m.per
				delete(run.Extra, m.key)
			}
		}
		if len(run.Extra) == 0 {
			run.Extra = nil
		}
	}
	r.Schema = SchemaVersion
}

// ReadDir loads every *.json record in dir, oldest first.
func ReadDir(dir string) ([]*Record, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	var records []*Record
	for _, p := range paths {
		r, err := Read(p)
		if err != nil {
			return nil, err
		}
		records = append(records, r)
	}
	slices.SortStableFunc(records, func(a, b *Record) int { return a.Time.Compare(b.Time) })
	return records, nil
}

// Find returns the run of scenario against server in the given round, or nil.
func (r *Record) Find(scenario, server string, round int) *Run {
	for i := range r.Runs {
		run := &r.Runs[i]
		if run.Scenario == scenario && run.Server == server && run.Round == round {
			return run
		}
	}
	return nil
}

// Scenarios lists the record's scenarios in the order they ran.
func (r *Record) Scenarios() []string {
	var names []string
	for _, run := range r.Runs {
		if !slices.Contains(names, run.Scenario) {
			names = append(names, run.Scenario)
		}
	}
	return names
}

// Busy reports whether other work shared the machine during the run: a
// load average, at its start or end, above three quarters of the CPUs.
func (r *Record) Busy() bool {
	for _, l := range r.LoadAvg {
		if l > 0.75*float64(max(r.Machine.NumCPU, 1)) {
			return true
		}
	}
	return false
}

// Label names the record in tables and charts: date, commit and mode.
func (r *Record) Label() string {
	s := r.Time.UTC().Format("2006-01-02 15:04") + " " + r.Commit
	if r.Quick {
		s += " (quick)"
	}
	return strings.TrimSpace(s)
}
