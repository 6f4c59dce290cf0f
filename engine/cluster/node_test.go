package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"switchyard/engine/tlstest"
	"switchyard/sched/replicated"
)

// startThree starts a cluster of three nodes on loopback ports, each with
// its own directory: n1 bootstraps alone, then adds n2 and n3, as the
// bench and an operator would.
func startThree(tb testing.TB) []*Node { return startThreeWith(tb, nil) }

// startThreeWith is startThree with each node's configuration changed by
// set (the i-th node's, from 0).
func startThreeWith(tb testing.TB, set func(i int, cfg *Config)) []*Node {
	tb.Helper()
	i := 0
	open := func(id string, peers []Peer) *Node {
		cfg := Config{ID: id, Listen: "127.0.0.1:0", Peers: peers, Dir: tb.TempDir()}
		if set != nil {
			set(i, &cfg)
		}
		i++
		n, err := Open(cfg)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { n.Close() })
		return n
	}
	n1 := open("n1", []Peer{{ID: "n1", Addr: "127.0.0.1:0"}})
	waitLeader(tb, n1)
	nodes := []*Node{n1}
	for _, id := range []string{"n2", "n3"} {
		n := open(id, nil)
		// A leader of two whose new member is slow to answer (a busy
		// machine) may lose its lease and be elected again: the change
		// is asked of whoever leads then.
		deadline := time.Now().Add(waitLimit)
		for {
			l, _ := leaderOf(tb, nodes)
			err := l.AddVoter(id, n.RaftAddr())
			if err == nil {
				break
			}
			if time.Now().After(deadline) || !errors.Is(err, ErrNotLeader) && !errors.Is(err, raft.ErrNotLeader) &&
				!errors.Is(err, raft.ErrLeadershipLost) {
				tb.Fatal(err)
			}
		}
		nodes = append(nodes, n)
	}
	l, _ := leaderOf(tb, nodes)
	if err := l.Barrier(context.Background(), 10*time.Second); err != nil {
		tb.Fatal(err)
	}
	return nodes
}

// leaderOf waits for one of nodes to lead, and returns it and its index.
func leaderOf(tb testing.TB, nodes []*Node) (*Node, int) {
	tb.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		for i, n := range nodes {
			if n.IsLeader() {
				return n, i
			}
		}
		if time.Now().After(deadline) {
			tb.Fatal("no leader")
		}
		time.Sleep(5 * time.Millisecond) // polling an election
	}
}

func waitLeader(tb testing.TB, n *Node) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !n.IsLeader() {
		if time.Now().After(deadline) {
			tb.Fatalf("%s did not become leader", n.ID())
		}
		select {
		case <-n.Changes():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func TestThreeNodesCommit(t *testing.T) {
	nodes := startThree(t)
	l, _ := leaderOf(t, nodes)
	s := replicated.New(context.Background(), l.Raft(), l.FSM(), replicated.Options{Term: l.Raft().CurrentTerm()})
	defer s.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := range 100 {
		wg.Add(1)
		s.Put(uint64(i+1), []byte(fmt.Sprint("job", i)), func(err error) {
			if err != nil {
				errs <- err
			}
			wg.Done()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	members, err := l.Members()
	if err != nil || len(members) != 3 {
		t.Fatalf("members %v, %v", members, err)
	}
	if got := l.FSM().Len(); got != 100 {
		t.Fatalf("leader's FSM holds %d jobs, want 100", got)
	}
}

// BenchmarkReplicatedPut is the cluster's submit path below the protocols:
// puts of 64-byte records through the leader's store, inflight of them
// outstanding, committed by three nodes on this machine.
func BenchmarkReplicatedPut(b *testing.B) {
	benchmarkReplicatedPut(b, startThree(b))
}

// BenchmarkReplicatedPutTLS is BenchmarkReplicatedPut with mutual TLS
// between the nodes.
func BenchmarkReplicatedPutTLS(b *testing.B) {
	ca := tlstest.CA("cluster CA")
	benchmarkReplicatedPut(b, startThreeWith(b, func(_ int, cfg *Config) { cfg.TLS = nodeCerts(b, ca, ca.Node(cfg.ID)) }))
}

func benchmarkReplicatedPut(b *testing.B, nodes []*Node) {
	const inflight = 256
	l, _ := leaderOf(b, nodes)
	s := replicated.New(context.Background(), l.Raft(), l.FSM(), replicated.Options{Term: l.Raft().CurrentTerm()})
	defer s.Close()
	rec := make([]byte, 64)
	slots := make(chan struct{}, inflight)
	var wg sync.WaitGroup
	var failed error
	var mu sync.Mutex
	done := func(err error) {
		if err != nil {
			mu.Lock()
			failed = err
			mu.Unlock()
		}
		<-slots
		wg.Done()
	}
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	for i := range b.N {
		slots <- struct{}{}
		wg.Add(1)
		s.Put(uint64(i+1), rec, done)
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "puts/s")
	// The three nodes' CPU (one process) per put: what a shared machine's
	// other load leaves alone, unlike puts/s.
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/put")
	b.ReportMetric(float64(b.N)/float64(max(s.Entries(), 1)), "puts/entry")
	if failed != nil {
		b.Fatal(failed)
	}
}

// cpuTime is this process's user and system time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestTimings: the leader's /metrics figures of Raft's own timings grow
// with commits: the commit, the log's store and each follower's
// AppendEntries round trip.
func TestTimings(t *testing.T) {
	nodes := startThree(t)
	l, _ := leaderOf(t, nodes)
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(l.Collector()); err != nil {
		t.Fatal(err)
	}
	counts := func() map[string]uint64 {
		t.Helper()
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]uint64{}
		for _, f := range fams {
			for _, m := range f.GetMetric() {
				if h := m.GetHistogram(); h != nil {
					key := f.GetName()
					for _, l := range m.GetLabel() {
						key += "/" + l.GetValue()
					}
					out[key] = h.GetSampleCount()
				}
			}
		}
		return out
	}
	before := counts()
	s := replicated.New(context.Background(), l.Raft(), l.FSM(), replicated.Options{Term: l.Raft().CurrentTerm()})
	defer s.Close()
	for i := range 20 { // one at a time: 20 entries, 20 commits
		done := make(chan error, 1)
		s.Put(uint64(i+1), []byte("job"), func(err error) { done <- err })
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	after := counts()
	// Each put is its own entry, committed and stored on the leader
	// alone; a follower's AppendEntries may carry several, since a
	// majority does not wait for the slower follower.
	want := map[string]uint64{"switchyard_cluster_commit_seconds": 20, "switchyard_cluster_log_store_seconds": 20}
	for _, n := range nodes {
		if n != l {
			want["switchyard_cluster_append_entries_seconds/"+n.ID()] = 1
		}
	}
	for key, least := range want {
		if after[key] < before[key]+least {
			t.Errorf("%s: %d samples after 20 commits, %d before", key, after[key], before[key])
		}
	}
}
