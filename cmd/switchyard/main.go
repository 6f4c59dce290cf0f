// Command switchyard is a job broker that stands in for gearmand: the same
// flags, the same bytes on the wire, one scheduler behind every protocol.
package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"switchyard/engine/budget"
	"switchyard/engine/certs"
	"switchyard/engine/cluster"
	"switchyard/engine/ops"
	"switchyard/engine/source"
	"switchyard/sched"
	"switchyard/sched/durable"
	"switchyard/sched/sqlite"
)

// drainTimeout bounds how long shutdown waits for replies to be written.
const drainTimeout = 5 * time.Second

func main() {
	os.Exit(run(os.Args[1:]))
}

// Signals, as gearmand 1.1.20 takes them: SIGTERM and SIGINT stop at once
// (writing what is owed), SIGHUP reopens the log file (and, ours, reloads
// the certificates), SIGUSR1 and SIGUSR2 are ignored. Go's default for all but the first two would end the process.
var (
	stopSignals   = []os.Signal{syscall.SIGTERM, syscall.SIGINT}
	ignoreSignals = []os.Signal{syscall.SIGUSR1, syscall.SIGUSR2}
)

func run(args []string) int {
	o, err := parseArgs(args, os.Getenv)
	if err != nil {
		// As gearmand: the program as invoked, its message, status 1.
		stderrf("%v", err)
		return 1
	}
	switch {
	case o.CheckArgs:
		return 0
	case o.Help:
		usage(os.Stdout)
		return 0
	case o.Version:
		fmt.Println(versionLine())
		return 0
	}
	if o.Daemon {
		child, err := daemonize(args)
		var de *daemonError
		if errors.As(err, &de) {
			return de.ExitCode() // the child failed to start; it said why
		}
		if err != nil {
			stderrf("daemon: %v", err)
			return 1
		}
		if !child {
			return 0
		}
	}
	// The signals before anything else: from here on a SIGHUP never ends
	// the process, and a SIGTERM during the start still means a clean exit.
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, stopSignals...)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	signal.Ignore(ignoreSignals...)

	log, err := newLogger(o.LogFile, o.Verbose)
	if err != nil {
		stderrf("log file: %v", err)
		return 1
	}
	defer log.close()
	srv := &server{o: o, log: log.Logger, admin: make(chan bool, 1)}
	go func() {
		for range hup {
			log.reopen()
			srv.reloadCerts()
		}
	}()
	for _, w := range o.Warnings {
		log.Warn(w)
	}

	defer srv.close() // every path: what started stops, the pid file goes
	if err := srv.start(); err != nil {
		log.Error("cannot start", zap.Error(err))
		if o.LogFile != "stderr" {
			stderrf("cannot start: %v", err) // where whoever started it looks
		}
		return 1
	}
	srv.wait(stop)
	srv.close()
	notice(log.Logger, "shutdown complete")
	return 0
}

// server is the running process: what lives as long as it does (the
// logger, the TLS files, the operator endpoints, a cluster node), the term
// that runs now (the scheduler and the frontends, or a follower's relays),
// and how to undo each.
type server struct {
	o   *options
	log *zap.Logger
	// tls serves the job ports' TLS listeners from jobCerts (the --ssl-*
	// files); clusterCerts is a node's (--cluster-tls-*). SIGHUP reloads
	// what certsMu guards.
	tls          *tls.Config
	jobCerts     *certs.Source
	clusterCerts *certs.Source
	certsMu      sync.Mutex
	reloadable   []reloadable
	// budget is the memory peers can make the server hold, on every
	// protocol and across a node's terms (--max-memory).
	budget *budget.Budget
	ops    *ops.Server // single node: nil when --metrics-listen is off or its default was taken
	// term is what runs: for a single node, from start to close.
	term *term
	// node is the cluster node (--node-id), nil for a single server;
	// opsMux serves each term's operator endpoints on one listener.
	node   *cluster.Node
	roles  *cluster.Roles
	opsMux *opsMux
	// undo is what start did, undone in reverse by close.
	undo []func()
	// admin carries the admin command "shutdown" (false) or "shutdown
	// graceful" (true).
	admin chan bool
}

