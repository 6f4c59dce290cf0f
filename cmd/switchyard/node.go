package main

// A cluster node (--node-id): one process of a Raft cluster. It runs what
// its role says, and changes when the role does:
//
//   - leading, a term: the scheduler over the replicated store, read as a
//     restarted server reads its disk, and every frontend, whose addresses
//     it then publishes through Raft;
//   - following, relays: every TCP and unix listener a frontend would
//     open, each carrying its connections byte for byte to the leader's
//     listener of the same protocol. The Worker–Controller socket is the
//     leader's alone: its workers are dialled back on the leader's host.
//
// The operator endpoints live as long as the process, on one listener,
// and serve the current role's figures.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"switchyard/engine/cluster"
	"switchyard/engine/listen"
	"switchyard/engine/ops"
	"switchyard/engine/source"
	"switchyard/sched"
	"switchyard/sched/replicated"
)

// barrierTimeout bounds a new leader's wait for the entries of earlier
// terms to be applied before it reads the state.
const barrierTimeout = 30 * time.Second

// defaultClusterHandlePrefix is every node's job handle prefix unless
// --job-handle-prefix says otherwise: a handle stays good when another
// node takes the lead.
const defaultClusterHandlePrefix = "H:switchyard"

// startNode opens the cluster node and the operator endpoints; serveNode
// then runs what the node's role says.
func (s *server) startNode() error {
	o := s.o
	if o.JobHandlePrefix == "" {
		o.JobHandlePrefix = defaultClusterHandlePrefix
	}
	dir, err := dataDirPath(o)
	if err != nil {
		return err
	}
	lock, err := lockDataDir(dir)
	if err != nil {
		return err
	}
	s.defer_(lock.unlock)
	var peers []cluster.Peer
	if o.ClusterPeers != "" {
		peers, _ = cluster.ParsePeers(o.ClusterPeers) // checked by the flags
	}
	node, err := cluster.Open(cluster.Config{ID: o.NodeID, Listen: o.ClusterListen, Peers: peers,
		Dir: filepath.Join(dir, "cluster"), Log: s.log})
	if err != nil {
		return err
	}
	s.node = node
	s.defer_(func() {
		if err := node.Close(); err != nil {
			s.log.Warn("cluster: close", zap.Error(err))
		}
	})
	notice(s.log, "cluster node", zap.String("node", o.NodeID), zap.String("raft", node.RaftAddr()),
		zap.String("dir", filepath.Join(dir, "cluster")), zap.Int("jobs", node.FSM().Len()))
	if o.MetricsListen != "off" {
		addr := cmp.Or(o.MetricsListen, defaultMetricsListen)
		m, err := listenOps(addr)
		switch {
		case err != nil && o.MetricsListen != "":
			return fmt.Errorf("metrics: %w", err)
		case err != nil:
			notice(s.log, "metrics is off: its default address cannot be used (give --metrics-listen an address, or off)",
				zap.String("addr", addr), zap.Error(err))
		default:
			s.opsMux = m
			s.defer_(m.close)
		}
	}
	if err := s.writePid(); err != nil {
		return err
	}
	return s.ready()
}

// nodeRole is what a node runs in its current role.
type nodeRole struct {
	leader bool
	term   *term             // leading
	store  *replicated.Store // leading: the term's store, closed after it
	relays []relayOf         // following
	// following is the leader the relays point at, "" if none.
	following string
	ops       *ops.Server
}

type relayOf struct {
	protocol string
	index    int // which of the protocol's listeners
	r        *cluster.Relay
}

