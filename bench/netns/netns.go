// Package netns builds a small network of Linux network namespaces for
// the cluster's fault tests and benchmarks: a bridge in a namespace of its
// own (the hub), and for each member a namespace joined to it by a veth
// pair, with an address of its own on the bridge's subnet. Processes run
// inside a member (Command), and so do sockets this process opens there
// (Do, Dial, Listen). Between members, iptables in the members' own
// namespaces cut the traffic: a partition into groups, a one-way cut,
// random loss; Heal removes every cut.
//
// Nothing is made outside the namespaces it creates: no address, route or
// rule in the namespace this process runs in. Every name (namespaces, the
// bridge, veths) starts with the prefix New is given and this process's
// id, and Close removes them all; New also removes those a process with
// the same prefix left behind when it died.
//
// It needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN), ip(8), iptables(8) and
// iptables-restore(8).
package netns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// Net is a bridge in its hub namespace, and the members joined to it.
type Net struct {
	base    string // prefix, pid and a sequence letter: every name's start
	hub     string // the hub's namespace
	subnet  [3]byte
	mu      sync.Mutex
	members []*NS
	closed  bool
}

// NS is a member of a Net: a namespace with an address on the bridge.
type NS struct {
	// Name is the member's name as given to Add; Namespace the network
	// namespace's (ip netns) name.
	Name, Namespace string
	// IP is its address on the bridge.
	IP  string
	net *Net
}

// Subnet is the bridge's: members get .1, .2, ... in order. It exists only
// inside the namespaces a Net creates.
const Subnet = "10.77.0.0/24"

// cutChain is the iptables chain of a member's cuts, jumped to from INPUT:
// Heal flushes it. A cut drops packets where they arrive, so that the
// sender sees what a cable pulled or a host frozen gives it, no answer
// (dropped as they leave, a connect(2) would fail at once with EPERM).
const cutChain = "NETNS-CUTS"

// maxIfName is the kernel's limit on an interface's name (IFNAMSIZ - 1).
const maxIfName = 15

var seq atomic.Int32

// Available says why New cannot work here, or nil: not root, or ip or
// iptables missing.
func Available() error {
	if os.Geteuid() != 0 {
		return errors.New("netns: needs root")
	}
	for _, tool := range []string{"ip", "iptables", "iptables-restore"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("netns: %w", err)
		}
	}
	return nil
}

// New makes the hub namespace and its bridge. Its names start with
// prefix and this process's id; prefix must be a few letters.
func New(prefix string) (*Net, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	if prefix == "" || strings.ContainsAny(prefix, "-/ 0123456789") {
		return nil, fmt.Errorf("netns: prefix %q: want a few letters", prefix)
	}
	RemoveStale(prefix)
	n := &Net{base: fmt.Sprintf("%s%d%c", prefix, os.Getpid(), 'a'+rune(seq.Add(1)%26)), subnet: [3]byte{10, 77, 0}}
	if len(n.base)+3 > maxIfName {
		return nil, fmt.Errorf("netns: prefix %q is too long for interface names", prefix)
	}
	n.hub = n.base + "-hub"
	if err := run("ip", "netns", "add", n.hub); err != nil {
		return nil, err
	}
	br := n.base + "br"
	for _, args := range [][]string{
		{"-n", n.hub, "link", "add", br, "type", "bridge"},
		{"-n", n.hub, "link", "set", br, "up"},
		{"-n", n.hub, "link", "set", "lo", "up"},
	} {
		if err := run("ip", args...); err != nil {
			n.Close()
			return nil, err
		}
	}
	return n, nil
}

// Add makes a member: its namespace, a veth pair from it to the bridge,
// its address, and its (empty) chain of cuts.
func (n *Net) Add(name string) (*NS, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, errors.New("netns: closed")
	}
	i := len(n.members) + 1
	if i > 250 {
		return nil, errors.New("netns: too many members")
	}
	ns := &NS{Name: name, Namespace: n.base + "-" + name, net: n,
		IP: net.IPv4(n.subnet[0], n.subnet[1], n.subnet[2], byte(i)).String()}
	if err := run("ip", "netns", "add", ns.Namespace); err != nil {
		return nil, err
	}
	n.members = append(n.members, ns)
	in, out := fmt.Sprintf("%s%d", n.base, i), fmt.Sprintf("%s%dh", n.base, i)
	for _, args := range [][]string{
		{"link", "add", in, "netns", ns.Namespace, "type", "veth", "peer", "name", out, "netns", n.hub},
		{"-n", n.hub, "link", "set", out, "master", n.base + "br", "up"},
		{"-n", ns.Namespace, "addr", "add", ns.IP + "/24", "dev", in},
		{"-n", ns.Namespace, "link", "set", in, "up"},
		{"-n", ns.Namespace, "link", "set", "lo", "up"},
	} {
		if err := run("ip", args...); err != nil {
			return nil, err
		}
	}
	for _, args := range [][]string{
		{"-N", cutChain},
		{"-A", "INPUT", "-j", cutChain},
	} {
		if err := ns.iptables(args...); err != nil {
			return nil, err
		}
	}
	return ns, nil
}

// Members are the members, in the order added.
func (n *Net) Members() []*NS {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]*NS(nil), n.members...)
}

