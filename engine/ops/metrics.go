package ops

import (
	"runtime"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"switchyard/sched"
)

// gearman-exporter (github.com/bakins/gearman-exporter) exports these two
// beside its per-function families (see funcFamilies), under these
// names and help, so that its dashboards read switchyard as gearmand.
var (
	descUp      = prometheus.NewDesc("gearman_up", "is gearman up", nil, nil)
	descVersion = prometheus.NewDesc("gearman_version_info", "gearman version", []string{"version"}, nil)
)

// switchyard's own.
var (
	descBuild      = prometheus.NewDesc("switchyard_build_info", "The running binary: its release, the git commit it was built from (+dirty: with uncommitted changes) and its Go version. Always 1.", []string{"version", "revision", "goversion"}, nil)
	descFunctions  = prometheus.NewDesc("switchyard_functions", "Functions known: with jobs, workers or an admin setting, or idle for less than --function-ttl.", nil, nil)
	descConns      = prometheus.NewDesc("switchyard_connections", "Open connections, by protocol.", []string{"protocol"}, nil)
	descQueueWait  = prometheus.NewDesc("switchyard_job_queue_wait_seconds", "How long jobs waited in their queue before a worker took them: each attempt, from the submit, the due time, or the requeue.", nil, nil)
	descRunTime    = prometheus.NewDesc("switchyard_job_run_seconds", "How long each attempt at a job lasted, from the grab to the worker's result, or to the job's return to its queue.", nil, nil)
	descStoreBytes = prometheus.NewDesc("switchyard_store_bytes", "Disk space the job store's files take.", nil, nil)
	descStoreSync  = prometheus.NewDesc("switchyard_store_sync_seconds", "How long the job store took to force its writes to disk: each fsync of the durable queue's write-ahead log, or each commit of the SQLite queue.", nil, nil)
	descStoreUp    = prometheus.NewDesc("switchyard_store_up", "1 while the job store takes writes, 0 while it refuses them after a failed write (a full disk): submits that need it are refused.", nil, nil)
	descStoreErrs  = prometheus.NewDesc("switchyard_store_write_errors_total", "Writes to the job store that failed: each that took the durable queue down and each failed attempt to bring it back, each failed SQLite transaction.", nil, nil)
	descRefused    = prometheus.NewDesc("switchyard_submits_refused_total", "Submits refused, by reason: store (the job store could not keep the job, or was down), queue_full (the function's maxqueue), ended (the job has run: a remembered submit), whatever the protocol.", []string{"reason"}, nil)
)

// eventDescs are the per-protocol counters, one per sched.Event.
var eventDescs = [sched.NumEvents]*prometheus.Desc{
	sched.EventSubmitted: prometheus.NewDesc("switchyard_jobs_submitted_total", "Submits accepted (a new job, or one joining or replacing a live job), by the protocol they came by; a job restored from the store at start counts under origin \"restored\" and no protocol.", []string{"protocol", "origin"}, nil),
	sched.EventCompleted: prometheus.NewDesc("switchyard_jobs_completed_total", "Jobs a worker reported complete, by the protocol they were submitted by.", []string{"protocol", "origin"}, nil),
	sched.EventFailed:    prometheus.NewDesc("switchyard_jobs_failed_total", "Jobs a worker reported failed, or that used up their retries (-j) or waited past their queue timeout, by the protocol they were submitted by.", []string{"protocol", "origin"}, nil),
	sched.EventException: prometheus.NewDesc("switchyard_jobs_exception_total", "Jobs a worker reported an exception for, by the protocol they were submitted by.", []string{"protocol", "origin"}, nil),
	sched.EventRetried:   prometheus.NewDesc("switchyard_jobs_retried_total", "Attempts that ended with the job back in its queue to be tried again (worker gone, run timeout, a failure of a job that retries for ever), by the protocol the job was submitted by.", []string{"protocol", "origin"}, nil),
	sched.EventTimedOut:  prometheus.NewDesc("switchyard_jobs_timed_out_total", "Attempts that overran their run timeout, by the protocol the job was submitted by.", []string{"protocol", "origin"}, nil),
}

