package ceiling

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// echoEnv makes the test binary, run again as a child, serve instead of
// testing: the echo server must be a process of its own, as a job server
// is, or the figure would leave out the switches between processes.
const echoEnv = "SWITCHYARD_CEILING_ECHO"

func TestMain(m *testing.M) {
	if addr := os.Getenv(echoEnv); addr != "" {
		err := Serve(addr, func(addr string) { fmt.Println("ready", addr) })
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// startEcho runs the echo server in a child process on a port the kernel
// picks, and returns the address the child reports.
func startEcho(tb testing.TB) string {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), echoEnv+"=127.0.0.1:0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		if addr, ok := strings.CutPrefix(lines.Text(), "ready "); ok {
			go io.Copy(io.Discard, out) // never block the child on a full pipe
			return addr
		}
	}
	tb.Fatal("echo server did not start")
	return ""
}

func TestPingPong(t *testing.T) {
	addr := startEcho(t)
	for _, tt := range []struct{ conns, size, n int }{{1, 1, 10}, {4, 64, 1001}, {3, 70 << 10, 7}} {
		if err := PingPong(addr, tt.conns, tt.size, tt.n); err != nil {
			t.Errorf("%d conns, %d bytes, %d round trips: %v", tt.conns, tt.size, tt.n, err)
		}
	}
	if err := PingPong(addr, 0, 64, 1); err == nil {
		t.Error("0 connections accepted")
	}
}

// BenchmarkLoopback reports round trips per second through an echo server
// in another process; ns/op is the time per round trip across all the
// connections, so with one connection it is the round-trip latency.
func BenchmarkLoopback(b *testing.B) {
	addr := startEcho(b)
	for _, conns := range []int{1, 4, 64} {
		b.Run(fmt.Sprintf("conns=%d", conns), func(b *testing.B) {
			start := time.Now()
			if err := PingPong(addr, conns, 64, b.N); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "roundtrips/s")
		})
	}
}

func TestRun(t *testing.T) {
	addr := startEcho(t)
	now := time.Now()
	res, err := Run(context.Background(), addr, 2, 64, now.Add(50*time.Millisecond), now.Add(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if res.RoundTrips == 0 || res.Latency.TotalCount() != res.RoundTrips {
		t.Fatalf("%d round trips, %d latencies", res.RoundTrips, res.Latency.TotalCount())
	}
	if res.Window != 250*time.Millisecond {
		t.Fatalf("window %v", res.Window)
	}
	if _, err := Run(context.Background(), addr, 1, 0, now, now); err == nil {
		t.Error("empty messages accepted")
	}
}
