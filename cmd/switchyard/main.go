// Command switchyard is a job broker that stands in for gearmand: the same
// flags, the same bytes on the wire, one scheduler behind every protocol.
package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.uber.org/zap"

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
// (writing what is owed), SIGHUP reopens the log file, SIGUSR1 and SIGUSR2
// are ignored. Go's default for all but the first two would end the process.
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
	go func() {
		for range hup {
			log.reopen()
		}
	}()
	for _, w := range o.Warnings {
		log.Warn(w)
	}

	srv := &server{o: o, log: log.Logger, admin: make(chan bool, 1)}
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

// server is the running process: the scheduler, its store, the operator
// endpoints and the frontends, and how to undo each.
type server struct {
	o     *options
	log   *zap.Logger
	sched *sched.Sched
	ops   *ops.Server // nil when --metrics-listen is off or its default was taken
	// running are the frontends started, in the table's order.
	running []running
	// undo is what start did, undone in reverse by close.
	undo []func()
	// admin carries the admin command "shutdown" (false) or "shutdown
	// graceful" (true).
	admin chan bool
}

type running struct {
	p     *protocol
	f     frontend
	addrs []string
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
	var tlsConfig *tls.Config
	if o.SSL {
		var err error
		if tlsConfig, err = loadTLS(o.SSLCAFile, o.SSLCertificate, o.SSLKey); err != nil {
			return err
		}
	}
	scfg := sched.Config{WorkerWakeup: o.WorkerWakeup, JobRetries: o.JobRetries, RoundRobin: o.RoundRobin,
		FunctionTTL: o.FunctionTTL, Release: gearmanRelease,
		Latency: o.MetricsListen != "off"} // the histograms are only read there
	storeStats, err := s.openQueue(&scfg)
	if err != nil {
		return err
	}
	s.sched = sched.New(scfg)
	s.defer_(s.sched.Close)
	if o.MetricsListen != "off" {
		addr := cmp.Or(o.MetricsListen, defaultMetricsListen)
		if err := s.startOps(addr, o.MetricsListen != "", storeStats); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.defer_(cancel)
	go returnMemory(ctx, s.sched.Len, time.Second)
	if st, ok := scfg.Store.(*durable.Store); ok {
		go watchStore(ctx, st, s.log)
	}
	n, err := s.sched.Replay()
	if err != nil {
		return fmt.Errorf("cannot load the stored jobs: %w", err)
	}
	if scfg.Store != nil {
		notice(s.log, "jobs restored", zap.Int("jobs", n))
	}

	e := &env{o: o, sched: s.sched, log: s.log, tls: tlsConfig, workers: s.moreWorkers}
	if o.AdminShutdown {
		e.shutdown = func(graceful bool) {
			select {
			case s.admin <- graceful:
			default:
			}
		}
	}
	for i := range protocols {
		if err := s.startFrontend(&protocols[i], e); err != nil {
			return err
		}
	}
	if err := dropPrivileges(o.User); err != nil {
		return fmt.Errorf("cannot switch to user %s: %w", o.User, err)
	}
	if err := writePidFile(o.PidFile); err != nil {
		return fmt.Errorf("cannot write pid file %s: %w", o.PidFile, err)
	}
	s.defer_(func() { removePidFile(o.PidFile) })
	daemonReady() // the parent may exit now
	s.logListeners()
	if s.ops != nil {
		s.ops.SetReady(true) // jobs replayed, every listener open
	}
	return nil
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

// startFrontend starts one protocol by the listen rule: an address the
// operator gave must work, and a default one that cannot be used turns the
// protocol off with a notice, so that a second server on one machine comes
// up with what is free.
func (s *server) startFrontend(p *protocol, e *env) error {
	addrs, explicit := p.listen(s.o)
	if len(addrs) == 0 {
		return nil // off by its option
	}
	f, bound, err := p.start(e, addrs)
	if err != nil {
		if explicit {
			return err
		}
		notice(s.log, p.name+" is off: its default address cannot be used (give "+p.flag+" an address, or off)",
			zap.Strings("addrs", addrs), zap.Error(err))
		return nil
	}
	s.running = append(s.running, running{p: p, f: f, addrs: bound})
	s.defer_(func() {
		ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
		defer cancel()
		if err := f.Stop(ctx); err != nil {
			s.log.Warn("stop "+p.name, zap.Error(err))
		}
	})
	if s.ops != nil {
		s.ops.AddConns(ops.Conns{Protocol: p.name, Open: f.Conns})
	}
	return nil
}

// moreWorkers lists the other protocols' workers after Gearman's own
// connections in "workers": "status" counts them all.
func (s *server) moreWorkers(dst []byte) []byte {
	for _, r := range s.running {
		if r.p.workers != nil {
			dst = r.p.workers(r.f)(dst)
		}
	}
	return dst
}

// logListeners is the one line, at every log level, that names every
// listener: the bound addresses, not the configured ones (with port 0 the
// kernel picks the port, and this line is where a person or a script
// finds it).
func (s *server) logListeners() {
	fields := make([]zap.Field, 0, len(s.running)+4)
	for _, r := range s.running {
		fields = append(fields, zap.Strings(r.p.name, r.addrs))
		if r.p.name == "gearman" && s.o.SSL {
			fields = append(fields, zap.Strings("tls", r.addrs[:1]))
		}
	}
	if s.ops != nil {
		fields = append(fields, zap.Strings("metrics", []string{s.ops.Addr().String()}))
	}
	fields = append(fields, zap.String("version", version), zap.Int("pid", os.Getpid()))
	notice(s.log, "listening", fields...)
}

// wait serves until a signal or the admin command says to stop.
func (s *server) wait(stop <-chan os.Signal) {
	select {
	case got := <-stop:
		notice(s.log, "shutting down", zap.String("signal", got.String()))
	case graceful := <-s.admin:
		notice(s.log, "shutting down on admin request", zap.Bool("graceful", graceful))
		if graceful {
			if s.ops != nil {
				s.ops.SetReady(false) // a load balancer stops sending new work here
			}
			s.drain(stop)
		}
	}
	if s.ops != nil {
		s.ops.SetReady(false)
	}
}

// drain is "shutdown graceful": every frontend stops taking connections
// and handing out work, and Gearman's, the last, waits until the running
// jobs have finished and their results are written, for at most
// --shutdown-timeout. A signal or a plain "shutdown" meanwhile cuts it
// short, as either would stop a running server.
func (s *server) drain(stop <-chan os.Signal) {
	ctx, cancel := context.WithTimeout(context.Background(), s.o.ShutdownTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		var err error
		for _, r := range s.running {
			if err = r.f.Drain(ctx); err != nil {
				break
			}
		}
		done <- err
	}()
	for {
		select {
		case err := <-done:
			if err != nil {
				s.log.Warn("stopping with jobs still running", zap.Stringer("shutdown-timeout", s.o.ShutdownTimeout))
			} else {
				notice(s.log, "no job running")
			}
			return
		case got := <-stop:
			notice(s.log, "stopping at once", zap.String("signal", got.String()))
		case graceful := <-s.admin:
			if graceful {
				continue // already draining
			}
			notice(s.log, "stopping at once on admin request")
		}
		cancel()
		<-done // Stop must not run concurrently with Drain
		return
	}
}

// startOps serves the operator endpoints, by the listen rule: the default
// address (loopback, whatever -L says) is best effort, since another
// switchyard or a gearman-exporter may hold it; an address given must work.
func (s *server) startOps(addr string, explicit bool, store func() ops.StoreStats) error {
	srv := ops.New(ops.Config{Sched: s.sched, Version: version, Revision: readBuild().Revision, Protocol: source.Name, Store: store, Log: s.log})
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
		st, err := openStore(dir, o.Fsync)
		if err != nil {
			return nil, fmt.Errorf("cannot open the job store: %w", err)
		}
		s.defer_(func() { st.Close() })
		cfg.Store = st
		notice(s.log, "job store", zap.String("queue", "durable"), zap.String("dir", st.Dir()), zap.String("fsync", o.Fsync))
		return func() ops.StoreStats {
			d := st.Stats()
			return ops.StoreStats{Bytes: d.DiskBytes, Syncs: d.Syncs, SyncSeconds: d.SyncSeconds, SyncBuckets: d.SyncBuckets}
		}, nil
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
		return func() ops.StoreStats {
			q := sq.Stats()
			n, sum, buckets := ops.Cumulative(&q.Commits)
			return ops.StoreStats{Bytes: q.DiskBytes, Syncs: n, SyncSeconds: sum, SyncBuckets: buckets}
		}, nil
	}
	notice(s.log, "job store", zap.String("queue", "builtin"))
	return nil, nil
}

// openStore opens the durable queue in dir, which exists. A store that
// exists but cannot be read is an error naming it.
func openStore(dir, fsync string) (*durable.Store, error) {
	mode, err := durable.ParseSync(fsync)
	if err != nil {
		return nil, err
	}
	return durable.Open(dir, mode)
}

// watchStore logs the job store's failure (a full disk), once: clients
// learn of it from each refused submit, whoever runs the server from this
// line.
func watchStore(ctx context.Context, st *durable.Store, log *zap.Logger) {
	select {
	case <-st.Failed():
		log.Error("the job store takes no more writes until switchyard restarts: submits that need it are refused",
			zap.Error(st.Failure()))
	case <-ctx.Done():
	}
}
