package cluster

import (
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	descRole = prometheus.NewDesc("switchyard_cluster_role", "This node's Raft role: 1 for the one it has (leader, follower, candidate).",
		[]string{"role"}, nil)
	descTerm      = prometheus.NewDesc("switchyard_cluster_term", "The Raft term this node is in.", nil, nil)
	descLastIndex = prometheus.NewDesc("switchyard_cluster_last_index", "The index of the last entry in this node's Raft log.", nil, nil)
	descCommit    = prometheus.NewDesc("switchyard_cluster_commit_index", "The index of the last entry this node knows committed by a majority.", nil, nil)
	descApplied   = prometheus.NewDesc("switchyard_cluster_applied_index", "The index of the last entry this node has applied to its copy of the job store.", nil, nil)
	descMembers   = prometheus.NewDesc("switchyard_cluster_members", "Nodes in the cluster's configuration, voters and not.", nil, nil)
	descLeader    = prometheus.NewDesc("switchyard_cluster_has_leader", "1 if this node knows a leader (itself included).", nil, nil)
	descContact   = prometheus.NewDesc("switchyard_cluster_last_contact_seconds", "On a follower, how long ago the leader was last heard from.", nil, nil)
	descLag       = prometheus.NewDesc("switchyard_cluster_peer_lag_entries", "On the leader, how many entries of its log each follower is not known to hold (from its match index).",
		[]string{"peer"}, nil)
	descRefused = prometheus.NewDesc("switchyard_cluster_refused_total", "Connections between nodes refused, dialled or accepted, by why: "+
		"not_tls, no_certificate, unknown_authority (another CA), expired, bad_certificate, wrong_node (a certificate naming another node, or no member), timeout, handshake.",
		[]string{"reason"}, nil)
	descLogFailed = prometheus.NewDesc("switchyard_cluster_log_failed", "1 once a sync of this node's Raft log has failed: it acknowledges nothing more, stands for no election, and needs a restart once its disk is sound.", nil, nil)
	descJobs      = prometheus.NewDesc("switchyard_cluster_stored_jobs", "Jobs in this node's copy of the replicated job store.", nil, nil)
)

// Collector is the node's figures as Prometheus families.
func (n *Node) Collector() prometheus.Collector { return collector{n} }

type collector struct{ n *Node }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRole, descTerm, descLastIndex, descCommit, descApplied, descMembers,
		descLeader, descContact, descLag, descLogFailed, descJobs, descRefused} {
		ch <- d
	}
	timings.Describe(ch)
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	st := c.n.Status()
	g := prometheus.GaugeValue
	for _, r := range []string{"leader", "follower", "candidate"} {
		v := 0.0
		if st.Role == r {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(descRole, g, v, r)
	}
	ch <- prometheus.MustNewConstMetric(descTerm, g, float64(st.Term))
	ch <- prometheus.MustNewConstMetric(descLastIndex, g, float64(st.LastIndex))
	ch <- prometheus.MustNewConstMetric(descCommit, g, float64(st.Commit))
	ch <- prometheus.MustNewConstMetric(descApplied, g, float64(st.Applied))
	ch <- prometheus.MustNewConstMetric(descMembers, g, float64(len(st.Members)))
	has := 0.0
	if st.Leader != "" {
		has = 1
	}
	ch <- prometheus.MustNewConstMetric(descLeader, g, has)
	if !st.LastContact.IsZero() {
		ch <- prometheus.MustNewConstMetric(descContact, g, time.Since(st.LastContact).Seconds())
	}
	for _, m := range st.Members {
		if m.Lag >= 0 && m.ID != st.ID {
			ch <- prometheus.MustNewConstMetric(descLag, g, float64(m.Lag), m.ID)
		}
	}
	failed := 0.0
	if st.LogFailed != "" {
		failed = 1
	}
	ch <- prometheus.MustNewConstMetric(descLogFailed, g, failed)
	ch <- prometheus.MustNewConstMetric(descJobs, g, float64(c.n.fsm.Len()))
	for r := range numReasons {
		ch <- prometheus.MustNewConstMetric(descRefused, prometheus.CounterValue, float64(c.n.ref.counts[r].Load()), r.String())
	}
	timings.collect(ch, func(peer string) bool {
		return slices.ContainsFunc(st.Members, func(m Member) bool { return m.ID == peer })
	})
}
