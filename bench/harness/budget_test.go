package harness

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"switchyard/bench/cgroup"
)

// TestNoBudget: with no budget a server runs in no group of the harness's
// and its Procs say so.
func TestNoBudget(t *testing.T) {
	t.Setenv(listenEnv, "127.0.0.1:0")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := Start(ctx, Config{Name: "child", Path: os.Args[0], Args: []string{"-test.run=^$"}, Budget: &CPUBudget{}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	procs, err := srv.Procs()
	if err != nil || len(procs) != 1 || procs[0].PID != srv.PID() || procs[0].Name != "child" || procs[0].Quota != 0 || srv.group != nil {
		t.Errorf("procs %+v, %v", procs, err)
	}
}

// TestBudget starts a server in a budget of 0.5 CPU: its process is in a
// group of its own from the start, which Procs reads, a restart moves to
// a new one and Stop removes.
func TestBudget(t *testing.T) {
	if err := cgroup.Available(); err != nil {
		t.Skipf("skipped: %v (this test makes CPU cgroups; run it as root)", err)
	}
	t.Setenv(listenEnv, "127.0.0.1:0")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := Config{Name: "child", Path: os.Args[0], Args: []string{"-test.run=^$"}, Budget: &CPUBudget{CPUs: 0.5, Prefix: "sysc"}}
	srv, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	inGroup := func(s *Server) string {
		t.Helper()
		procs, err := s.Procs()
		// Its CPU may still be under /proc's 10 ms tick: 0.
		if err != nil || len(procs) != 1 || procs[0].Quota != 0.5 || procs[0].PID != s.PID() || procs[0].CPU < 0 || procs[0].RSS <= 0 {
			t.Fatalf("procs %+v, %v", procs, err)
		}
		own, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", s.PID()))
		name := s.group.Name
		if err != nil || !strings.Contains(string(own), "/"+name+"\n") || !strings.HasPrefix(name, fmt.Sprintf("sysc-%d-", os.Getpid())) {
			t.Fatalf("/proc/%d/cgroup does not name %s: %s (%v)", s.PID(), name, own, err)
		}
		return s.group.Dir()
	}
	first := inGroup(srv)
	next, _, err := srv.Restart(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Stop()
	second := inGroup(next)
	if second == first {
		t.Errorf("the restarted server is in the first one's group, %s", first)
	}
	if _, err := os.Stat(first); !os.IsNotExist(err) {
		t.Errorf("the killed server's group %s is still there", first)
	}
	if err := next.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(second); !os.IsNotExist(err) {
		t.Errorf("the stopped server's group %s is still there", second)
	}
}
