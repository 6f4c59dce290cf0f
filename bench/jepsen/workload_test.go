package jepsen

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"switchyard/bench/harness"
)

// buildSwitchyard builds the server into the test's directory.
func buildSwitchyard(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "switchyard")
	build := exec.Command("go", "build", "-o", bin, "switchyard/cmd/switchyard")
	build.Env = append(os.Environ(), "CGO_ENABLED=0") // as make build
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// startServer starts one switchyard on loopback with every protocol the
// workload speaks, and returns it as a Node.
func startServer(ctx context.Context, t *testing.T, bin string) Node {
	t.Helper()
	cmd := exec.Command(bin, "-L", "127.0.0.1", "-p", "0", "-q", "builtin", "-l", "stderr",
		"--periodic-listen", "tcp://127.0.0.1:0", "--dwork-listen", "tcp://127.0.0.1:0", "--memodb-listen", "tcp://127.0.0.1:0",
		"--memodb-heartbeat", MemoHeartbeat.String(), "--controller-socket", "off", "--metrics-listen", "off")
	out, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	found := make(chan Node, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if msg, f, ok := harness.ParseNotice(sc.Text()); ok && msg == "listening" {
				found <- Node{ID: "n1", Gearman: first(f, "gearman"), Periodic: first(f, "periodic"), Dwork: first(f, "dwork"), Memodb: first(f, "memodb")}
			}
		}
	}()
	select {
	case n := <-found:
		return n
	case <-ctx.Done():
		t.Fatal("the server did not say where it listens")
	}
	return Node{}
}

// first is a "listening" line's first address of protocol, as HOST:PORT.
func first(fields map[string]any, protocol string) string {
	l, _ := fields[protocol].([]any)
	if len(l) == 0 {
		return ""
	}
	s, _ := l[0].(string)
	if _, rest, ok := strings.Cut(s, "://"); ok {
		s = rest
	}
	return s
}

// TestWorkloadAgainstServer runs the workload of every protocol against
// one server, no fault, drains it and checks the history: every client and
// worker speaks its protocol, and the checker passes a real history.
func TestWorkloadAgainstServer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n := startServer(ctx, t, buildSwitchyard(t))
	rec, err := NewRecorder(filepath.Join(t.TempDir(), "history.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	m := n
	m.ID = "n2"
	w := Start(ctx, Config{Nodes: []Node{n, m}, Rec: rec, Ops: 25, Pace: 20 * time.Millisecond, Seed: 1})
	<-w.ClientsDone()
	if err := drain(ctx, w, 30*time.Second); err != nil {
		t.Error(err)
	}
	w.Stop()
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	if odd := w.Unexpected(); len(odd) > 0 {
		t.Errorf("unexpected: %q", odd)
	}
	ops, err := Pair(rec.Events())
	if err != nil {
		t.Fatal(err)
	}
	r := Check(ops, Options{})
	var b strings.Builder
	r.WriteText(&b)
	t.Log(b.String())
	if !r.Valid() {
		t.Error("the checker failed a history of no fault")
	}
	for _, p := range Protocols {
		if c := r.Counts[p]; c.OK == 0 || c.Runs == 0 || c.Failed+c.Unknown > 0 {
			t.Errorf("%s: %+v", p, *c)
		}
	}
}
