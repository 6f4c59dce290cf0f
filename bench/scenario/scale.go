package scenario

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"switchyard/bench/harness"
	"switchyard/bench/load"
	"switchyard/bench/record"
)

// cluster-scale asks whether a cluster's capacity grows with its nodes
// (issue 47): on one machine, every server process gets a CPU quota of its
// own, so that each stands for a smaller machine of its own, and one
// durable server, a cluster of three and one of five, and JetStream's
// three and five servers take the same load per node, one after the
// other in each round.

var clusterScale = &Scenario{
	Name: "cluster-scale",
	About: "one durable switchyard, a 3-node and a 5-node cluster (and, once the binary takes --cluster-groups, the same clusters with --cluster-groups 1 beside them), then JetStream R3 on three and five nats-server, " +
		"every server process in a CPU cgroup of its own allowing `cpu` CPUs, the load generator outside them all: on every node `clients` connections submit unique background jobs to `functions` functions in turn (JetStream: a work-queue stream each), `inflight` in flight each, " +
		"for `warmup` then the measured `duration`; then `workers` a node drain them, every acknowledged job checked off. jobs/s is acknowledged submits a second over the measured time; each node's CPU used, of its quota, and throttled share are in the record's nodes. Needs root",
	Uses: []string{"cpu", "functions", "groups", "clients", "inflight", "payload", "warmup", "duration", "jobs", "workers", "grab", "timeout"},
	Full: Params{CPU: 0.3, Functions: 12, Clients: 2, InFlight: 128, Payload: 64, Warmup: 3 * time.Second, Duration: 10 * time.Second,
		Jobs: 3_000_000, Workers: 4, Grab: 1, Timeout: 3 * time.Minute},
	Quick: Params{CPU: 0.3, Functions: 12, Clients: 2, InFlight: 128, Payload: 64, Warmup: time.Second, Duration: 3 * time.Second,
		Jobs: 1_000_000, Workers: 4, Grab: 1, Timeout: time.Minute},
	runFleet: runScale,
}

// Fleet starts the servers of a scenario that sets several configurations
// side by side in one run (cluster-scale): each a fresh one, on loopback,
// every server process in the CPU budget given. Each returns a stop that
// stops the servers and removes their files.
type Fleet struct {
	// Durable starts one switchyard with its durable queue.
	Durable func(ctx context.Context, b *harness.CPUBudget) (*harness.Server, func() error, error)
	// Cluster starts a switchyard cluster of n nodes, each with extra
	// arguments besides a node's own.
	Cluster func(ctx context.Context, n int, extra []string, b *harness.CPUBudget) (*harness.Cluster, func() error, error)
	// NATS starts n JetStream servers (and their seed); nil when there is
	// no nats-server.
	NATS func(ctx context.Context, n int, b *harness.CPUBudget) (*harness.NATSCluster, func() error, error)
	// Groups says the binary takes --cluster-groups.
	Groups bool
	// CgroupPrefix starts the names of the cgroups (harness.CPUBudget).
	CgroupPrefix string
	// Note, when set, takes a line of progress.
	Note func(format string, args ...any)
}

// scaleKind is what a configuration of cluster-scale runs.
type scaleKind int

const (
	scaleDurable scaleKind = iota
	scaleCluster
	scaleJetStream
)

// scaleConfig is one configuration: the server its record names, what it
// is, its nodes, the --cluster-groups it is given (0: none) and, when it
// takes the load of more nodes than it has (all on its nodes), of how
// many.
type scaleConfig struct {
	server string
	kind   scaleKind
	nodes  int
	groups int
	load   int
}

// loadOf is how many nodes' load the configuration takes.
func (c scaleConfig) loadOf() int { return max(c.load, c.nodes) }

// scaleSizes are the cluster sizes, the first the one the others are set
// against.
var scaleSizes = []int{3, 5}

