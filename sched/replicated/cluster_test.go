package replicated

import (
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// A cluster of nodes on Raft's in-memory transport, for the partitions
// that are hard to make with processes: each node's log in a LogStore of
// its own, its snapshots in a directory.
type testNode struct {
	id    raft.ServerID
	addr  raft.ServerAddress
	trans *raft.InmemTransport
	fsm   *FSM
	logs  *LogStore
	snaps raft.SnapshotStore
	raft  *raft.Raft
	dir   string
}

type testCluster struct {
	t     *testing.T
	nodes []*testNode
}

// testConfig is a node's Raft configuration, with the cluster's own
// timeouts (engine/cluster's defaults, 500 ms). At 100 ms, make test's
// -race pass on a machine others kept busy (load 10) once had the
// leader step down before TestStoreReplicates's puts, every one refused:
// a leader that cannot reach a majority within its lease acknowledges
// nothing, as it should, and the test's premise, a leader, was gone.
func testConfig(id raft.ServerID) *raft.Config {
	c := raft.DefaultConfig()
	c.LocalID = id
	c.HeartbeatTimeout = 500 * time.Millisecond
	c.ElectionTimeout = 500 * time.Millisecond
	c.LeaderLeaseTimeout = 500 * time.Millisecond
	c.CommitTimeout = 5 * time.Millisecond
	c.SnapshotThreshold = 1 << 30 // snapshots only when a test asks
	c.TrailingLogs = 8
	c.Logger = hclog.New(&hclog.LoggerOptions{Output: io.Discard, Level: hclog.Off})
	return c
}

func newTestCluster(t *testing.T, n int) *testCluster {
	t.Helper()
	c := &testCluster{t: t}
	var servers []raft.Server
	for i := range n {
		nd := &testNode{id: raft.ServerID(fmt.Sprintf("n%d", i+1)), dir: t.TempDir()}
		nd.addr, nd.trans = raft.NewInmemTransport("")
		servers = append(servers, raft.Server{ID: nd.id, Address: nd.addr})
		c.nodes = append(c.nodes, nd)
	}
	for _, a := range c.nodes {
		for _, b := range c.nodes {
			if a != b {
				a.trans.Connect(b.addr, b.trans)
			}
		}
	}
	for _, nd := range c.nodes {
		c.start(nd, raft.Configuration{Servers: servers})
	}
	t.Cleanup(func() {
		for _, nd := range c.nodes {
			if nd.raft != nil {
				nd.raft.Shutdown().Error()
				nd.logs.Close()
			}
		}
	})
	return c
}

// start opens a node's stores and its Raft, bootstrapping it with conf if
// it has no state yet.
func (c *testCluster) start(nd *testNode, conf raft.Configuration) {
	t := c.t
	t.Helper()
	var err error
	if nd.logs, err = OpenLogStore(nd.dir + "/log"); err != nil {
		t.Fatal(err)
	}
	if nd.snaps, err = raft.NewFileSnapshotStoreWithLogger(nd.dir, 2, hclog.NewNullLogger()); err != nil {
		t.Fatal(err)
	}
	nd.fsm = NewFSM()
	cfg := testConfig(nd.id)
	if ok, _ := raft.HasExistingState(nd.logs, nd.logs, nd.snaps); !ok && len(conf.Servers) > 0 {
		if err := raft.BootstrapCluster(cfg, nd.logs, nd.logs, nd.snaps, nd.trans, conf); err != nil {
			t.Fatal(err)
		}
	}
	if nd.raft, err = raft.NewRaft(cfg, nd.fsm, nd.logs, nd.logs, nd.snaps, nd.trans); err != nil {
		t.Fatal(err)
	}
}

// leader waits for one of nodes (all if none given) to lead, and returns
// it.
func (c *testCluster) leader(among ...*testNode) *testNode {
	c.t.Helper()
	if len(among) == 0 {
		among = c.nodes
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, nd := range among {
			if nd.raft != nil && nd.raft.State() == raft.Leader {
				return nd
			}
		}
		time.Sleep(5 * time.Millisecond) // polling an election
	}
	c.t.Fatal("no leader after 10s")
	return nil
}

// isolate cuts nd off from every other node, both ways.
func (c *testCluster) isolate(nd *testNode) {
	nd.trans.DisconnectAll()
	for _, o := range c.nodes {
		if o != nd {
			o.trans.Disconnect(nd.addr)
		}
	}
}

// heal connects every node to every other again.
func (c *testCluster) heal() {
	for _, a := range c.nodes {
		for _, b := range c.nodes {
			if a != b {
				a.trans.Connect(b.addr, b.trans)
			}
		}
	}
}

// waitApplied waits until every running node's FSM has applied index.
func (c *testCluster) waitApplied(index uint64) {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, nd := range c.nodes {
		for nd.raft != nil && nd.fsm.Applied() < index {
			if time.Now().After(deadline) {
				c.t.Fatalf("%s applied %d, want %d", nd.id, nd.fsm.Applied(), index)
			}
			time.Sleep(5 * time.Millisecond) // polling replication
		}
	}
}

// putAll writes n records through s, concurrently, and returns the ids
// acknowledged and those refused.
func putAll(s *Store, from, n int) (acked, refused []uint64) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	wg.Add(n)
	for i := from; i < from+n; i++ {
		id := uint64(i)
		s.Put(id, rec("f", fmt.Sprint("u", id), "payload"), func(err error) {
			mu.Lock()
			if err == nil {
				acked = append(acked, id)
			} else {
				refused = append(refused, id)
			}
			mu.Unlock()
			wg.Done()
		})
	}
	wg.Wait()
	return acked, refused
}

