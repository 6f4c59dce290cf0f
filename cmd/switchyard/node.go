package main

// A cluster node (--node-id): one process of a Raft cluster. Its role
// machine (cluster.Roles) decides what it runs, and when; this file starts
// it (nodeRunner):
//
//   - leading, a term: the scheduler over the term's replicated store,
//     read as a restarted server reads its disk, and every frontend, whose
//     addresses the machine then publishes through Raft;
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
	"switchyard/engine/gearman"
	"switchyard/engine/listen"
	"switchyard/engine/ops"
	"switchyard/engine/source"
	"switchyard/sched"
	"switchyard/sched/replicated"
)

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
		Dir: filepath.Join(dir, "cluster"), Log: s.log, TLS: s.clusterCerts, Insecure: o.ClusterInsecure})
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
		zap.String("dir", filepath.Join(dir, "cluster")), zap.Int("jobs", node.FSM().Len()), zap.Bool("tls", s.clusterCerts != nil))
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

// serveNode runs the node's role machine (cluster.Roles), with
// nodeRunner starting what each role runs, until a signal or the admin
// command stops it.
func (s *server) serveNode(stop <-chan os.Signal) {
	roles := cluster.NewRoles(s.node, cluster.RolesConfig{Runner: nodeRunner{s}, Log: s.log, NoticeLevel: noticeLevel})
	s.roles = roles
	roles.Start()
	select {
	case got := <-stop:
		notice(s.log, "shutting down", zap.String("signal", got.String()))
	case graceful := <-s.admin:
		notice(s.log, "shutting down on admin request", zap.Bool("graceful", graceful))
		if graceful {
			roles.Drain(func(l cluster.Leading) {
				lt := l.(*leaderTerm)
				lt.ops.SetReady(false)
				lt.term.drain(stop, s.admin)
			})
		}
	}
	roles.Stop(true) // a leader hands the lead over first
}

// nodeRunner starts what a node runs in each role (cluster.Runner).
type nodeRunner struct{ s *server }

// leaderTerm is a leader's term: the scheduler over the term's store and
// every frontend.
type leaderTerm struct {
	s    *server
	term *term
	ops  *ops.Server
}

// Lead reads the jobs into a new scheduler, then opens the frontends.
func (r nodeRunner) Lead(ctx context.Context, store *replicated.Store) (cluster.Leading, error) {
	s := r.s
	cfg := s.schedConfig()
	cfg.Store = store
	// Jobs are handed out only within the term's lease: a leader thawed
	// after another was elected must not run what that one has ended.
	cfg.Lease = s.node.Lease(store.Term())
	t := s.newTerm(cfg)
	lt := &leaderTerm{s: s, term: t, ops: s.nodeOps(t)}
	t.ops = lt.ops
	if err := t.replay(); err != nil {
		lt.Stop()
		return nil, fmt.Errorf("cannot load the stored jobs: %w", err)
	}
	if err := ctx.Err(); err != nil {
		lt.Stop()
		return nil, err
	}
	t.env.commands = s.clusterCommands()
	if err := t.startFrontends(); err != nil {
		lt.Stop()
		return nil, err
	}
	return lt, nil
}

// Addrs are the frontends' TCP addresses (a leader's unix sockets are not
// reachable from other hosts).
func (l *leaderTerm) Addrs() map[string][]string {
	out := map[string][]string{}
	for _, r := range l.term.running {
		for _, a := range r.addrs {
			if hp, ok := tcpAddr(a); ok {
				out[r.p.name] = append(out[r.p.name], hp)
			}
		}
	}
	return out
}

// Serve says the term serves, on /healthz and in the "listening" line.
func (l *leaderTerm) Serve(term uint64, took time.Duration) {
	l.ops.SetReady(true)
	l.term.logListeners(l.s.opsAddr(), zap.String("role", "leader"), zap.Uint64("term", term), zap.Duration("took", took))
}

// Stop stops the frontends and the scheduler, then the operator
// endpoints; the store is closed after, by the role machine (its writes
// still waiting fail).
func (l *leaderTerm) Stop() {
	l.term.stop()
	l.s.stopOps(l.ops)
}

// followerRole is a follower's relays and operator endpoints.
type followerRole struct {
	s      *server
	relays []cluster.RoleRelay
	ops    *ops.Server
}

func (f *followerRole) Relays() []cluster.RoleRelay { return f.relays }

func (f *followerRole) Stop() {
	for _, r := range f.relays {
		r.Relay.Close()
	}
	f.s.stopOps(f.ops)
}

// Follow opens the relays: the listeners a leader's frontends would open,
// every one but the Worker–Controller socket.
func (r nodeRunner) Follow() (cluster.Following, error) {
	s := r.s
	role := &followerRole{s: s, ops: s.nodeOps(nil)}
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
					role.Stop()
					return nil, fmt.Errorf("%s: %w", p.name, err)
				}
			}
			rl, err := cluster.Listen(p.name, network, addr, s.log)
			if err != nil {
				if explicit {
					role.Stop()
					return nil, fmt.Errorf("%s: relay on %s: %w", p.name, a, err)
				}
				notice(s.log, p.name+" is off: its default address cannot be used (give "+p.flag+" an address, or off)",
					zap.String("addr", a), zap.Error(err))
				continue
			}
			role.relays = append(role.relays, cluster.RoleRelay{Protocol: p.name, Index: j, Relay: rl})
			role.ops.AddConns(ops.Conns{Protocol: p.name, Open: rl.Conns})
			bound = append(bound, rl.Addr().String())
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

// stopOps stops a role's operator endpoints and takes them off the
// node's listener.
func (s *server) stopOps(srv *ops.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	srv.Stop(ctx)
	cancel()
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
		Health:         s.roles.Health,
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
//
// A membership change needs a connection that presented a client
// certificate the server verified (--ssl with --ssl-verify-client): a job
// connection alone never changes who is in the cluster.
func (s *server) clusterCommands() map[string]func(gearman.Caller, []string) string {
	n := s.node
	return map[string]func(gearman.Caller, []string) string{"cluster": func(c gearman.Caller, args []string) string {
		var err error
		if len(args) > 0 && c.Cert == "" {
			s.log.Warn("cluster membership change refused on the admin port: no client certificate",
				zap.String("remote", c.Remote), zap.Strings("args", args))
			return "ERR PERMISSION_DENIED cluster+add+and+remove+need+a+connection+with+a+client+certificate+(--ssl-verify-client)\r\n"
		}
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
				zap.String("node", args[1]), zap.String("addr", args[2]), zap.String("cert", c.Cert), zap.String("remote", c.Remote), zap.Error(err))
		case len(args) == 2 && strings.EqualFold(args[0], "remove"):
			err = n.Remove(args[1])
			s.log.Warn("cluster membership change asked on the admin port", zap.String("change", "remove"),
				zap.String("node", args[1]), zap.String("cert", c.Cert), zap.String("remote", c.Remote), zap.Error(err))
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

// tcpAddr is a bound address's HOST:PORT, if it is a TCP one, TLS or not
// (a leader's unix sockets are not reachable from other hosts).
func tcpAddr(bound string) (string, bool) {
	if scheme, rest, ok := strings.Cut(bound, "://"); ok {
		if scheme != "tcp" && scheme != "tls" && scheme != "tls+tcp" {
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
