package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"switchyard/sched"
	"switchyard/sched/durable"
	"switchyard/sched/replicated"
)

// inmemCluster is three nodes on hashicorp/raft's in-memory transport,
// each with its log in a directory of its own: partitions are a call.
type inmemCluster struct {
	t     *testing.T
	nodes []*Node
	trans []*raft.InmemTransport
}

func startInmem(t *testing.T) *inmemCluster {
	t.Helper()
	c := &inmemCluster{t: t}
	var peers []Peer
	for i := range 3 {
		addr, tr := raft.NewInmemTransport("")
		c.trans = append(c.trans, tr)
		peers = append(peers, Peer{ID: fmt.Sprintf("n%d", i+1), Addr: string(addr)})
	}
	for _, a := range c.trans {
		for _, b := range c.trans {
			if a != b {
				a.Connect(b.LocalAddr(), b)
			}
		}
	}
	for i, tr := range c.trans {
		// The default timeouts: shorter ones make elections no test asked
		// for on a busy machine (the in-memory transport has no fast path
		// for heartbeats, which wait behind a follower's disk).
		n, err := Open(Config{ID: peers[i].ID, Peers: peers, Dir: t.TempDir(), trans: tr})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		c.nodes = append(c.nodes, n)
	}
	return c
}

// leader waits for one of among (every node if none) to lead.
func (c *inmemCluster) leader(among ...*Node) *Node {
	c.t.Helper()
	if len(among) == 0 {
		among = c.nodes
	}
	deadline := time.Now().Add(waitLimit)
	for time.Now().Before(deadline) {
		for _, n := range among {
			if n.IsLeader() {
				return n
			}
		}
		time.Sleep(5 * time.Millisecond) // polling an election
	}
	c.t.Fatal("no leader")
	return nil
}

func (c *inmemCluster) others(n *Node) []*Node {
	var out []*Node
	for _, o := range c.nodes {
		if o != n {
			out = append(out, o)
		}
	}
	return out
}

func (c *inmemCluster) transOf(n *Node) *raft.InmemTransport {
	for i, o := range c.nodes {
		if o == n {
			return c.trans[i]
		}
	}
	panic("not a node of the cluster")
}

// isolate cuts n off from the others, both ways.
func (c *inmemCluster) isolate(n *Node) {
	tr := c.transOf(n)
	tr.DisconnectAll()
	for _, o := range c.trans {
		if o != tr {
			o.Disconnect(tr.LocalAddr())
		}
	}
}

func (c *inmemCluster) heal() {
	for _, a := range c.trans {
		for _, b := range c.trans {
			if a != b {
				a.Connect(b.LocalAddr(), b)
			}
		}
	}
}

// fakeRunner runs no scheduler: a leader's term replays the store into a
// map, as a scheduler would read it; a follower's has no relay.
type fakeRunner struct {
	leads   chan *fakeLeading
	follows chan *fakeFollowing
	entered chan struct{} // a Lead began
	calls   atomic.Int32  // Lead calls
	// block makes Lead wait until its context ends, as a replay of
	// many jobs would take long.
	block bool
}

func newFakeRunner() *fakeRunner {
	return &fakeRunner{leads: make(chan *fakeLeading, 8), follows: make(chan *fakeFollowing, 8), entered: make(chan struct{}, 8)}
}

func (f *fakeRunner) Lead(ctx context.Context, store *replicated.Store) (Leading, error) {
	f.calls.Add(1)
	f.entered <- struct{}{}
	if f.block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	l := &fakeLeading{store: store, jobs: map[uint64]string{}, served: make(chan uint64, 1), stopped: make(chan struct{})}
	if err := store.Load(func(r *sched.Record) error {
		l.jobs[r.ID] = string(r.Payload)
		return nil
	}); err != nil {
		return nil, err
	}
	f.leads <- l
	return l, nil
}

func (f *fakeRunner) Follow() (Following, error) {
	fl := &fakeFollowing{stopped: make(chan struct{})}
	f.follows <- fl
	return fl, nil
}

type fakeLeading struct {
	store   *replicated.Store
	jobs    map[uint64]string // what the term's replay read
	served  chan uint64       // its term, once it serves
	stopped chan struct{}
}

func (l *fakeLeading) Addrs() map[string][]string {
	return map[string][]string{"gearman": {"127.0.0.1:4730"}}
}
func (l *fakeLeading) Serve(term uint64, _ time.Duration) { l.served <- term }
func (l *fakeLeading) Stop()                              { close(l.stopped) }

type fakeFollowing struct{ stopped chan struct{} }

func (f *fakeFollowing) Relays() []RoleRelay { return nil }
func (f *fakeFollowing) Stop()               { close(f.stopped) }

// recv waits for a value on ch, for at most waitLimit.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitLimit):
		t.Fatalf("no %s in %v", what, waitLimit)
	}
	var zero T
	return zero
}

func put(s *replicated.Store, id uint64, payload string) error {
	done := make(chan error, 1)
	s.Put(id, durable.EncodeRecord(&sched.Record{Func: "f", Payload: []byte(payload)}), func(err error) { done <- err })
	select {
	case err := <-done:
		return err
	case <-time.After(waitLimit):
		return errors.New("no answer")
	}
}