// Partition cuts every member of each group off from every member of the
// others, both ways. A member in no group keeps reaching every one (the
// clients of a cluster cut in two). The cuts add to those in place. Each
// member's rules go in at once, the first group's first: a group of one
// hears from none of the others from one step on.
func (n *Net) Partition(groups ...[]*NS) error {
	for i, g := range groups {
		for _, a := range g {
			var others []*NS
			for j, h := range groups {
				if j != i {
					others = append(others, h...)
				}
			}
			if err := a.drop(others, 0); err != nil {
				return err
			}
		}
	}
	return nil
}

// OneWay drops what a sends to b; what b sends to a passes. (A TCP
// connection needs both ways: neither side can open one.)
func (n *Net) OneWay(a, b *NS) error { return b.drop([]*NS{a}, 0) }

// Loss drops each packet between a and b, either way, with probability
// p (0 < p < 1).
func (n *Net) Loss(a, b *NS, p float64) error {
	if p <= 0 || p >= 1 {
		return fmt.Errorf("netns: loss probability %v: want 0 < p < 1", p)
	}
	return errors.Join(b.drop([]*NS{a}, p), a.drop([]*NS{b}, p))
}

// Heal removes every cut.
func (n *Net) Heal() error {
	var errs []error
	for _, ns := range n.Members() {
		errs = append(errs, ns.iptables("-F", cutChain))
	}
	return errors.Join(errs...)
}

// Close removes the members' namespaces and the hub's (their veths and
// the bridge go with them). Processes still running in one keep it alive,
// unnamed, until they end: stop them first.
func (n *Net) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil
	}
	n.closed = true
	var errs []error
	for _, ns := range n.members {
		errs = append(errs, run("ip", "netns", "del", ns.Namespace))
	}
	errs = append(errs, run("ip", "netns", "del", n.hub))
	return errors.Join(errs...)
}

// drop adds rules to ns's chain, in one step (iptables-restore), dropping
// what arrives from each of from (with probability p, if p > 0).
func (ns *NS) drop(from []*NS, p float64) error {
	if len(from) == 0 {
		return nil
	}
	var rules strings.Builder
	rules.WriteString("*filter\n")
	for _, f := range from {
		fmt.Fprintf(&rules, "-A %s -s %s", cutChain, f.IP)
		if p > 0 {
			fmt.Fprintf(&rules, " -m statistic --mode random --probability %s", strconv.FormatFloat(p, 'f', -1, 64))
		}
		rules.WriteString(" -j DROP\n")
	}
	rules.WriteString("COMMIT\n")
	cmd := exec.Command("ip", "netns", "exec", ns.Namespace, "iptables-restore", "-w", "--noflush")
	cmd.Stdin = strings.NewReader(rules.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("netns: iptables-restore in %s: %w: %s", ns.Namespace, err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (ns *NS) iptables(args ...string) error {
	return run("ip", append([]string{"netns", "exec", ns.Namespace, "iptables", "-w"}, args...)...)
}

// Command is a command that runs inside the member (ip netns exec, which
// execs it: its pid is the command's).
func (ns *NS) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", ns.Namespace, name}, args...)...)
}

// Do runs fn on an OS thread moved into the member's namespace: a socket
// fn opens is the member's, and stays so wherever it is used later. fn
// must not start goroutines that open sockets.
func (ns *NS) Do(fn func() error) error {
	runtime.LockOSThread()
	self, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer unix.Close(self)
	target, err := unix.Open("/run/netns/"+ns.Namespace, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer unix.Close(target)
	if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("netns: enter %s: %w", ns.Namespace, err)
	}
	ferr := fn()
	if err := unix.Setns(self, unix.CLONE_NEWNET); err != nil {
		// The thread stays locked: the runtime ends it with the
		// goroutine rather than run others in the wrong namespace.
		return errors.Join(ferr, fmt.Errorf("netns: leave %s: %w", ns.Namespace, err))
	}
	runtime.UnlockOSThread()
	return ferr
}

// Dial opens a connection from inside the member.
func (ns *NS) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := ns.Do(func() error {
		var err error
		c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// Listen listens inside the member.
func (ns *NS) Listen(network, addr string) (net.Listener, error) {
	var ln net.Listener
	err := ns.Do(func() error {
		var err error
		ln, err = net.Listen(network, addr)
		return err
	})
	return ln, err
}

// ListenPacket opens a packet socket inside the member.
func (ns *NS) ListenPacket(network, addr string) (net.PacketConn, error) {
	var pc net.PacketConn
	err := ns.Do(func() error {
		var err error
		pc, err = net.ListenPacket(network, addr)
		return err
	})
	return pc, err
}

// RemoveStale removes the namespaces named with prefix by processes that
// are gone (a test killed by its timeout runs no cleanup).
func RemoveStale(prefix string) {
	entries, err := os.ReadDir("/run/netns")
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok {
			continue
		}
		end := 0
		for end < len(rest) && rest[end] >= '0' && rest[end] <= '9' {
			end++
		}
		pid, err := strconv.Atoi(rest[:end])
		if err != nil || pid == os.Getpid() || syscall.Kill(pid, 0) == nil || errors.Is(syscall.Kill(pid, 0), syscall.EPERM) {
			continue
		}
		_ = run("ip", "netns", "del", e.Name())
	}
}

// run runs a command, its output in the error if it fails.
func run(name string, args ...string) error {
	var out bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("netns: %s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}