// scaleConfigs lists a round's configurations in the order they run: the
// durable server with a node's load and with the smallest cluster's, the
// clusters (with groups, when the binary takes the flag, and then with one
// group), JetStream's. The durable server with three nodes' clients tells
// what the cluster of three gains from the deeper pipelines its load
// brings (larger batches, cheaper jobs) from what it gains from its
// nodes.
func scaleConfigs(p Params, groupsFlag, nats bool) []scaleConfig {
	cs := []scaleConfig{{server: "switchyard-durable", kind: scaleDurable, nodes: 1},
		{server: fmt.Sprintf("switchyard-durable-x%d", scaleSizes[0]), kind: scaleDurable, nodes: 1, load: scaleSizes[0]}}
	for _, n := range scaleSizes {
		c := scaleConfig{server: fmt.Sprintf("switchyard-cluster-%d", n), kind: scaleCluster, nodes: n}
		if groupsFlag {
			c.groups = cmpOr(p.Groups, 4*n)
		}
		cs = append(cs, c)
	}
	if groupsFlag {
		for _, n := range scaleSizes {
			cs = append(cs, scaleConfig{server: fmt.Sprintf("switchyard-cluster-%d-g1", n), kind: scaleCluster, nodes: n, groups: 1})
		}
	}
	if nats {
		for _, n := range scaleSizes {
			cs = append(cs, scaleConfig{server: fmt.Sprintf("jetstream-%d", n), kind: scaleJetStream, nodes: n})
		}
	}
	return cs
}

func cmpOr(a, b int) int {
	if a != 0 {
		return a
	}
	return b
}

// runScale runs every configuration once: one record each, related to
// each other (vs_single_x, vs_3_nodes_x).
func runScale(ctx context.Context, f Fleet, p Params) []record.Run {
	configs := scaleConfigs(p, f.Groups, f.NATS != nil)
	runs := make([]record.Run, 0, len(configs))
	for _, c := range configs {
		if ctx.Err() != nil {
			break
		}
		run := record.Run{Server: c.server} // Scenario and Params: RunFleet
		loadBefore := selfCPU()
		err := runScaleConfig(ctx, f, p, c, &run)
		run.LoadCPU = (selfCPU() - loadBefore).Seconds()
		if err != nil {
			run.Error = err.Error()
		}
		runs = append(runs, run)
		if f.Note != nil {
			f.Note("cluster-scale %s: %s acknowledged/s, drained %s/s; %s%s", run.Server, record.FormatRate(run.JobsPerSec),
				record.FormatRate(run.Extra["drain_jobs_per_s"]), nodesLine(run.Nodes), errorNote(run.Error))
		}
	}
	relateScale(configs, runs)
	return runs
}

func nodesLine(nodes []record.Node) string {
	var parts []string
	for _, n := range nodes {
		parts = append(parts, n.String())
	}
	return strings.Join(parts, "; ")
}

func errorNote(err string) string {
	if err == "" {
		return ""
	}
	line, _, _ := strings.Cut(err, "\n")
	return "; error: " + line
}

// relateScale sets each run against the durable server's with a node's
// load (vs_single_x) and with the run's load (vs_single_same_load_x, when
// it ran), and a larger cluster against the smallest of its kind
// (vs_3_nodes_x).
func relateScale(configs []scaleConfig, runs []record.Run) {
	rate := func(i int) float64 {
		if i < 0 || i >= len(runs) || runs[i].Error != "" {
			return 0
		}
		return runs[i].JobsPerSec
	}
	durable := func(load int) int {
		return slices.IndexFunc(configs, func(c scaleConfig) bool { return c.kind == scaleDurable && c.loadOf() == load })
	}
	single := durable(1)
	for i, c := range configs {
		if i >= len(runs) || rate(i) == 0 {
			continue
		}
		if i != single && rate(single) > 0 {
			setExtra(&runs[i], "vs_single_x", rate(i)/rate(single))
		}
		if same := durable(c.loadOf()); c.kind != scaleDurable && rate(same) > 0 {
			setExtra(&runs[i], "vs_single_same_load_x", rate(i)/rate(same))
		}
		if c.kind == scaleDurable {
			continue
		}
		if c.nodes == scaleSizes[0] {
			continue
		}
		base := slices.IndexFunc(configs, func(b scaleConfig) bool {
			return b.kind == c.kind && b.nodes == scaleSizes[0] && (b.groups == 1) == (c.groups == 1)
		})
		if rate(base) > 0 {
			setExtra(&runs[i], "vs_3_nodes_x", rate(i)/rate(base))
		}
	}
}