// serveNode runs the node until a signal or the admin command stops it:
// it starts what the role says, and again whenever the role changes.
func (s *server) serveNode(stop <-chan os.Signal) {
	n := s.node
	var cur *nodeRole
	defer func() { s.stopRole(cur) }()
	retry := time.NewTimer(0)
	defer retry.Stop()
	for {
		leader := n.IsLeader()
		if cur == nil || cur.leader != leader {
			s.stopRole(cur)
			var err error
			if leader {
				cur, err = s.lead()
			} else {
				cur, err = s.follow()
			}
			if err != nil {
				s.log.Error("cluster: cannot take the role", zap.Bool("leader", leader), zap.Error(err))
				cur = nil
				retry.Reset(time.Second) // the role may have changed meanwhile: look again
			}
		}
		if cur != nil && !cur.leader {
			s.retarget(cur)
		}
		select {
		case <-n.Changes():
		case <-n.FSM().MetaChanged():
		case <-retry.C:
		case got := <-stop:
			notice(s.log, "shutting down", zap.String("signal", got.String()))
			s.handOff(cur)
			return
		case graceful := <-s.admin:
			notice(s.log, "shutting down on admin request", zap.Bool("graceful", graceful))
			if graceful && cur != nil && cur.term != nil {
				cur.ops.SetReady(false)
				cur.term.drain(stop, s.admin)
			}
			s.handOff(cur)
			return
		}
	}
}

// handOff gives the lead to another node before a leader stops, so that
// the cluster does not wait out an election timeout.
func (s *server) handOff(cur *nodeRole) {
	if cur == nil || !cur.leader {
		return
	}
	if err := s.node.Raft().LeadershipTransfer().Error(); err != nil {
		s.log.Warn("cluster: could not hand the lead over before stopping", zap.Error(err))
	}
}

// lead starts a leader's term: it waits until every earlier entry is
// applied, reads the jobs into a new scheduler, opens the frontends and
// publishes their addresses.
func (s *server) lead() (*nodeRole, error) {
	n := s.node
	start := time.Now()
	if err := n.Barrier(barrierTimeout); err != nil {
		return nil, fmt.Errorf("wait for the log: %w", err)
	}
	store := replicated.New(context.Background(), n.Raft(), n.FSM(), replicated.Options{Term: n.Raft().CurrentTerm()})
	cfg := s.schedConfig()
	cfg.Store = store
	t := s.newTerm(cfg)
	role := &nodeRole{leader: true, term: t, store: store}
	role.ops = s.nodeOps(t)
	t.ops = role.ops
	fail := func(err error) (*nodeRole, error) {
		s.stopRole(role)
		return nil, err
	}
	if err := t.replay(); err != nil {
		return fail(fmt.Errorf("cannot load the stored jobs: %w", err))
	}
	t.env.commands = s.clusterCommands()
	if err := t.startFrontends(); err != nil {
		return fail(err)
	}
	info := cluster.LeaderInfo{Addrs: map[string][]string{}}
	for _, r := range t.running {
		for _, a := range r.addrs {
			if hp, ok := tcpAddr(a); ok {
				info.Addrs[r.p.name] = append(info.Addrs[r.p.name], n.Reachable(hp))
			}
		}
	}
	if a := s.opsAddr(); a != "" {
		info.Ops = n.Reachable(a)
	}
	if err := n.Publish(info); err != nil {
		return fail(err)
	}
	role.ops.SetReady(true)
	t.logListeners(s.opsAddr(), zap.String("role", "leader"), zap.Uint64("term", n.Raft().CurrentTerm()),
		zap.Duration("took", time.Since(start)))
	return role, nil
}

// follow opens the relays: the listeners a leader's frontends would
// open, every one but the Worker–Controller socket.
func (s *server) follow() (*nodeRole, error) {
	role := &nodeRole{}
	role.ops = s.nodeOps(nil)
	fields := []zap.Field{}
	for i := range protocols {
		p := &protocols[i]
		if p.name == "controller" {
			continue
		}
		addrs, explicit := p.listen(s.o)
		var bound []string
		for j, a := range addrs {
			network, addr := relayAddr(a)
			if network == "unix" {
				if _, err := listen.ClaimUnix([]string{"unix://" + addr}); err != nil {
					s.stopRole(role)
					return nil, fmt.Errorf("%s: %w", p.name, err)
				}
			}
			r, err := cluster.Listen(p.name, network, addr, s.log)
			if err != nil {
				if explicit {
					s.stopRole(role)
					return nil, fmt.Errorf("%s: relay on %s: %w", p.name, a, err)
				}
				notice(s.log, p.name+" is off: its default address cannot be used (give "+p.flag+" an address, or off)",
					zap.String("addr", a), zap.Error(err))
				continue
			}
			role.relays = append(role.relays, relayOf{protocol: p.name, index: j, r: r})
			role.ops.AddConns(ops.Conns{Protocol: p.name, Open: r.Conns})
			bound = append(bound, r.Addr().String())
		}
		if len(bound) > 0 {
			fields = append(fields, zap.Strings(p.name, bound))
		}
	}
	role.ops.SetReady(true)
	if a := s.opsAddr(); a != "" {
		fields = append(fields, zap.Strings("metrics", []string{a}))
	}
	id, _ := s.node.Leader()
	fields = append(fields, zap.String("role", "follower"), zap.String("leader", id),
		zap.String("version", version), zap.Int("pid", os.Getpid()))
	notice(s.log, "listening", fields...)
	return role, nil
}