// Writes are acknowledged once committed: every node then holds them.
// Deletes reach every node too.
func TestStoreReplicates(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	s := New(l.raft, l.fsm)
	if s.maxLinger != maxLinger {
		t.Fatalf("the writer lingers %v at most, want %v", s.maxLinger, maxLinger)
	}
	acked, refused := putAll(s, 1, 2000)
	if len(acked) != 2000 || len(refused) != 0 {
		t.Fatalf("%d acknowledged, %d refused", len(acked), len(refused))
	}
	if e := s.Entries(); e == 0 || e > 1000 {
		t.Errorf("%d entries for 2000 puts: not batched", e)
	}
	for id := uint64(1); id <= 1000; id++ {
		s.Delete(id)
	}
	flushed := make(chan error, 1)
	s.Flush(func(err error) { flushed <- err })
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
	s.Close()
	c.waitApplied(l.fsm.Applied())
	for _, nd := range c.nodes {
		got := loaded(t, nd.fsm)
		if len(got) != 1000 || got[1001] != "f/u1001=payload" || got[2000] == "" {
			t.Errorf("%s holds %d jobs", nd.id, len(got))
		}
	}
	// A store closed takes no more writes.
	done := make(chan error, 1)
	s.Put(1, rec("f", "", ""), func(err error) { done <- err })
	if err := <-done; err != ErrClosed {
		t.Errorf("a put after Close: %v", err)
	}
}

