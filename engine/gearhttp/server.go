// Package gearhttp serves gearmand's HTTP protocol module (gearmand -r http
// --http-port 8080) on the shared scheduler: a request to /FUNCTION submits
// a job of FUNCTION with the body as its payload and, unless it is a
// background job, answers with the job's result. It runs on Go's net/http,
// off the job hot path; each request waits in its own goroutine, as
// net/http serves each connection in one.
//
// What gearmand 1.1.20 does is the rule, down to its quirks (a WORK_STATUS
// or WORK_WARNING ends the response, every response closes the
// connection); where gearmand's answer is broken bytes or no answer at all,
// this package answers what gearmand's code sets out to (docs/http.md lists
// each case).
//
// # How it maps onto sched
//
// Its clients are tagged with its own Source (Client.SetSource), so that
// Stats counts its jobs apart. a request -> NewClient and Submit, as
// Gearman's SUBMIT_JOB (unique "-" by default, so CoalesceOnPayload); a
// background one with Stored, answered once stored; a foreground one with
// the request as Listener: Data is gathered, the first other update
// answers it, and Client.Close detaches it when the client leaves or waits
// too long.
package gearhttp

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"switchyard/engine/budget"
	"switchyard/sched"
)

// Config is the HTTP frontend's configuration; main fills it from
// gearmand's flags (-r http, --http-port, -L) and ours.
type Config struct {
	// Addr is where to listen, "host:port"; an empty host is every
	// address, port 0 one the kernel picks (see Server.Addr).
	Addr string
	// TLS, when set, makes the port speak TLS only (HTTPS, HTTP/1.1);
	// it must hold a certificate.
	TLS *tls.Config
	// HandlePrefix replaces "H:<hostname>" in job handles, as for the
	// Gearman port (--job-handle-prefix).
	HandlePrefix string
	// Exceptions passes a worker's WORK_EXCEPTION on as such
	// (--exceptions); otherwise the request is answered WORK_FAIL, as a
	// Gearman client that did not ask for exceptions is.
	Exceptions bool
	// MaxBody bounds a request's body and the WORK_DATA a response
	// gathers; 0 = DefaultMaxBody.
	MaxBody int64
	// Timeout bounds how long a foreground request waits for its job's
	// result; 0 = no bound, as in gearmand.
	Timeout time.Duration
	// Server is the Server header's value.
	Server string
	// KeepAlive is TCP keepalive on the accepted connections (--keepalive);
	// off when not Enable, as gearmand's sockets are without it.
	KeepAlive net.KeepAliveConfig
	// Budget is the memory budget request bodies are read against (see
	// engine/budget): a body it cannot take is answered 503; nil: none.
	Budget *budget.Budget
	// BodyIdle bounds the wait for each read of a request's body; 0 =
	// 30 s. A client that sends a Content-Length and then a byte now and
	// then (slowloris) holds nothing for long.
	BodyIdle time.Duration
}

// DefaultMaxBody is Config.MaxBody's default, --max-packet's.
const DefaultMaxBody = 64 << 20

// DefaultTimeout is --http-timeout's default.
const DefaultTimeout = 10 * time.Minute

// Timeouts of the connection, where gearmand has none: a peer that opens a
// connection and sends nothing, or half a request, does not hold it for
// ever, nor does an idle keep-alive connection.
const (
	readHeaderTimeout = 30 * time.Second
	idleTimeout       = 60 * time.Second
	maxHeaderBytes    = 64 << 10
	// bodyIdleTimeout is Config.BodyIdle's default, and bodyTimeout
	// bounds a whole body.
	bodyIdleTimeout = 30 * time.Second
	bodyTimeout     = 10 * time.Minute
)

// Server is gearmand's HTTP protocol on a listener of its own.
type Server struct {
	h         *Handler
	log       *zap.Logger
	addr      string
	keepAlive net.KeepAliveConfig

	tls    *tls.Config
	hs     *http.Server
	ln     net.Listener
	served chan struct{} // closed when Serve has returned
	conns  atomic.Int64  // open connections, for the metrics

	drainOnce   sync.Once
	drained     chan struct{}      // closed once Drain's Shutdown has returned
	cancelDrain context.CancelFunc // ends Drain's wait
	stopOnce    sync.Once
}

