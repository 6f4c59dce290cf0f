// Command switchyard is a job broker that stands in for gearmand: the same
// flags, the same bytes on the wire, one scheduler behind every protocol.
package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"switchyard/engine/controller"
	"switchyard/engine/dwork"
	"switchyard/engine/gearhttp"
	"switchyard/engine/gearman"
	"switchyard/engine/memodb"
	"switchyard/engine/ops"
	"switchyard/engine/periodic"
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

func run(args []string) int {
	o, err := parseArgs(args, os.Getenv)
	if err != nil {
		// As gearmand: the program as invoked, its message, status 1.
		fmt.Fprintf(os.Stderr, "%s: %v\n", os.Args[0], err)
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
			fmt.Fprintf(os.Stderr, "switchyard: daemon: %v\n", err)
			return 1
		}
		if !child {
			return 0
		}
	}
	log, err := newLogger(o.LogFile, o.Verbose)
	if err != nil {
		fmt.Fprintf(os.Stderr, "switchyard: log file: %v\n", err)
		return 1
	}
	defer log.Sync()
	for _, w := range o.Warnings {
		log.Warn(w)
	}
	if err := setFileLimit(o.FileDescriptors); err != nil {
		log.Error("file descriptor limit", zap.Error(err))
		return 1
	}

	// The TLS files first: a server that cannot start leaves no store behind.
	var tlsConfig *tls.Config
	if o.SSL {
		if tlsConfig, err = loadTLS(o.SSLCAFile, o.SSLCertificate, o.SSLKey); err != nil {
			log.Error("cannot start", zap.Error(err))
			return 1
		}
	}
	scfg := sched.Config{WorkerWakeup: o.WorkerWakeup, JobRetries: o.JobRetries, RoundRobin: o.RoundRobin,
		FunctionTTL: o.FunctionTTL, Release: gearman.ReleasePayload,
		Latency: o.MetricsListen != "off"} // the histograms are only read there
	var st *durable.Store
	var sqStore *sqlite.Store
	var storeStats func() ops.StoreStats
	switch o.QueueType {
	case "durable":
		if st, err = openStore(o.DataDir, o.Fsync, o.Recover, log); err != nil {
			log.Error("cannot open the job store", zap.Error(err))
			return 1
		}
		defer st.Close() // after the scheduler's Close below: last
		scfg.Store = st
		storeStats = durableStats(st)
		log.Info("job store", zap.String("dir", st.Dir()), zap.String("fsync", o.Fsync))
	case "libsqlite3":
		sq, err := sqlite.Open(sqlite.Config{Path: o.SqliteDB, Table: o.SqliteTable, StoreOnShutdown: o.StoreOnShutdown,
			EachRecord: o.Fsync == "always", NoSync: o.Fsync == "never"})
		if err != nil {
			log.Error("cannot open the job store", zap.Error(err))
			fmt.Fprintf(os.Stderr, "switchyard: Error while initializing the queue : libsqlite3: %v\n", err)
			return 1
		}
		defer func() {
			if err := sq.Close(); err != nil {
				log.Error("job store", zap.Error(err))
			}
		}()
		scfg.Store = sq
		storeStats = sqliteStats(sq)
		sqStore = sq
		log.Info("job store", zap.String("sqlite", sq.Path()), zap.String("table", o.SqliteTable),
			zap.Bool("store-queue-on-shutdown", o.StoreOnShutdown), zap.String("fsync", o.Fsync))
	}
	s := sched.New(scfg)
	defer s.Close()
	// The metrics listener first: it reports on the start too.
	var mon *ops.Server
	if o.MetricsListen != "off" {
		addr := cmp.Or(o.MetricsListen, defaultMetricsListen)
		if mon, err = startOps(addr, o.MetricsListen != "", s, storeStats, log); err != nil {
			log.Error("cannot start", zap.Error(err))
			return 1
		}
	}
	if mon != nil {
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
			defer cancel()
			mon.Stop(ctx)
		}()
	}
	countConns := func(protocol string, open func() int) {
		if mon != nil {
			mon.AddConns(ops.Conns{Protocol: protocol, Open: open})
		}
	}
	ctx, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	go returnMemory(ctx, s.Len, time.Second)
	if st != nil {
		go watchStore(ctx, st, log)
	}
	if sqStore != nil {
		go watchSqlite(ctx, sqStore, log)
	}

	stop := make(chan bool, 1) // true: graceful
	plain, secure := gearmanAddrs(o)
	cfg := gearman.Config{
		Addrs:        plain,
		TLSAddrs:     secure,
		Loops:        o.Threads,
		HandlePrefix: o.JobHandlePrefix,
		Exceptions:   o.Exceptions,
		MaxPacket:    int(o.MaxPacket),
		Keepalive:    o.Keepalive,
		Version:      version,
		Verbose:      o.Verbose,
	}
	if o.AdminShutdown {
		cfg.Shutdown = func(graceful bool) {
			select {
			case stop <- graceful:
			default:
			}
		}
	}
	if o.KeepaliveIdle > 0 {
		cfg.KeepaliveIdle = time.Duration(o.KeepaliveIdle) * time.Second
	}
	if o.KeepaliveInterval > 0 {
		cfg.KeepaliveInterval = time.Duration(o.KeepaliveInterval) * time.Second
	}
	if o.KeepaliveCount > 0 {
		cfg.KeepaliveCount = o.KeepaliveCount
	}
	cfg.TLS = tlsConfig
	// The stored jobs are back before any port opens: no submit can take
	// an id or a unique that a stored job holds.
	if n, err := s.Replay(); err != nil {
		log.Error("cannot load the stored jobs", zap.Error(err))
		return 1
	} else if n > 0 {
		log.Info("jobs restored", zap.Int("jobs", n))
	}
	// Listen for signals before the port opens, so that a SIGTERM sent as
	// soon as we accept connections still means a clean exit.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	// The other protocols' frontends first, Gearman's last: once the
	// Gearman port answers, every listener is up (scripts and tests wait on
	// that port). Each is stopped before Gearman's.
	var srv *gearman.Server
	var others []frontend
	var psrv *periodic.Server
	if addrs := periodicAddrs(o); len(addrs) > 0 {
		psrv = periodic.New(periodic.Config{Addrs: addrs, Loops: o.Threads}, s, log)
		if err := psrv.Start(); err != nil {
			log.Error("cannot start", zap.Error(err))
			stopServers(srv, others, log)
			return 1
		}
		others = append(others, frontend{"periodic", psrv})
		countConns("periodic", psrv.Conns)
	}
	csrv, err := startController(o, s, int(o.MaxPacket), log)
	if err != nil {
		log.Error("cannot start", zap.Error(err))
		stopServers(srv, others, log)
		return 1
	}
	if csrv != nil {
		others = append(others, frontend{"controller", csrv})
		countConns("controller", csrv.Conns)
	}
	var dsrv *dwork.Server
	if addrs := dworkAddrs(o); len(addrs) > 0 {
		dsrv = dwork.New(dwork.Config{Addrs: addrs, Func: cmp.Or(o.DworkFunc, defaultDworkFunc)}, s, log)
		if err := dsrv.Start(); err != nil {
			log.Error("cannot start", zap.Error(err))
			stopServers(srv, others, log)
			return 1
		}
		others = append(others, frontend{"dwork", dsrv})
		countConns("dwork", dsrv.Conns)
	}
	var msrv *memodb.Server
	if addrs := memodbAddrs(o); len(addrs) > 0 {
		msrv = memodb.New(memodb.Config{Addrs: addrs, QueueTimeout: o.MemodbQueue, Heartbeat: o.MemodbHeartbeat,
			MaxMessage: int(min(o.MaxPacket, maxMemodbMessage))}, s, log)
		if err := msrv.Start(); err != nil {
			log.Error("cannot start", zap.Error(err))
			stopServers(srv, others, log)
			return 1
		}
		others = append(others, frontend{"memodb", msrv})
		countConns("memodb", msrv.Conns)
	}
	var hsrv *gearhttp.Server
	if o.HTTP {
		hsrv = gearhttp.New(httpConfig(o, cfg), s, log)
		if err := hsrv.Start(); err != nil {
			log.Error("cannot start", zap.Error(err))
			stopServers(srv, others, log)
			return 1
		}
		others = append(others, frontend{"http", hsrv})
		countConns("http", hsrv.Conns)
	}
	// The other protocols' workers join Gearman's "workers" listing, after
	// its own connections: "status" counts them all.
	var listers []func([]byte) []byte
	if psrv != nil {
		listers = append(listers, psrv.AppendWorkers)
	}
	if csrv != nil {
		listers = append(listers, csrv.AppendWorkers)
	}
	if msrv != nil {
		listers = append(listers, msrv.AppendWorkers)
	}
	cfg.MoreWorkers = func(dst []byte) []byte {
		for _, l := range listers {
			dst = l(dst)
		}
		return dst
	}
	srv = gearman.New(cfg, s, log)
	if err := srv.Start(); err != nil {
		log.Error("cannot start", zap.Error(err))
		srv = nil
		stopServers(srv, others, log)
		return 1
	}
	countConns("gearman", srv.Conns)
	if err := dropPrivileges(o.User); err != nil {
		log.Error("cannot switch user", zap.String("user", o.User), zap.Error(err))
		return 1
	}
	if err := writePidFile(o.PidFile); err != nil {
		log.Error("cannot write pid file", zap.String("path", o.PidFile), zap.Error(err))
		return 1
	}
	defer removePidFile(o.PidFile)
	if o.Daemon {
		daemonReady() // the parent may exit now
	}
	// The bound addresses, not the configured ones: with -p 0 the kernel
	// picks the port, and this line is where a person or a script finds it.
	log.Info("listening", append(listenFields(srv), zap.String("version", version))...)
	if mon != nil {
		mon.SetReady(true) // jobs replayed, every listener open
	}
	if psrv != nil {
		log.Info("periodic listening", zap.Stringers("addrs", psrv.Addrs()))
	}
	if csrv != nil {
		log.Info("controller listening", zap.String("socket", csrv.Socket()))
	}
	if dsrv != nil {
		log.Info("dwork listening", zap.Stringers("addrs", dsrv.Addrs()), zap.String("func", dsrv.Func()))
	}
	if msrv != nil {
		log.Info("memodb listening", zap.Strings("addrs", msrv.Addrs()))
	}
	if hsrv != nil {
		log.Info("http listening", zap.Stringer("addr", hsrv.Addr()))
	}

	select {
	case got := <-sig:
		log.Info("shutting down", zap.String("signal", got.String()))
		if mon != nil {
			mon.SetReady(false)
		}
	case graceful := <-stop:
		log.Info("shutting down on admin request", zap.Bool("graceful", graceful))
		if mon != nil {
			mon.SetReady(false) // a load balancer stops sending new work here
		}
		if graceful {
			for _, f := range others {
				f.srv.Drain()
			}
			finishRunningJobs(srv, o.ShutdownTimeout, sig, stop, log)
		}
	}
	stopServers(srv, others, log)
	log.Info("shutdown complete")
	return 0
}

