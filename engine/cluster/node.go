// Package cluster runs a switchyard node of a Raft cluster: hashicorp/raft
// over TCP between the nodes, mutual TLS when they have certificates
// (stream.go), the replicated job store's state
// (sched/replicated), membership changes, and the figures an operator
// reads (role, term, indexes, each follower's lag). Which node leads, and
// in which term, decides what the process runs: the role machine (Roles)
// has the leader of a term run the scheduler and every frontend, which a
// Runner (cmd/switchyard's) starts, and the others relay their clients'
// connections to it (Relay).
package cluster

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"switchyard/engine/certs"
	"switchyard/sched/replicated"
)

// Peer is a node of the cluster: its name and its Raft address.
type Peer struct {
	ID   string
	Addr string
}

// ParsePeers reads --cluster-peers: NAME@HOST:PORT, comma-separated.
func ParsePeers(s string) ([]Peer, error) {
	var out []Peer
	seen := map[string]bool{}
	for _, p := range strings.Split(s, ",") {
		id, addr, ok := strings.Cut(strings.TrimSpace(p), "@")
		if !ok || id == "" {
			return nil, fmt.Errorf("%q: want NAME@HOST:PORT", p)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("%q: %v", p, err)
		}
		if seen[id] {
			return nil, fmt.Errorf("node %q given twice", id)
		}
		seen[id] = true
		out = append(out, Peer{ID: id, Addr: addr})
	}
	return out, nil
}

// Config is a node's configuration.
type Config struct {
	ID string
	// Listen is the Raft transport's address, host:port; it is also the
	// address the other nodes reach this one at, so not 0.0.0.0. Port 0
	// is one the kernel picks (RaftAddr tells it).
	Listen string
	// Peers bootstrap a new cluster: every node of it, this one
	// included. A node that has state already, or is to be added to a
	// running cluster, needs none.
	Peers []Peer
	// Dir holds the Raft log and snapshots.
	Dir string
	Log *zap.Logger
	// TLS, when set, is this node's certificate and the cluster's CA:
	// mutual TLS between the nodes (stream.go). Without it the nodes
	// speak plain TCP, which Open allows on a loopback address only,
	// unless Insecure.
	TLS      *certs.Source
	Insecure bool
	// Timeouts; zero: the defaults below.
	HeartbeatTimeout, ElectionTimeout, LeaderLeaseTimeout time.Duration
	HandshakeTimeout                                      time.Duration // DefaultHandshakeTimeout

	// For tests: Raft over this transport (an in-memory one) rather than
	// TCP on Listen, and the log's files opened as logOpts says.
	trans   raftTransport
	logOpts replicated.LogOptions
}

// Defaults of Config: a leader that stops answering is replaced in about
// a second (a follower gives up on it after the heartbeat timeout, at a
// random check within twice that, and the election waits for the later
// of the two survivors), and a leader that cannot reach a majority steps
// down, and acknowledges nothing more, within its lease. At hashicorp/raft's
// 1 s, 3 of 60 kills of a leader took over 3 s to be replaced (p50 2.3 s);
// at 500 ms the worst of 60 took 2.0 s (p50 1.1 s), with no other election
// on a busy 2-core machine.
const (
	DefaultHeartbeatTimeout   = 500 * time.Millisecond
	DefaultElectionTimeout    = 500 * time.Millisecond
	DefaultLeaderLeaseTimeout = 500 * time.Millisecond
)

// Node is a running member of a cluster.
type Node struct {
	cfg   Config
	raft  *raft.Raft
	fsm   *replicated.FSM
	logs  *replicated.LogStore
	trans *transport
	sl    *streamLayer
	ref   *refusals
	lease *lease
	obsCh chan raft.Observation
	obs   *raft.Observer

	changes chan struct{} // signalled on every change of leader or role
	stop    chan struct{}
	done    sync.WaitGroup

	// logFailed, once set, is the failed sync that stopped the log's
	// writes: the node stands for no election (transport.fence), steps
	// down, and its health says so.
	logFailed atomic.Pointer[error]
}

