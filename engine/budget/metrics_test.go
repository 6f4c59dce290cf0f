package budget

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestCollector(t *testing.T) {
	b := New(1000)
	small := b.Hold(func() {})
	big := b.Hold(func() {})
	small.Set(100)
	if !big.Take(500) {
		t.Fatal("Take(500) refused under the budget")
	}
	if big.Take(500) {
		t.Fatal("Take(500) granted past the budget")
	}
	big.Set(800) // 1400 held: big is cut
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(b.Collector())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		m := mf.GetMetric()[0]
		if c := m.GetCounter(); c != nil {
			got[mf.GetName()] = c.GetValue()
		} else {
			got[mf.GetName()] = m.GetGauge().GetValue()
		}
	}
	want := map[string]float64{
		"switchyard_memory_budget_bytes":         1000,
		"switchyard_memory_held_bytes":           1400,
		"switchyard_memory_budget_cuts_total":    1,
		"switchyard_memory_budget_refused_total": 1,
	}
	for name, v := range want {
		if got[name] != v {
			t.Errorf("%s = %v, want %v (all: %v)", name, got[name], v, got)
		}
	}
}
