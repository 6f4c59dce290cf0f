package main

import (
	"testing"
	"time"
)

func TestParseFlagsQuick(t *testing.T) {
	tests := []struct {
		name         string
		args         []string
		wantDuration time.Duration // of fg
		wantJobs     int           // of queue-1m
	}{
		{"full defaults", nil, 20 * time.Second, 1_000_000},
		{"quick defaults", []string{"--quick"}, 3 * time.Second, 100_000},
		{"explicit flags beat quick", []string{"--quick", "--fg.duration", "7s", "--queue-1m.jobs=5"}, 7 * time.Second, 5},
		{"explicit flags without quick", []string{"--fg.duration", "7s"}, 7 * time.Second, 1_000_000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts, err := parseFlags(tt.args)
			if err != nil {
				t.Fatal(err)
			}
			if got := opts.params["fg"].Duration; got != tt.wantDuration {
				t.Errorf("fg duration %v, want %v", got, tt.wantDuration)
			}
			if got := opts.params["queue-1m"].Jobs; got != tt.wantJobs {
				t.Errorf("queue-1m jobs %d, want %d", got, tt.wantJobs)
			}
		})
	}
	for _, bad := range [][]string{{"--rounds", "0"}, {"stray"}, {"--fg.jobs", "3"}} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("parseFlags(%q) accepted", bad)
		}
	}
}