// Open starts the node: its Raft on cfg.Listen, its state from cfg.Dir,
// bootstrapping a new cluster from cfg.Peers when there is no state.
func Open(cfg Config) (*Node, error) {
	if err := ValidID(cfg.ID); err != nil {
		return nil, err
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	if err := os.MkdirAll(cfg.Dir, 0o750); err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, fsm: replicated.NewFSM(), changes: make(chan struct{}, 1), stop: make(chan struct{}),
		ref: &refusals{log: cfg.Log, logged: make(map[string]bool)}}
	hlog := hclog.New(&hclog.LoggerOptions{Name: "raft", Output: zapWriter{cfg.Log}, Level: hclog.Warn})
	var err error
	logOpts := cfg.logOpts
	logOpts.OnFail = n.logFail
	if n.logs, err = replicated.OpenLogStoreWith(filepath.Join(cfg.Dir, "log"), logOpts); err != nil {
		return nil, err
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.Dir, 2, hlog)
	if err != nil {
		n.logs.Close()
		return nil, fmt.Errorf("cluster: snapshots in %s: %w", cfg.Dir, err)
	}
	rt := cfg.trans
	if rt == nil {
		if rt, n.sl, err = listenRaft(cfg, hlog, n.ref); err != nil {
			n.logs.Close()
			return nil, err
		}
	}
	n.lease = newLease(orDefault(cfg.HeartbeatTimeout, DefaultHeartbeatTimeout))
	n.trans = newTransport(rt, n.LogFailed, n.lease)
	if n.sl != nil {
		n.trans.target = dialAddr
	}
	n.cfg.Listen = string(rt.LocalAddr())

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.ID)
	rc.Logger = hlog
	rc.HeartbeatTimeout = orDefault(cfg.HeartbeatTimeout, DefaultHeartbeatTimeout)
	rc.ElectionTimeout = orDefault(cfg.ElectionTimeout, DefaultElectionTimeout)
	rc.LeaderLeaseTimeout = orDefault(cfg.LeaderLeaseTimeout, DefaultLeaderLeaseTimeout)
	rc.CommitTimeout = 5 * time.Millisecond
	rc.MaxAppendEntries = 256
	rc.BatchApplyCh = true
	rc.TrailingLogs = 4096
	rc.SnapshotThreshold = 8192
	rc.SnapshotInterval = 30 * time.Second

	has, err := raft.HasExistingState(n.logs, n.logs, snaps)
	if err != nil {
		n.close()
		return nil, err
	}
	if !has && len(cfg.Peers) > 0 {
		var conf raft.Configuration
		self := false
		for _, p := range cfg.Peers {
			addr := p.Addr
			if p.ID == cfg.ID {
				// This node's entry is where it listens: the same, or with
				// port 0, the port it got.
				addr, self = n.cfg.Listen, true
			}
			conf.Servers = append(conf.Servers, raft.Server{ID: raft.ServerID(p.ID), Address: raft.ServerAddress(addr)})
		}
		if !self {
			n.close()
			return nil, fmt.Errorf("cluster: --cluster-peers does not name this node (%s)", cfg.ID)
		}
		if err := raft.BootstrapCluster(rc, n.logs, n.logs, snaps, n.trans, conf); err != nil {
			n.close()
			return nil, fmt.Errorf("cluster: bootstrap: %w", err)
		}
	}
	recordTimings()
	if n.raft, err = raft.NewRaft(rc, n.fsm, n.logs, n.logs, snaps, n.trans); err != nil {
		n.close()
		return nil, fmt.Errorf("cluster: %w", err)
	}
	if n.sl != nil {
		n.sl.raft.Store(n.raft) // the acceptor checks peers against its configuration from now on
	}
	n.obsCh = make(chan raft.Observation, 16)
	n.obs = raft.NewObserver(n.obsCh, false, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.LeaderObservation, raft.RaftState, raft.PeerObservation:
			return true
		}
		return false
	})
	n.raft.RegisterObserver(n.obs)
	n.votersChanged()
	n.done.Add(1)
	go n.watch()
	return n, nil
}

