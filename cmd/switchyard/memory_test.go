package main

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
)

func TestHalving(t *testing.T) {
	tests := []struct {
		name   string
		counts []int64
		frees  []bool
	}{
		{"small queues never", []int64{10, 50_000, 0}, []bool{false, false, false}},
		{"swings below the peak never", []int64{90_000, 45_000, 90_000, 40_000, 0}, []bool{false, false, false, false, false}},
		{"drain of a large queue, halving by halving",
			[]int64{0, 400_000, 1_000_000, 600_000, 500_000, 300_000, 250_000, 125_000, 10, 0, 0},
			[]bool{false, false, false, false, true, false, true, true, true, false, false}},
		{"straight to empty", []int64{200_000, 0, 0}, []bool{false, true, false}},
		{"again after a new peak", []int64{200_000, 0, 0, 300_000, 1000, 0}, []bool{false, true, false, false, true, false}},
		// The row of the reliability table: one job stays queued.
		{"a queue that never empties", []int64{1_000_000, 400_000, 150_000, 60_000, 20_000, 1, 1, 1},
			[]bool{false, true, true, true, true, true, false, false}},
		{"a rise while draining raises the level", []int64{800_000, 90_000, 100_000, 60_000, 50_000, 1},
			[]bool{false, true, false, false, true, true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := halving{min: 100_000}
			for i, n := range tt.counts {
				if got := h.observe(n); got != tt.frees[i] {
					t.Fatalf("observe(%d) at step %d = %v, want %v", n, i, got, tt.frees[i])
				}
			}
		})
	}
}

func TestMemoryLimits(t *testing.T) {
	const gib = 1 << 30
	tests := []struct {
		name            string
		files           map[string]string
		machine, cgroup int64
		budget          int64
	}{
		{"nothing readable", nil, 0, 0, gib},
		{"machine only", map[string]string{
			"proc/meminfo": "MemTotal:       24683520 kB\nMemFree:        20000000 kB\n",
		}, 24683520 << 10, 0, 24683520 << 10 / 4},
		{"cgroup v2, limit on a parent", map[string]string{
			"proc/meminfo":     "MemTotal: 16777216 kB\n",
			"proc/self/cgroup": "0::/system.slice/switchyard.service\n",
			"sys/fs/cgroup/system.slice/switchyard.service/memory.max": "max\n",
			"sys/fs/cgroup/system.slice/memory.max":                    "4294967296\n",
		}, 16 * gib, 4 * gib, gib},
		{"cgroup v2, the smallest along the path", map[string]string{
			"proc/meminfo":                 "MemTotal: 16777216 kB\n",
			"proc/self/cgroup":             "0::/a/b\n",
			"sys/fs/cgroup/a/b/memory.max": "2147483648\n",
			"sys/fs/cgroup/a/memory.max":   "8589934592\n",
			"sys/fs/cgroup/memory.max":     "max\n",
		}, 16 * gib, 2 * gib, gib / 2},
		{"cgroup v1", map[string]string{
			"proc/meminfo": "MemTotal: 16777216 kB\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "1073741824\n",
		}, 16 * gib, gib, gib / 4},
		{"cgroup v1 unlimited", map[string]string{
			"proc/meminfo": "MemTotal: 16777216 kB\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
		}, 16 * gib, 0, 4 * gib},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			for name, body := range tt.files {
				p := filepath.Join(root, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			machine, cgroup := memoryLimits(root)
			if machine != tt.machine || cgroup != tt.cgroup {
				t.Fatalf("memoryLimits = %d, %d; want %d, %d", machine, cgroup, tt.machine, tt.cgroup)
			}
			if b := autoBudget(machine, cgroup); b != tt.budget {
				t.Fatalf("autoBudget = %d, want %d", b, tt.budget)
			}
		})
	}
}

// Under pressure the collector runs at GOGC pressureGC, and after it at
// what it was; a lower GOGC, or none (off), is left alone.
func TestCollectSooner(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	for _, gogc := range []int{100, 200, pressureGC, 10, -1} {
		debug.SetGCPercent(gogc)
		press := collectSooner()
		press(true)
		want := min(gogc, pressureGC)
		if gogc < 0 {
			want = -1
		}
		if got := gogcNow(); got != want {
			t.Errorf("GOGC %d, pressed: %d, want %d", gogc, got, want)
		}
		press(false)
		if got := gogcNow(); got != gogc {
			t.Errorf("GOGC %d, released: %d, want it back", gogc, got)
		}
	}
}

// gogcNow is the collector's GOGC, read by setting it back.
func gogcNow() int {
	v := debug.SetGCPercent(100)
	debug.SetGCPercent(v)
	return v
}
