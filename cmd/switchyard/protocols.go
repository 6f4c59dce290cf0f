package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"net"
	"time"

	"go.uber.org/zap"

	"switchyard/engine/budget"
	"switchyard/engine/controller"
	"switchyard/engine/dwork"
	"switchyard/engine/gearhttp"
	"switchyard/engine/gearman"
	"switchyard/engine/memodb"
	"switchyard/engine/periodic"
	"switchyard/engine/workerline"
	"switchyard/sched"
)

// A frontend is one protocol's running server, as run sees it.
type frontend interface {
	// Drain is the graceful half of a stop: no new connections, no new
	// work handed out, while open connections may report the jobs they
	// hold. It returns once that is done, or ctx ends.
	Drain(ctx context.Context) error
	// Stop closes the listeners and every connection.
	Stop(ctx context.Context) error
	// Conns is the number of open connections.
	Conns() int
}

// A protocol is one row of the table run starts the frontends from.
// Adding a protocol is one row here, its option rows in flags.go, and its
// engine package.
type protocol struct {
	name string
	// flag is the option that says where it listens, for the line that
	// tells why it is off.
	flag string
	// listen says where the protocol listens (none: it is off) and
	// whether the operator said so. An address the operator gave must
	// work; a default one that cannot be used turns the protocol off.
	listen func(o *options) (addrs []string, explicit bool)
	// start serves the protocol on addrs and returns the addresses bound
	// (the ports the kernel picked for port 0).
	start func(e *env, addrs []string) (frontend, []string, error)
	// workers lists the protocol's workers, newest first, for Gearman's
	// "workers" listing; nil: it has none to list there.
	workers func(f frontend) []workerline.Worker
	// conns lists every connection, for the operator endpoints; nil:
	// those of workers.
	conns func(f frontend) []workerline.Worker
}

// env is what every frontend is built from.
type env struct {
	o     *options
	sched *sched.Sched
	log   *zap.Logger
	tls   *tls.Config
	// budget is the memory budget every frontend's connections hold against.
	budget *budget.Budget
	// workers lists the other protocols' workers, for Gearman's listing.
	workers func() []workerline.Worker
	// shutdown is the admin command's ("shutdown [graceful]") way to stop
	// the process; nil unless --admin-shutdown.
	shutdown func(graceful bool)
	// commands are admin commands beyond gearmand's (a cluster node's).
	commands map[string]func(gearman.Caller, []string) string
}

// protocols is every frontend in the order they start; they stop in the
// reverse order. Gearman's is last: once its port answers, every listener
// is up, and scripts and tests wait on that port.
var protocols = []protocol{
	{
		name: "periodic", flag: "--periodic-listen",
		listen: func(o *options) ([]string, bool) {
			if o.PeriodicListen != nil {
				return o.PeriodicListen, true
			}
			return []string{"tcp://" + net.JoinHostPort(cmp.Or(o.Listen, "0.0.0.0"), defaultPeriodicPort)}, false
		},
		start: func(e *env, addrs []string) (frontend, []string, error) {
			s := periodic.New(periodic.Config{Addrs: addrs, TLS: e.tls, Loops: e.o.Threads, Budget: e.budget}, e.sched, e.log)
			if err := s.Start(); err != nil {
				return nil, nil, err
			}
			return s, s.Bound(), nil
		},
		workers: func(f frontend) []workerline.Worker { return f.(*periodic.Server).ListWorkers() },
	},
	{
		name: "controller", flag: "--controller-socket",
		listen: func(o *options) ([]string, bool) {
			switch o.ControllerSocket {
			case "off":
				return nil, true
			case "":
				return []string{defaultControllerSocket}, false
			}
			return []string{o.ControllerSocket}, true
		},
		start: func(e *env, addrs []string) (frontend, []string, error) {
			funcs := e.o.ControllerFuncs
			if funcs == nil {
				funcs = []string{defaultControllerFunc}
			}
			s := controller.New(controller.Config{Socket: addrs[0], Funcs: funcs, MaxExtra: int(e.o.MaxPacket), Budget: e.budget}, e.sched, e.log)
			if err := s.Start(); err != nil {
				return nil, nil, err
			}
			return s, []string{"unix://" + s.Socket()}, nil
		},
		workers: func(f frontend) []workerline.Worker { return f.(*controller.Server).ListWorkers() },
	},
	{
		name: "dwork", flag: "--dwork-listen",
		listen: func(o *options) ([]string, bool) {
			if o.DworkListen != nil {
				return o.DworkListen, true
			}
			return []string{"tcp://" + net.JoinHostPort(cmp.Or(o.Listen, "*"), defaultDworkPort)}, false
		},
		start: func(e *env, addrs []string) (frontend, []string, error) {
			s := dwork.New(dwork.Config{Addrs: addrs, Func: cmp.Or(e.o.DworkFunc, defaultDworkFunc), HostTimeout: e.o.DworkHostTimeout,
				Budget: e.budget}, e.sched, e.log)
			if err := s.Start(); err != nil {
				return nil, nil, err
			}
			return s, stringsOf(s.Addrs()), nil
		},
		// Its hosts are listed for the operator endpoints, not in
		// Gearman's "workers" (a host's name is any text; "status"
		// counts them).
		conns: func(f frontend) []workerline.Worker { return f.(*dwork.Server).ListHosts() },
	},
	{
		name: "memodb", flag: "--memodb-listen",
		listen: func(o *options) ([]string, bool) {
			if o.MemodbListen != nil {
				return o.MemodbListen, true
			}
			return []string{"tcp://" + net.JoinHostPort(cmp.Or(o.Listen, "127.0.0.1"), defaultMemodbPort)}, false
		},
		start: func(e *env, addrs []string) (frontend, []string, error) {
			s := memodb.New(memodb.Config{Addrs: addrs, TLS: e.tls, QueueTimeout: e.o.MemodbQueue, Heartbeat: e.o.MemodbHeartbeat,
				MaxMessage: int(min(e.o.MaxPacket, maxMemodbMessage)), Budget: e.budget}, e.sched, e.log)
			if err := s.Start(); err != nil {
				return nil, nil, err
			}
			return s, s.Addrs(), nil
		},
		workers: func(f frontend) []workerline.Worker { return f.(*memodb.Server).ListWorkers() },
	},
	{
		name: "http", flag: "--http-port",
		listen: func(o *options) ([]string, bool) {
			if !o.HTTP {
				return nil, true
			}
			return []string{net.JoinHostPort(o.Listen, o.HTTPPort)}, o.HTTPPortGiven
		},
		start: func(e *env, addrs []string) (frontend, []string, error) {
			s := gearhttp.New(httpConfig(e, addrs[0]), e.sched, e.log)
			if err := s.Start(); err != nil {
				return nil, nil, err
			}
			return s, []string{s.Addr().String()}, nil
		},
	},
	{
		// Gearman's port is the server: -p is always explicit, as in
		// gearmand, and a port that cannot be bound stops the start.
		name: "gearman", flag: "--port",
		conns: func(f frontend) []workerline.Worker { return f.(*gearman.Server).ListConns() },
		listen: func(o *options) ([]string, bool) {
			plain, secure := gearmanAddrs(o)
			return append(secure, plain...), true
		},
		start: func(e *env, _ []string) (frontend, []string, error) {
			s := gearman.New(gearmanConfig(e), e.sched, e.log)
			if err := s.Start(); err != nil {
				return nil, nil, err
			}
			// The TLS port (-p with --ssl) first, then the plain ones.
			return s, append(stringsOf(s.TLSAddrs()), stringsOf(s.Addrs())...), nil
		},
	},
}

