package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// cgroup is a CPU cgroup of its own for one process, so that one machine
// stands for several smaller ones: cpu.max on cgroup v2,
// cpu.cfs_quota_us on v1. The load generator stays outside every one.
type cgroup struct {
	dir string
	v2  bool
}

const cgroupPeriod = 100_000 // µs

// newCgroup makes a cgroup named name allowing quota CPUs.
func newCgroup(name string, quota float64) (*cgroup, error) {
	q := int(quota * cgroupPeriod)
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		g := &cgroup{dir: filepath.Join("/sys/fs/cgroup", name), v2: true}
		if err := os.Mkdir(g.dir, 0o755); err != nil {
			return nil, err
		}
		return g, g.write("cpu.max", fmt.Sprintf("%d %d", q, cgroupPeriod))
	}
	g := &cgroup{dir: filepath.Join("/sys/fs/cgroup/cpu", name)}
	if err := os.Mkdir(g.dir, 0o755); err != nil {
		return nil, err
	}
	if err := g.write("cpu.cfs_period_us", strconv.Itoa(cgroupPeriod)); err != nil {
		return g, err
	}
	return g, g.write("cpu.cfs_quota_us", strconv.Itoa(q))
}

func (g *cgroup) write(file, val string) error {
	return os.WriteFile(filepath.Join(g.dir, file), []byte(val), 0o644)
}

// add moves a process, all its threads, into the cgroup.
func (g *cgroup) add(pid int) error { return g.write("cgroup.procs", strconv.Itoa(pid)) }

// throttled is the time the cgroup's processes were held back by the
// quota so far (cpu.stat).
func (g *cgroup) throttled() time.Duration {
	b, err := os.ReadFile(filepath.Join(g.dir, "cpu.stat"))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, " ")
		n, _ := strconv.ParseInt(v, 10, 64)
		switch k {
		case "throttled_time": // v1: ns
			return time.Duration(n)
		case "throttled_usec": // v2
			return time.Duration(n) * time.Microsecond
		}
	}
	return 0
}

// remove deletes the cgroup; its processes must have exited (or moved).
// It waits a little for the kernel to let go of exited ones.
func (g *cgroup) remove() error {
	var err error
	for range 50 {
		if err = os.Remove(g.dir); err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}