// retarget points the relays at the current leader's listeners, or at
// none while there is no leader (their connections are closed).
func (s *server) retarget(role *nodeRole) {
	info, ok := s.node.CurrentLeader()
	if info.ID != role.following {
		role.following = info.ID
		if ok {
			notice(s.log, "relaying to the leader", zap.String("leader", info.ID), zap.Uint64("term", info.Term))
		} else {
			notice(s.log, "no leader to relay to: connections wait for one", zap.Uint64("term", s.node.Raft().CurrentTerm()))
		}
	}
	for _, ro := range role.relays {
		target := ""
		if addrs := info.Addrs[ro.protocol]; ok && len(addrs) > 0 {
			target = addrs[min(ro.index, len(addrs)-1)]
		}
		ro.r.SetTarget(target)
	}
}

// stopRole stops what a role runs: a leader's frontends and scheduler
// (the store last: its writes still waiting fail), or a follower's
// relays.
func (s *server) stopRole(role *nodeRole) {
	if role == nil {
		return
	}
	if role.term != nil {
		role.term.stop()
	}
	if role.store != nil {
		role.store.Close()
	}
	for _, ro := range role.relays {
		ro.r.Close()
	}
	if role.ops != nil {
		ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
		role.ops.Stop(ctx)
		cancel()
	}
	if s.opsMux != nil {
		s.opsMux.set(nil)
	}
}

// nodeOps makes a role's operator endpoints and puts them on the node's
// listener. A follower's scheduler is an empty one: it runs no job.
func (s *server) nodeOps(t *term) *ops.Server {
	n := s.node
	token, _ := readOpsToken(s.o.OpsTokenFile) // checked at start
	cfg := ops.Config{Version: version, Revision: readBuild().Revision, Protocol: source.Name, Log: s.log,
		Restored: isRestored, Token: token, Failures: s.o.FailuresKept, ActionLevel: noticeLevel,
		FuncHistograms: s.o.FuncHistograms,
		Collectors:     []prometheus.Collector{n.Collector(), s.budget.Collector()},
		Health:         func() error { return nodeHealth(n) },
		Cluster:        nodeAPI{n},
		Store: func() ops.StoreStats {
			return ops.StoreStats{Bytes: uint64(n.FSM().Bytes())}
		}}
	if t != nil {
		cfg.Sched = t.sched
	} else {
		cfg.Sched = emptySched()
	}
	srv := ops.New(cfg)
	if s.opsMux != nil {
		srv.StartSampler()
		s.opsMux.set(srv.Handler())
	}
	return srv
}

// nodeHealth is /healthz's answer beyond the start: a node serves while
// it leads, or follows a leader that has published where it listens.
func nodeHealth(n *cluster.Node) error {
	if n.IsLeader() {
		return nil
	}
	if _, ok := n.CurrentLeader(); ok {
		return nil
	}
	return errors.New("no leader: this node relays to none")
}

// nodeAPI is the node as the operator endpoints see it.
type nodeAPI struct{ n *cluster.Node }

func (a nodeAPI) Status() any { return a.n.Status() }

func (a nodeAPI) AddVoter(id, addr string) error { return opsErr(a.n.AddVoter(id, addr)) }

func (a nodeAPI) Remove(id string) error { return opsErr(a.n.Remove(id)) }

// opsErr names a change asked of a node that does not lead as the
// operator endpoints know it.
func opsErr(err error) error {
	if errors.Is(err, cluster.ErrNotLeader) || errors.Is(err, raft.ErrNotLeader) {
		return fmt.Errorf("%w: %v", ops.ErrNotLeader, err)
	}
	return err
}

