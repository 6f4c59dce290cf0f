package harness

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
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

// busyChildEnv makes this test binary the busy child of
// TestReadUsageOfBusyChild.
const busyChildEnv = "HARNESS_BUSY_CHILD"

// TestBusyChild is not a test: run by TestReadUsageOfBusyChild with
// busyChildEnv set, it burns CPU for each line it reads and answers when
// done, until its input ends.
func TestBusyChild(t *testing.T) {
	if os.Getenv(busyChildEnv) != "1" {
		t.Skip("the child process of TestReadUsageOfBusyChild")
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		d, err := time.ParseDuration(in.Text())
		if err != nil {
			t.Fatal(err)
		}
		for from := ownCPU(); ownCPU()-from < d; {
		}
		fmt.Println("done")
	}
}

func ownCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestReadUsageOfBusyChild reads a real child process's CPU from /proc as
// the bench reads a server's: before and after it burns a known amount,
// and against what the kernel reports of it once it has exited (wait4's
// rusage).
func TestReadUsageOfBusyChild(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestBusyChild$")
	cmd.Env = append(os.Environ(), busyChildEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	out := bufio.NewScanner(stdout)
	burn := func(d time.Duration) {
		t.Helper()
		fmt.Fprintln(stdin, d)
		if !out.Scan() || out.Text() != "done" {
			t.Fatalf("child answered %q, %v", out.Text(), out.Err())
		}
	}
	// /proc counts in ticks of 10 ms, and rounds down.
	const tick = time.Second / clockTicks

	before, err := ReadUsage(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	const spent = 300 * time.Millisecond
	burn(spent)
	after, err := ReadUsage(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if got := after.CPU - before.CPU; got < spent-2*tick {
		t.Errorf("CPU went from %v to %v while the child burnt %v", before.CPU, after.CPU, spent)
	}
	if after.RSS <= 0 || after.Threads < 1 {
		t.Errorf("implausible usage of the child: %+v", after)
	}

	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	exited := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	// What /proc said while it ran is at most what it had at its exit,
	// and not much less: after its burn the child only exits.
	if after.CPU > exited+tick || after.CPU < exited-100*time.Millisecond {
		t.Errorf("/proc read %v after the burn; the child had used %v when it exited", after.CPU, exited)
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
