// Package cgroup gives a benchmark's server processes a CPU budget each:
// a cgroup of its own with a CPU quota (cpu.max on cgroup v2,
// cpu.cfs_quota_us on v1), so that one machine stands for several smaller
// ones, and reads back how often the quota held each back. The load
// generator stays outside every one. It needs root; Available says why it
// cannot run.
//
// A quota is a ceiling, not a reservation: on a machine other work
// shares, a process can get less than its quota, which is why the bench
// records what each process used (its /proc CPU time) beside its quota.
package cgroup

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Period is the length of the quota's period: a group allowed c CPUs runs
// for c x Period in each Period, then waits for the next.
const Period = 100 * time.Millisecond

// root is where the cgroup file systems are mounted.
const root = "/sys/fs/cgroup"

// hierarchy is where the groups are made: the unified (v2) hierarchy's
// root, or the v1 cpu controller's.
type hierarchy struct {
	dir string
	v2  bool
}

// find returns the hierarchy with the cpu controller: v2 when the whole
// of /sys/fs/cgroup is the unified hierarchy with the cpu controller in
// it, else v1's cpu mount. (A hybrid system's unified hierarchy under
// /sys/fs/cgroup/unified has no controllers: they are v1's.)
func find() (hierarchy, error) {
	if b, err := os.ReadFile(filepath.Join(root, "cgroup.controllers")); err == nil {
		if !hasWord(string(b), "cpu") {
			return hierarchy{}, fmt.Errorf("cgroup: the v2 hierarchy at %s has no cpu controller (cgroup.controllers: %q)", root, strings.TrimSpace(string(b)))
		}
		return hierarchy{dir: root, v2: true}, nil
	}
	dir := filepath.Join(root, "cpu")
	if _, err := os.Stat(filepath.Join(dir, "cpu.cfs_quota_us")); err != nil {
		return hierarchy{}, fmt.Errorf("cgroup: no cpu controller at %s (v2) or %s (v1)", root, dir)
	}
	return hierarchy{dir: dir}, nil
}

// Available returns nil if this process can make CPU cgroups, or why not.
func Available() error {
	if os.Geteuid() != 0 {
		return errors.New("cgroup: making CPU cgroups needs root")
	}
	_, err := find()
	return err
}

// Group is one CPU cgroup allowing CPUs of CPU time a Period.
type Group struct {
	Name string
	CPUs float64
	dir  string
	v2   bool
}

// New makes a cgroup named name allowing cpus CPUs (0.3: 30 ms of every
// 100 ms). The name must be new: a group left from an earlier run is an
// error (Sweep removes those).
func New(name string, cpus float64) (*Group, error) {
	if name == "" || strings.ContainsAny(name, "/.") {
		return nil, fmt.Errorf("cgroup: bad name %q", name)
	}
	quota := Quota(cpus)
	if quota < minQuota {
		return nil, fmt.Errorf("cgroup: %v CPUs is under the kernel's smallest quota, %d µs a %v period", cpus, minQuota, Period)
	}
	h, err := find()
	if err != nil {
		return nil, err
	}
	if h.v2 {
		// A child of the root gets the cpu controller only if the root
		// hands it down.
		if err := enableCPU(h.dir); err != nil {
			return nil, err
		}
	}
	g := &Group{Name: name, CPUs: cpus, dir: filepath.Join(h.dir, name), v2: h.v2}
	if err := os.Mkdir(g.dir, 0o755); err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	period := Period.Microseconds()
	if h.v2 {
		err = g.write("cpu.max", fmt.Sprintf("%d %d", quota, period))
	} else if err = g.write("cpu.cfs_period_us", strconv.FormatInt(period, 10)); err == nil {
		err = g.write("cpu.cfs_quota_us", strconv.FormatInt(quota, 10))
	}
	if err != nil {
		os.Remove(g.dir)
		return nil, err
	}
	return g, nil
}

// minQuota is the smallest quota the kernel takes, µs.
const minQuota = 1000

// Quota is the quota, µs a Period, that allows cpus CPUs.
func Quota(cpus float64) int64 {
	return int64(cpus*float64(Period.Microseconds()) + 0.5)
}

// enableCPU turns the cpu controller on for the children of the v2
// cgroup dir, if it is not already.
func enableCPU(dir string) error {
	file := filepath.Join(dir, "cgroup.subtree_control")
	b, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("cgroup: %w", err)
	}
	if hasWord(string(b), "cpu") {
		return nil
	}
	if err := os.WriteFile(file, []byte("+cpu"), 0o644); err != nil {
		return fmt.Errorf("cgroup: enabling the cpu controller in %s: %w", file, err)
	}
	return nil
}

func hasWord(s, word string) bool {
	for _, w := range strings.Fields(s) {
		if w == word {
			return true
		}
	}
	return false
}

// Dir is the group's directory.
func (g *Group) Dir() string { return g.dir }

