package main

import "testing"

func TestDrainWatch(t *testing.T) {
	tests := []struct {
		name   string
		counts []int
		frees  []bool
	}{
		{"small queues never", []int{10, 50_000, 0}, []bool{false, false, false}},
		{"drain of a large queue", []int{0, 400_000, 1_000_000, 600_000, 125_000, 10, 0, 0}, []bool{false, false, false, false, true, false, true, false}},
		{"straight to empty", []int{200_000, 0, 0}, []bool{false, true, false}},
		{"again after a new peak", []int{200_000, 0, 0, 300_000, 1000, 0}, []bool{false, true, false, false, true, true}},
		{"a queue that never empties", []int{800_000, 90_000, 100_000, 50_000, 1}, []bool{false, true, false, false, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := drainWatch{minPeak: 100_000}
			for i, n := range tt.counts {
				if got := d.observe(n); got != tt.frees[i] {
					t.Fatalf("observe(%d) at step %d = %v, want %v", n, i, got, tt.frees[i])
				}
			}
		})
	}
}