// A node that loses the lead and wins it back between two looks of its
// role machine (the observations coalesced, or late) starts its new term
// anew: the first term's role stops, a new one replays what the interim
// leader committed, and meanwhile the first term's store can overwrite
// nothing. A role tracked by whether the node leads, not by its term,
// kept the first term's scheduler, which never saw the interim leader's
// jobs and could hand their ids out again.
func TestRolesNewTermStartsAnew(t *testing.T) {
	c := startInmem(t)
	a := c.leader()
	run := newFakeRunner()
	look, meta := make(chan struct{}, 1), make(chan struct{}, 1)
	m := NewRoles(a, RolesConfig{Runner: run})
	m.changes, m.metaChanged = look, meta // the test decides when it looks
	m.Start()
	defer m.Stop(false)
	first := recv(t, run.leads, "first term")
	term1 := recv(t, first.served, "first term serving")
	if err := put(first.store, 1, "first term's job"); err != nil {
		t.Fatal(err)
	}

	// a is cut off; another node leads and writes job 11.
	c.isolate(a)
	b := c.leader(c.others(a)...)
	if err := b.Barrier(context.Background(), waitLimit); err != nil {
		t.Fatal(err)
	}
	interim := replicated.New(context.Background(), b.Raft(), b.FSM(), replicated.Options{Term: b.Raft().CurrentTerm()})
	if err := put(interim, 11, "interim leader's job"); err != nil {
		t.Fatal(err)
	}
	interim.Close()
	c.heal()
	// a leads again, in a later term, and its machine has not looked.
	if err := b.Raft().LeadershipTransferToServer(raft.ServerID(a.ID()), raft.ServerAddress(a.RaftAddr())).Error(); err != nil {
		t.Fatal(err)
	}
	c.leader(a)
	term3 := a.Raft().CurrentTerm()
	if term3 <= term1 || run.calls.Load() != 1 {
		t.Fatalf("a leads in term %d (first %d); %d starts", term3, term1, run.calls.Load())
	}
	if err := put(first.store, 11, "first term's job 11"); !errors.Is(err, replicated.ErrStaleTerm) {
		t.Fatalf("a write of the first term's store in term %d: %v", term3, err)
	}

	look <- struct{}{} // one look
	second := recv(t, run.leads, "the new term")
	recv(t, first.stopped, "the first term's stop")
	if got := recv(t, second.served, "the new term serving"); got != term3 || second.store.Term() != term3 {
		t.Errorf("the new term serves as %d, its store's is %d; want %d", got, second.store.Term(), term3)
	}
	if second.jobs[11] != "interim leader's job" || second.jobs[1] != "first term's job" || len(second.jobs) != 2 {
		t.Errorf("the new term replayed %v", second.jobs)
	}
	// The publication of the new term reaches the followers.
	deadline := time.Now().Add(waitLimit)
	for {
		info, ok := b.CurrentLeader()
		if ok && info.ID == a.ID() && info.Term == term3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the followers see the leader %+v, %v", info, ok)
		}
		time.Sleep(5 * time.Millisecond) // polling replication
	}
}

// A leader's start that takes long (a replay of many jobs) ends when its
// term does, and when the machine stops: neither waits for it.
func TestRolesStartEndsWithTerm(t *testing.T) {
	for _, end := range []string{"term", "stop"} {
		t.Run(end, func(t *testing.T) {
			c := startInmem(t)
			a := c.leader()
			run := newFakeRunner()
			run.block = true
			m := NewRoles(a, RolesConfig{Runner: run})
			m.Start()
			stopped := make(chan struct{})
			defer func() {
				go func() { m.Stop(false); close(stopped) }()
				recv(t, stopped, "the machine's stop")
			}()
			recv(t, run.entered, "a start")
			if end == "stop" {
				return // the deferred Stop
			}
			c.isolate(a) // a steps down within its lease
			recv(t, run.follows, "a follower's role after the term ended")
			waitFor(t, "health saying there is no leader", func() bool {
				h := m.Health()
				return h != nil && strings.Contains(h.Error(), "no leader")
			})
		})
	}
}

// diskFaults are a node's disk: its log's syncs can stall until released,
// or fail.
type diskFaults struct {
	stall    atomic.Pointer[chan struct{}]
	failSync atomic.Bool
}

func (d *diskFaults) open(name string, flag int, perm os.FileMode) (replicated.File, error) {
	f, err := replicated.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return faultyFile{f, d}, nil
}

// stallSyncs makes every sync wait until the returned func is called.
func (d *diskFaults) stallSyncs() (release func()) {
	ch := make(chan struct{})
	d.stall.Store(&ch)
	return func() {
		if d.stall.CompareAndSwap(&ch, nil) {
			close(ch)
		}
	}
}

type faultyFile struct {
	replicated.File
	d *diskFaults
}

func (f faultyFile) Datasync() error {
	if ch := f.d.stall.Load(); ch != nil {
		<-*ch
	}
	if f.d.failSync.Load() {
		return syscall.EIO
	}
	return f.File.Datasync()
}

