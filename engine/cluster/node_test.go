package cluster

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"switchyard/sched/replicated"
)

// startThree starts a cluster of three nodes on loopback ports, each with
// its own directory: n1 bootstraps alone, then adds n2 and n3, as the
// bench and an operator would.
func startThree(tb testing.TB) []*Node {
	tb.Helper()
	open := func(id string, peers []Peer) *Node {
		n, err := Open(Config{ID: id, Listen: "127.0.0.1:0", Peers: peers, Dir: tb.TempDir()})
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
		if err := n1.AddVoter(id, n.RaftAddr()); err != nil {
			tb.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	if err := n1.Barrier(10 * time.Second); err != nil {
		tb.Fatal(err)
	}
	return nodes
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
	s := replicated.New(context.Background(), nodes[0].Raft(), nodes[0].FSM(), replicated.Options{Term: nodes[0].Raft().CurrentTerm()})
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
	members, err := nodes[0].Members()
	if err != nil || len(members) != 3 {
		t.Fatalf("members %v, %v", members, err)
	}
	if got := nodes[0].FSM().Len(); got != 100 {
		t.Fatalf("leader's FSM holds %d jobs, want 100", got)
	}
}

// BenchmarkReplicatedPut is the cluster's submit path below the protocols:
// puts of 64-byte records through the leader's store, inflight of them
// outstanding, committed by three nodes on this machine.
func BenchmarkReplicatedPut(b *testing.B) {
	const inflight = 256
	nodes := startThree(b)
	s := replicated.New(context.Background(), nodes[0].Raft(), nodes[0].FSM(), replicated.Options{Term: nodes[0].Raft().CurrentTerm()})
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
	start := time.Now()
	for i := range b.N {
		slots <- struct{}{}
		wg.Add(1)
		s.Put(uint64(i+1), rec, done)
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "puts/s")
	b.ReportMetric(float64(b.N)/float64(max(s.Entries(), 1)), "puts/entry")
	if failed != nil {
		b.Fatal(failed)
	}
}

// TestTimings: the leader's /metrics figures of Raft's own timings grow
// with commits: the commit, the log's store and each follower's
// AppendEntries round trip.
func TestTimings(t *testing.T) {
	nodes := startThree(t)
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(nodes[0].Collector()); err != nil {
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
	s := replicated.New(context.Background(), nodes[0].Raft(), nodes[0].FSM(), replicated.Options{Term: nodes[0].Raft().CurrentTerm()})
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
	for key, least := range map[string]uint64{"switchyard_cluster_commit_seconds": 20, "switchyard_cluster_log_store_seconds": 20,
		"switchyard_cluster_append_entries_seconds/n2": 1, "switchyard_cluster_append_entries_seconds/n3": 1} {
		if after[key] < before[key]+least {
			t.Errorf("%s: %d samples after 20 commits, %d before", key, after[key], before[key])
		}
	}
}
