package scenario

import (
	"errors"
	"math"
	"testing"
	"time"

	"switchyard/bench/harness"
	"switchyard/bench/load"
)

// The server's CPU per job in a fill's first and last tenth comes from
// its CPU time read as the fill begins and crosses 10%, 90% and 100%.
func TestCPUAtTenths(t *testing.T) {
	cpu := time.Duration(0)
	fail := false
	target := Target{Usage: func() (harness.Usage, error) {
		if fail {
			return harness.Usage{}, errors.New("gone")
		}
		return harness.Usage{CPU: cpu}, nil
	}}
	for _, tc := range []struct {
		name        string
		perJob      func(pct int) time.Duration // CPU each job up to pct costs
		failAt      int                         // a reading that fails, or 0
		first, last float64
		ok          bool
	}{
		{"flat", func(int) time.Duration { return 3 * time.Microsecond }, 0, 3, 3, true},
		{"dearer at the end", func(pct int) time.Duration {
			if pct > 90 {
				return 6 * time.Microsecond
			}
			return 2 * time.Microsecond
		}, 0, 2, 6, true},
		{"a reading failed", func(int) time.Duration { return time.Microsecond }, 90, 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cpu, fail = time.Hour, false
			p := load.NewProgress(1000)
			c := cpuAtTenths(target, p)
			for pct := 1; pct <= 100; pct++ {
				cpu += 10 * tc.perJob(pct) // 10 jobs a percent
				fail = pct == tc.failAt
				p.Add(10)
			}
			first, last, ok := c.perJob(1000)
			if ok != tc.ok || math.Abs(first-tc.first) > 1e-9 || math.Abs(last-tc.last) > 1e-9 {
				t.Errorf("first %v µs, last %v µs, ok %v; want %v, %v, %v", first, last, ok, tc.first, tc.last, tc.ok)
			}
		})
	}
}