// scaleFunctions names n functions.
func scaleFunctions(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("scale-%02d", i)
	}
	return out
}

// rotate returns s from its k-th element on, then its first k: a
// client's functions in turn, each client starting at another.
func rotate(s []string, k int) []string {
	k %= len(s)
	return append(slices.Clone(s[k:]), s[:k]...)
}

// scaleSystem is one configuration running: what its clients, workers and
// meters use.
type scaleSystem struct {
	nodes int
	// client runs the fill's client on node, tagged, submitting to
	// functions in turn.
	client func(ctx context.Context, node int, tag string, functions []string, ph *load.Phase) (load.ClientResult, error)
	// worker drains on node until ctx ends.
	worker func(ctx context.Context, node int, jobs *load.Countdown, seen func([]byte)) (load.WorkerResult, error)
	// queued is how many jobs the system holds, every function's.
	queued func(ctx context.Context) (int64, error)
	// drained, when set, waits until the system holds no job once the
	// drain has counted them all (JetStream's acks are not waited for).
	drained func(ctx context.Context) error
	procs   func() ([]harness.ProcUsage, error)
	roles   func() map[string]string // by process name
	stop    func() error
}

// runScaleConfig starts one configuration, fills and drains it, and
// stops it.
func runScaleConfig(ctx context.Context, f Fleet, p Params, c scaleConfig, out *record.Run) (err error) {
	if p.Functions < 1 || p.Clients < 1 || p.Workers < 1 || p.InFlight < 1 {
		return fmt.Errorf("cluster-scale needs functions, clients, workers and inflight of at least 1: %+v", p)
	}
	budget := &harness.CPUBudget{CPUs: p.CPU, Prefix: f.CgroupPrefix}
	functions := scaleFunctions(p.Functions)
	setExtra(out, "nodes", float64(c.nodes))
	if c.loadOf() != c.nodes { // every node's clients and workers on its nodes
		setExtra(out, "load_of_nodes", float64(c.loadOf()))
		p.Clients, p.Workers = p.Clients*c.loadOf()/c.nodes, p.Workers*c.loadOf()/c.nodes
	}
	if p.CPU > 0 {
		setExtra(out, "quota_cpus", p.CPU)
	}
	if c.groups > 0 {
		setExtra(out, "cluster_groups", float64(c.groups))
	}
	var sys *scaleSystem
	switch c.kind {
	case scaleDurable:
		sys, err = startScaleDurable(ctx, f, budget, functions, p)
	case scaleCluster:
		var extra []string
		if c.groups > 0 {
			extra = []string{"--cluster-groups", strconv.Itoa(c.groups)}
		}
		sys, err = startScaleCluster(ctx, f, c.nodes, extra, budget, functions, p)
	case scaleJetStream:
		sys, err = startScaleJetStream(ctx, f, c.nodes, budget, functions, p, out)
	}
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, sys.stop()) }()

	books := newLedger()
	if err := scaleFill(ctx, sys, p, functions, books, out); err != nil {
		return err
	}
	return scaleDrain(ctx, sys, p, books, out)
}

// scaleSample is a configuration's processes' CPU, the machine's and the
// load generator's at one moment.
type scaleSample struct {
	at      time.Time
	procs   []harness.ProcUsage
	machine harness.MachineCPU
	load    time.Duration
	err     error
}

func takeScaleSample(sys *scaleSystem) scaleSample {
	s := scaleSample{at: time.Now(), load: selfCPU()}
	var errMachine error
	s.procs, s.err = sys.procs()
	s.machine, errMachine = harness.ReadMachineCPU()
	s.err = errors.Join(s.err, errMachine)
	return s
}

