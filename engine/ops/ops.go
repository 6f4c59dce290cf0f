// Package ops is switchyard's operator endpoints over HTTP: Prometheus
// metrics on /metrics, a health check on /healthz, and a live status page
// on / with the JSON it reads (/api/). Nothing here is on a job's path:
// every figure is read when it is asked for, or once a second by the
// page's sampler, from counters the scheduler keeps anyway.
//
// Handler is the endpoints as one http.Handler, to be mounted on any
// listener; Start serves them on a listener of their own, with Go's
// profiler on /debug/pprof/ beside them (there only: a listener open to
// more than operators must not hand out profiles).
package ops

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/expfmt"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"switchyard/engine/workerline"
	"switchyard/sched"
)

// Config says what the endpoints report on.
type Config struct {
	Sched *sched.Sched
	// Version is the server's, reported as gearman_version_info and
	// switchyard_build_info; Revision is the commit it was built from.
	Version, Revision string
	// Protocol names a sched.Source for the per-protocol counters; ""
	// for a number no frontend uses.
	Protocol func(sched.Source) string
	// Restored tells the source of the jobs restored from the store at
	// start: their counters are labelled origin="restored" and no
	// protocol, the others origin="submitted". nil: none is.
	Restored func(sched.Source) bool
	// Store reads the job store's figures; nil when there is none.
	Store func() StoreStats
	Log   *zap.Logger
	// Collectors are more metric families to serve (a cluster node's).
	Collectors []prometheus.Collector
	// Health, when set, is asked by /healthz once the server is ready: an
	// error is a 503 with the error as the reason (a cluster node without
	// a leader).
	Health func() error
	// Token, when set, turns the actions on (POST /api/actions/...):
	// each must carry it (see TokenHeader).
	Token []byte
	// FuncHistograms serves each function's queue wait and run time
	// histograms (sched.Config.FuncHistograms must be on for them to
	// hold anything).
	FuncHistograms bool
	// ActionLevel is the level each action is logged at (Info unless
	// said): an operator's change to the running server.
	ActionLevel zapcore.Level
	// Failures is how many failures the scheduler keeps per function
	// (sched.Config.Failures), for the page.
	Failures int
	// Cluster, when set, serves the cluster's state and membership on
	// /api/cluster.
	Cluster Cluster
}

// StoreStats is what the job store reports.
type StoreStats struct {
	Bytes uint64 // disk space its files take
	// Its syncs: how many, their total in seconds, and the count at most
	// each upper bound in seconds (see Cumulative).
	Syncs       uint64
	SyncSeconds float64
	SyncBuckets map[float64]uint64
	// Failure is why the store takes no writes ("" while it does): a
	// failed write (a full disk). /healthz answers 503 with it.
	Failure string
	// WriteErrors counts the store's failed writes.
	WriteErrors uint64
}

// Conns counts one protocol's open connections.
type Conns struct {
	Protocol string
	Open     func() int
	// List lists its connections (or only its workers) for
	// /api/connections; nil: none listed.
	List func() []workerline.Worker
}

// Server serves the endpoints.
type Server struct {
	cfg     Config
	reg     *prometheus.Registry
	handler http.Handler

	mu    sync.Mutex
	count []Conns // AddConns

	state   atomic.Int32 // starting, ready or stopping: see SetReady
	started time.Time
	sampler *sampler

	srv *http.Server
	ln  net.Listener
}

// New prepares the endpoints; Start serves them.
func New(cfg Config) *Server {
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	if cfg.Protocol == nil {
		cfg.Protocol = func(sched.Source) string { return "" }
	}
	s := &Server{cfg: cfg, reg: prometheus.NewRegistry(), started: time.Now(), sampler: newSampler(cfg.Sched)}
	s.reg.MustRegister(collector{s},
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewGoCollector())
	s.reg.MustRegister(cfg.Collectors...)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", s.serveMetrics)
	mux.HandleFunc("GET /healthz", s.serveHealth)
	mux.HandleFunc("GET /api/overview", s.serveOverview)
	mux.HandleFunc("GET /api/functions", s.serveFunctions)
	mux.HandleFunc("GET /api/function", s.serveFunction)
	mux.HandleFunc("GET /api/failures", s.serveFailures)
	mux.HandleFunc("GET /api/connections", s.serveConns)
	mux.HandleFunc("POST /api/actions/{action}", s.serveAction)
	if cfg.Cluster != nil {
		mux.HandleFunc("GET /api/cluster", s.serveCluster)
		mux.HandleFunc("POST /api/cluster/members", s.addMember)
		mux.HandleFunc("DELETE /api/cluster/members/{id}", s.removeMember)
	}
	mux.Handle("GET /", pageHandler())
	s.handler = mux
	return s
}

