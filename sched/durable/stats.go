package durable

import (
	dto "github.com/prometheus/client_model/go"
)

// Stats is what the store reports for monitoring.
type Stats struct {
	// DiskBytes is the space the database's files take, obsolete ones
	// not yet deleted included (Pebble's DiskSpaceUsage).
	DiskBytes uint64
	// Syncs are the write-ahead log's fsyncs as Pebble times them, each
	// sync covering every batch written while the one before ran: their
	// count, their total in seconds, and the count at most each upper
	// bound (seconds), as a Prometheus histogram has them.
	Syncs       uint64
	SyncSeconds float64
	SyncBuckets map[float64]uint64
}

// Stats reads the store's figures from Pebble: a few locks of its own
// held briefly, none the writer waits on for long. While the store is
// down they are the last read before: its database is given up. (After a
// recovery, the sync counts start again from zero, as after a restart.)
func (s *Store) Stats() Stats {
	in := s.cur.Load()
	if in.Failure() != nil {
		if p := s.lastStats.Load(); p != nil {
			return *p
		}
		return Stats{}
	}
	st := in.stats(s.sync)
	s.lastStats.Store(&st)
	return st
}

func (in *incarnation) stats(mode Sync) Stats {
	m := in.db.Metrics()
	st := Stats{DiskBytes: m.DiskSpaceUsage()}
	h := m.LogWriter.FsyncLatency
	if h == nil || mode == SyncNever { // Pebble times syncs the log's file does not make
		return st
	}
	var out dto.Metric
	if h.Write(&out) != nil || out.Histogram == nil {
		return st
	}
	// Pebble records nanoseconds.
	st.Syncs = out.Histogram.GetSampleCount()
	st.SyncSeconds = out.Histogram.GetSampleSum() / 1e9
	st.SyncBuckets = make(map[float64]uint64, len(out.Histogram.Bucket))
	for _, b := range out.Histogram.Bucket {
		st.SyncBuckets[b.GetUpperBound()/1e9] = b.GetCumulativeCount()
	}
	return st
}