// startThreeFaulty is startThree with each node's disk in disks.
func startThreeFaulty(t *testing.T, disks *[3]diskFaults) []*Node {
	return startThreeWith(t, func(i int, cfg *Config) { cfg.logOpts.OpenFile = disks[i].open })
}

// A new leader whose followers' disks stall (it keeps its lease: they
// answer heartbeats) gives up its wait for the log after the barrier's
// timeout, says so, and tries again; once the disks move, it serves.
func TestRolesBarrierBounded(t *testing.T) {
	var disks [3]diskFaults
	nodes := startThreeFaulty(t, &disks)
	l, li := leaderOf(t, nodes)
	var releases []func()
	for i := range disks {
		if i == li {
			continue
		}
		release := disks[i].stallSyncs()
		t.Cleanup(release) // before the nodes close, which waits for the syncs
		releases = append(releases, release)
	}
	core, logs := observer.New(zapcore.WarnLevel)
	run := newFakeRunner()
	m := NewRoles(l, RolesConfig{Runner: run, Log: zap.New(core)})
	m.barrierTimeout, m.retryAfter = 100*time.Millisecond, 10*time.Millisecond
	m.Start()
	defer func() {
		for _, release := range releases { // a stop waits for a start under way
			release()
		}
		m.Stop(false)
	}()
	deadline := time.Now().Add(waitLimit)
	for logs.FilterMessage("cluster: cannot take the lead").Len() < 2 { // polling the log
		if time.Now().After(deadline) {
			t.Fatalf("no bounded wait for the log: %v", logs.All())
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, e := range logs.FilterMessage("cluster: cannot take the lead").All() {
		if err := e.ContextMap()["error"]; !strings.Contains(fmt.Sprint(err), "wait for the log to be applied: timed out") {
			t.Errorf("the log says %q", err)
		}
	}
	if !l.IsLeader() || run.calls.Load() != 0 {
		t.Fatalf("leader %v, %d starts while the disks stall", l.IsLeader(), run.calls.Load())
	}
	if h := m.Health(); h == nil {
		t.Error("healthy while the log does not move")
	}
	for _, release := range releases {
		release()
	}
	lt := recv(t, run.leads, "the lead once the disks move")
	recv(t, lt.served, "serving")
	if h := m.Health(); h != nil {
		t.Errorf("health once serving: %v", h)
	}
}

// A leader whose log fails a sync acknowledges nothing more: the write
// fails, it steps down, another leads; its health and metrics say why,
// and it follows.
func TestRolesFailedSync(t *testing.T) {
	var disks [3]diskFaults
	nodes := startThreeFaulty(t, &disks)
	l, li := leaderOf(t, nodes)
	run := newFakeRunner()
	m := NewRoles(l, RolesConfig{Runner: run})
	m.Start()
	defer m.Stop(false)
	lt := recv(t, run.leads, "the lead")
	recv(t, lt.served, "serving")
	if err := put(lt.store, 1, "before"); err != nil {
		t.Fatal(err)
	}
	disks[li].failSync.Store(true)
	if err := put(lt.store, 2, "after"); err == nil {
		t.Fatal("a write acknowledged by a leader whose sync failed")
	}
	disks[li].failSync.Store(false) // the disk syncs again: no matter
	recv(t, run.follows, "a follower's role")
	recv(t, lt.stopped, "the term's stop")
	if err := m.Health(); err == nil || !strings.Contains(err.Error(), "raft log failed a sync") || !errors.Is(err, syscall.EIO) {
		t.Errorf("health: %v", err)
	}
	if err := put(lt.store, 3, "late"); err == nil {
		t.Error("the closed term's store acknowledged a write")
	}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(l.Collector()); err != nil {
		t.Fatal(err)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	failed := -1.0
	for _, f := range fams {
		if f.GetName() == "switchyard_cluster_log_failed" {
			failed = f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	if failed != 1 {
		t.Errorf("switchyard_cluster_log_failed %v, want 1", failed)
	}
	if st := l.Status(); st.LogFailed == "" || st.Role == "leader" {
		t.Errorf("status %+v", st)
	}
	// The others go on, and l acknowledges nothing: it has not the entry.
	var nl *Node
	deadline := time.Now().Add(waitLimit)
	for nl == nil {
		for _, n := range nodes {
			if n != l && n.IsLeader() {
				nl = n
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no new leader")
		}
		time.Sleep(10 * time.Millisecond) // polling an election
	}
	if err := nl.Barrier(context.Background(), waitLimit); err != nil {
		t.Fatal(err)
	}
	s := replicated.New(context.Background(), nl.Raft(), nl.FSM(), replicated.Options{Term: nl.Raft().CurrentTerm()})
	defer s.Close()
	if err := put(s, 4, "new leader"); err != nil {
		t.Fatal(err)
	}
	if l.FSM().Len() != 1 || l.IsLeader() {
		t.Errorf("the failed node holds %d jobs; leads %v", l.FSM().Len(), l.IsLeader())
	}
}