// listenRaft opens Raft's network transport on cfg.Listen, which is also
// where the other nodes reach this one: advertised as bound (with port
// 0, the port the kernel picked). It speaks through our stream layer:
// mutual TLS with cfg.TLS, plain TCP without, which only a loopback
// address or cfg.Insecure allows.
func listenRaft(cfg Config, hlog hclog.Logger, ref *refusals) (raftTransport, *streamLayer, error) {
	bind, err := net.ResolveTCPAddr("tcp", cfg.Listen)
	if err != nil {
		return nil, nil, fmt.Errorf("cluster: --cluster-listen %s: %w", cfg.Listen, err)
	}
	if bind.IP == nil || bind.IP.IsUnspecified() {
		return nil, nil, fmt.Errorf("cluster: --cluster-listen %s: the other nodes reach this one there: give a host, not every address", cfg.Listen)
	}
	if cfg.TLS != nil {
		if err := CheckCert(cfg.TLS.Get(), cfg.ID); err != nil {
			return nil, nil, err
		}
	}
	if cfg.TLS == nil && !cfg.Insecure && !bind.IP.IsLoopback() {
		return nil, nil, fmt.Errorf("cluster: --cluster-listen %s is not a loopback address: give this node its certificate "+
			"(--cluster-tls-cert, --cluster-tls-key and --cluster-tls-ca: mutual TLS between the nodes), "+
			"or say --cluster-insecure to let anyone who reaches the port in, and everything replicated cross the network in clear", cfg.Listen)
	}
	ln, err := net.Listen("tcp", bind.String())
	if err != nil {
		return nil, nil, fmt.Errorf("cluster: listen on %s: %w", cfg.Listen, err)
	}
	sl := newStreamLayer(ln, cfg.TLS, orDefault(cfg.HandshakeTimeout, DefaultHandshakeTimeout), ref)
	nt := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{Stream: sl, MaxPool: 3,
		Timeout: 10 * time.Second, Logger: hlog})
	return nt, sl, nil
}

// CheckCert refuses a node certificate its peers would refuse: one that
// does not name the node id, or that the cluster's CA did not issue for
// TLS servers and clients. Open checks the one it is given; a reload
// (certs.Source's Loader) should check each, so as to keep the old one.
func CheckCert(b *certs.Bundle, id string) error {
	var chain []*x509.Certificate
	for _, der := range b.Cert.Certificate {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return fmt.Errorf("cluster: --cluster-tls-cert: %w", err)
		}
		chain = append(chain, c)
	}
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := verifyChain(chain, b.Roots(), usage); err != nil {
			return fmt.Errorf("cluster: --cluster-tls-cert does not verify against --cluster-tls-ca for TLS servers and clients, "+
				"so the other nodes would refuse it: %w", err)
		}
	}
	if !names(chain[0], id) {
		return fmt.Errorf("cluster: --cluster-tls-cert names %q, not this node (--node-id %s): the other nodes would refuse it", chain[0].DNSNames, id)
	}
	return nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// watch turns Raft's observations into Changes, and forgets what the
// metrics know of a node removed.
func (n *Node) watch() {
	defer n.done.Done()
	for {
		select {
		case o := <-n.obsCh:
			n.votersChanged()
			if p, ok := o.Data.(raft.PeerObservation); ok {
				if p.Removed {
					n.trans.forget(string(p.Peer.ID))
					timings.forget(string(p.Peer.ID))
				}
				continue
			}
			n.signal()
		case <-n.stop:
			return
		}
	}
}

// votersChanged hands the configuration's voters to the lease (a leader's
// configuration changes as it replicates to a node added or stops for one
// removed, each with a PeerObservation).
func (n *Node) votersChanged() {
	if f := n.raft.GetConfiguration(); f.Error() == nil {
		n.lease.setVoters(n.cfg.ID, f.Configuration())
	}
}

// Lease says, for a leader of term, whether it holds its lease now: no
// other node can have been elected since, and its scheduler's state is
// the one to act on (sched.Config.Lease). Quick: an atomic load and a
// clock reading.
func (n *Node) Lease(term uint64) func() bool {
	return func() bool { return n.lease.holds(term) }
}

