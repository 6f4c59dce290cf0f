package harness

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// listenEnv makes the test binary, run again as a child, listen on a port
// the kernel picks instead of testing: a stand-in server for Start.
const listenEnv = "SWITCHYARD_HARNESS_LISTEN"

// twoListenersEnv makes the child listen on two ports like switchyard with
// its Periodic listener: first one that closes every connection, then, a
// moment later, one that answers the admin getpid.
const twoListenersEnv = "SWITCHYARD_HARNESS_TWO"

func TestMain(m *testing.M) {
	if os.Getenv(twoListenersEnv) != "" {
		serveTwo()
	}
	if addr := os.Getenv(listenEnv); addr != "" {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		for {
			c, err := l.Accept()
			if err != nil {
				os.Exit(1)
			}
			c.Close()
		}
	}
	os.Exit(m.Run())
}

func serveTwo() {
	closer, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		os.Exit(1)
	}
	go func() {
		for {
			c, err := closer.Accept()
			if err != nil {
				os.Exit(1)
			}
			c.Close()
		}
	}()
	time.Sleep(100 * time.Millisecond)
	admin, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		os.Exit(1)
	}
	for {
		c, err := admin.Accept()
		if err != nil {
			os.Exit(1)
		}
		go func() {
			defer c.Close()
			line, _ := bufio.NewReader(c).ReadString('\n')
			if line == "getpid\n" {
				fmt.Fprintf(c, "OK %d\n", os.Getpid())
			}
		}()
	}
}

// The rows are as an x86 kernel prints them: words in little-endian order.
const (
	tcpHeader  = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
	tcp6Header = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
)

func TestParseListening(t *testing.T) {
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		t.Skip("the rows below are a little-endian kernel's")
	}
	inodes := map[uint64]bool{16095: true, 47577: true, 47578: true, 900: true}
	tests := []struct {
		name    string
		table   string
		want    []string
		wantErr string
	}{
		{"listening on 127.0.0.1:46723", tcpHeader +
			"   0: 0100007F:B683 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 16095 1 0000000041f1306 100 0 0 10 0\n",
			[]string{"127.0.0.1:46723"}, ""},
		{"another process's listener", tcpHeader +
			"   0: 00000000:07E8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 516 1 00000000041f1306 100 0 0 10 0\n",
			nil, ""},
		{"a connection of ours is not a listener", tcpHeader +
			"   1: 0100007F:D22C 0100007F:9E61 01 00000000:00000000 00:00000000 00000000     0        0 900 1 00000000a2a0a7ff\n" +
			"   2: 0100007F:D22D 0100007F:9E61 06 00000000:00000000 03:00000662 00000000     0        0 0 3 00000000a2a0a7ff\n",
			nil, ""},
		{"tcp6 ::1 and ::", tcp6Header +
			"   0: 00000000000000000000000001000000:C317 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 47577 1 0000000046d328c4 100 0 0 10 0\n" +
			"   1: 00000000000000000000000000000000:127B 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 47578 1 00000000254b0158 100 0 0 10 0\n",
			[]string{"[::1]:49943", "[::]:4731"}, ""},
		{"header only", tcpHeader, nil, ""},
		{"short row", tcpHeader + "   0: 0100007F:B683 00000000:0000 0A\n", nil, "short row"},
		{"bad address", tcpHeader +
			"   0: 0100007:B683 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 16095 1\n",
			nil, "bad IP"},
		{"bad inode", tcpHeader +
			"   0: 0100007F:B683 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 x 1\n",
			nil, "inode"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseListening(strings.NewReader(tt.table), inodes)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var gotS []string
			for _, a := range got {
				gotS = append(gotS, a.String())
			}
			if !slices.Equal(gotS, tt.want) {
				t.Errorf("got %q, want %q", gotS, tt.want)
			}
		})
	}
}

// TestListeningOfSelf: this process's listeners are found, its connected
// sockets are not.
func TestListeningOfSelf(t *testing.T) {
	var want []netip.AddrPort
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0"} {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			if addr == "[::1]:0" {
				continue // no IPv6 loopback here
			}
			t.Fatal(err)
		}
		defer l.Close()
		want = append(want, l.Addr().(*net.TCPAddr).AddrPort())
	}
	c, err := net.Dial("tcp", want[0].String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	got, err := Listening(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("Listening = %v, want it to include %v", got, w)
		}
	}
	if local := c.LocalAddr().(*net.TCPAddr).AddrPort(); slices.Contains(got, local) {
		t.Errorf("Listening = %v includes the client end %v", got, local)
	}
}