// clusterCommands are the admin port's cluster commands (the leader's:
// a follower relays the admin port to it):
//
//	cluster                       the members, one per line, then "."
//	cluster add NAME HOST:PORT    OK, or ERR and why
//	cluster remove NAME           OK, or ERR and why
func (s *server) clusterCommands() map[string]func([]string) string {
	n := s.node
	return map[string]func([]string) string{"cluster": func(args []string) string {
		var err error
		switch {
		case len(args) == 0:
			var b strings.Builder
			st := n.Status()
			for _, m := range st.Members {
				role := "follower"
				if m.Leader {
					role = "leader"
				}
				fmt.Fprintf(&b, "%s\t%s\t%s\t%d\n", m.ID, m.Addr, role, m.Lag)
			}
			b.WriteString(".\n")
			return b.String()
		case len(args) == 3 && strings.EqualFold(args[0], "add"):
			err = n.AddVoter(args[1], args[2])
			s.log.Warn("cluster membership change asked on the admin port", zap.String("change", "add"),
				zap.String("node", args[1]), zap.String("addr", args[2]), zap.Error(err))
		case len(args) == 2 && strings.EqualFold(args[0], "remove"):
			err = n.Remove(args[1])
			s.log.Warn("cluster membership change asked on the admin port", zap.String("change", "remove"),
				zap.String("node", args[1]), zap.Error(err))
		default:
			return "ERR INVALID_ARGUMENTS cluster+[add+NAME+HOST:PORT|remove+NAME]\r\n"
		}
		if err != nil {
			return "ERR " + strings.ReplaceAll(err.Error(), " ", "+") + "\r\n"
		}
		return "OK\r\n"
	}}
}

// relayAddr turns a frontend's listen address into a relay's: tcp:// and
// plain HOST:PORT (a ZeroMQ "*" host is every address), unix:// and NNG's
// ipc:// paths.
func relayAddr(a string) (network, addr string) {
	scheme, rest, ok := strings.Cut(a, "://")
	switch {
	case !ok:
		return "tcp", a
	case scheme == "unix" || scheme == "ipc":
		return "unix", rest
	}
	if host, port, err := net.SplitHostPort(rest); err == nil && host == "*" {
		rest = net.JoinHostPort("", port)
	}
	if _, port, err := net.SplitHostPort(rest); err == nil && port == "*" {
		rest = strings.TrimSuffix(rest, "*") + "0"
	}
	return "tcp", rest
}

// tcpAddr is a bound address's HOST:PORT, if it is a TCP one (a leader's
// unix sockets are not reachable from other hosts).
func tcpAddr(bound string) (string, bool) {
	if scheme, rest, ok := strings.Cut(bound, "://"); ok {
		if scheme != "tcp" {
			return "", false
		}
		bound = rest
	}
	if _, _, err := net.SplitHostPort(bound); err != nil {
		return "", false // a unix socket's path
	}
	return bound, true
}

// opsMux is a cluster node's operator listener: each role's endpoints are
// served on it in turn, with Go's profiler beside them.
type opsMux struct {
	ln  net.Listener
	srv *http.Server
	cur atomic.Pointer[http.Handler]
	wg  sync.WaitGroup
}

func listenOps(addr string) (*opsMux, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	m := &opsMux{ln: ln}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		h := m.cur.Load()
		if h == nil {
			w.Header().Set("Cache-Control", "no-store")
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		(*h).ServeHTTP(w, r)
	})
	m.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.srv.Serve(ln)
	}()
	return m, nil
}

func (m *opsMux) addr() string { return m.ln.Addr().String() }

func (m *opsMux) set(h http.Handler) {
	if h == nil {
		m.cur.Store(nil)
		return
	}
	m.cur.Store(&h)
}

func (m *opsMux) close() {
	ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	m.srv.Shutdown(ctx)
	m.wg.Wait()
}

// emptySched is a follower's scheduler for its operator endpoints: it
// runs nothing, so it has no ticker.
func emptySched() *sched.Sched { return sched.New(sched.Config{Tick: -1}) }