// start brings the server up in the order that keeps every promise: the
// TLS files first (a server that cannot start leaves no store behind); the
// store, and the jobs it kept back in the scheduler, before any port opens
// (no submit can take an id or a unique a stored job holds); the operator
// endpoints before the frontends (they report on the start); Gearman's port
// last. Whatever fails, close undoes what was done.
func (s *server) start() error {
	o := s.o
	if err := setFileLimit(o.FileDescriptors); err != nil {
		return fmt.Errorf("file descriptor limit: %w", err)
	}
	if tlsListeners(o) {
		src, err := certs.New(func() (*certs.Bundle, error) { return loadTLS(o.SSLCAFile, o.SSLCertificate, o.SSLKey) })
		if err != nil {
			return err
		}
		s.jobCerts, s.tls = src, certs.ServerConfig(src, o.SSLVerifyClient)
		s.reloadOnHUP("--ssl-certificate, --ssl-key, --ssl-ca-file", src)
	}
	if o.ClusterTLSCert != "" {
		// A certificate the other nodes would refuse (another node's name,
		// another CA's) stops the start, and a reload keeps the old one.
		load := func() (*certs.Bundle, error) {
			b, err := certs.Load(o.ClusterTLSCert, o.ClusterTLSKey, o.ClusterTLSCA)
			if err == nil {
				err = cluster.CheckCert(b, o.NodeID)
			}
			return b, err
		}
		src, err := certs.New(load)
		if err != nil {
			return fmt.Errorf("--cluster-tls-*: %w", err)
		}
		s.clusterCerts = src
		s.reloadOnHUP("--cluster-tls-cert, --cluster-tls-key, --cluster-tls-ca", src)
	}
	s.budget = memoryBudget(o.MaxMemory, s.log)
	if _, err := readOpsToken(o.OpsTokenFile); err != nil {
		return err // before anything opens
	}
	if o.NodeID != "" {
		return s.startNode()
	}
	scfg := s.schedConfig()
	storeStats, err := s.openQueue(&scfg)
	if err != nil {
		return err
	}
	t := s.newTerm(scfg)
	s.term = t
	s.defer_(t.stop)
	if o.MetricsListen != "off" {
		addr := cmp.Or(o.MetricsListen, defaultMetricsListen)
		if err := s.startOps(addr, o.MetricsListen != "", storeStats); err != nil {
			return err
		}
		t.ops = s.ops
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.defer_(cancel)
	switch st := scfg.Store.(type) {
	case *durable.Store:
		go watchStore(ctx, st, s.log)
	case *sqlite.Store:
		go watchSqlite(ctx, st, s.log)
	}
	if err := t.replay(); err != nil {
		return err
	}
	if err := s.writePid(); err != nil {
		return err
	}
	if err := t.startFrontends(); err != nil {
		return err
	}
	if err := s.ready(); err != nil {
		return err
	}
	t.logListeners(s.opsAddr())
	if s.ops != nil {
		s.ops.SetReady(true) // jobs replayed, every listener open
	}
	return nil
}

// reloadable is a certificate source SIGHUP reloads, and the options
// that name its files.
type reloadable struct {
	files string
	src   *certs.Source
}

func (s *server) reloadOnHUP(files string, src *certs.Source) {
	s.certsMu.Lock()
	s.reloadable = append(s.reloadable, reloadable{files, src})
	s.certsMu.Unlock()
}

// reloadCerts reads every certificate, key and CA file again (SIGHUP): new
// handshakes use them, established connections keep theirs. Files that
// fail to load leave the ones loaded before in use, and the log says why.
func (s *server) reloadCerts() {
	s.certsMu.Lock()
	defer s.certsMu.Unlock()
	for _, r := range s.reloadable {
		if err := r.src.Reload(); err != nil {
			s.log.Error("SIGHUP: cannot reload the certificates: the ones loaded before stay in use",
				zap.String("files", r.files), zap.Error(err))
			continue
		}
		fields := []zap.Field{zap.String("files", r.files)}
		if leaf := r.src.Get().Cert.Leaf; leaf != nil {
			fields = append(fields, zap.String("subject", leaf.Subject.String()), zap.String("serial", leaf.SerialNumber.String()),
				zap.Time("not after", leaf.NotAfter))
		}
		notice(s.log, "SIGHUP: certificates reloaded", fields...)
	}
}

// schedConfig is the scheduler's configuration from the options; the
// store is the caller's.
func (s *server) schedConfig() sched.Config {
	o := s.o
	return sched.Config{WorkerWakeup: o.WorkerWakeup, JobRetries: o.JobRetries, RoundRobin: o.RoundRobin,
		FunctionTTL: o.FunctionTTL,
		Latency:     o.MetricsListen != "off", // the histograms are only read there
		Failures:    o.FailuresKept, FuncHistograms: o.FuncHistograms}
}

// ready is the end of the start, once the ports are open: the user of
// -u, and the daemon's parent told to go.
func (s *server) ready() error {
	o := s.o
	if err := dropPrivileges(o.User); err != nil {
		return fmt.Errorf("cannot switch to user %s: %w", o.User, err)
	}
	daemonReady() // the parent may exit now
	return nil
}

// writePid writes the pid file before the ports open, as gearmand does: a
// client that can connect finds it.
func (s *server) writePid() error {
	o := s.o
	if err := writePidFile(o.PidFile); err != nil {
		return fmt.Errorf("cannot write pid file %s: %w", o.PidFile, err)
	}
	s.defer_(func() { removePidFile(o.PidFile) })
	return nil
}

// opsAddr is the operator endpoints' bound address, "" if they are off.
func (s *server) opsAddr() string {
	switch {
	case s.ops != nil:
		return s.ops.Addr().String()
	case s.opsMux != nil:
		return s.opsMux.addr()
	}
	return ""
}

// shutdownFunc is the admin command's way to stop the process; nil
// unless --admin-shutdown.
func (s *server) shutdownFunc() func(graceful bool) {
	if !s.o.AdminShutdown {
		return nil
	}
	return func(graceful bool) {
		select {
		case s.admin <- graceful:
		default:
		}
	}
}

// defer_ adds f to what close undoes.
func (s *server) defer_(f func()) { s.undo = append(s.undo, f) }

// close undoes what start did, in reverse: the frontends (each given
// drainTimeout to write what it owes), the operator endpoints, the
// scheduler, the store, the pid file. A second call does nothing.
func (s *server) close() {
	for i := len(s.undo) - 1; i >= 0; i-- {
		s.undo[i]()
	}
	s.undo = nil
}

// wait serves until a signal or the admin command says to stop.
func (s *server) wait(stop <-chan os.Signal) {
	if s.node != nil {
		s.serveNode(stop)
		return
	}
	select {
	case got := <-stop:
		notice(s.log, "shutting down", zap.String("signal", got.String()))
	case graceful := <-s.admin:
		notice(s.log, "shutting down on admin request", zap.Bool("graceful", graceful))
		if graceful {
			if s.ops != nil {
				s.ops.SetReady(false) // a load balancer stops sending new work here
			}
			s.term.drain(stop, s.admin)
		}
	}
	if s.ops != nil {
		s.ops.SetReady(false)
	}
}

// startOps serves the operator endpoints, by the listen rule: the default
// address (loopback, whatever -L says) is best effort, since another
// switchyard or a gearman-exporter may hold it; an address given must work.
func (s *server) startOps(addr string, explicit bool, store func() ops.StoreStats) error {
	var sc *sched.Sched
	if s.term != nil {
		sc = s.term.sched
	}
	o := s.o
	if o == nil {
		o = &options{} // a test's server
	}
	token, err := readOpsToken(o.OpsTokenFile)
	if err != nil {
		return err
	}
	srv := ops.New(ops.Config{Sched: sc, Version: version, Revision: readBuild().Revision, Protocol: source.Name, Store: store, Log: s.log,
		Restored: isRestored, Token: token, Failures: o.FailuresKept, ActionLevel: noticeLevel,
		FuncHistograms: o.FuncHistograms, Collectors: []prometheus.Collector{s.budget.Collector()}})
	if err := srv.Start(addr); err != nil {
		if explicit {
			return fmt.Errorf("metrics: %w", err)
		}
		notice(s.log, "metrics is off: its default address cannot be used (give --metrics-listen an address, or off)",
			zap.String("addr", addr), zap.Error(err))
		return nil
	}
	s.ops = srv
	s.defer_(func() {
		ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
		defer cancel()
		srv.Stop(ctx)
	})
	return nil
}

// isRestored tells the source of the jobs restored from the store.
func isRestored(src sched.Source) bool { return src == source.Restored }

// readOpsToken reads --ops-token-file's token (nil: no file, actions
// off); an empty one is an error, not actions open to anyone.
func readOpsToken(path string) ([]byte, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--ops-token-file: %w", err)
	}
	tok := bytes.TrimSpace(b)
	if len(tok) == 0 {
		return nil, fmt.Errorf("--ops-token-file: %s holds no token", path)
	}
	return tok, nil
}