// gearmanConfig is the Gearman port's configuration.
func gearmanConfig(e *env) gearman.Config {
	o := e.o
	plain, secure := gearmanAddrs(o)
	cfg := gearman.Config{
		Addrs:        plain,
		TLSAddrs:     secure,
		TLS:          e.tls,
		Loops:        o.Threads,
		HandlePrefix: o.JobHandlePrefix,
		Exceptions:   o.Exceptions,
		MaxPacket:    int(o.MaxPacket),
		Keepalive:    o.Keepalive,
		Version:      version,
		Verbose:      o.Verbose,
		Shutdown:     e.shutdown,
		MoreWorkers:  e.workers,
		Commands:     e.commands,
		Budget:       e.budget,
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
	return cfg
}

// httpConfig is gearmand's HTTP protocol's configuration (-r http) on addr:
// the Gearman port's job handles, exceptions and TCP keepalive settings.
func httpConfig(e *env, addr string) gearhttp.Config {
	o := e.o
	cfg := gearhttp.Config{
		Budget:       e.budget,
		Addr:         addr,
		TLS:          e.httpTLS(),
		HandlePrefix: o.JobHandlePrefix,
		Exceptions:   o.Exceptions,
		MaxBody:      o.MaxPacket,
		Timeout:      o.HTTPTimeout,
		Server:       "switchyard/" + version,
	}
	if o.Keepalive {
		// The defaults of the Gearman port's (gnet's): Linux's idle time,
		// a fifth of it between probes, five probes.
		idle := 2 * time.Hour
		if o.KeepaliveIdle > 0 {
			idle = time.Duration(o.KeepaliveIdle) * time.Second
		}
		cfg.KeepAlive = net.KeepAliveConfig{Enable: true, Idle: idle, Interval: idle / 5, Count: 5}
		if o.KeepaliveInterval > 0 {
			cfg.KeepAlive.Interval = time.Duration(o.KeepaliveInterval) * time.Second
		}
		if o.KeepaliveCount > 0 {
			cfg.KeepAlive.Count = o.KeepaliveCount
		}
	}
	return cfg
}

// httpTLS is the HTTP port's TLS configuration, nil unless --http-ssl.
func (e *env) httpTLS() *tls.Config {
	if !e.o.HTTPSSL {
		return nil
	}
	return e.tls
}

// maxMemodbMessage caps --max-packet for MemoDB, whose limit is an int
// with room for NNG's header.
const maxMemodbMessage = 1<<31 - 1<<10

func stringsOf[T interface{ String() string }](xs []T) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = x.String()
	}
	return out
}
