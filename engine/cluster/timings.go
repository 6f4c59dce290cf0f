package cluster

import (
	"slices"
	"sync"

	metrics "github.com/hashicorp/go-metrics"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// timings is three of the timings hashicorp/raft reports through
// go-metrics, as histograms: what a commit waits for. go-metrics' sink is
// the process's, so nodes in one process (tests) share them; a server
// runs one node.
var timings = &timingSink{
	commit: prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "switchyard_cluster_commit_seconds",
		Help:    "On the leader, the time from handing an entry to Raft's replication to its commit by a majority.",
		Buckets: timingBuckets,
	}),
	store: prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "switchyard_cluster_log_store_seconds",
		Help:    "The time this node took to put a batch of entries in its Raft log, synced: the leader's dispatch of new entries, a follower's store of an AppendEntries.",
		Buckets: timingBuckets,
	}),
	appendRPC: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "switchyard_cluster_append_entries_seconds",
		Help:    "On the leader, an AppendEntries round trip to each follower, its store included.",
		Buckets: timingBuckets,
	}, []string{"peer"}),
}

// timingBuckets: 0.25 ms to 4 s, doubling; a synced write on a disk is
// about a millisecond.
var timingBuckets = prometheus.ExponentialBuckets(0.00025, 2, 15)

var installTimings sync.Once

// recordTimings points go-metrics, and so hashicorp/raft's reports, at
// timings (once a process). Everything else it reports is dropped, as by
// go-metrics' default sink.
func recordTimings() {
	installTimings.Do(func() {
		conf := metrics.DefaultConfig("")
		conf.EnableHostname = false
		conf.EnableRuntimeMetrics = false // the process's own collector has those
		metrics.NewGlobal(conf, timings)
	})
}

type timingSink struct {
	metrics.BlackholeSink
	commit, store prometheus.Histogram
	appendRPC     *prometheus.HistogramVec
}

var (
	keyCommit        = []string{"raft", "commitTime"}
	keyLeaderStore   = []string{"raft", "leader", "dispatchLog"}
	keyFollowStore   = []string{"raft", "rpc", "appendEntries", "storeLogs"}
	keyAppendEntries = []string{"raft", "replication", "appendEntries", "rpc"}
)

func (s *timingSink) AddSample(key []string, val float32) { s.AddSampleWithLabels(key, val, nil) }

// AddSampleWithLabels takes a timing in milliseconds (go-metrics'
// default granularity).
func (s *timingSink) AddSampleWithLabels(key []string, val float32, labels []metrics.Label) {
	sec := float64(val) / 1e3
	switch {
	case slices.Equal(key, keyCommit):
		s.commit.Observe(sec)
	case slices.Equal(key, keyLeaderStore), slices.Equal(key, keyFollowStore):
		s.store.Observe(sec)
	case slices.Equal(key, keyAppendEntries):
		for _, l := range labels {
			if l.Name == "peer_id" {
				s.appendRPC.WithLabelValues(l.Value).Observe(sec)
			}
		}
	}
}

// forget drops a removed node's round-trip histogram.
func (s *timingSink) forget(peer string) { s.appendRPC.DeleteLabelValues(peer) }

func (s *timingSink) Describe(ch chan<- *prometheus.Desc) {
	s.commit.Describe(ch)
	s.store.Describe(ch)
	s.appendRPC.Describe(ch)
}

// collect sends the histograms, each follower's only if member says it
// is one: a round trip to a node removed may end after forget.
func (s *timingSink) collect(ch chan<- prometheus.Metric, member func(peer string) bool) {
	s.commit.Collect(ch)
	s.store.Collect(ch)
	rpcs := make(chan prometheus.Metric, 16)
	go func() {
		s.appendRPC.Collect(rpcs)
		close(rpcs)
	}()
	for m := range rpcs {
		var d dto.Metric
		if m.Write(&d) != nil {
			continue
		}
		for _, l := range d.GetLabel() {
			if l.GetName() == "peer" && member(l.GetValue()) {
				ch <- m
			}
		}
	}
}
