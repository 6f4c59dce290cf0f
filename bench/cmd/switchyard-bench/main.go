// Command switchyard-bench runs the benchmark scenarios against switchyard
// and, when it is installed, gearmand, alternating the two per scenario so
// that every figure has a baseline from the same minute; the paired
// scenario (fg-curve) runs both at once and alternates them per step. The Periodic,
// Worker–Controller and dwork scenarios run against switchyard alone:
// gearmand has none of those protocols; so does mixed, which runs all of
// them at once. It prints a markdown table and writes a JSON record to the
// results directory.
//
//	switchyard-bench [--quick] [--scenarios fg,bg] [--rounds 2] [--fg.duration 30s] ...
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"switchyard/bench/ceiling"
	"switchyard/bench/cgroup"
	"switchyard/bench/harness"
	"switchyard/bench/netns"
	"switchyard/bench/record"
	"switchyard/bench/scenario"
)

const (
	defaultGearmand   = "/usr/sbin/gearmand"
	defaultNATSServer = "/usr/sbin/nats-server"
)

// The servers of records besides switchyard and gearmand: the ceiling
// scenarios' echo process, and the cluster scenarios' three switchyard
// nodes and three JetStream servers.
const (
	echoServer      = "echo"
	clusterServer   = "switchyard-cluster"
	jetstreamServer = "jetstream"
)

type options struct {
	scenarios       string
	quick           bool
	rounds          int
	switchyard      string
	switchyardArgs  string
	gearmand        string
	gearmandArgs    string
	gearmandThreads int
	switchyardLoops int
	natsServer      string
	clusterMetrics  bool
	netnsPrefix     string
	cgroupPrefix    string
	interleave      bool
	echoServer      bool
	version         bool
	out             string
	serverLog       string
	cpuProfile      string
	list            bool
	params          map[string]*scenario.Params
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "switchyard-bench:", err)
		os.Exit(1)
	}
}