// scaleFill runs the fill: p.Clients clients on every node, each
// submitting to every function in turn, for the warm-up and the measured
// time; it records the measured rate, latency and every process's CPU in
// out, and the jobs acknowledged in books.
func scaleFill(ctx context.Context, sys *scaleSystem, p Params, functions []string, books *ledger, out *record.Run) error {
	begin := time.Now()
	ph := &load.Phase{Start: begin.Add(p.Warmup), End: begin.Add(p.Warmup + p.Duration), Budget: load.NewBudget(int64(p.Jobs)), Grace: grace}
	var from, to scaleSample
	var sampled sync.WaitGroup
	sampled.Add(2)
	fromTimer := time.AfterFunc(time.Until(ph.Start), func() { from = takeScaleSample(sys); sampled.Done() })
	toTimer := time.AfterFunc(time.Until(ph.End), func() { to = takeScaleSample(sys); sampled.Done() })

	var mu sync.Mutex
	var measured, acked int64
	latency := load.NewLatencyHistogram()
	var errs []error
	var wg sync.WaitGroup
	for node := range sys.nodes {
		for i := range p.Clients {
			k := node*p.Clients + i
			tag := fmt.Sprintf("c%d", k)
			wg.Go(func() {
				res, err := sys.client(ctx, node, tag, rotate(functions, k), ph)
				mu.Lock()
				defer mu.Unlock()
				measured += res.Measured
				acked += res.Finished
				if res.Latency != nil {
					latency.Merge(res.Latency)
				}
				books.add(tag, res.AckedSeqs)
				if err != nil {
					errs = append(errs, fmt.Errorf("client %s on node %d: %w", tag, node+1, err))
				}
			})
		}
	}
	wg.Wait()
	// A fill cut short (its context, or every client failed) has timers
	// that have not fired: they sample now.
	for _, t := range []struct {
		timer *time.Timer
		dst   *scaleSample
	}{{fromTimer, &from}, {toTimer, &to}} {
		if t.timer.Stop() {
			*t.dst = takeScaleSample(sys)
			sampled.Done()
		}
	}
	sampled.Wait()
	recordScaleFill(out, p, measured, latency, from, to, sys.roles())
	setExtra(out, "acked_jobs", float64(acked))
	if err := errors.Join(firstErrors(errs)...); err != nil {
		return err
	}
	if ph.Budget.Left() == 0 {
		return fmt.Errorf("the job bound (%d) ended the fill before its measured time did: raise it", p.Jobs)
	}
	if measured == 0 {
		return errors.New("no submit acknowledged in the measured time")
	}
	return errors.Join(from.err, to.err)
}

// recordScaleFill puts the measured figures in out: the rate, latency, the
// processes' CPU per job and each one's CPU, quota and throttled share,
// and what the machine had idle.
func recordScaleFill(out *record.Run, p Params, measured int64, latency *hdrhistogram.Histogram, from, to scaleSample, roles map[string]string) {
	wall := to.at.Sub(from.at)
	out.Jobs = measured
	out.Seconds = p.Duration.Seconds()
	out.JobsPerSec = float64(measured) / p.Duration.Seconds()
	out.Latency = record.Summarize(latency)
	if wall <= 0 || from.err != nil || to.err != nil {
		return
	}
	idle := (to.machine.Idle - from.machine.Idle).Seconds() / wall.Seconds()
	setExtra(out, "machine_idle_cpus", idle)
	var cpu time.Duration
	var rss, peak int64
	short := 0
	for _, end := range to.procs {
		rss += end.RSS
		peak += end.PeakRSS
		i := slices.IndexFunc(from.procs, func(b harness.ProcUsage) bool { return b.Name == end.Name && b.PID == end.PID })
		if i < 0 {
			continue
		}
		begin := from.procs[i]
		d := end.CPU - begin.CPU
		cpu += d
		n := record.Node{Name: end.Name, Role: roles[end.Name], Quota: end.Quota, CPUs: d.Seconds() / wall.Seconds(),
			Throttled: end.Group.Sub(begin.Group).ThrottledShare()}
		if measured > 0 {
			n.CPUPerJob = float64(d.Microseconds()) / float64(measured)
		}
		// JetStream's seed serves nothing: little CPU is its due.
		n.Short = record.ShortOfQuota(n.CPUs, n.Quota, idle) && n.Role != "seed"
		if n.Short {
			short++
		}
		out.Nodes = append(out.Nodes, n)
	}
	out.CPUSeconds = cpu.Seconds()
	out.RSSMB, out.PeakRSSMB = megabytes(rss), megabytes(peak) // every process's, summed
	if measured > 0 {
		out.ServerCPUPerJob = float64(cpu.Microseconds()) / float64(measured)
		out.LoadCPUPerJob = float64((to.load - from.load).Microseconds()) / float64(measured)
	}
	setExtra(out, "short_nodes", float64(short))
}