// logFail is the log's OnFail: from now on the node stands for no
// election (its transport asks for no vote), and its role machine steps
// down (Changes) and reports it.
func (n *Node) logFail(err error) {
	n.logFailed.Store(&err)
	n.cfg.Log.Error("cluster: the raft log failed a sync: this node acknowledges nothing more, stands for no election and steps down; restart it once its disk is sound",
		zap.Error(err))
	n.signal()
}

// LogFailed is the failed sync that stopped this node's log, nil if none.
func (n *Node) LogFailed() error {
	if p := n.logFailed.Load(); p != nil {
		return *p
	}
	return nil
}

func (n *Node) signal() {
	select {
	case n.changes <- struct{}{}:
	default:
	}
}

// Changes is signalled when the leader or this node's role may have
// changed: read Leader and IsLeader again.
func (n *Node) Changes() <-chan struct{} { return n.changes }

// ID is this node's name.
func (n *Node) ID() string { return n.cfg.ID }

// RaftAddr is where this node's Raft listens, as the others dial it.
func (n *Node) RaftAddr() string { return n.cfg.Listen }

// Raft is the node's Raft, for the replicated store's writes.
func (n *Node) Raft() *raft.Raft { return n.raft }

// FSM is the replicated state.
func (n *Node) FSM() *replicated.FSM { return n.fsm }

// IsLeader tells whether this node leads.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// Leader is the leader's name and Raft address, empty when there is none
// (an election, or no majority).
func (n *Node) Leader() (id, addr string) {
	a, i := n.raft.LeaderWithID()
	return string(i), string(a)
}

// Barrier returns once every entry committed before it is applied to this
// node's FSM: a new leader calls it before it reads the state. It waits
// for at most timeout, and no longer than ctx lasts.
func (n *Node) Barrier(ctx context.Context, timeout time.Duration) error {
	return waitFuture(ctx, n.raft.Barrier(timeout), timeout, "wait for the log to be applied")
}

// errTimeout is what a wait on Raft that ran out of time wraps.
var errTimeout = errors.New("timed out")

// waitFuture waits for Raft's future f, for at most timeout and while ctx
// lasts: Raft's own timeouts bound only the wait for it to take a
// request, not its commit. The error says what (what) did not happen, and
// why. A wait given up on leaves a goroutine until Raft resolves f, which
// it does on every change of role and at shutdown.
func waitFuture(ctx context.Context, f raft.Future, timeout time.Duration, what string) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("cluster: %s: %w", what, err)
		}
		return nil
	case <-t.C:
		return fmt.Errorf("cluster: %s: %w after %v", what, errTimeout, timeout)
	case <-ctx.Done():
		return fmt.Errorf("cluster: %s: %w", what, context.Cause(ctx))
	}
}

// ErrNotLeader: a membership change asked of a node that does not lead.
var ErrNotLeader = errors.New("cluster: this node is not the leader")

// membershipTimeout bounds a membership change, its commit included.
const membershipTimeout = 10 * time.Second

// AddVoter adds a node (or changes its address) as a voter: it catches up
// from the others, by snapshot if need be. Only the leader can.
func (n *Node) AddVoter(id, addr string) error {
	if !n.IsLeader() {
		return ErrNotLeader
	}
	if err := ValidID(id); err != nil {
		return err
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("cluster: address %q: %w", addr, err)
	}
	return waitFuture(context.Background(), n.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(addr), 0, membershipTimeout),
		membershipTimeout, "add "+id)
}

// Remove takes a node out of the cluster. Only the leader can; a leader
// that removes itself steps down.
func (n *Node) Remove(id string) error {
	if !n.IsLeader() {
		return ErrNotLeader
	}
	members, err := n.Members()
	if err != nil {
		return err
	}
	found := false
	for _, m := range members {
		found = found || m.ID == id
	}
	if !found {
		return fmt.Errorf("cluster: no node %q", id)
	}
	return waitFuture(context.Background(), n.raft.RemoveServer(raft.ServerID(id), 0, membershipTimeout), membershipTimeout, "remove "+id)
}