// TestStartFindsPort: a server told to listen on port 0 is found where the
// kernel put it, and Addr accepts.
func TestStartFindsPort(t *testing.T) {
	t.Setenv(listenEnv, "127.0.0.1:0")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := Start(ctx, Config{Name: "child", Path: os.Args[0], Args: []string{"-test.run=^$"}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	if srv.Port == 0 || !strings.HasPrefix(srv.Addr, "127.0.0.1:") {
		t.Fatalf("Addr %q, Port %d", srv.Addr, srv.Port)
	}
	got, err := Listening(srv.PID())
	if err != nil {
		t.Fatal(err)
	}
	if want := []netip.AddrPort{netip.MustParseAddrPort(srv.Addr)}; !slices.Equal(got, want) {
		t.Errorf("Listening(child) = %v, want %v", got, want)
	}
}

// TestRestart: the server is killed and another started in its place,
// listening, whose Usage counts the first one's CPU time.
func TestRestart(t *testing.T) {
	t.Setenv(listenEnv, "127.0.0.1:0")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := Config{Name: "child", Path: os.Args[0], Args: []string{"-test.run=^$"}}
	first, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Stop()
	before, err := first.Usage()
	if err != nil {
		t.Fatal(err)
	}
	next, took, err := first.Restart(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Stop()
	if first.Alive() == nil || next.Alive() != nil || next.PID() == first.PID() || took <= 0 {
		t.Fatalf("after the restart: first alive %v, next alive %v, pids %d %d, took %v",
			first.Alive(), next.Alive(), first.PID(), next.PID(), took)
	}
	if c, err := net.DialTimeout("tcp", next.Addr, time.Second); err != nil {
		t.Fatal(err)
	} else {
		c.Close()
	}
	own, err := ReadUsage(next.PID())
	if err != nil {
		t.Fatal(err)
	}
	after, err := next.Usage()
	if err != nil || after.CPU < own.CPU+before.CPU || after.PeakRSS < before.PeakRSS {
		t.Errorf("usage %+v before the restart, %+v after, of which the new server's own %+v (%v)", before, after, own, err)
	}
}

// TestStartTellsListenersApart: of two listeners, Addr is the one that
// answers getpid, whichever was opened first, and the other is in Others.
func TestStartTellsListenersApart(t *testing.T) {
	t.Setenv(twoListenersEnv, "1")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := Start(ctx, Config{Name: "child", Path: os.Args[0], Args: []string{"-test.run=^$"}, Listeners: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	if !answersGetpid(srv.Addr, srv.PID()) || len(srv.Others) != 1 || srv.Others[0] == srv.Addr {
		t.Fatalf("Addr %q, Others %q", srv.Addr, srv.Others)
	}
	if answersGetpid(srv.Others[0], srv.PID()) {
		t.Errorf("the other listener %s answers getpid", srv.Others[0])
	}
	if got := srv.Addr; got != "127.0.0.1:"+strconv.Itoa(srv.Port) {
		t.Errorf("Addr %q, Port %d", got, srv.Port)
	}
}

// TestStartWantsEveryListener: a server that opens fewer listeners than
// the config says fails to start, in time.
func TestStartWantsEveryListener(t *testing.T) {
	t.Setenv(listenEnv, "127.0.0.1:0")
	ctx, cancel := context.WithTimeout(context.Background(), time.Second) // Start waits until ctx ends
	defer cancel()
	srv, err := Start(ctx, Config{Name: "child", Path: os.Args[0], Args: []string{"-test.run=^$"}, Listeners: 2})
	if err == nil {
		srv.Stop()
		t.Fatal("started with one listener of two")
	}
	if !strings.Contains(err.Error(), "want 2 addresses") {
		t.Errorf("error %v", err)
	}
}

// TestWaitListeningExited: a process that exits without listening ends the
// wait at once, with ErrExited.
func TestWaitListeningExited(t *testing.T) {
	exited := make(chan struct{})
	close(exited)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := WaitListening(ctx, os.Getpid(), exited); !errors.Is(err, ErrExited) {
		t.Errorf("got %v, want ErrExited", err)
	}
}