// A leader cut off from the others acknowledges nothing: its writes fail
// once it steps down. The others elect a leader that has every
// acknowledged write, and none of the refused ones once the cluster heals.
func TestPartitionedLeaderAcknowledgesNothing(t *testing.T) {
	c := newTestCluster(t, 3)
	old := c.leader()
	s := New(old.raft, old.fsm)
	acked, _ := putAll(s, 1, 100)
	if len(acked) != 100 {
		t.Fatalf("%d of 100 acknowledged before the partition", len(acked))
	}
	c.isolate(old)
	start := time.Now()
	lateAcked, refused := putAll(s, 1000, 100)
	if len(lateAcked) != 0 || len(refused) != 100 {
		t.Fatalf("a partitioned leader acknowledged %d of 100", len(lateAcked))
	}
	t.Logf("refused after %v", time.Since(start))
	s.Close()

	var rest []*testNode
	for _, nd := range c.nodes {
		if nd != old {
			rest = append(rest, nd)
		}
	}
	nl := c.leader(rest...)
	if err := nl.raft.Barrier(5 * time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	ns := New(nl.raft, nl.fsm)
	more, _ := putAll(ns, 2000, 100)
	if len(more) != 100 {
		t.Fatalf("the new leader acknowledged %d of 100", len(more))
	}
	ns.Close()
	c.heal()
	c.waitApplied(nl.fsm.Applied())
	for _, nd := range c.nodes {
		got := loaded(t, nd.fsm)
		for _, id := range append(acked, more...) {
			if got[id] == "" {
				t.Errorf("%s lost acknowledged job %d", nd.id, id)
			}
		}
		for _, id := range refused {
			if got[id] != "" {
				t.Errorf("%s holds refused job %d", nd.id, id)
			}
		}
	}
}

// A node that was down while the log was compacted catches up from a
// snapshot, and so does one that lost its data directory.
func TestFollowerCatchesUpFromSnapshot(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	var lagging, wiped *testNode
	for _, nd := range c.nodes {
		if nd != l && lagging == nil {
			lagging = nd
		} else if nd != l {
			wiped = nd
		}
	}
	c.isolate(lagging)
	s := New(l.raft, l.fsm)
	if acked, _ := putAll(s, 1, 500); len(acked) != 500 {
		t.Fatalf("%d of 500 acknowledged", len(acked))
	}
	for i := range 50 { // entries past TrailingLogs, for compaction to drop
		putAll(s, 1000+i, 1)
	}
	if err := l.raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	if first, _ := l.logs.FirstIndex(); first <= 2 {
		t.Fatalf("the log was not compacted: first index %d", first)
	}

	// The wiped node: stopped, its directory emptied, started again with
	// no state and no bootstrap (it has to be sent everything).
	wiped.raft.Shutdown().Error()
	wiped.logs.Close()
	wiped.dir = t.TempDir()
	c.start(wiped, raft.Configuration{})
	c.heal()
	c.waitApplied(l.fsm.Applied())
	want := loaded(t, l.fsm)
	for _, nd := range []*testNode{lagging, wiped} {
		if got := loaded(t, nd.fsm); len(got) != len(want) {
			t.Errorf("%s holds %d jobs, the leader %d", nd.id, len(got), len(want))
		}
	}
	s.Close()
}

// A node restarted from its directory knows the members, itself among
// them, so it can stand for election. (hashicorp/raft's
// RestoreCommittedLogs loses them: see LogStore.)
func TestRestartedNodeKnowsMembers(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	s := New(l.raft, l.fsm)
	if acked, _ := putAll(s, 1, 10); len(acked) != 10 {
		t.Fatalf("%d of 10 acknowledged", len(acked))
	}
	s.Close()
	var f *testNode
	for _, nd := range c.nodes {
		if nd != l {
			f = nd
			break
		}
	}
	f.raft.Shutdown().Error()
	f.logs.Close()
	c.start(f, raft.Configuration{})
	conf := f.raft.GetConfiguration()
	if err := conf.Error(); err != nil {
		t.Fatal(err)
	}
	if n := len(conf.Configuration().Servers); n != 3 {
		t.Fatalf("the restarted node knows %d members, want 3", n)
	}
	// The leader gone, the restarted node and the third elect one of
	// them, which has every acknowledged job once it has applied the log.
	c.isolate(l)
	var rest []*testNode
	for _, nd := range c.nodes {
		if nd != l {
			rest = append(rest, nd)
		}
	}
	nl := c.leader(rest...)
	if err := nl.raft.Barrier(5 * time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	if got := loaded(t, nl.fsm); len(got) != 10 {
		t.Errorf("the new leader holds %d jobs, want 10", len(got))
	}
}
