package cluster

import (
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"switchyard/engine/tlstest"
	"switchyard/sched/replicated"
)

// startThree starts a cluster of three nodes on loopback ports, each with
// its own directory: n1 bootstraps alone, then adds n2 and n3, as the
// bench and an operator would.
func startThree(tb testing.TB) []*Node {
	return startThreeWith(tb, func(string) Config { return Config{} })
}

// startThreeWith is startThree with each node's configuration from cfg
// (its ID, Listen, Peers and Dir set here).
//
// The nodes keep Raft's timeouts at testTimeout, not the defaults' half
// second: a leader that does not hear a majority within its lease steps
// down, and a run of the race detector beside other packages' tests on a
// busy machine starved n1 past half a second between adding n2 and n3
// (AddVoter: "this node is not the leader"). These tests are about what a
// cluster commits, not how soon it elects.
func startThreeWith(tb testing.TB, cfg func(id string) Config) []*Node {
	tb.Helper()
	open := func(id string, peers []Peer) *Node {
		c := cfg(id)
		c.ID, c.Listen, c.Peers, c.Dir = id, "127.0.0.1:0", peers, tb.TempDir()
		c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout = testTimeout, testTimeout, testTimeout
		n, err := Open(c)
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

// testTimeout is the Raft timeouts of startThree's nodes.
const testTimeout = 3 * time.Second

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
	s := replicated.New(nodes[0].Raft(), nodes[0].FSM())
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
	benchmarkReplicatedPut(b, startThree(b))
}

// BenchmarkReplicatedPutTLS is BenchmarkReplicatedPut with mutual TLS
// between the nodes.
func BenchmarkReplicatedPutTLS(b *testing.B) {
	ca := tlstest.CA("cluster CA")
	benchmarkReplicatedPut(b, startThreeWith(b, func(id string) Config { return Config{TLS: nodeCerts(b, ca, ca.Node(id))} }))
}

func benchmarkReplicatedPut(b *testing.B, nodes []*Node) {
	const inflight = 256
	s := replicated.New(nodes[0].Raft(), nodes[0].FSM())
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
	s := replicated.New(nodes[0].Raft(), nodes[0].FSM())
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
