package harness

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync/atomic"

	"switchyard/bench/cgroup"
)

// CPUBudget gives every server process the harness starts a CPU cgroup of
// its own allowing CPUs (bench/cgroup), so that one machine stands for
// several smaller ones, each process a machine. The load generator, this
// process, stays outside every one. The zero budget, or a nil one, starts
// processes as they are.
type CPUBudget struct {
	CPUs float64 // each process's quota; 0: none
	// Prefix starts the groups' names, Prefix-PID-N-NAME: this process's
	// id, a count of the groups it has made and the server's or node's
	// name. cgroup.Sweep(Prefix) removes what a killed run left.
	Prefix string
}

// groupSeq counts the groups this process has made, so that the nodes of
// successive clusters (each with an n1) have groups of their own.
var groupSeq atomic.Int64

// group makes the cgroup for the process of a server named name, nil when
// the budget has no CPUs.
func (b *CPUBudget) group(name string) (*cgroup.Group, error) {
	if b == nil || b.CPUs <= 0 {
		return nil, nil
	}
	prefix := b.Prefix
	if prefix == "" {
		prefix = "syb"
	}
	return cgroup.New(cgroup.Name(prefix, os.Getpid(), fmt.Sprintf("%d-%s", groupSeq.Add(1), name)), b.CPUs)
}

// startIn starts cmd, in g when there is one.
func startIn(g *cgroup.Group, cmd *exec.Cmd) error {
	if g == nil {
		return cmd.Start()
	}
	return g.Start(cmd)
}

// removeGroup removes g, if any, once its process has exited.
func removeGroup(g *cgroup.Group) error {
	if g == nil {
		return nil
	}
	return g.Remove()
}

// ProcUsage is one server process's CPU time so far and memory and,
// in a group of a CPUBudget, its quota and what the quota did.
type ProcUsage struct {
	Name string // the server's or node's: "switchyard", "n1", ...
	PID  int
	Usage
	Quota float64 // CPUs its group allows; 0 when in none
	Group cgroup.Stat
}

// readProcUsage reads the usage of the process pid, and g's counters.
func readProcUsage(name string, pid int, g *cgroup.Group) (ProcUsage, error) {
	p := ProcUsage{Name: name, PID: pid}
	var err error
	if p.Usage, err = ReadUsage(pid); err != nil {
		return p, err
	}
	if g != nil {
		p.Quota = g.CPUs
		if p.Group, err = g.Stat(); err != nil {
			return p, err
		}
	}
	return p, nil
}

// procsUsage reads each process of procs, in order.
func procsUsage(procs []procRef) ([]ProcUsage, error) {
	out := make([]ProcUsage, 0, len(procs))
	var errs []error
	for _, p := range procs {
		u, err := readProcUsage(p.name, p.pid, p.group)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p.name, err))
			continue
		}
		out = append(out, u)
	}
	return out, errors.Join(errs...)
}

// procRef names one process to read.
type procRef struct {
	name  string
	pid   int
	group *cgroup.Group
}