// frontend is a protocol's server beside Gearman's.
type frontend struct {
	name string
	srv  interface {
		Drain()
		Stop(context.Context) error
	}
}

// stopServers closes every frontend, each given drainTimeout to write what
// it owes; srv is nil if Gearman's never started.
func stopServers(srv *gearman.Server, others []frontend, log *zap.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	for _, f := range others {
		if err := f.srv.Stop(ctx); err != nil {
			log.Warn("stop "+f.name, zap.Error(err))
		}
	}
	if srv == nil {
		return
	}
	if err := srv.Stop(ctx); err != nil {
		log.Warn("stop", zap.Error(err))
	}
}

// startOps serves the metrics endpoints on addr. The default address is
// best effort: where it is taken (another switchyard, gearman-exporter),
// they are off with a warning; an address given explicitly must work.
func startOps(addr string, explicit bool, s *sched.Sched, store func() ops.StoreStats, log *zap.Logger) (*ops.Server, error) {
	srv := ops.New(ops.Config{Sched: s, Version: version, Protocol: source.Name, Store: store, Log: log})
	if err := srv.Start(addr); err != nil {
		if explicit {
			return nil, fmt.Errorf("metrics: %w", err)
		}
		log.Warn("the metrics endpoints are off: their default address cannot be used (see --metrics-listen)", zap.Error(err))
		return nil, nil
	}
	log.Info("metrics listening", zap.Stringer("addr", srv.Addr()))
	return srv, nil
}

