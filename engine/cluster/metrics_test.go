package cluster

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// The leader's metrics name the followers by their match index, and drop
// a node removed from the cluster: its lag and its round-trip histogram.
func TestMetricsForgetRemoved(t *testing.T) {
	nodes := startThree(t)
	l, li := leaderOf(t, nodes)
	gone, stays := nodes[(li+1)%3], nodes[(li+2)%3]
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(l.Collector()); err != nil {
		t.Fatal(err)
	}
	peers := func() map[string]bool {
		t.Helper()
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, f := range fams {
			if f.GetName() != "switchyard_cluster_peer_lag_entries" && f.GetName() != "switchyard_cluster_append_entries_seconds" {
				continue
			}
			for _, m := range f.GetMetric() {
				for _, lp := range m.GetLabel() {
					if lp.GetName() == "peer" {
						out[f.GetName()+"/"+lp.GetValue()] = true
					}
				}
			}
		}
		return out
	}
	waitFor(t, gone.ID()+"'s figures", func() bool {
		got := peers()
		return got["switchyard_cluster_peer_lag_entries/"+gone.ID()] && got["switchyard_cluster_append_entries_seconds/"+gone.ID()]
	})
	if err := l.Remove(gone.ID()); err != nil {
		t.Fatal(err)
	}
	gone.Close()
	waitFor(t, gone.ID()+" forgotten", func() bool {
		got := peers()
		return !got["switchyard_cluster_peer_lag_entries/"+gone.ID()] && !got["switchyard_cluster_append_entries_seconds/"+gone.ID()] &&
			got["switchyard_cluster_peer_lag_entries/"+stays.ID()]
	})
}