func run() error {
	opts, err := parseFlags(os.Args[1:])
	if err != nil {
		return err
	}
	if opts.version {
		fmt.Println("switchyard-bench echo server")
		return nil
	}
	if opts.echoServer {
		// The ceiling scenarios' server: this binary run again, so that it
		// is a process of its own, as a job server is. The harness finds
		// the port the kernel picked in /proc.
		return ceiling.Serve("127.0.0.1:0", func(string) {})
	}
	if opts.list {
		for _, s := range scenario.All {
			fmt.Printf("%-19s %s\n", s.Name, s.About)
		}
		return nil
	}
	scenarios, err := scenario.Lookup(strings.Split(opts.scenarios, ","))
	if err != nil {
		return err
	}
	if err := netns.Available(); err != nil {
		scenarios = slices.DeleteFunc(scenarios, func(s *scenario.Scenario) bool {
			if s.Netns {
				fmt.Fprintf(os.Stderr, "bench: %s skipped: it cuts nodes off in network namespaces, and %v\n", s.Name, err)
			}
			return s.Netns
		})
	}
	scenarios = slices.DeleteFunc(scenarios, func(s *scenario.Scenario) bool {
		why := ""
		if s.StartsOwn() {
			why = fleetRunnable(s, *opts.params[s.Name])
		}
		if why != "" {
			fmt.Fprintf(os.Stderr, "bench: %s skipped: %s\n", s.Name, why)
		}
		return why != ""
	})
	fdLimit, err := raiseFileLimit()
	if err != nil {
		return fmt.Errorf("raising the open file limit: %w", err)
	}
	servers, err := serverConfigs(opts, fdLimit)
	if err != nil {
		return err
	}
	if slices.ContainsFunc(scenarios, func(s *scenario.Scenario) bool { return s.Echo }) {
		self, err := os.Executable()
		if err != nil {
			return err
		}
		servers = append(servers, newServerSpec(echoServer, self, []string{"--echo-server"}))
	}
	if slices.ContainsFunc(scenarios, func(s *scenario.Scenario) bool { return s.Cluster }) {
		servers = append(servers, clusterConfigs(opts, fdLimit, scenarios)...)
	}
	var serverLog *os.File
	var fleetLog io.Writer // the fleet's servers' output, once serverLog is open
	if opts.serverLog != "" {
		if serverLog, err = os.Create(opts.serverLog); err != nil {
			return err
		}
		defer serverLog.Close()
		fleetLog = serverLog
	}
	note := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...) }
	var fleet scenario.Fleet
	var fleetServers []record.Server
	if slices.ContainsFunc(scenarios, (*scenario.Scenario).StartsOwn) {
		fleet, fleetServers = fleetFor(opts, servers[0], fdLimit, &fleetLog, note)
		if cgroup.Available() == nil {
			sweepCgroups(opts.cgroupPrefix, note)
		}
		note("%s takes --cluster-groups: %v", opts.switchyard, fleet.Groups)
	}

	if opts.cpuProfile != "" {
		f, err := os.Create(opts.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	rec := &record.Record{
		Schema:  record.SchemaVersion,
		Time:    time.Now().UTC().Truncate(time.Second),
		Commit:  record.GitCommit(".", opts.out),
		Command: os.Args,
		Quick:   opts.quick,
		Machine: record.DetectMachine(),
		LoadAvg: []float64{record.LoadAvg()},
	}
	for _, s := range servers {
		rec.Servers = append(rec.Servers, s.record)
	}
	rec.Servers = append(rec.Servers, fleetServers...)
	fmt.Fprintf(os.Stderr, "bench: %d CPUs (%s), load average %.2f, commit %s, servers: %s\n",
		rec.Machine.NumCPU, rec.Machine.CPUModel, rec.LoadAvg[0], rec.Commit, serverNames(servers))

	for _, step := range schedule(scenarios, opts.rounds, opts.interleave) {
		sc, round := step.sc, step.round
		params := *opts.params[sc.Name]
		if sc.StartsOwn() {
			if ctx.Err() != nil {
				return errors.New("interrupted; no record written")
			}
			if serverLog != nil {
				fmt.Fprintf(serverLog, "=== %s round %d, its own servers\n", sc.Name, round)
			}
			for _, run := range sc.RunFleet(ctx, fleet, params) {
				run.Round = round
				rec.Runs = append(rec.Runs, run)
				printRun(run)
			}
			continue
		}
		if sc.Paired() {
			var specs []serverSpec
			for _, s := range servers {
				if runsOn(sc, s.config.Name) {
					specs = append(specs, s)
				}
			}
			if ctx.Err() != nil {
				return errors.New("interrupted; no record written")
			}
			if serverLog != nil {
				for i := range specs {
					specs[i].config.Log = serverLog
				}
				fmt.Fprintf(serverLog, "=== %s round %d on %s, paired\n", sc.Name, round, serverNames(specs))
			}
			// The server that takes each step first alternates by round.
			first := slices.Clone(specs)
			if round%2 == 0 {
				slices.Reverse(first)
			}
			runs, err := runPaired(ctx, sc, params, first)
			if err != nil {
				return err
			}
			if round%2 == 0 {
				slices.Reverse(runs) // back to the record's order
			}
			for i, run := range runs {
				run.Server, run.Round = specs[i].config.Name, round
				rec.Runs = append(rec.Runs, run)
				printRun(run)
			}
			continue
		}
		for _, s := range servers {
			if !runsOn(sc, s.config.Name) {
				continue
			}
			if ctx.Err() != nil {
				return errors.New("interrupted; no record written")
			}
			if serverLog != nil {
				s.config.Log = serverLog
				fmt.Fprintf(serverLog, "=== %s round %d on %s\n", sc.Name, round, s.config.Name)
			}
			var run record.Run
			var err error
			switch s.config.Name {
			case clusterServer:
				run, err = runCluster(ctx, sc, params, s, opts.netnsPrefix, note)
			case jetstreamServer:
				run, err = runJetStream(ctx, sc, params, s)
			default:
				run, err = runOne(ctx, sc, params, s)
			}
			if err != nil {
				return err
			}
			run.Server, run.Round = s.config.Name, round
			if c := rec.Find(sc.Ceiling, echoServer, round); sc.Ceiling != "" && c != nil && c.JobsPerSec > 0 {
				run.OfCeiling = run.JobsPerSec / c.JobsPerSec
			}
			rec.Runs = append(rec.Runs, run)
			printRun(run)
		}
	}
	relateCluster(rec, scenarios)
	if ctx.Err() != nil {
		return errors.New("interrupted; no record written")
	}
	rec.LoadAvg = append(rec.LoadAvg, record.LoadAvg())
	if rec.Busy() {
		fmt.Fprintf(os.Stderr, "bench: load average %v over %d CPUs: other work shared the machine, the figures are low and noisy\n", rec.LoadAvg, rec.Machine.NumCPU)
	}

	fmt.Print(rec.Markdown())
	if curves := rec.CurveMarkdown(); curves != "" {
		fmt.Printf("\nLatency–throughput curves (open loop, latency from each job's due time):\n\n%s", curves)
	}
	if pooled := rec.PooledMarkdown(); pooled != "" {
		fmt.Printf("\nThe curves' steps, each rate's rounds pooled:\n\n%s", pooled)
	}
	if nodes := rec.NodesMarkdown(); nodes != "" {
		fmt.Printf("\nEach server process under its CPU quota (* got under 85%% of its quota while the machine had less than a quota idle):\n\n%s", nodes)
	}
	if ranges := rec.RangesMarkdown(); ranges != "" {
		fmt.Printf("\nOver the %d rounds, median (lowest-highest):\n\n%s", rec.Rounds(), ranges)
	}
	if opts.out != "" {
		path, err := rec.Write(opts.out)
		if err != nil {
			return err
		}
		fmt.Fprintln(os.Stderr, "bench: wrote", path)
	}
	return nil
}

// printRun reports a run's headline figures as it ends.
func printRun(run record.Run) {
	fmt.Fprintf(os.Stderr, "bench: %-19s %-10s %10s jobs/s  p99 %-8s cpu µs/job server %s load %s %s\n", run.Scenario, run.Server,
		record.FormatRate(run.JobsPerSec), record.FormatMicros(run.Latency.P99),
		record.FormatCPU(run.ServerCPUPerJob), record.FormatCPU(run.LoadCPUPerJob), firstLine(run.Error))
}

// runOne starts a fresh server, runs one scenario against it and stops it.
func runOne(ctx context.Context, sc *scenario.Scenario, p scenario.Params, s serverSpec) (record.Run, error) {
	st, err := startOne(ctx, sc, p, s)
	if err != nil {
		return record.Run{}, err
	}
	if st.skipped != nil {
		return *st.skipped, nil
	}
	run := sc.Run(ctx, st.target, p)
	if err := st.stop(); err != nil && run.Error == "" {
		run.Error = err.Error()
	}
	return run, nil
}

// runPaired starts a fresh server of each spec, runs a paired scenario
// on them all at once (scenario.RunPaired) and stops them: one record per
// spec, in order.
func runPaired(ctx context.Context, sc *scenario.Scenario, p scenario.Params, specs []serverSpec) ([]record.Run, error) {
	runs := make([]record.Run, len(specs))
	var started []*startedServer
	var targets []scenario.Target
	var at []int // runs[at[i]] is targets[i]'s
	defer func() {
		for _, st := range started {
			st.stop() // only on an early return: stopped below otherwise
		}
	}()
	for i, s := range specs {
		st, err := startOne(ctx, sc, p, s)
		if err != nil {
			return nil, err
		}
		if st.skipped != nil {
			runs[i] = *st.skipped
			continue
		}
		started = append(started, st)
		targets = append(targets, st.target)
		at = append(at, i)
	}
	for i, run := range sc.RunPaired(ctx, targets, p) {
		runs[at[i]] = run
	}
	for i, st := range started {
		if err := st.stop(); err != nil && runs[at[i]].Error == "" {
			runs[at[i]].Error = err.Error()
		}
	}
	started = nil
	return runs, nil
}

// startedServer is a server started for a scenario: target to run it
// against, and stop to stop the server and remove its files. skipped,
// instead, is the record of a scenario the server cannot run.
type startedServer struct {
	target  scenario.Target
	stop    func() error
	skipped *record.Run
}

// startOne starts a fresh server for one scenario.
func startOne(ctx context.Context, sc *scenario.Scenario, p scenario.Params, s serverSpec) (st *startedServer, err error) {
	st = &startedServer{}
	var cleanup []func()
	defer func() {
		if err != nil || st.skipped != nil {
			for _, f := range cleanup {
				f()
			}
		}
	}()
	cfg := s.config
	// Each protocol's listener is off but for that protocol's scenarios
	// (and mixed): on a port the kernel picks on the protocol's own
	// loopback address, or for the controller a socket in a fresh
	// directory.
	values := make(map[string]string) // by listener flag
	for i, l := range listeners {
		if !s.has[i] {
			if l.of(sc) {
				st.skipped = &record.Run{Scenario: sc.Name, Params: p.Strings(sc.Uses),
					Error: cfg.Path + " has no " + l.flag + ": it does not serve " + l.protocol}
				return st, nil
			}
			continue
		}
		if l.on != nil { // off unless turned on
			if l.of(sc) {
				cfg.Args = append(slices.Clip(cfg.Args), l.on...)
				cfg.Listeners = max(cfg.Listeners, 1) + 1
			}
			continue
		}
		value := "off"
		switch {
		case !l.of(sc):
		case l.flag == "--controller-socket":
			dir, err := controllerDir()
			if err != nil {
				return nil, err
			}
			cleanup = append(cleanup, func() { os.RemoveAll(dir) })
			value = filepath.Join(dir, "main.sock")
			values[l.flag] = value
		default:
			value = "tcp://" + l.host + ":0"
			cfg.Listeners = max(cfg.Listeners, 1) + 1
		}
		cfg.Args = append(slices.Clip(cfg.Args), l.flag, value)
	}
	if sc.Durable {
		dir, err := os.MkdirTemp("", "switchyard-bench-data-")
		if err != nil {
			return nil, err
		}
		cleanup = append(cleanup, func() { os.RemoveAll(dir) })
		cfg.Args = durableArgs(cfg.Name, cfg.Args, dir)
	}
	srv, err := harness.Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	// srv changes at a Restart: Usage and the Stop below follow it.
	target := scenario.Target{Addr: srv.Addr, Usage: func() (harness.Usage, error) { return srv.Usage() }}
	for _, addr := range srv.Others {
		ap, err := netip.ParseAddrPort(addr)
		if err != nil {
			srv.Stop()
			return nil, err
		}
		if i := slices.IndexFunc(listeners[:], func(l listener) bool { return l.host == ap.Addr().String() }); i >= 0 {
			values[listeners[i].flag] = addr
		}
	}
	for _, l := range listeners {
		if v, ok := values[l.flag]; ok {
			l.set(&target, v)
		}
	}
	if sc.Durable {
		restart := cfg
		restart.StartTimeout = max(p.Timeout, time.Minute) // a replay of the whole queue comes first
		target.Restart = func() (scenario.Target, time.Duration, error) {
			next, took, err := srv.Restart(ctx, restart)
			if err != nil {
				return scenario.Target{}, 0, err
			}
			srv = next
			return scenario.Target{Addr: srv.Addr, Usage: target.Usage}, took, nil
		}
	}
	st.target = target
	st.stop = func() error {
		err := srv.Stop()
		for _, f := range cleanup {
			f()
		}
		return err
	}
	return st, nil
}

// controllerDir makes a directory for a controller scenario's sockets.
// Unix socket paths are limited to 107 bytes, and the workers' sockets,
// <dir>/<id>.sock, are in it: a long $TMPDIR gives way to /tmp.
func controllerDir() (string, error) {
	parent := os.TempDir()
	if len(parent) > 60 {
		parent = "/tmp"
	}
	return os.MkdirTemp(parent, "syb-ctl-")
}

// durableArgs points a server at a durable queue in dir: switchyard's own
// in place of -q builtin, gearmand's SQLite queue.
func durableArgs(name string, args []string, dir string) []string {
	out := slices.Clone(args)
	if i := slices.Index(out, "-q"); i >= 0 && i+1 < len(out) {
		out = slices.Delete(out, i, i+2)
	}
	if name == "gearmand" {
		return append(out, "-q", "libsqlite3", "--libsqlite3-db", filepath.Join(dir, "queue.db"))
	}
	return append(out, "-q", "durable", "--data-dir", dir)
}

type serverSpec struct {
	config harness.Config
	record record.Server
	// has says which of listeners the binary knows: runOne appends
	// each of those to config.Args per scenario.
	has [len(listeners)]bool
	// cluster: the binary runs as a cluster node (--node-id).
	cluster bool
}

// serverConfigs returns switchyard and, when it is available, gearmand.
func serverConfigs(opts *options, fdLimit uint64) ([]serverSpec, error) {
	fd := strconv.FormatUint(fdLimit, 10)
	// -p 0: the kernel picks the port and the harness reads it back, so no
	// free port is picked here that someone else could take first.
	// -q builtin: the scenarios measure the in-memory queue, as gearmand's
	// builtin; switchyard's default keeps background jobs on disk.
	sy := []string{"-L", "127.0.0.1", "-p", "0", "-t", strconv.Itoa(opts.switchyardLoops), "-l", "stderr", "-f", fd, "-q", "builtin"}
	sy = append(sy, strings.Fields(opts.switchyardArgs)...)
	spec := newServerSpec("switchyard", opts.switchyard, sy)
	// The record shows the Gearman scenarios' command line: every
	// listener the binary knows, off (a protocol's scenarios have theirs
	// on, see runOne).
	help := helpText(opts.switchyard)
	for i, l := range listeners {
		if spec.has[i] = strings.Contains(help, l.flag); spec.has[i] && l.on == nil {
			spec.record.Args = append(slices.Clip(spec.record.Args), l.flag, "off")
		}
	}
	servers := []serverSpec{spec}
	if opts.gearmand == "" || opts.gearmand == "none" {
		return servers, nil
	}
	if _, err := os.Stat(opts.gearmand); err != nil {
		if opts.gearmand == defaultGearmand {
			fmt.Fprintf(os.Stderr, "bench: %s is not installed (make bench-deps installs it); running switchyard alone\n", defaultGearmand)
			return servers, nil
		}
		return nil, err
	}
	pidFile := filepath.Join(os.TempDir(), fmt.Sprintf("switchyard-bench-gearmand-%d.pid", os.Getpid()))
	gm := []string{"-L", "127.0.0.1", "-p", "0", "-t", strconv.Itoa(opts.gearmandThreads),
		"-l", "none", "--pid-file", pidFile, "-f", fd}
	gspec := newServerSpec(record.Baseline, opts.gearmand, append(gm, strings.Fields(opts.gearmandArgs)...))
	for i, l := range listeners {
		gspec.has[i] = l.gearmand
	}
	return append(servers, gspec), nil
}

func newServerSpec(name, path string, args []string) serverSpec {
	version, err := harness.Version(path)
	if err != nil {
		version = "unknown: " + err.Error()
	}
	return serverSpec{
		config: harness.Config{Name: name, Path: path, Args: args},
		record: record.Server{Name: name, Path: path, Version: version, Args: args},
	}
}

// helpText is the --help of the binary at path. A switchyard from before
// a protocol's listener refuses its flag, and the bench still runs the
// other scenarios.
func helpText(path string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, path, "--help").CombinedOutput()
	return string(out)
}