// openQueue opens -q's job store into cfg, and returns how the metrics read
// it (nil for the builtin queue).
func (s *server) openQueue(cfg *sched.Config) (func() ops.StoreStats, error) {
	o := s.o
	switch o.QueueType {
	case "durable":
		dir, err := dataDirPath(o)
		if err != nil {
			return nil, err
		}
		lock, err := lockDataDir(dir)
		if err != nil {
			return nil, err
		}
		s.defer_(lock.unlock) // after the store is closed: last
		st, err := openStore(dir, o.Fsync, o.Recover, s.log)
		if err != nil {
			return nil, fmt.Errorf("cannot open the job store: %w", err)
		}
		s.defer_(func() { st.Close() })
		cfg.Store = st
		notice(s.log, "job store", zap.String("queue", "durable"), zap.String("dir", st.Dir()), zap.String("fsync", o.Fsync))
		return durableStats(st), nil
	case "libsqlite3":
		sq, err := sqlite.Open(sqlite.Config{Path: o.SqliteDB, Table: o.SqliteTable, StoreOnShutdown: o.StoreOnShutdown,
			EachRecord: o.Fsync == "always", NoSync: o.Fsync == "never"})
		if err != nil {
			stderrf("Error while initializing the queue : libsqlite3: %v", err) // gearmand's words
			return nil, fmt.Errorf("cannot open the job store: %w", err)
		}
		s.defer_(func() {
			if err := sq.Close(); err != nil {
				s.log.Error("job store", zap.Error(err))
			}
		})
		cfg.Store = sq
		notice(s.log, "job store", zap.String("queue", "libsqlite3"), zap.String("sqlite", sq.Path()), zap.String("table", o.SqliteTable),
			zap.Bool("store-queue-on-shutdown", o.StoreOnShutdown), zap.String("fsync", o.Fsync))
		return sqliteStats(sq), nil
	}
	notice(s.log, "job store", zap.String("queue", "builtin"))
	return nil, nil
}