// startController serves the Worker–Controller protocol unless
// --controller-socket is off. The default path is best effort: where it
// cannot be made (no /run/switchyard for this user), the protocol is off
// with a warning; a path given explicitly must work.
func startController(o *options, s *sched.Sched, maxExtra int, log *zap.Logger) (*controller.Server, error) {
	path := o.ControllerSocket
	if path == "off" {
		return nil, nil
	}
	explicit := path != ""
	if !explicit {
		path = defaultControllerSocket
	}
	funcs := o.ControllerFuncs
	if funcs == nil {
		funcs = []string{defaultControllerFunc}
	}
	c := controller.New(controller.Config{Socket: path, Funcs: funcs, MaxExtra: maxExtra}, s, log)
	if err := c.Start(); err != nil {
		if explicit {
			return nil, err
		}
		log.Warn("the Worker-Controller protocol is off: its default socket cannot be used (see --controller-socket)", zap.Error(err))
		return nil, nil
	}
	return c, nil
}

// periodicAddrs is where the Periodic frontend listens: the real server's
// TCP port unless --periodic-listen says otherwise ("off": nowhere).
func periodicAddrs(o *options) []string {
	if o.PeriodicListen == nil {
		return []string{defaultPeriodicListen}
	}
	return o.PeriodicListen
}