// AddConns adds a protocol to switchyard_connections: a frontend that
// starts after the endpoints.
func (s *Server) AddConns(c Conns) {
	s.mu.Lock()
	s.count = append(s.count, c)
	s.mu.Unlock()
}

func (s *Server) conns() []Conns {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.count
}

func (s *Server) protocol(src sched.Source) string { return s.cfg.Protocol(src) }

// Handler is the endpoints, for a listener that serves other things too.
func (s *Server) Handler() http.Handler { return s.handler }

// Server states, for /healthz.
const (
	starting int32 = iota
	ready
	stopping
)

// SetReady says the server is ready (true: it has replayed its stored
// jobs and every listener is open) or stopping (false). /healthz answers
// 503 until the first and from the second on.
func (s *Server) SetReady(r bool) {
	if r {
		s.state.CompareAndSwap(starting, ready)
	} else {
		s.state.Store(stopping)
	}
}

// stateName is the state as /healthz says it.
func (s *Server) stateName() string {
	switch s.state.Load() {
	case ready:
		return "ok"
	case starting:
		return "starting"
	}
	return "stopping"
}

// serveHealth is /healthz: 200 "ok" while ready, else 503 and why, for a
// load balancer or an orchestrator's readiness probe. A job store that
// takes no writes makes a ready server unhealthy: every submit that needs
// it is refused.
func (s *Server) serveHealth(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	state := s.stateName()
	if state == "ok" {
		if f := s.storeFailure(); f != "" {
			state = "store failed: " + f
		} else if s.cfg.Health != nil {
			if err := s.cfg.Health(); err != nil {
				state = err.Error()
			}
		}
	}
	if state != "ok" {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	io.WriteString(w, state+"\n")
}

// storeFailure is why the job store takes no writes, or "".
func (s *Server) storeFailure() string {
	if s.cfg.Store == nil {
		return ""
	}
	return s.cfg.Store().Failure
}

// Start listens on addr (host:port; port 0 lets the kernel pick one, see
// Addr) and serves the endpoints there, and the profiler.
func (s *Server) Start(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	s.ln = ln
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.Handle("/", s.handler)
	s.srv = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       time.Minute,
		ErrorLog:          zap.NewStdLog(s.cfg.Log),
	}
	s.StartSampler()
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.cfg.Log.Error("metrics listener", zap.Error(err))
		}
	}()
	return nil
}

// Addr is the address Start bound.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// StartSampler starts the status page's sampler, which Start starts: for
// Handler served on another listener alone. Stop stops it.
func (s *Server) StartSampler() { s.sampler.start() }

// Stop closes the listener and waits, until ctx is done, for the requests
// under way; and stops the sampler.
func (s *Server) Stop(ctx context.Context) error {
	defer s.sampler.close()
	if s.srv == nil {
		return nil
	}
	return s.srv.Shutdown(ctx)
}

// serveMetrics writes the registry's families, then the per-function
// ones (see funcFamilies), in OpenMetrics's text format to a scraper that
// asks for it, else in Prometheus's text format, which every scraper
// takes whatever it asks for (the protocol buffer format is never
// served); gzipped if the scraper takes that.
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) {
	mfs, err := s.reg.Gather()
	if err != nil { // Gather gives what it could: serve that
		s.cfg.Log.Warn("metrics", zap.Error(err))
	}
	rows := readFuncs(s.cfg.Sched, nil)
	format := expfmt.NegotiateIncludingOpenMetrics(r.Header)
	om := format.FormatType() == expfmt.TypeOpenMetrics
	if !om {
		format = expfmt.NewFormat(expfmt.TypeTextPlain)
	}
	w.Header().Set("Content-Type", string(format))
	var out io.Writer = w
	if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		w.Header().Set("Content-Encoding", "gzip")
		gz, _ := gzip.NewWriterLevel(w, gzip.BestSpeed)
		defer gz.Close()
		out = gz
	}
	bw := bufio.NewWriterSize(out, 64<<10)
	enc := expfmt.NewEncoder(bw, format)
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return // the scraper went away
		}
	}
	writeFuncFamilies(bw, rows, om)
	if s.cfg.FuncHistograms {
		writeFuncHistograms(bw, s.cfg.Sched)
	}
	if c, ok := enc.(expfmt.Closer); ok {
		c.Close() // OpenMetrics's "# EOF", after every family
	}
	bw.Flush()
}