// listener is one of switchyard's listeners of a protocol besides Gearman's.
type listener struct {
	flag, protocol string
	// host is the loopback address a TCP listener binds, each its own
	// (the Gearman port is 127.0.0.1's): a server with several on tells
	// them apart by address. "" for the controller's unix socket.
	host string
	of   func(*scenario.Scenario) bool          // the scenarios that need it on
	set  func(t *scenario.Target, where string) // gives a scenario its address or socket
	// on, if set, is what turns the listener on, on a port the kernel
	// picks; such a listener is off unless turned on. Otherwise it is
	// "flag tcp://HOST:0", and "flag off" turns it off.
	on []string
	// gearmand: gearmand has it too, turned on the same way.
	gearmand bool
}

// listeners are the listeners, in the order their flags come on the
// command line.
var listeners = [...]listener{
	{"--periodic-listen", "Periodic", "127.0.0.2",
		func(sc *scenario.Scenario) bool { return sc.Periodic || sc.Mixed },
		func(t *scenario.Target, addr string) { t.PeriodicAddr = addr }, nil, false},
	{"--controller-socket", "the Worker–Controller protocol", "",
		func(sc *scenario.Scenario) bool { return sc.Controller || sc.Mixed },
		func(t *scenario.Target, sock string) { t.ControllerSocket = sock }, nil, false},
	{"--dwork-listen", "dwork", "127.0.0.3",
		func(sc *scenario.Scenario) bool { return sc.Dwork || sc.Mixed },
		func(t *scenario.Target, addr string) { t.DworkAddr = addr }, nil, false},
	{"--memodb-listen", "MemoDB", "127.0.0.4",
		func(sc *scenario.Scenario) bool { return sc.Memodb || sc.Mixed },
		func(t *scenario.Target, addr string) { t.MemodbURL = "tcp://" + addr }, nil, false},
	// gearmand's HTTP module, on -L's address (127.0.0.1): no other
	// listener is on beside it. A switchyard with it has --http-timeout;
	// an older one took -r http and ignored it.
	{"--http-timeout", "gearmand's HTTP protocol", "127.0.0.1",
		func(sc *scenario.Scenario) bool { return sc.HTTP },
		func(t *scenario.Target, addr string) { t.HTTPAddr = addr },
		[]string{"-r", "http", "--http-port", "0"}, true},
	// No scenario measures with the metrics on: the latency histograms'
	// clock reads are not the server's own cost.
	{"--metrics-listen", "the metrics endpoints", "",
		func(*scenario.Scenario) bool { return false }, nil, nil, false},
}

