package main

import (
	"context"
	"os"
	"time"

	"go.uber.org/zap"

	"switchyard/engine/ops"
	"switchyard/engine/workerline"
	"switchyard/sched"
)

// A term is a scheduler and the frontends that serve it: a single server
// runs one from start to stop; a cluster node runs one each time it takes
// the lead, with the replicated store behind it.
type term struct {
	o     *options
	log   *zap.Logger
	env   *env
	sched *sched.Sched
	ops   *ops.Server // counts the frontends' connections, if set
	// running are the frontends started, in the table's order.
	running []running
	undo    []func()
}

type running struct {
	p     *protocol
	f     frontend
	addrs []string
}

// newTerm starts a scheduler on cfg (its store opened by the caller, and
// closed by the caller after stop).
func (s *server) newTerm(cfg sched.Config) *term {
	t := &term{o: s.o, log: s.log, sched: sched.New(cfg)}
	t.env = &env{o: s.o, sched: t.sched, log: s.log, tls: s.tls, budget: s.budget, workers: t.moreWorkers, shutdown: s.shutdownFunc()}
	t.defer_(t.sched.Close)
	ctx, cancel := context.WithCancel(context.Background())
	t.defer_(cancel)
	go returnMemory(ctx, t.sched.Len, func() (int64, int64) { return s.budget.Peak(), s.budget.Used() }, time.Second)
	return t
}

func (t *term) defer_(f func()) { t.undo = append(t.undo, f) }

// stop stops the frontends, in reverse order, each given drainTimeout to
// write what it owes, then the scheduler. A second call does nothing.
func (t *term) stop() {
	for i := len(t.undo) - 1; i >= 0; i-- {
		t.undo[i]()
	}
	t.undo = nil
}

// replay loads the stored jobs into the scheduler, before any port opens.
func (t *term) replay() error {
	n, err := t.sched.Replay()
	if err != nil {
		return err
	}
	notice(t.log, "jobs restored", zap.Int("jobs", n))
	return nil
}

// startFrontends starts every protocol of the table, in order.
func (t *term) startFrontends() error {
	for i := range protocols {
		if err := t.startFrontend(&protocols[i]); err != nil {
			return err
		}
	}
	return nil
}

// startFrontend starts one protocol by the listen rule: an address the
// operator gave must work, and a default one that cannot be used turns the
// protocol off with a notice, so that a second server on one machine comes
// up with what is free.
func (t *term) startFrontend(p *protocol) error {
	addrs, explicit := p.listen(t.o)
	if len(addrs) == 0 {
		return nil // off by its option
	}
	f, bound, err := p.start(t.env, addrs)
	if err != nil {
		if explicit {
			return err
		}
		notice(t.log, p.name+" is off: its default address cannot be used (give "+p.flag+" an address, or off)",
			zap.Strings("addrs", addrs), zap.Error(err))
		return nil
	}
	t.running = append(t.running, running{p: p, f: f, addrs: bound})
	t.defer_(func() {
		ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
		defer cancel()
		if err := f.Stop(ctx); err != nil {
			t.log.Warn("stop "+p.name, zap.Error(err))
		}
	})
	if t.ops != nil {
		t.ops.AddConns(ops.Conns{Protocol: p.name, Open: f.Conns, List: connsOf(p, f)})
	}
	return nil
}

// connsOf is how the operator endpoints list p's connections: all of
// them, or its workers, named by the protocol.
func connsOf(p *protocol, f frontend) func() []workerline.Worker {
	switch {
	case p.conns != nil:
		return func() []workerline.Worker { return p.conns(f) }
	case p.workers != nil:
		return func() []workerline.Worker {
			ws := p.workers(f)
			for i := range ws {
				ws[i].Protocol = p.name
			}
			return ws
		}
	}
	return nil
}

// moreWorkers lists the other protocols' workers, which "workers" shows
// after Gearman's own connections: "status" counts them all.
func (t *term) moreWorkers() []workerline.Worker {
	var out []workerline.Worker
	for _, r := range t.running {
		if r.p.workers != nil {
			out = append(out, r.p.workers(r.f)...)
		}
	}
	return out
}

// logListeners is the one line, at every log level, that names every
// listener: the bound addresses, not the configured ones (with port 0 the
// kernel picks the port, and this line is where a person or a script
// finds it). extra are more fields (a cluster node's role).
func (t *term) logListeners(opsAddr string, extra ...zap.Field) {
	fields := make([]zap.Field, 0, len(t.running)+4+len(extra))
	var secure []string
	for _, r := range t.running {
		fields = append(fields, zap.Strings(r.p.name, r.addrs))
		switch {
		case r.p.name == "gearman" && t.o.SSL:
			secure = append(secure, r.addrs[:1]...)
		case r.p.name == "http" && t.o.HTTPSSL:
			secure = append(secure, r.addrs...)
		}
	}
	if len(secure) > 0 {
		// The Gearman and HTTP ports' addresses that speak TLS (Periodic's
		// and MemoDB's say so by their scheme).
		fields = append(fields, zap.Strings("tls", secure))
	}
	if opsAddr != "" {
		fields = append(fields, zap.Strings("metrics", []string{opsAddr}))
	}
	fields = append(fields, extra...)
	fields = append(fields, zap.String("version", version), zap.Int("pid", os.Getpid()))
	notice(t.log, "listening", fields...)
}

// drain is "shutdown graceful": every frontend stops taking connections
// and handing out work, and Gearman's, the last, waits until the running
// jobs have finished and their results are written, for at most
// --shutdown-timeout. A signal or a plain "shutdown" meanwhile cuts it
// short, as either would stop a running server.
func (t *term) drain(stop <-chan os.Signal, admin <-chan bool) {
	ctx, cancel := context.WithTimeout(context.Background(), t.o.ShutdownTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		var err error
		for _, r := range t.running {
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
				t.log.Warn("stopping with jobs still running", zap.Stringer("shutdown-timeout", t.o.ShutdownTimeout))
			} else {
				notice(t.log, "no job running")
			}
			return
		case got := <-stop:
			notice(t.log, "stopping at once", zap.String("signal", got.String()))
		case graceful := <-admin:
			if graceful {
				continue // already draining
			}
			notice(t.log, "stopping at once on admin request")
		}
		cancel()
		<-done // Stop must not run concurrently with Drain
		return
	}
}
