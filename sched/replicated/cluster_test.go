package replicated

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
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
	// logOpts open its log (faults injected).
	logOpts LogOptions
}

type testCluster struct {
	t     *testing.T
	nodes []*testNode
}

func testConfig(id raft.ServerID) *raft.Config {
	c := raft.DefaultConfig()
	c.LocalID = id
	// A second, not the server's 500 ms: the tests count what a leader
	// acknowledges, and a leader whose heartbeats a busy machine (and the
	// race detector) delays past its lease steps down and refuses writes.
	// TestStoreReplicates lost the lead so at 100 ms, under -race beside
	// other builds. Elections the tests cause (isolate) take a second or two.
	c.HeartbeatTimeout = time.Second
	c.ElectionTimeout = time.Second
	c.LeaderLeaseTimeout = time.Second
	c.CommitTimeout = 5 * time.Millisecond
	c.SnapshotThreshold = 1 << 30 // snapshots only when a test asks
	c.TrailingLogs = 8
	c.Logger = hclog.New(&hclog.LoggerOptions{Output: io.Discard, Level: hclog.Off})
	return c
}

func newTestCluster(t *testing.T, n int, opts ...LogOptions) *testCluster {
	t.Helper()
	c := &testCluster{t: t}
	var servers []raft.Server
	for i := range n {
		nd := &testNode{id: raft.ServerID(fmt.Sprintf("n%d", i+1)), dir: t.TempDir()}
		if i < len(opts) {
			nd.logOpts = opts[i]
		}
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
	if nd.logs, err = OpenLogStoreWith(nd.dir+"/log", nd.logOpts); err != nil {
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

// newStore is a store of nd's current term, as a leader makes one.
func newStore(nd *testNode) *Store {
	return New(context.Background(), nd.raft, nd.fsm, Options{Term: nd.raft.CurrentTerm()})
}

// steady runs write with a store of the current leader's term (among
// nodes; every node if none given), and again with a store of a new term
// if write failed because the lead changed: at these timeouts, a machine
// busy enough can hold an election in the middle of a test, and the store
// of the term that ended is then refused, as it must be. A failure with no
// change of leader fails the test. It returns the store (open) and its
// node.
func (c *testCluster) steady(write func(s *Store) error, among ...*testNode) (*Store, *testNode) {
	c.t.Helper()
	for attempt := 1; ; attempt++ {
		if attempt > 5 {
			c.t.Fatalf("the lead changed %d times during the writes", attempt-1)
		}
		l := c.leader(among...)
		term := l.raft.CurrentTerm()
		if err := l.raft.Barrier(5 * time.Second).Error(); err != nil {
			c.t.Logf("%s's barrier in term %d: %v: again", l.id, term, err)
			continue
		}
		s := newStore(l)
		err := write(s)
		if err == nil {
			return s, l
		}
		s.Close()
		if l.raft.State() == raft.Leader && l.raft.CurrentTerm() == s.Term() {
			c.t.Fatalf("%s, the leader of term %d, refused writes: %v", l.id, s.Term(), err)
		}
		c.t.Logf("the lead changed during the writes (%s's term %d, now %d, %v): written again", l.id, s.Term(),
			l.raft.CurrentTerm(), l.raft.State())
	}
}

// putEvery writes n records through s and fails unless each one is
// acknowledged (for steady).
func putEvery(from, n int) func(s *Store) error {
	return func(s *Store) error {
		if _, refused := putAll(s, from, n); len(refused) > 0 {
			return fmt.Errorf("%d of %d writes refused", len(refused), n)
		}
		return nil
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
	s, l := c.steady(func(s *Store) error {
		if s.maxLinger != maxLinger {
			t.Fatalf("the writer lingers %v at most, want %v", s.maxLinger, maxLinger)
		}
		if err := putEvery(1, 2000)(s); err != nil {
			return err
		}
		if e := s.Entries(); e == 0 || e > 1000 {
			t.Errorf("%d entries for 2000 puts: not batched", e)
		}
		for id := uint64(1); id <= 1000; id++ {
			s.Delete(id)
		}
		flushed := make(chan error, 1)
		s.Flush(func(err error) { flushed <- err })
		return <-flushed
	})
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
	s, old := c.steady(putEvery(1, 100))
	var acked []uint64
	for id := uint64(1); id <= 100; id++ {
		acked = append(acked, id)
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
	ns, nl := c.steady(putEvery(2000, 100), rest...)
	var more []uint64
	for id := uint64(2000); id < 2100; id++ {
		more = append(more, id)
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

// A leader that loses the lead and wins it back, its store of the first
// term still open (its role machine did not look in between): that
// store's writes are refused on every node, and none overwrites the record
// the interim leader wrote under the same id, which the first term's
// scheduler could hand out again.
func TestStaleTermStoreRefused(t *testing.T) {
	c := newTestCluster(t, 3)
	old, a := c.steady(putEvery(1, 10))
	defer old.Close()
	c.isolate(a)
	var rest []*testNode
	for _, nd := range c.nodes {
		if nd != a {
			rest = append(rest, nd)
		}
	}
	done := make(chan error, 1)
	interim, b := c.steady(func(s *Store) error {
		s.Put(11, rec("f", "interim", "interim's job 11"), func(err error) { done <- err })
		return <-done
	}, rest...)
	interim.Close()
	c.heal()
	c.waitApplied(b.fsm.Applied())
	// a takes the lead back, in a later term than its store's.
	if err := b.raft.LeadershipTransferToServer(a.id, a.addr).Error(); err != nil {
		t.Fatal(err)
	}
	if c.leader(a) != a || a.raft.CurrentTerm() <= old.Term() {
		t.Fatalf("%s leads in term %d, its old store's is %d", a.id, a.raft.CurrentTerm(), old.Term())
	}
	old.Put(11, rec("f", "stale", "the old term's job 11"), func(err error) { done <- err })
	if err := <-done; !errors.Is(err, ErrStaleTerm) {
		t.Fatalf("a put through the old term's store: %v, want %v", err, ErrStaleTerm)
	}
	// A store of a's new term writes.
	cur, _ := c.steady(func(s *Store) error {
		s.Put(12, rec("f", "new", "the new term's job 12"), func(err error) { done <- err })
		return <-done
	})
	defer cur.Close()
	c.waitApplied(a.fsm.Applied())
	for _, nd := range c.nodes {
		got := loaded(t, nd.fsm)
		if got[11] != "f/interim=interim's job 11" || got[12] != "f/new=the new term's job 12" || len(got) != 12 {
			t.Errorf("%s holds %d jobs; 11: %q, 12: %q", nd.id, len(got), got[11], got[12])
		}
	}
}

// A leader whose log fails a sync acknowledges nothing more: the writes
// of the entry fail, it steps down, and its log takes no entry after,
// although its disk syncs again; the other two go on without it.
func TestFailedSyncStopsAcknowledging(t *testing.T) {
	var fss [3]faultFS
	var opts []LogOptions
	for i := range fss {
		opts = append(opts, LogOptions{OpenFile: fss[i].OpenFile})
	}
	c := newTestCluster(t, 3, opts...)
	s, l := c.steady(putEvery(1, 10))
	defer s.Close()
	fs := &fss[slices.IndexFunc(c.nodes, func(nd *testNode) bool { return nd == l })]
	fs.arm(&fs.failSync, 1)
	if acked, refused := putAll(s, 100, 10); len(acked) != 0 || len(refused) != 10 {
		t.Fatalf("after the failed sync: %d acknowledged, %d refused", len(acked), len(refused))
	}
	if err := l.logs.Failed(); !errors.Is(err, ErrLogFailed) {
		t.Fatalf("the leader's log after the failed sync: %v", err)
	}
	last, _ := l.logs.LastIndex()
	var rest []*testNode
	for _, nd := range c.nodes {
		if nd != l {
			rest = append(rest, nd)
		}
	}
	ns, _ := c.steady(putEvery(200, 10), rest...)
	defer ns.Close()
	if st := l.raft.State(); st == raft.Leader {
		t.Errorf("the node whose sync failed is %v", st)
	}
	if now, _ := l.logs.LastIndex(); now != last {
		t.Errorf("the failed log went from %d to %d", last, now)
	}
	if acked, _ := putAll(s, 300, 5); len(acked) != 0 {
		t.Errorf("the failed node's store acknowledged %d", len(acked))
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
	s, l := c.steady(func(s *Store) error {
		if err := putEvery(1, 500)(s); err != nil {
			return err
		}
		for i := range 50 { // entries past TrailingLogs, for compaction to drop
			if err := putEvery(1000+i, 1)(s); err != nil {
				return err
			}
		}
		return nil
	}, l, wiped)
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
	s, l := c.steady(putEvery(1, 10))
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