// New prepares a server; Start binds and runs it.
func New(cfg Config, s *sched.Sched, log *zap.Logger) *Server {
	if log == nil {
		log = zap.NewNop()
	}
	return &Server{h: NewHandler(cfg, s, log), log: log, addr: cfg.Addr, keepAlive: cfg.KeepAlive, tls: cfg.TLS}
}

// Handler is the protocol's handler, for serving it from another
// http.Server.
func (s *Server) Handler() *Handler { return s.h }

// Start binds Config.Addr and serves it.
func (s *Server) Start() error {
	lc := net.ListenConfig{KeepAlive: -1, KeepAliveConfig: s.keepAlive} // Go's default would be on
	ln, err := lc.Listen(context.Background(), "tcp", s.addr)
	if err != nil {
		return fmt.Errorf("http: listen on %s: %w", s.addr, err)
	}
	s.ln = ln
	served := net.Listener(framedListener{ln})
	if s.tls != nil {
		// The framing is checked on the plain text, inside TLS. The
		// handshake runs on the connection's first read, within the
		// header's timeout; net/http, which sees no *tls.Conn, speaks
		// HTTP/1.1 only, as gearmand does.
		served = framedListener{tls.NewListener(ln, s.tls)}
	}
	s.hs = &http.Server{
		Handler:           s.h,
		ConnState:         s.countConn,
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          log.New(&zapWriter{s.log}, "", 0),

		// The handler checks each request's framing (framing.go).
		ConnContext: withConn,
		// "OPTIONS *" goes to the handler too, which closes the
		// connection as gearmand does: net/http's own answer would keep
		// the connection, and the framing check counts every request the
		// handler is handed.
		DisableGeneralOptionsHandler: true,
	}
	s.served = make(chan struct{})
	go func() {
		defer close(s.served)
		if err := s.hs.Serve(served); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("http: serve", zap.Error(err))
		}
	}()
	return nil
}

// countConn keeps Conns: every connection is new once, then closed or
// hijacked once.
func (s *Server) countConn(_ net.Conn, st http.ConnState) {
	switch st {
	case http.StateNew:
		s.conns.Add(1)
	case http.StateClosed, http.StateHijacked:
		s.conns.Add(-1)
	}
}

// Conns is the number of open connections.
func (s *Server) Conns() int { return int(s.conns.Load()) }

// Addr is the bound address, with the port the kernel picked for port 0.
// It is valid once Start has returned nil.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Drain is the graceful half of a shutdown: no new connections; the
// requests under way go on, and get their jobs' results as workers report
// them. It does not wait for them: Stop does.
func (s *Server) Drain(context.Context) error {
	if s.hs == nil {
		return nil
	}
	s.drainOnce.Do(func() {
		ctx, cancel := context.WithCancel(context.Background())
		s.drained, s.cancelDrain = make(chan struct{}), cancel
		go func() {
			// Shutdown closes the listener and the idle connections, then
			// waits for the busy ones; Stop cuts the wait short.
			s.hs.Shutdown(ctx)
			close(s.drained)
		}()
	})
	return nil
}

// Stop closes the listener; requests still waiting for a job are dropped
// unanswered (their jobs detached, as when a client leaves), and those
// writing a response get until ctx ends to finish.
func (s *Server) Stop(ctx context.Context) error {
	if s.hs == nil {
		return nil // never started
	}
	var err error
	s.stopOnce.Do(func() {
		s.drainOnce.Do(func() {}) // no Drain from now on
		if s.cancelDrain != nil {
			s.cancelDrain()
			<-s.drained
		}
		s.h.Close()
		if s.hs.Shutdown(ctx) != nil {
			s.hs.Close() // the rest, at once
			err = ctx.Err()
		}
		<-s.served
	})
	return err
}

// zapWriter is net/http's error log (a peer's malformed request, an accept
// error), at debug level: gearmand logs those at its own debug levels.
type zapWriter struct{ l *zap.Logger }

func (z *zapWriter) Write(p []byte) (int, error) {
	z.l.Debug("http: " + string(trimNewline(p)))
	return len(p), nil
}

func trimNewline(p []byte) []byte {
	if n := len(p); n > 0 && p[n-1] == '\n' {
		return p[:n-1]
	}
	return p
}