// scaleDrain takes every job the system holds with p.Workers workers on
// every node, checks off each one acknowledged, and records the drain's
// rate and CPU per job.
func scaleDrain(ctx context.Context, sys *scaleSystem, p Params, books *ledger, out *record.Run) error {
	want, err := sys.queued(ctx)
	if err != nil {
		return fmt.Errorf("before the drain: %w", err)
	}
	if acked := books.total(); want < acked {
		return fmt.Errorf("%d jobs acknowledged, %d held before the drain", acked, want)
	}
	dctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	from := takeScaleSample(sys)
	var end time.Time
	countdown := load.NewCountdown(want, func() { end = time.Now(); cancel() })
	var mu sync.Mutex
	var done int64
	var errs []error
	var wg sync.WaitGroup
	for node := range sys.nodes {
		for range p.Workers {
			wg.Go(func() {
				res, err := sys.worker(dctx, node, countdown, books.see)
				mu.Lock()
				defer mu.Unlock()
				done += res.Jobs
				// A worker that had not connected when the drain ended
				// did not fail.
				if err != nil && !(dctx.Err() != nil && errors.Is(err, context.Canceled)) {
					errs = append(errs, fmt.Errorf("worker on node %d: %w", node+1, err))
				}
			})
		}
	}
	wg.Wait() // each returns when dctx ends, or when it fails
	to := takeScaleSample(sys)
	if end.IsZero() {
		errs = append(errs, fmt.Errorf("drain: %d of %d jobs done in %v", done, want, p.Timeout))
		return errors.Join(firstErrors(errs)...)
	}
	took := end.Sub(from.at)
	setExtra(out, "drain_jobs_per_s", float64(want)/took.Seconds())
	setExtra(out, "drain_s", took.Seconds())
	if from.err == nil && to.err == nil && want > 0 {
		var cpu time.Duration
		for _, e := range to.procs {
			if i := slices.IndexFunc(from.procs, func(b harness.ProcUsage) bool { return b.Name == e.Name && b.PID == e.PID }); i >= 0 {
				cpu += e.CPU - from.procs[i].CPU
			}
		}
		setExtra(out, "drain_cpu_us_per_job", float64(cpu.Microseconds())/float64(want))
	}
	if sys.drained != nil {
		if err := sys.drained(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if lost, first := books.missing(); lost > 0 {
		errs = append(errs, fmt.Errorf("%d of %d acknowledged jobs lost (not drained), %s the first", lost, books.total(), first))
	}
	if strays := books.strays(); strays > 0 {
		setExtra(out, "stray_jobs", float64(strays))
	}
	return errors.Join(firstErrors(errs)...)
}

// ledger keeps which jobs a fill had acknowledged, by client tag and job
// number, and which of them a drain saw.
type ledger struct {
	mu     sync.Mutex
	tags   map[string]int
	acked  [][]uint64
	seen   [][]uint64 // a bit per job number, by tag
	stray  int64      // jobs seen that no client of the fill tagged
	ackedN int64
}

func newLedger() *ledger { return &ledger{tags: make(map[string]int)} }

// add notes a client's acknowledged jobs.
func (l *ledger) add(tag string, seqs []uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	i, ok := l.tags[tag]
	if !ok {
		i = len(l.acked)
		l.tags[tag] = i
		l.acked = append(l.acked, nil)
		l.seen = append(l.seen, nil)
	}
	l.acked[i] = append(l.acked[i], seqs...)
	l.ackedN += int64(len(seqs))
}

// see checks off the job whose payload this is; a worker calls it.
func (l *ledger) see(payload []byte) {
	tag, n, ok := load.TagSeq(load.UniqueOf(payload))
	l.mu.Lock()
	defer l.mu.Unlock()
	i, known := l.tags[tag]
	if !ok || !known {
		l.stray++
		return
	}
	word := int(n / 64)
	if word >= len(l.seen[i]) {
		l.seen[i] = append(l.seen[i], make([]uint64, word+1-len(l.seen[i]))...)
	}
	l.seen[i][word] |= 1 << (n % 64)
}

func (l *ledger) total() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ackedN
}

func (l *ledger) strays() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stray
}

