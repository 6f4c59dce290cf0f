package cgroup

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// spinEnv makes this test binary, run again as a child, spin on a CPU
// until it is killed: the busy process the quota holds back.
const spinEnv = "SWITCHYARD_CGROUP_SPIN"

func TestMain(m *testing.M) {
	if os.Getenv(spinEnv) != "" {
		for {
		}
	}
	os.Exit(m.Run())
}

// prefix starts the names of the groups these tests make.
const prefix = "sysc"

func TestParseStat(t *testing.T) {
	tests := []struct {
		name, text string
		want       Stat
		wantErr    bool
	}{
		{"v1", "nr_periods 120\nnr_throttled 45\nthrottled_time 2345678901\nnr_bursts 0\nburst_time 0\n",
			Stat{Periods: 120, Throttled: 45, ThrottledTime: 2345678901 * time.Nanosecond}, false},
		{"v2", "usage_usec 123\nuser_usec 100\nsystem_usec 23\nnr_periods 10\nnr_throttled 3\nthrottled_usec 4567\nnr_bursts 0\nburst_usec 0\n",
			Stat{Periods: 10, Throttled: 3, ThrottledTime: 4567 * time.Microsecond}, false},
		{"never ran", "nr_periods 0\nnr_throttled 0\nthrottled_time 0\n", Stat{}, false},
		{"no throttled time", "nr_periods 1\nnr_throttled 0\n", Stat{}, true},
		{"not a number", "nr_periods x\nnr_throttled 0\nthrottled_time 0\n", Stat{}, true},
		{"empty", "", Stat{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseStat(tt.text)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("got %+v, %v; want %+v, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestStatSub(t *testing.T) {
	a := Stat{Periods: 10, Throttled: 2, ThrottledTime: time.Second}
	b := Stat{Periods: 30, Throttled: 17, ThrottledTime: 3 * time.Second}
	d := b.Sub(a)
	if d != (Stat{Periods: 20, Throttled: 15, ThrottledTime: 2 * time.Second}) || d.ThrottledShare() != 0.75 {
		t.Errorf("%+v, share %v", d, d.ThrottledShare())
	}
	if (Stat{}).ThrottledShare() != 0 {
		t.Error("a share of no periods")
	}
}

func TestQuota(t *testing.T) {
	for _, tt := range []struct {
		cpus float64
		want int64
	}{{0.3, 30_000}, {0.15, 15_000}, {1, 100_000}, {2.5, 250_000}, {0.01, 1000}} {
		if got := Quota(tt.cpus); got != tt.want {
			t.Errorf("Quota(%v) = %d, want %d", tt.cpus, got, tt.want)
		}
	}
}

func TestNewRefuses(t *testing.T) {
	for _, tt := range []struct {
		name string
		cpus float64
	}{{"", 0.3}, {"a/b", 0.3}, {"..", 0.3}, {Name(prefix, os.Getpid(), "tiny"), 0.001}} {
		if g, err := New(tt.name, tt.cpus); err == nil {
			g.Remove()
			t.Errorf("New(%q, %v) made a group", tt.name, tt.cpus)
		}
	}
}

// needRoot skips a test that makes cgroups where it cannot.
func needRoot(t *testing.T) {
	t.Helper()
	if err := Available(); err != nil {
		t.Skipf("skipped: %v (these tests make CPU cgroups; run them as root)", err)
	}
}

// startSpinner starts a child that spins in g, killed and its group
// removed when the test ends.
func startSpinner(t *testing.T, g *Group) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), spinEnv+"=1")
	if err := g.Start(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd
}

// TestQuotaHoldsBack puts a child that spins in a group allowing 0.01
// CPU (1 ms of every 100 ms, the kernel's smallest quota): the kernel
// must throttle it, and what it gets stays near its quota. A spinner that
// gets as little as one percent of a CPU from a busy machine uses up such
// a quota in every period, so the throttling does not depend on the
// machine's load; without the quota it would get its fair share of a
// CPU.
func TestQuotaHoldsBack(t *testing.T) {
	needRoot(t)
	g, err := New(Name(prefix, os.Getpid(), "holds"), 0.01)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := g.Remove(); err != nil {
			t.Error(err)
		}
	})
	begin := time.Now()
	cmd := startSpinner(t, g)
	pid := cmd.Process.Pid

	procs, err := g.Procs()
	if err != nil || !slices.Contains(procs, pid) {
		t.Fatalf("the group holds %v (%v), not the child %d", procs, err, pid)
	}
	own, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil || !strings.Contains(string(own), "/"+g.Name+"\n") {
		t.Errorf("/proc/%d/cgroup does not name %s:\n%s", pid, g.Name, own)
	}

	// Until the kernel has held it back in a few periods.
	deadline := begin.Add(30 * time.Second)
	var st Stat
	for st.Throttled < 5 {
		if time.Now().After(deadline) {
			t.Fatalf("not throttled after 30 s: %+v", st)
		}
		time.Sleep(50 * time.Millisecond) // polling the kernel's counters
		if st, err = g.Stat(); err != nil {
			t.Fatal(err)
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	wall := time.Since(begin)
	used := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	// The quota is 1% of the wall time; the kernel lets a period's run
	// go on to the next tick (at most 10 ms at HZ 100). Well under what
	// an unthrottled spinner gets of even a busy machine.
	if bound := time.Duration(0.12*float64(wall)) + 20*time.Millisecond; used > bound {
		t.Errorf("the child used %v of CPU in %v (quota 1%%, bound %v)", used, wall, bound)
	}
	if st.Periods < st.Throttled || st.ThrottledTime <= 0 {
		t.Errorf("implausible cpu.stat: %+v", st)
	}
	t.Logf("%v of CPU in %v; %+v", used, wall.Round(time.Millisecond), st)
}

// TestRemove: a group whose process has exited is removed; one that still
// holds a process is not.
func TestRemove(t *testing.T) {
	needRoot(t)
	g, err := New(Name(prefix, os.Getpid(), "remove"), 0.5)
	if err != nil {
		t.Fatal(err)
	}
	cmd := startSpinner(t, g)
	if err := os.Remove(g.Dir()); err == nil {
		t.Fatal("a group holding a process was removed")
	}
	cmd.Process.Kill()
	cmd.Wait()
	if err := g.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(g.Dir()); !os.IsNotExist(err) {
		t.Errorf("%s still there: %v", g.Dir(), err)
	}
	if err := g.Remove(); err != nil {
		t.Errorf("removing it again: %v", err)
	}
}

// TestSweep removes the empty groups of runs that are gone and keeps
// those of runs that still run.
func TestSweep(t *testing.T) {
	needRoot(t)
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	gone, err := New(Name(prefix, dead.Process.Pid, "sweep"), 0.5)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gone.Remove() })
	kept, err := New(Name(prefix, os.Getpid(), "sweep"), 0.5)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := kept.Remove(); err != nil {
			t.Error(err)
		}
	})
	removed, err := Sweep(prefix)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(removed, gone.Name) || slices.Contains(removed, kept.Name) {
		t.Errorf("swept %q", removed)
	}
	if _, err := os.Stat(gone.Dir()); !os.IsNotExist(err) {
		t.Errorf("%s still there", gone.Dir())
	}
	if _, err := os.Stat(filepath.Join(kept.Dir(), "cgroup.procs")); err != nil {
		t.Errorf("%s gone: %v", kept.Dir(), err)
	}
}
