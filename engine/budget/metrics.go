package budget

import "github.com/prometheus/client_golang/prometheus"

var (
	descLimit   = prometheus.NewDesc("switchyard_memory_budget_bytes", "The memory budget for what peers make the server hold (--max-memory); 0 when it only counts.", nil, nil)
	descHeld    = prometheus.NewDesc("switchyard_memory_held_bytes", "What peers make the server hold now, against the memory budget: partial requests, request bodies, replies not yet read.", nil, nil)
	descCuts    = prometheus.NewDesc("switchyard_memory_budget_cuts_total", "Connections closed because the memory budget was spent, the largest holders first.", nil, nil)
	descRefused = prometheus.NewDesc("switchyard_memory_budget_refused_total", "Large packets and request bodies refused because the memory budget could not hold them, each answered with its protocol's error.", nil, nil)
)

// Collector serves b's figures as metric families.
func (b *Budget) Collector() prometheus.Collector { return collector{b} }

type collector struct{ b *Budget }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descLimit
	ch <- descHeld
	ch <- descCuts
	ch <- descRefused
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(descLimit, prometheus.GaugeValue, float64(c.b.Limit()))
	ch <- prometheus.MustNewConstMetric(descHeld, prometheus.GaugeValue, float64(max(c.b.Used(), 0)))
	ch <- prometheus.MustNewConstMetric(descCuts, prometheus.CounterValue, float64(c.b.Cuts()))
	ch <- prometheus.MustNewConstMetric(descRefused, prometheus.CounterValue, float64(c.b.Refused()))
}