// Member is a node of the configuration, as this node knows it.
type Member struct {
	ID     string `json:"id"`
	Addr   string `json:"addr"`
	Voter  bool   `json:"voter"`
	Leader bool   `json:"leader"`
	// Match is the last entry the leader knows the node holds, and Lag
	// how far that is behind the leader's log; known on the leader only
	// (-1 elsewhere, and for the leader itself 0).
	Match uint64 `json:"match"`
	Lag   int64  `json:"lag"`
}

// Members lists the configuration's nodes.
func (n *Node) Members() ([]Member, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, err
	}
	_, leader := n.raft.LeaderWithID()
	isLeader := n.IsLeader()
	last, term := n.raft.LastIndex(), n.raft.CurrentTerm()
	var out []Member
	for _, s := range f.Configuration().Servers {
		m := Member{ID: string(s.ID), Addr: string(s.Address), Voter: s.Suffrage == raft.Voter, Leader: s.ID == leader, Lag: -1}
		switch {
		case isLeader && m.ID == n.cfg.ID:
			m.Match, m.Lag = last, 0
		case isLeader:
			if match, ok := n.trans.matchIndex(m.ID, term); ok {
				m.Match, m.Lag = match, int64(last)-int64(match)
			}
		}
		out = append(out, m)
	}
	return out, nil
}

// Status is the node's Raft state, for metrics and the status page.
type Status struct {
	ID          string    `json:"id"`
	Role        string    `json:"role"` // leader, follower, candidate, shutdown
	Leader      string    `json:"leader"`
	Term        uint64    `json:"term"`
	LastIndex   uint64    `json:"last_index"`
	Commit      uint64    `json:"commit_index"`
	Applied     uint64    `json:"applied_index"`
	LastContact time.Time `json:"last_contact"` // with the leader; zero on the leader
	Members     []Member  `json:"members"`
	Error       string    `json:"error,omitempty"` // why Members is missing
	// LogFailed is the failed sync that stopped this node's log.
	LogFailed string `json:"log_failed,omitempty"`
}

// Status reads the node's state.
func (n *Node) Status() Status {
	_, leader := n.raft.LeaderWithID()
	st := Status{ID: n.cfg.ID, Role: strings.ToLower(n.raft.State().String()), Leader: string(leader),
		Term: n.raft.CurrentTerm(), LastIndex: n.raft.LastIndex(), Commit: n.raft.CommitIndex(),
		Applied: n.raft.AppliedIndex()}
	if !n.IsLeader() {
		st.LastContact = n.raft.LastContact()
	}
	var err error
	if st.Members, err = n.Members(); err != nil {
		st.Error = err.Error()
	}
	if err := n.LogFailed(); err != nil {
		st.LogFailed = err.Error()
	}
	return st
}

// Close leaves the cluster's traffic (not its membership: the node comes
// back with its state) and closes the stores.
func (n *Node) Close() error {
	select {
	case <-n.stop:
		return nil // closed already
	default:
	}
	close(n.stop)
	n.done.Wait()
	err := n.raft.Shutdown().Error()
	n.raft.DeregisterObserver(n.obs)
	if cerr := n.close(); err == nil {
		err = cerr
	}
	return err
}

func (n *Node) close() error {
	var errs []error
	if n.trans != nil {
		errs = append(errs, n.trans.Close())
	}
	if n.logs != nil {
		errs = append(errs, n.logs.Close())
	}
	return errors.Join(errs...)
}

// zapWriter takes hclog's lines ("... [WARN]  raft: ...") into zap, at
// most at warning level: Raft logs an error for every failed heartbeat to
// a node that is down, twice a second, which would drown the default
// level's lines. What an operator must see (who leads, what this node
// runs) the process says itself.
type zapWriter struct{ l *zap.Logger }

func (w zapWriter) Write(p []byte) (int, error) {
	line := string(bytes.TrimRight(p, "\n"))
	if strings.Contains(line, "[ERROR]") || strings.Contains(line, "[WARN]") {
		w.l.Warn(line)
	} else {
		w.l.Debug(line)
	}
	return len(p), nil
}
