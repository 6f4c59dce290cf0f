package netns

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// waitLimit bounds a wait for what must happen (a connection between two
// members, a datagram that must arrive); lost is how long a test listens
// for what must not (a datagram across a cut): a slow machine can only
// make that pass for the wrong reason less often, never fail it.
const (
	waitLimit = 10 * time.Second
	lost      = 300 * time.Millisecond
)

// newNet makes a Net of the named members, removed when the test ends;
// without root or the tools, the test is skipped.
func newNet(t *testing.T, names ...string) (*Net, []*NS) {
	t.Helper()
	if err := Available(); err != nil {
		t.Skip(err) // needs root, ip and iptables
	}
	n, err := New("syr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Error(err)
		}
	})
	var out []*NS
	for _, name := range names {
		ns, err := n.Add(name)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ns)
	}
	return n, out
}

// echo listens on ns's address and answers every connection with ns's
// name.
func echo(t *testing.T, ns *NS) string {
	t.Helper()
	ln, err := ns.Listen("tcp", ns.IP+":0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			io.WriteString(c, ns.Name)
			c.Close()
		}
	}()
	return ln.Addr().String()
}

// reaches says whether a TCP connection from a to addr is answered: it
// waits up to waitLimit when want says it should be, lost otherwise. A
// connection across a cut must get no answer at all (as across a cable
// pulled), not a refusal: blackHole says whether it timed out.
func reaches(a *NS, addr string, want bool) (ok, blackHole bool, note string) {
	limit := lost
	if want {
		limit = waitLimit
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	c, err := a.Dial(ctx, "tcp", addr)
	if err != nil {
		var ne net.Error
		return false, errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout(), err.Error()
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(limit))
	b, err := io.ReadAll(c)
	return err == nil && len(b) > 0, false, string(b)
}

// matrix checks which member reaches which: want(i, j) for members[i]
// dialling members[j].
func matrix(t *testing.T, members []*NS, addrs []string, want func(i, j int) bool) {
	t.Helper()
	for i, a := range members {
		for j := range members {
			if i == j {
				continue
			}
			w := want(i, j)
			got, hole, note := reaches(a, addrs[j], w)
			if got != w {
				t.Errorf("%s -> %s: reached %v, want %v (%s)", a.Name, members[j].Name, got, w, note)
			}
			if !w && !hole {
				t.Errorf("%s -> %s: the cut answered: %s", a.Name, members[j].Name, note)
			}
		}
	}
}

// Members reach each other on the bridge; a partition into groups leaves
// each group to itself and a member in no group reaching all; Heal undoes
// it.
func TestPartitionAndHeal(t *testing.T) {
	n, m := newNet(t, "n1", "n2", "n3", "c")
	var addrs []string
	for _, ns := range m {
		addrs = append(addrs, echo(t, ns))
	}
	all := func(i, j int) bool { return true }
	matrix(t, m, addrs, all)
	// n1 alone, n2 and n3 together; c in no group.
	if err := n.Partition([]*NS{m[0]}, []*NS{m[1], m[2]}); err != nil {
		t.Fatal(err)
	}
	matrix(t, m, addrs, func(i, j int) bool { return !(i == 0 && (j == 1 || j == 2) || j == 0 && (i == 1 || i == 2)) })
	if err := n.Heal(); err != nil {
		t.Fatal(err)
	}
	matrix(t, m, addrs, all)
}

// datagrams sends k datagrams from a to b's pc, then (the cuts healed) a
// last one, and counts those that arrived before it. It reads as they
// come: a socket's buffer holds a few hundred.
func datagrams(t *testing.T, n *Net, a *NS, pc net.PacketConn, k int) int {
	t.Helper()
	// Room for every datagram, however late the reader (SO_RCVBUFFORCE:
	// past the system's cap, as root): a datagram the socket drops would
	// count as one the cut dropped.
	raw, err := pc.(*net.UDPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 16<<20)
	}); err != nil || serr != nil {
		t.Fatal(err, serr)
	}
	count := make(chan int, 1)
	go func() {
		got := 0
		buf := make([]byte, 64)
		pc.SetReadDeadline(time.Now().Add(waitLimit))
		for {
			k, _, err := pc.ReadFrom(buf)
			if err != nil {
				count <- -1
				return
			}
			if string(buf[:k]) == "end" {
				count <- got
				return
			}
			got++
		}
	}()
	conn, err := a.Dial(context.Background(), "udp", pc.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for i := range k {
		fmt.Fprintf(conn, "%d", i)
	}
	if err := n.Heal(); err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(conn, "end")
	got := <-count
	if got < 0 {
		t.Fatal("the last datagram did not come")
	}
	return got
}

// A one-way cut drops what a sends to b, and lets what b sends to a pass.
func TestOneWay(t *testing.T) {
	n, m := newNet(t, "a", "b")
	a, b := m[0], m[1]
	pcs := map[*NS]net.PacketConn{}
	for _, ns := range m {
		pc, err := ns.ListenPacket("udp", ns.IP+":0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pc.Close() })
		pcs[ns] = pc
	}
	if err := n.OneWay(a, b); err != nil {
		t.Fatal(err)
	}
	if got := datagrams(t, n, a, pcs[b], 20); got != 0 {
		t.Errorf("%d of 20 datagrams from a reached b across the cut", got)
	}
	if err := n.OneWay(a, b); err != nil {
		t.Fatal(err)
	}
	if got := datagrams(t, n, b, pcs[a], 20); got != 20 {
		t.Errorf("%d of 20 datagrams from b reached a", got)
	}
}

// Loss drops about its share of packets: of 1,000 datagrams at p = 0.3,
// between 200 and 400 are lost (the binomial's odds of falling outside
// are below one in a million).
func TestLoss(t *testing.T) {
	n, m := newNet(t, "a", "b")
	pc, err := m[1].ListenPacket("udp", m[1].IP+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	if err := n.Loss(m[0], m[1], 0.3); err != nil {
		t.Fatal(err)
	}
	got := datagrams(t, n, m[0], pc, 1000)
	if lostN := 1000 - got; lostN < 200 || lostN > 400 {
		t.Errorf("%d of 1000 lost at p = 0.3", lostN)
	}
	if err := n.Loss(m[0], m[1], 1.5); err == nil {
		t.Error("a loss of 1.5 taken")
	}
}

// A command runs inside a member: it sees the member's address, and
// reaches the others.
func TestCommand(t *testing.T) {
	_, m := newNet(t, "a", "b")
	out, err := m[0].Command("ip", "-o", "-4", "addr", "show").CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !strings.Contains(string(out), " "+m[0].IP+"/24 ") || strings.Contains(string(out), " "+m[1].IP+"/") {
		t.Errorf("addresses inside a: %s", out)
	}
}

// Close removes every namespace; a second Close does nothing.
func TestClose(t *testing.T) {
	n, m := newNet(t, "a")
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{m[0].Namespace, n.hub} {
		if _, err := os.Stat("/run/netns/" + name); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after Close: %v", name, err)
		}
	}
	if err := n.Close(); err != nil {
		t.Error(err)
	}
	if _, err := n.Add("b"); err == nil {
		t.Error("Add after Close")
	}
}
