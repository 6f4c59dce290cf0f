package jepsen

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"switchyard/bench/harness"
	"switchyard/bench/netns"
)

// RunConfig is one run of a schedule against a new cluster.
type RunConfig struct {
	// Binary is switchyard's.
	Binary string
	// Dir receives the run's files: history.jsonl, checker.txt, nodes.log
	// (every node's output), the nodes' data directories and porcupine's
	// pictures of a failed model check.
	Dir      string
	Schedule *Schedule
	Faults   int
	// Prefix starts the names of the network namespaces (netns.New).
	Prefix string
	// Ops bounds each client's operations, Pace spaces them.
	Ops  int
	Pace time.Duration
	// RecoverWithin bounds, in the check, each recovery after a heal.
	RecoverWithin time.Duration
	// Seed makes the schedule's and the clients' choices repeatable.
	Seed uint64
	Logf func(format string, args ...any)
}

// raftPort is where each node's Raft listens, at its own address.
const raftPort = 7000

// drainLimit bounds the wait, once the clients have stopped, for every
// acknowledged job to run and every queue to empty.
const drainLimit = 60 * time.Second

// Run starts three nodes, each in a network namespace of its own, the
// workload in a fourth, runs the schedule, heals, drains, and checks the
// history. The error is the run's (a fault that could not be made, a
// node that died); the Result is the checker's verdict on what was
// recorded, whatever happened.
func Run(ctx context.Context, cfg RunConfig) (*Result, error) {
	logf := cfg.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	nodesLog, err := os.Create(filepath.Join(cfg.Dir, "nodes.log"))
	if err != nil {
		return nil, err
	}
	defer nodesLog.Close()
	net, err := netns.New(cfg.Prefix)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := net.Close(); err != nil {
			logf("netns: %v", err)
		}
	}()
	c, err := harness.StartCluster(ctx, harness.ClusterConfig{Path: cfg.Binary, Dir: filepath.Join(cfg.Dir, "data"), Net: net,
		RaftPort: raftPort, Log: nodesLog, Timeout: 30 * time.Second, Ops: true, // Ops: membership changes
		Args: []string{"-L", "127.0.0.1", "--controller-socket", "off", "--metrics-listen", "off",
			"--memodb-heartbeat", MemoHeartbeat.String(), "--dwork-host-timeout", DworkHostTimeout.String()}})
	if err != nil {
		return nil, err
	}
	var runErr []error
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			if err := c.Stop(); err != nil {
				runErr = append(runErr, fmt.Errorf("the cluster: %w", err))
			}
		}
	}
	defer stop()
	var nodes []Node
	for _, n := range c.Nodes {
		nodes = append(nodes, Node{ID: n.ID, Gearman: n.Addr("gearman"), Periodic: hostPort(n.Addr("periodic")),
			Dwork: hostPort(n.Addr("dwork")), Memodb: hostPort(n.Addr("memodb"))})
	}
	rec, err := NewRecorder(filepath.Join(cfg.Dir, "history.jsonl"))
	if err != nil {
		return nil, err
	}
	defer rec.Close()
	w := Start(ctx, Config{Nodes: nodes, Dial: c.Dial, Rec: rec, Ops: cfg.Ops, Pace: cfg.Pace, Seed: cfg.Seed})
	nem := &Nemesis{c: c, net: net, rec: rec, w: w, ctx: ctx, logf: logf, clientNodes: slices.Clone(c.Nodes)}

	// Every node serves before the first fault.
	nem.AwaitRecovery()
	rng := rand.New(rand.NewPCG(cfg.Seed, 99))
	began := time.Now()
	if err := cfg.Schedule.Run(nem, rng, cfg.Faults); err != nil {
		runErr = append(runErr, fmt.Errorf("schedule %s: %w", cfg.Schedule.Name, err))
	}
	logf("%s: %d faults in %v, %d client operations", cfg.Schedule.Name, nem.Faults(), time.Since(began).Round(time.Millisecond), w.Ops())

	// The end: every fault undone, every node up, every node serving.
	if err := nem.Heal(); err != nil {
		runErr = append(runErr, err)
	}
	var down []*harness.ClusterNode
	for _, n := range nem.clientNodes {
		if n.Alive() != nil {
			down = append(down, n)
		}
	}
	if len(down) > 0 {
		if err := nem.Restart(down...); err != nil {
			runErr = append(runErr, err)
		}
	}
	nem.AwaitRecovery()
	w.StopClients()
	if err := drainCluster(ctx, c, w, drainLimit); err != nil {
		runErr = append(runErr, err)
		dumpStacks(c, logf)
	}
	w.Stop()
	for _, odd := range w.Unexpected() {
		logf("unexpected: %s", odd)
	}
	stop()
	if err := rec.Close(); err != nil {
		runErr = append(runErr, err)
	}
	r, err := checkFiles(cfg.Dir, rec.Events(), Options{RecoverWithin: cfg.RecoverWithin})
	if err != nil {
		runErr = append(runErr, err)
	}
	return r, errors.Join(runErr...)
}

