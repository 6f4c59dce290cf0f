package harness

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

func TestParseStatus(t *testing.T) {
	tests := []struct {
		name    string
		status  string
		want    Usage
		wantErr string
	}{
		{
			name:   "running process",
			status: "Name:\tswitchyard\nState:\tS (sleeping)\nVmPeak:\t  1240000 kB\nVmHWM:\t    13312 kB\nVmRSS:\t    12800 kB\nThreads:\t9\n",
			want:   Usage{RSS: 12800 << 10, PeakRSS: 13312 << 10, Threads: 9},
		},
		{
			name:   "zombie without memory lines",
			status: "Name:\tgearmand\nState:\tZ (zombie)\nThreads:\t1\n",
			want:   Usage{Threads: 1},
		},
		{name: "bad number", status: "VmRSS:\t   12x kB\n", wantErr: "VmRSS"},
		{name: "unexpected unit", status: "VmRSS:\t   12 MB\n", wantErr: "unit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStatus(strings.NewReader(tt.status))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestParseStatCPU(t *testing.T) {
	// Fields 14 and 15 (utime, stime) are 250 and 130 ticks.
	rest := " S 1 2 3 0 -1 4194304 97 0 0 0 250 130 0 0 20 0 9 0 135201 3133440 412"
	tests := []struct {
		name    string
		stat    string
		want    time.Duration
		wantErr bool
	}{
		{"plain name", "4242 (gearmand)" + rest, 3800 * time.Millisecond, false},
		{"name with spaces and parentheses", "4242 (a (b) c)" + rest, 3800 * time.Millisecond, false},
		{"no parenthesis", "4242 gearmand S 1", 0, true},
		{"truncated", "4242 (x) S 1 2 3", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStatCPU(tt.stat)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("got %v, %v; want %v, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestReadUsageOfSelf(t *testing.T) {
	u, err := ReadUsage(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if u.RSS <= 0 || u.PeakRSS < u.RSS || u.Threads < 1 {
		t.Errorf("implausible usage of this process: %+v", u)
	}
}

func TestTail(t *testing.T) {
	tl := &tail{max: 8}
	tl.Write([]byte("0123"))
	tl.Write([]byte("456789ab"))
	if got := tl.String(); got != "456789ab" {
		t.Errorf("tail kept %q", got)
	}
}

func TestStartFailure(t *testing.T) {
	// A "server" that exits at once is reported with its output, quickly.
	_, err := Start(context.Background(), Config{
		Name: "false",
		Path: "/bin/sh",
		Args: []string{"-c", "echo cannot bind >&2; exit 3"},
	})
	if err == nil || !strings.Contains(err.Error(), "cannot bind") {
		t.Errorf("got %v, want an error quoting the server's output", err)
	}
}
