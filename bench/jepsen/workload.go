package jepsen

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Node is a node as the workload reaches it: its name and each protocol's
// address (HOST:PORT), its own or its relay's.
type Node struct {
	ID                               string
	Gearman, Periodic, Dwork, Memodb string
}

// Dialer opens the workload's connections (from the clients' network
// namespace); nil dials as net.Dialer does.
type Dialer func(ctx context.Context, network, addr string) (net.Conn, error)

// Config says what a workload does. Every count and every wait is
// bounded: Ops per client, Timeout per answer.
type Config struct {
	Nodes []Node
	Dial  Dialer
	Rec   *Recorder
	// Protocols are those to drive; nil: all four.
	Protocols []string
	// Clients and Workers are how many of each protocol connect to each
	// node; 0: one.
	Clients, Workers int
	// Ops bounds each client's operations (a dwork client's graphs);
	// Pace is a client's pause between two.
	Ops  int
	Pace time.Duration
	// Timeout bounds the wait for an answer: past it, the operation is
	// unknown and its connection closed. 0: 3 s.
	Timeout time.Duration
	// Seed makes the clients' choices repeatable.
	Seed uint64
}

// The workload's functions (services): one a protocol, each its own.
const (
	gearmanFunc  = "jepsen-g"
	periodicFunc = "jepsen-p"
	memodbFunc   = "jepsen-m"
	// DworkFunc is the function dwork's tasks are jobs of: the server's
	// --dwork-func, which the workload expects at its default.
	DworkFunc = "dwork"
)

// Functions are the functions the workload's jobs are queued under: a
// drain is over when none holds a job.
var Functions = []string{gearmanFunc, periodicFunc, DworkFunc}

// Workload is the clients and workers of a Config, running.
type Workload struct {
	cfg Config

	clients, workers         sync.WaitGroup
	stopClients, stopWorkers context.CancelFunc
	clientCtx, workerCtx     context.Context
	lastAck                  map[string]*atomic.Int64 // node -> history time of its latest acknowledged submit
	mu                       sync.Mutex
	ackedV, ranV             map[string]int // proto/key -> latest version acknowledged, run
	outstanding              int            // keys acknowledged at a version not yet run
	opsDone                  atomic.Int64
	unexpected               []string // what a client or worker met that no protocol says (kept for the report)
	unexpectedMu             sync.Mutex
	dworkOnce                sync.Once
	dworkToken               string // names cfg.Dial to the dwork transport
}

// Start starts the workers, then the clients.
func Start(ctx context.Context, cfg Config) *Workload {
	if cfg.Clients == 0 {
		cfg.Clients = 1
	}
	if cfg.Workers == 0 {
		cfg.Workers = 1
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 3 * time.Second
	}
	if cfg.Protocols == nil {
		cfg.Protocols = Protocols
	}
	if cfg.Dial == nil {
		var d net.Dialer
		cfg.Dial = d.DialContext
	}
	w := &Workload{cfg: cfg, lastAck: map[string]*atomic.Int64{}, ackedV: map[string]int{}, ranV: map[string]int{}}
	for _, n := range cfg.Nodes {
		w.lastAck[n.ID] = &atomic.Int64{}
		w.lastAck[n.ID].Store(-1)
	}
	w.workerCtx, w.stopWorkers = context.WithCancel(ctx)
	w.clientCtx, w.stopClients = context.WithCancel(ctx)
	for _, n := range cfg.Nodes {
		for k := range cfg.Workers {
			name := fmt.Sprintf("%s-w%d", n.ID, k)
			w.spawn(&w.workers, w.workerCtx, Gearman, func(ctx context.Context) { w.gearmanWorker(ctx, "gearman-"+name, n) })
			w.spawn(&w.workers, w.workerCtx, Periodic, func(ctx context.Context) { w.periodicWorker(ctx, "periodic-"+name, n) })
			w.spawn(&w.workers, w.workerCtx, Dwork, func(ctx context.Context) { w.dworkHost(ctx, "dwork-"+name, n) })
			w.spawn(&w.workers, w.workerCtx, Memodb, func(ctx context.Context) { w.memodbWorker(ctx, "memodb-"+name, n) })
		}
	}
	for i, n := range cfg.Nodes {
		for k := range cfg.Clients {
			name := fmt.Sprintf("%s-c%d", n.ID, k)
			seed := cfg.Seed + uint64(i*100+k)
			w.spawn(&w.clients, w.clientCtx, Gearman, func(ctx context.Context) { w.gearmanClient(ctx, "gearman-"+name, i, rng(seed, 2)) })
			w.spawn(&w.clients, w.clientCtx, Periodic, func(ctx context.Context) { w.periodicClient(ctx, "periodic-"+name, n, rng(seed, 3)) })
			w.spawn(&w.clients, w.clientCtx, Dwork, func(ctx context.Context) { w.dworkClient(ctx, "dwork-"+name, n) })
			w.spawn(&w.clients, w.clientCtx, Memodb, func(ctx context.Context) { w.memodbClient(ctx, "memodb-"+name, n) })
		}
	}
	return w
}