// dumpStacks has every node running print its goroutines (SIGQUIT: Go's
// runtime writes them to stderr, nodes.log, and exits) when the cluster
// did not drain: where a job stuck in a node waits is in nodes.log.
func dumpStacks(c *harness.Cluster, logf func(string, ...any)) {
	for _, n := range c.Nodes {
		if n.Alive() == nil {
			logf("%s: SIGQUIT, its goroutines to nodes.log", n.ID)
			syscall.Kill(n.PID(), syscall.SIGQUIT)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, n := range c.Nodes {
		for n.Alive() == nil && time.Now().Before(deadline) {
			time.Sleep(pollInterval)
		}
	}
}

// checkFiles checks a history and writes the verdict to checker.txt in
// dir, with porcupine's pictures of failed model checks beside it.
func checkFiles(dir string, events []Event, o Options) (*Result, error) {
	ops, err := Pair(events)
	if err != nil {
		return nil, err
	}
	o.Visualize = func(name string, html []byte) {
		os.WriteFile(filepath.Join(dir, "porcupine-"+safeName(name)+".html"), html, 0o644)
	}
	r := Check(ops, o)
	var b bytes.Buffer
	r.WriteText(&b)
	return r, os.WriteFile(filepath.Join(dir, "checker.txt"), b.Bytes(), 0o644)
}

func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, s)
}

// hostPort is a listening address as HOST:PORT, without a scheme.
func hostPort(a string) string {
	if _, rest, ok := strings.Cut(a, "://"); ok {
		return rest
	}
	return a
}

// pollInterval is how often a wait looks at what it waits for.
const pollInterval = 50 * time.Millisecond

// drain waits, for at most limit, until every job the workload saw
// acknowledged has been seen to run.
func drain(ctx context.Context, w *Workload, limit time.Duration) error {
	return waitFor(ctx, limit, func() (bool, string) {
		n := w.Outstanding()
		return n == 0, fmt.Sprintf("%d acknowledged jobs not seen to run", n)
	})
}

// drainCluster drains the workload, then waits until the leader holds no
// job of the workload's functions: the jobs refused or unanswered that
// were stored all the same have run too.
func drainCluster(ctx context.Context, c *harness.Cluster, w *Workload, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	if err := drain(ctx, w, limit); err != nil {
		return err
	}
	return waitFor(ctx, time.Until(deadline), func() (bool, string) {
		l, err := c.Leader(ctx)
		if err != nil {
			return false, err.Error()
		}
		text, err := harness.AdminCommandVia(c.Dial, l.Addr("gearman"), "status")
		if err != nil {
			return false, err.Error()
		}
		held := queued(text)
		return held == 0, fmt.Sprintf("the leader holds %d jobs of the workload's functions:\n%s", held, text)
	})
}

// queued sums the workload's functions' TOTAL in an admin "status".
func queued(status string) int {
	n := 0
	for line := range strings.SplitSeq(status, "\n") {
		f := strings.Split(line, "\t")
		if len(f) == 4 && slices.Contains(Functions, f[0]) {
			total, _ := strconv.Atoi(f[1])
			n += total
		}
	}
	return n
}

// waitFor polls cond for at most limit.
func waitFor(ctx context.Context, limit time.Duration, cond func() (bool, string)) error {
	if note, err := harness.Poll(ctx, limit, pollInterval, cond); err != nil {
		return fmt.Errorf("after %v: %s", limit, note)
	}
	return nil
}