// collector reads the scheduler, the frontends and the store when
// Prometheus scrapes: nothing is counted on the job path for it (sched's
// own counters are plain increments under locks it holds anyway). The
// per-function families are not its: see funcFamilies.
type collector struct{ s *Server }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descUp, descVersion, descBuild, descFunctions,
		descConns, descQueueWait, descRunTime, descStoreBytes, descStoreSync, descStoreUp, descStoreErrs, descRefused} {
		ch <- d
	}
	for _, d := range eventDescs {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	gauge := prometheus.GaugeValue
	ch <- prometheus.MustNewConstMetric(descUp, gauge, 1)
	ch <- prometheus.MustNewConstMetric(descVersion, gauge, 1, s.cfg.Version)
	ch <- prometheus.MustNewConstMetric(descBuild, gauge, 1, s.cfg.Version, s.cfg.Revision, runtime.Version())

	ch <- prometheus.MustNewConstMetric(descFunctions, gauge, float64(s.cfg.Sched.NumFuncs()))

	var st sched.Stats
	s.cfg.Sched.Stats(&st)
	for src := range st.Events {
		proto, origin := s.protocol(sched.Source(src)), "submitted"
		switch {
		case s.cfg.Restored != nil && s.cfg.Restored(sched.Source(src)):
			proto, origin = "", "restored"
		case proto == "":
			if st.Events[src] == (sched.Counts{}) {
				continue
			}
			proto = strconv.Itoa(src) // counted, yet named by no frontend
		}
		for e, d := range eventDescs {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(st.Events[src][e]), proto, origin)
		}
	}
	ch <- histogram(descQueueWait, &st.QueueWait)
	ch <- histogram(descRunTime, &st.RunTime)
	for r, n := range st.Refused {
		ch <- prometheus.MustNewConstMetric(descRefused, prometheus.CounterValue, float64(n), sched.Refusal(r).String())
	}

	for _, cn := range s.conns() {
		ch <- prometheus.MustNewConstMetric(descConns, gauge, float64(cn.Open()), cn.Protocol)
	}
	if s.cfg.Store != nil {
		ss := s.cfg.Store()
		ch <- prometheus.MustNewConstMetric(descStoreBytes, gauge, float64(ss.Bytes))
		ch <- prometheus.MustNewConstHistogram(descStoreSync, ss.Syncs, ss.SyncSeconds, ss.SyncBuckets)
		up := 1.0
		if ss.Failure != "" {
			up = 0
		}
		ch <- prometheus.MustNewConstMetric(descStoreUp, gauge, up)
		ch <- prometheus.MustNewConstMetric(descStoreErrs, prometheus.CounterValue, float64(ss.WriteErrors))
	}
}

// boundSeconds are sched.LatencyBounds in seconds, Prometheus's unit.
var boundSeconds = func() []float64 {
	out := make([]float64, len(sched.LatencyBounds))
	for i, b := range sched.LatencyBounds {
		out[i] = b.Seconds()
	}
	return out
}()

// histogram turns one of sched's histograms into a Prometheus one.
func histogram(d *prometheus.Desc, h *sched.Histogram) prometheus.Metric {
	n, sum, buckets := Cumulative(h)
	return prometheus.MustNewConstHistogram(d, n, sum, buckets)
}

// Cumulative is one of sched's histograms as Prometheus counts it: the
// number of durations, their sum in seconds, and the count at most each
// bound (in seconds). A store that times its syncs in a sched.Histogram
// gives them to StoreStats this way.
func Cumulative(h *sched.Histogram) (count uint64, sum float64, buckets map[float64]uint64) {
	buckets = make(map[float64]uint64, len(boundSeconds))
	for i, b := range boundSeconds {
		count += h.Buckets[i]
		buckets[b] = count
	}
	return count + h.Buckets[len(boundSeconds)], h.Sum, buckets
}