// missing counts the jobs acknowledged and not seen, and names the first.
func (l *ledger) missing() (int64, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var lost int64
	first := ""
	for tag, i := range l.tags {
		for _, n := range l.acked[i] {
			word := int(n / 64)
			if word < len(l.seen[i]) && l.seen[i][word]&(1<<(n%64)) != 0 {
				continue
			}
			lost++
			if first == "" {
				first = tag + "-" + strconv.FormatUint(n, 10)
			}
		}
	}
	return lost, first
}

// startScaleDurable starts the durable server: one node.
func startScaleDurable(ctx context.Context, f Fleet, b *harness.CPUBudget, functions []string, p Params) (*scaleSystem, error) {
	srv, stop, err := f.Durable(ctx, b)
	if err != nil {
		return nil, err
	}
	sys := gearmanSystem([]string{srv.Addr}, functions, p)
	sys.procs, sys.stop = srv.Procs, stop
	sys.roles = func() map[string]string { return nil }
	return sys, nil
}

// startScaleCluster starts a cluster of n nodes; its clients and workers
// go to every node.
func startScaleCluster(ctx context.Context, f Fleet, n int, extra []string, b *harness.CPUBudget, functions []string, p Params) (*scaleSystem, error) {
	c, stop, err := f.Cluster(ctx, n, extra, b)
	if err != nil {
		return nil, err
	}
	var addrs []string
	for _, node := range c.Nodes {
		addrs = append(addrs, node.Addr("gearman"))
	}
	sys := gearmanSystem(addrs, functions, p)
	sys.procs, sys.stop = c.Procs, stop
	sys.roles = func() map[string]string {
		roles := make(map[string]string)
		for _, node := range c.Nodes {
			roles[node.ID] = node.Role()
		}
		return roles
	}
	return sys, nil
}

// gearmanSystem is the clients, workers and queue count of switchyard
// nodes at addrs.
func gearmanSystem(addrs, functions []string, p Params) *scaleSystem {
	payload := payloadOf(p.Payload)
	return &scaleSystem{
		nodes: len(addrs),
		client: func(ctx context.Context, node int, tag string, fs []string, ph *load.Phase) (load.ClientResult, error) {
			c := load.Client{Addr: addrs[node], Functions: fs, Payload: payload, InFlight: p.InFlight, Background: true, Tag: tag}
			return c.Run(ctx, ph)
		},
		worker: func(ctx context.Context, node int, jobs *load.Countdown, seen func([]byte)) (load.WorkerResult, error) {
			w := load.Worker{Addr: addrs[node], Functions: functions, Grab: p.Grab, Jobs: jobs, Seen: seen}
			return w.Run(ctx)
		},
		queued: func(ctx context.Context) (int64, error) {
			st, err := load.QueuedByFunction(ctx, nil, addrs[0])
			var sum int64
			for _, f := range functions {
				sum += st[f]
			}
			return sum, err
		},
	}
}

// scaleDurableName is the consumer every JetStream worker shares.
const scaleDurableName = "drain"