func rng(seed, stream uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, stream)) }

func (w *Workload) spawn(wg *sync.WaitGroup, ctx context.Context, proto string, fn func(context.Context)) {
	if !slices.Contains(w.cfg.Protocols, proto) {
		return
	}
	wg.Go(func() { fn(ctx) })
}

// StopClients stops the clients (each after its operation under way) and
// waits for them; the workers go on.
func (w *Workload) StopClients() {
	w.stopClients()
	w.clients.Wait()
}

// ClientsDone is closed once every client has done its operations.
func (w *Workload) ClientsDone() <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		w.clients.Wait()
		close(ch)
	}()
	return ch
}

// Stop stops the clients and the workers, and waits for them.
func (w *Workload) Stop() {
	w.StopClients()
	w.stopWorkers()
	w.workers.Wait()
}

// AckedSince says whether a submit through node was acknowledged at or
// after history time t.
func (w *Workload) AckedSince(node string, t int64) bool {
	a, ok := w.lastAck[node]
	return ok && a.Load() >= t
}

// Outstanding is how many jobs were acknowledged and have not been seen
// to run (Periodic: at the version acknowledged or a later one).
func (w *Workload) Outstanding() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.outstanding
}

// Ops is how many operations the clients have completed.
func (w *Workload) Ops() int64 { return w.opsDone.Load() }

// Unexpected is what clients and workers met that no protocol says: a
// reply of the wrong type, a frame that does not parse.
func (w *Workload) Unexpected() []string {
	w.unexpectedMu.Lock()
	defer w.unexpectedMu.Unlock()
	return slices.Clone(w.unexpected)
}

func (w *Workload) oddity(format string, args ...any) {
	w.unexpectedMu.Lock()
	defer w.unexpectedMu.Unlock()
	if len(w.unexpected) < 100 {
		w.unexpected = append(w.unexpected, fmt.Sprintf(format, args...))
	}
}

// acked notes a submit acknowledged through node, of key at version v.
func (w *Workload) acked(proto, node, key string, v int) {
	if a := w.lastAck[node]; a != nil {
		now := w.cfg.Rec.Now()
		for {
			old := a.Load()
			if old >= now || a.CompareAndSwap(old, now) {
				break
			}
		}
	}
	if proto == Memodb {
		return
	}
	k := proto + "/" + key
	w.mu.Lock()
	defer w.mu.Unlock()
	before, had := w.ackedV[k]
	if had && before >= v {
		return
	}
	ran, hasRun := w.ranV[k]
	wasOut := had && (!hasRun || ran < before)
	nowOut := !hasRun || ran < v
	w.ackedV[k] = v
	if nowOut && !wasOut {
		w.outstanding++
	}
}

// ran notes a run of key at version v.
func (w *Workload) ran(proto, key string, v int) {
	if proto == Memodb {
		return
	}
	k := proto + "/" + key
	w.mu.Lock()
	defer w.mu.Unlock()
	before, hasRun := w.ranV[k]
	if hasRun && before >= v {
		return
	}
	a, had := w.ackedV[k]
	wasOut := had && (!hasRun || before < a)
	w.ranV[k] = v
	if wasOut && v >= a {
		w.outstanding--
	}
}

// pause waits d, or until ctx ends: the pace of a client, a worker's
// pause before it reconnects. It is the load's rhythm, not a wait for
// anything.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// reconnectPause is a worker's pause before it dials again after its
// connection failed.
const reconnectPause = 50 * time.Millisecond

// dial dials addr within the timeout.
func (w *Workload) dial(ctx context.Context, addr string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
	defer cancel()
	return w.cfg.Dial(ctx, "tcp", addr)
}
