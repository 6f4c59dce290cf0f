package main

import (
	"context"
	"os"
	"path/filepath"

	"go.uber.org/zap"

	"switchyard/engine/ops"
	"switchyard/sched/durable"
	"switchyard/sched/sqlite"
)

// openStore opens the durable queue in dir, making the directory if need
// be. A store that exists but cannot be read, or that lost acknowledged
// jobs, is an error naming it and the damaged file; with recover, a
// damaged store opens with what can be read, and the log says how many
// jobs could not be.
func openStore(dir, fsync string, recover bool, log *zap.Logger) (*durable.Store, error) {
	mode, err := durable.ParseSync(fsync)
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(abs, 0o750); err != nil {
		return nil, err
	}
	st, err := durable.OpenWith(abs, durable.Options{Sync: mode, Recover: recover})
	if err != nil {
		return nil, err
	}
	if d := st.Damage(); d != nil {
		// At the default level (ERROR): jobs are gone, and whoever runs the
		// server must hear of it.
		log.Error("started with --recover on a damaged job store: the jobs that could not be read are lost",
			zap.String("dir", abs), zap.Int("jobs_lost", d.Lost()), zap.Int("jobs_read", d.Readable),
			zap.Int("jobs_recorded", d.Recorded), zap.Strings("files", d.Files), zap.Error(d))
	}
	return st, nil
}

// durableStats reads the durable queue's figures for the metrics, its
// health for /healthz.
func durableStats(st *durable.Store) func() ops.StoreStats {
	return func() ops.StoreStats {
		d := st.Stats()
		h := st.Health()
		out := ops.StoreStats{Bytes: d.DiskBytes, Syncs: d.Syncs, SyncSeconds: d.SyncSeconds, SyncBuckets: d.SyncBuckets,
			WriteErrors: h.WriteErrors}
		if h.Failure != nil {
			out.Failure = h.Failure.Error()
		}
		return out
	}
}

// sqliteStats reads the SQLite queue's figures for the metrics, its
// health for /healthz.
func sqliteStats(sq *sqlite.Store) func() ops.StoreStats {
	return func() ops.StoreStats {
		q := sq.Stats()
		n, sum, buckets := ops.Cumulative(&q.Commits)
		out := ops.StoreStats{Bytes: q.DiskBytes, Syncs: n, SyncSeconds: sum, SyncBuckets: buckets, WriteErrors: q.WriteErrors}
		if q.Failure != nil {
			out.Failure = q.Failure.Error()
		}
		return out
	}
}

// watchStore logs each time the job store goes down (a failed write: a
// full disk) and each time it comes back, at the default level: clients
// learn of it from each refused submit, whoever runs the server from
// these lines, /healthz and the metrics.
func watchStore(ctx context.Context, st *durable.Store, log *zap.Logger) {
	down := false
	for {
		changed := st.Watch()
		switch h := st.Health(); {
		case h.Failure != nil && !down:
			down = true
			log.Error("the job store takes no writes: submits that need it are refused until it recovers; it retries by itself",
				zap.String("dir", st.Dir()), zap.Error(h.Failure))
		case h.Failure == nil && down:
			down = false
			log.Error("the job store takes writes again: it recovered without a restart, and lost no acknowledged job",
				zap.String("dir", st.Dir()), zap.Uint64("write_errors", h.WriteErrors), zap.Uint64("recoveries", h.Recoveries))
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

// watchSqlite logs each time the SQLite queue's writes start failing, and
// each time they succeed again.
func watchSqlite(ctx context.Context, sq *sqlite.Store, log *zap.Logger) {
	down := false
	for {
		changed := sq.Watch()
		switch q := sq.Stats(); {
		case q.Failure != nil && !down:
			down = true
			log.Error("the SQLite job store failed a write: submits that need it are refused until a write succeeds",
				zap.String("db", sq.Path()), zap.Error(q.Failure))
		case q.Failure == nil && down:
			down = false
			log.Error("the SQLite job store takes writes again", zap.String("db", sq.Path()), zap.Uint64("write_errors", q.WriteErrors))
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}