// startScaleJetStream starts n JetStream servers and a work-queue stream
// of three replicas per function, created through the servers in turn
// (JetStream places each stream and its leader); its publishers and
// consumers go to every server.
func startScaleJetStream(ctx context.Context, f Fleet, n int, b *harness.CPUBudget, functions []string, p Params, out *record.Run) (sys *scaleSystem, err error) {
	c, stop, err := startJetStream(ctx, f, n, b, out)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, stop())
		}
	}()
	var urls, subjects []string
	for _, s := range c.Servers {
		urls = append(urls, s.ClientURL)
	}
	led := make(map[string]int)
	for i, fn := range functions {
		subject := "jobs." + fn
		subjects = append(subjects, subject)
		leader, err := load.CreateWorkQueue(ctx, urls[i%n], fn, []string{subject}, 3, p.Timeout)
		if err != nil {
			return nil, err
		}
		led[leader]++
		// Redelivery only if a message is not acknowledged in the whole
		// drain: each is taken once.
		if err := load.CreateConsumer(ctx, urls[i%n], fn, scaleDurableName, 2*p.Timeout); err != nil {
			return nil, err
		}
	}
	subjectOf := make(map[string]string, len(functions))
	for i, fn := range functions {
		subjectOf[fn] = subjects[i]
	}
	payload := payloadOf(p.Payload)
	messages := func(ctx context.Context) (int64, error) {
		var sum int64
		for i, fn := range functions {
			m, err := load.StreamMessages(ctx, urls[i%n], fn)
			if err != nil {
				return 0, err
			}
			sum += int64(m)
		}
		return sum, nil
	}
	return &scaleSystem{
		nodes: n,
		client: func(ctx context.Context, node int, tag string, fs []string, ph *load.Phase) (load.ClientResult, error) {
			subs := make([]string, len(fs))
			for i, fn := range fs {
				subs[i] = subjectOf[fn]
			}
			pub := load.JetStreamPublisher{URL: urls[node], Subjects: subs, Payload: payload, InFlight: p.InFlight, Tag: tag}
			return pub.Run(ctx, ph)
		},
		worker: func(ctx context.Context, node int, jobs *load.Countdown, seen func([]byte)) (load.WorkerResult, error) {
			cons := load.JetStreamConsumer{URL: urls[node], Streams: functions, Durable: scaleDurableName, Jobs: jobs, Seen: seen}
			return cons.Run(ctx)
		},
		queued: messages,
		drained: func(ctx context.Context) error {
			// Every message taken was acknowledged; the streams let go
			// of them once their acks arrive.
			return pollUntil(ctx, p.Timeout, func() (bool, string) {
				m, err := messages(ctx)
				return err == nil && m == 0, fmt.Sprintf("%d messages left in the streams (%v)", m, err)
			})
		},
		procs: c.Procs,
		roles: func() map[string]string {
			roles := map[string]string{"n0": "seed"}
			for _, s := range c.Servers {
				roles[s.Name] = fmt.Sprintf("leads %d", led[s.Name])
			}
			return roles
		},
		stop: stop,
	}, nil
}

// jetStreamStarts bounds how many times startJetStream starts the servers
// afresh, and jetStreamForms how long it waits each time for them to form
// one meta group.
const (
	jetStreamStarts = 3
	jetStreamForms  = 30 * time.Second
)

// startJetStream starts n JetStream servers and waits until they form one
// meta group; servers that split into two (harness.WaitJetStream) are
// stopped and started afresh. How many starts it took is in out's
// jetstream_starts when more than one.
func startJetStream(ctx context.Context, f Fleet, n int, b *harness.CPUBudget, out *record.Run) (*harness.NATSCluster, func() error, error) {
	var errs []error
	for start := 1; start <= jetStreamStarts; start++ {
		c, stop, err := f.NATS(ctx, n, b)
		if err != nil {
			return nil, nil, errors.Join(append(errs, err)...)
		}
		err = c.WaitJetStream(ctx, jetStreamForms)
		if err == nil {
			if start > 1 {
				setExtra(out, "jetstream_starts", float64(start))
			}
			return c, stop, nil
		}
		errs = append(errs, fmt.Errorf("start %d: %w", start, err), stop())
		if f.Note != nil {
			f.Note("cluster-scale %s: %v; starting them afresh", out.Server, err)
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, nil, errors.Join(errs...)
}

// pollUntil polls cond every few milliseconds until it holds, for at
// most timeout; the error has cond's last note.
func pollUntil(ctx context.Context, timeout time.Duration, cond func() (bool, string)) error {
	if note, err := harness.Poll(ctx, timeout, 20*time.Millisecond, cond); err != nil {
		return fmt.Errorf("%s after %v", note, timeout)
	}
	return nil
}