func serverNames(servers []serverSpec) string {
	var names []string
	for _, s := range servers {
		names = append(names, s.record.Name+" ("+s.record.Version+")")
	}
	return strings.Join(names, ", ")
}

// raiseFileLimit lifts the soft limit on open files to the hard limit and
// returns it: conns-10k holds 10,000 connections in this process and as
// many in the server, which is started with -f to match. Setting it
// explicitly also makes children inherit it (Go otherwise restores the
// original soft limit in child processes).
func raiseFileLimit() (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	lim.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	return lim.Cur, nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func parseFlags(args []string) (*options, error) {
	opts := &options{params: make(map[string]*scenario.Params)}
	fs := flag.NewFlagSet("switchyard-bench", flag.ContinueOnError)
	fs.StringVar(&opts.scenarios, "scenarios", strings.Join(scenario.Names(), ","), "comma-separated scenarios to run")
	fs.BoolVar(&opts.quick, "quick", false, "a few seconds per scenario and smaller counts (explicit scenario flags still win)")
	fs.IntVar(&opts.rounds, "rounds", 1, "times each scenario runs on each server, alternating servers")
	fs.StringVar(&opts.switchyard, "switchyard", "bin/switchyard", "switchyard binary")
	fs.StringVar(&opts.switchyardArgs, "switchyard-args", "", "extra switchyard arguments, space-separated")
	fs.StringVar(&opts.gearmand, "gearmand", defaultGearmand, `gearmand binary for the baseline; "none" to skip (the default is skipped when not installed)`)
	fs.StringVar(&opts.gearmandArgs, "gearmand-args", "", "extra gearmand arguments, space-separated")
	fs.IntVar(&opts.switchyardLoops, "switchyard-threads", 0, "switchyard -t (event loops); 0, its default, is one per core")
	fs.IntVar(&opts.gearmandThreads, "gearmand-threads", 4, "gearmand -t (I/O threads); 4 is its default")
	fs.StringVar(&opts.natsServer, "nats-server", defaultNATSServer, `nats-server binary for the cluster scenarios' JetStream peer; "none" to skip (the default is skipped when not installed)`)
	fs.BoolVar(&opts.clusterMetrics, "cluster-metrics", false, "turn each cluster node's metrics listener on (127.0.0.1:0, in its listening log line) for pprof at /debug/pprof/; it turns the scheduler's latency histograms on too, which no scenario measures otherwise")
	fs.StringVar(&opts.cgroupPrefix, "cgroup-prefix", "syb", "the start of the names of the CPU cgroups of the scenarios that give each server process a quota (a few letters; the pid follows)")
	fs.StringVar(&opts.netnsPrefix, "netns-prefix", "syb", "the start of the names of the network namespaces, bridge and veths of the scenarios that cut nodes off (a few letters; the pid follows)")
	fs.BoolVar(&opts.interleave, "interleave", false, "run round 1 of every scenario, then round 2 of every one, ...: runs set against each other across scenarios (cluster-bg and bg-durable) share the same minutes")
	fs.StringVar(&opts.out, "out", "bench/results", `directory for the JSON record; "" to write none`)
	fs.StringVar(&opts.serverLog, "server-log", "", "file to receive the servers' output")
	fs.StringVar(&opts.cpuProfile, "cpuprofile", "", "write a CPU profile of the load generator (not the server) to this file")
	fs.BoolVar(&opts.list, "list", false, "list the scenarios and exit")
	fs.BoolVar(&opts.echoServer, "echo-server", false, "run as the ceiling scenarios' echo server on a 127.0.0.1 port the kernel picks")
	fs.BoolVar(&opts.version, "version", false, "print the echo server's version line and exit")
	for _, s := range scenario.All {
		p := s.Full
		opts.params[s.Name] = &p
		for _, name := range s.Uses {
			def, _ := scenario.LookupParam(name)
			flagName := s.Name + "." + name
			switch v := def.Field(&p).(type) {
			case *int:
				fs.IntVar(v, flagName, *v, def.Usage)
			case *time.Duration:
				fs.DurationVar(v, flagName, *v, def.Usage)
			case *float64:
				fs.Float64Var(v, flagName, *v, def.Usage)
			}
		}
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if opts.rounds < 1 {
		return nil, fmt.Errorf("--rounds %d < 1", opts.rounds)
	}
	if opts.quick {
		set := make(map[string]bool)
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		for _, s := range scenario.All {
			for _, name := range s.Uses {
				if !set[s.Name+"."+name] {
					scenario.CopyParam(name, opts.params[s.Name], &s.Quick)
				}
			}
		}
	}
	return opts, nil
}
