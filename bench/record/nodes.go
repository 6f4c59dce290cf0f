package record

import (
	"fmt"
	"strings"
)

// Node is one server process of a run that gives each a CPU budget of
// its own (cluster-scale), over the run's measured time.
type Node struct {
	Name string `json:"name"`
	// Role is what it was: a cluster node's "leader" or "follower", a
	// JetStream server's streams led, "seed".
	Role string `json:"role,omitempty"`
	// Quota is the CPUs its cgroup allowed; 0: none.
	Quota float64 `json:"quota_cpus,omitempty"`
	// CPUs is what it used: its user+system time over the measured time.
	CPUs float64 `json:"cpus"`
	// Throttled is the share of its quota's periods with work to run in
	// which it used up its quota and was held back.
	Throttled float64 `json:"throttled,omitempty"`
	// CPUPerJob is its CPU time per job measured, µs.
	CPUPerJob float64 `json:"cpu_us_per_job,omitempty"`
	// Short is set when it used materially less than its quota while the
	// machine had less than a quota's worth of CPU idle: the machine, not
	// the quota, may have set its pace.
	Short bool `json:"short,omitempty"`
}

// ShortOfQuota says whether a process that used cpus of its quota while
// the machine had idle CPUs left over got materially less than its quota
// (under 85%) for want of the machine: had the machine had a quota's
// worth idle, it could have taken more had it wanted to.
func ShortOfQuota(cpus, quota, idle float64) bool {
	return quota > 0 && cpus < 0.85*quota && idle < quota
}

// String is the node as NodesMarkdown shows it: name, role, CPU used of
// its quota, throttled share, CPU per job; a "*" marks it short.
func (n Node) String() string {
	var b strings.Builder
	b.WriteString(n.Name)
	if n.Role != "" {
		b.WriteString(" " + n.Role)
	}
	fmt.Fprintf(&b, " %.2f", n.CPUs)
	if n.Quota > 0 {
		fmt.Fprintf(&b, "/%.2f", n.Quota)
	}
	if n.Short {
		b.WriteString("*")
	}
	if n.Throttled > 0 {
		fmt.Fprintf(&b, " thr %s", FormatShare(n.Throttled))
	}
	if n.CPUPerJob > 0 {
		fmt.Fprintf(&b, " %sµs", FormatCPU(n.CPUPerJob))
	}
	return b.String()
}

// NodesMarkdown renders the runs that have Nodes, one row each, in the
// order they ran: the headline rates, their ratios and each node's CPU.
// "" when no run has nodes.
func (r *Record) NodesMarkdown() string {
	var b strings.Builder
	for _, run := range r.Runs {
		if len(run.Nodes) == 0 {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("| scenario | server | round | jobs/s | x single | x single, same load | x 3 nodes | drained/s | server CPU µs/job | machine idle CPUs | short nodes | per node: CPUs used/quota (* short), throttled, µs/job |\n")
			b.WriteString("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|\n")
		}
		ratio := func(key string) string {
			if v, ok := run.Extra[key]; ok {
				return FormatRatio(v)
			}
			return ""
		}
		var nodes []string
		for _, n := range run.Nodes {
			nodes = append(nodes, n.String())
		}
		rate := FormatRate(run.JobsPerSec)
		if run.Error != "" {
			rate += " (**error**: " + oneLine(run.Error, 80) + ")"
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %s | %s | %s | %s | %.2f | %.0f | %s |\n", run.Scenario, run.Server, run.Round, rate,
			ratio("vs_single_x"), ratio("vs_single_same_load_x"), ratio("vs_3_nodes_x"), FormatRate(run.Extra["drain_jobs_per_s"]), FormatCPU(run.ServerCPUPerJob),
			run.Extra["machine_idle_cpus"], run.Extra["short_nodes"], strings.Join(nodes, "; "))
	}
	return b.String()
}