// dworkAddrs is where the dwork frontend listens: the real hub's port
// unless --dwork-listen says otherwise ("off": nowhere).
func dworkAddrs(o *options) []string {
	if o.DworkListen == nil {
		return []string{defaultDworkListen}
	}
	return o.DworkListen
}

// memodbAddrs is where the MemoDB frontend listens: memodb-broker's usual
// URL unless --memodb-listen says otherwise ("off": nowhere).
func memodbAddrs(o *options) []string {
	if o.MemodbListen == nil {
		return []string{defaultMemodbListen}
	}
	return o.MemodbListen
}

// httpConfig is gearmand's HTTP protocol's configuration (-r http): its
// port on -L's address, as gearmand binds it, and the Gearman port's job
// handles, exceptions and TCP keepalive settings.
func httpConfig(o *options, gcfg gearman.Config) gearhttp.Config {
	cfg := gearhttp.Config{
		Addr:         net.JoinHostPort(o.Listen, o.HTTPPort),
		HandlePrefix: o.JobHandlePrefix,
		Exceptions:   o.Exceptions,
		MaxBody:      o.MaxPacket,
		Timeout:      o.HTTPTimeout,
		Server:       "switchyard/" + version,
	}
	if gcfg.Keepalive {
		// The defaults of the Gearman port's (gnet's): Linux's idle time,
		// a fifth of it between probes, five probes.
		idle := cmp.Or(gcfg.KeepaliveIdle, 2*time.Hour)
		cfg.KeepAlive = net.KeepAliveConfig{Enable: true, Idle: idle,
			Interval: cmp.Or(gcfg.KeepaliveInterval, idle/5), Count: cmp.Or(gcfg.KeepaliveCount, 5)}
	}
	return cfg
}

// maxMemodbMessage caps --max-packet for MemoDB, whose limit is an int
// with room for NNG's header.
const maxMemodbMessage = 1<<31 - 1<<10

// finishRunningJobs is "shutdown graceful": no new connections and no new
// work until the running jobs have finished, for at most timeout. A signal
// or a plain "shutdown" meanwhile cuts it short, as either would stop a
// running server.
func finishRunningJobs(srv *gearman.Server, timeout time.Duration, sig <-chan os.Signal, stop <-chan bool, log *zap.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- srv.Drain(ctx) }()
	for {
		select {
		case err := <-done:
			if err != nil {
				log.Warn("stopping with jobs still running", zap.Stringer("shutdown-timeout", timeout))
			} else {
				log.Info("no job running")
			}
			return
		case got := <-sig:
			log.Info("stopping at once", zap.String("signal", got.String()))
		case graceful := <-stop:
			if graceful {
				continue // already draining
			}
			log.Info("stopping at once on admin request")
		}
		cancel()
		<-done // Stop must not run concurrently with Drain
		return
	}
}

// newLogger builds the zap logger for -l/--log-file and --verbose.
func newLogger(path, verbose string) (*zap.Logger, error) {
	if path == "none" {
		return zap.NewNop(), nil
	}
	var out zapcore.WriteSyncer = zapcore.Lock(os.Stderr)
	if path != "stderr" {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, err
		}
		out = zapcore.Lock(f)
	}
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	core := zapcore.NewCore(zapcore.NewConsoleEncoder(enc), out, zapLevel(verboseLevel(verbose)))
	return zap.New(core), nil
}

// zapLevel maps gearmand's levels (0 FATAL .. 7 DEBUG) onto zap's.
func zapLevel(l int) zapcore.Level {
	switch {
	case l <= 3: // FATAL ALERT CRITICAL ERROR
		return zapcore.ErrorLevel
	case l == 4: // WARNING
		return zapcore.WarnLevel
	case l <= 6: // NOTICE INFO
		return zapcore.InfoLevel
	default:
		return zapcore.DebugLevel
	}
}