func (g *Group) write(file, val string) error {
	if err := os.WriteFile(filepath.Join(g.dir, file), []byte(val), 0o644); err != nil {
		return fmt.Errorf("cgroup %s: %w", g.Name, err)
	}
	return nil
}

// Add moves the process pid, all its threads, into the group.
func (g *Group) Add(pid int) error { return g.write("cgroup.procs", strconv.Itoa(pid)) }

// Start starts cmd in the group: it starts it, then moves it in before it
// has done much more than exec (what it does before counts against no
// quota; the bench measures long after). If the move fails, the process is
// killed and reaped.
func (g *Group) Start(cmd *exec.Cmd) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	if err := g.Add(cmd.Process.Pid); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return err
	}
	return nil
}

// Procs lists the processes in the group.
func (g *Group) Procs() ([]int, error) {
	b, err := os.ReadFile(filepath.Join(g.dir, "cgroup.procs"))
	if err != nil {
		return nil, fmt.Errorf("cgroup %s: %w", g.Name, err)
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("cgroup %s: cgroup.procs: %w", g.Name, err)
		}
		pids = append(pids, pid)
	}
	return pids, nil
}

// Stat is what the quota did to a group so far (its cpu.stat).
type Stat struct {
	// Periods counts the quota periods in which the group had work to
	// run, Throttled those in which it used up its quota and was held
	// back until the next.
	Periods, Throttled int64
	// ThrottledTime is the time its threads were held back, summed over
	// the CPUs they were held back on (so it can exceed the wall time).
	ThrottledTime time.Duration
}

// Stat reads the group's cpu.stat.
func (g *Group) Stat() (Stat, error) {
	b, err := os.ReadFile(filepath.Join(g.dir, "cpu.stat"))
	if err != nil {
		return Stat{}, fmt.Errorf("cgroup %s: %w", g.Name, err)
	}
	st, err := ParseStat(string(b))
	if err != nil {
		return Stat{}, fmt.Errorf("cgroup %s: %w", g.Name, err)
	}
	return st, nil
}

// ParseStat parses the text of a cpu.stat file, v1's (throttled_time in
// ns) or v2's (throttled_usec).
func ParseStat(text string) (Stat, error) {
	var st Stat
	seen := 0
	for line := range strings.SplitSeq(text, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		switch k {
		case "nr_periods":
			st.Periods = n
		case "nr_throttled":
			st.Throttled = n
		case "throttled_time": // v1
			st.ThrottledTime = time.Duration(n)
		case "throttled_usec": // v2
			st.ThrottledTime = time.Duration(n) * time.Microsecond
		default:
			continue
		}
		if err != nil {
			return Stat{}, fmt.Errorf("cpu.stat: %s: %w", k, err)
		}
		seen++
	}
	if seen < 3 {
		return Stat{}, fmt.Errorf("cpu.stat: want nr_periods, nr_throttled and the throttled time in %q", text)
	}
	return st, nil
}

// Sub is what the quota did between an earlier Stat and this one.
func (s Stat) Sub(earlier Stat) Stat {
	return Stat{Periods: s.Periods - earlier.Periods, Throttled: s.Throttled - earlier.Throttled,
		ThrottledTime: s.ThrottledTime - earlier.ThrottledTime}
}

// ThrottledShare is the share of the periods with work in which the
// group was held back by its quota, 0 when it had none.
func (s Stat) ThrottledShare() float64 {
	if s.Periods <= 0 {
		return 0
	}
	return float64(s.Throttled) / float64(s.Periods)
}

// removeWait bounds how long Remove waits for the kernel to let go of
// processes that have exited.
const removeWait = 5 * time.Second

// Remove deletes the group. Its processes must have exited (or moved
// out); an exited process leaves the group once reaped, which Remove
// waits a little for.
func (g *Group) Remove() error {
	deadline := time.Now().Add(removeWait)
	for {
		err := os.Remove(g.dir)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
			return fmt.Errorf("cgroup: %w", err)
		}
		time.Sleep(20 * time.Millisecond) // polling the kernel, not a goroutine
	}
}

// Name is a group's name for the process pid of a run: prefix-PID-what.
// Sweep reads the pid back.
func Name(prefix string, pid int, what string) string {
	return fmt.Sprintf("%s-%d-%s", prefix, pid, what)
}

// Sweep removes the groups named prefix-PID-... whose PID no longer runs
// and that hold no process: what a run killed before it could clean up
// left behind. It returns the names removed.
func Sweep(prefix string) ([]string, error) {
	h, err := find()
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(h.dir)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), prefix+"-")
		if !e.IsDir() || !ok {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid <= 0 || running(pid) {
			continue
		}
		g := &Group{Name: e.Name(), dir: filepath.Join(h.dir, e.Name()), v2: h.v2}
		if procs, err := g.Procs(); err != nil || len(procs) > 0 {
			continue
		}
		if err := os.Remove(g.dir); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, e.Name())
	}
	return removed, errors.Join(errs...)
}

// running reports whether a process pid exists.
func running(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
