package harness

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"switchyard/bench/cgroup"
	"switchyard/bench/netns"
	"switchyard/engine/tlstest"
)

// ClusterConfig says how to start a switchyard cluster on this machine.
type ClusterConfig struct {
	Path  string // the binary
	Nodes int    // how many; 0 means 3
	// Args are every node's arguments beyond the cluster's own, which
	// StartCluster adds (--node-id, --cluster-listen 127.0.0.1:0,
	// --cluster-peers for the first, --data-dir, -l stderr, and those of
	// Ops and TLS): the listeners, each on port 0 or off ("-L 127.0.0.1
	// -p 0 --periodic-listen off ..."), as for a single server.
	Args []string
	// Ops turns each node's operator API on (--metrics-listen
	// 127.0.0.1:0, whatever Args say, and --ops-token-file), which
	// Restart needs: a restarted node listens on another Raft port, which
	// only a membership change tells the leader, and only the API with
	// the token may change the membership.
	Ops bool
	// TLS gives the nodes certificates of a CA made for the cluster, in
	// Dir: mutual TLS between them (--cluster-tls-*).
	TLS bool
	// Dir holds the nodes' data directories, one each.
	Dir string
	// Log, when set, also receives every node's output.
	Log io.Writer
	// Timeout bounds each wait: a node's start, an election, a member
	// added; 0 means 30 s.
	Timeout time.Duration
	// Net, when set, runs each node in a network namespace of its own on
	// Net's bridge, with 127.0.0.1 in its arguments (and in the cluster's
	// own, --cluster-listen) replaced by its address there, and the
	// cluster's clients (Dial) in one more: Cut and Heal then cut a node
	// off from the others while clients still reach it.
	Net *netns.Net
	// Budget, when set, runs each node in a CPU cgroup of its own, the
	// same one across its restarts.
	Budget *CPUBudget
	// RaftPort, with Net, is the port every node's Raft listens on at its
	// own address, as on hosts of their own: a node restarted comes back
	// where the others know it, so a cluster whose every node was down
	// starts again by itself (Start). The namespace is the node's alone,
	// so nothing else can hold the port. 0: a port the kernel picks, a
	// new one at each restart, which the leader is told (Restart).
	RaftPort int
}

// Cluster is a switchyard cluster of processes on loopback, started
// without picking a port: every node but the first starts with no peers
// on a Raft port the kernel picks, and the first bootstraps a cluster of
// them all (--cluster-peers with their addresses); the others, with no
// configuration of their own, follow the first leader that reaches them.
// (A membership change needs the operator API's token or a client
// certificate, so the cluster is not grown by "cluster add".) Each node
// says where it listens in its log lines ("cluster node" with its Raft
// address; "listening" with every protocol's and its role), which is how
// the cluster finds its nodes and its leader.
type Cluster struct {
	cfg   ClusterConfig
	Nodes []*ClusterNode
	token string // the ops token, with Ops
	certs string // the directory of the nodes' certificates, with TLS
	// clients is the namespace the clients dial from (Net set).
	clients *netns.NS

	mu    sync.Mutex
	prior time.Duration // CPU of the node processes killed or stopped
}

// ClusterNode is one node: its name, its data directory and its current
// process (a new one after Restart).
type ClusterNode struct {
	ID  string
	Dir string

	ns    *netns.NS     // with ClusterConfig.Net
	group *cgroup.Group // with ClusterConfig.Budget
	cur   atomic.Pointer[nodeProc]
}

// Host is the address the node listens on: 127.0.0.1, or its namespace's.
func (n *ClusterNode) Host() string {
	if n.ns != nil {
		return n.ns.IP
	}
	return "127.0.0.1"
}

// nodeProc is one process of a node.
type nodeProc struct {
	cmd     *exec.Cmd
	exited  chan struct{} // closed once it has exited; waitErr is set then
	waitErr error
	log     *noticeLog
	killed  atomic.Bool // by Kill: its exit is no failure
	paused  atomic.Bool // by Pause, until Resume
	started time.Time
}

// pollInterval is how often the cluster looks at a node's state while it
// waits for one: polling processes, not synchronising goroutines.
const pollInterval = 10 * time.Millisecond

// StartCluster starts cfg.Nodes nodes and returns once each serves: the
// leader on its own ports, the others relaying to it.
func StartCluster(ctx context.Context, cfg ClusterConfig) (*Cluster, error) {
	if cfg.Nodes == 0 {
		cfg.Nodes = 3
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 30 * time.Second
	}
	c := &Cluster{cfg: cfg}
	if err := c.prepare(); err != nil {
		return nil, err
	}
	if cfg.Net != nil {
		var err error
		if c.clients, err = cfg.Net.Add("clients"); err != nil {
			return nil, err
		}
	}
	for i := range cfg.Nodes {
		n := &ClusterNode{ID: fmt.Sprintf("n%d", i+1), Dir: filepath.Join(cfg.Dir, fmt.Sprintf("n%d", i+1))}
		if cfg.Net != nil {
			ns, err := cfg.Net.Add(n.ID)
			if err != nil {
				c.Stop()
				return nil, err
			}
			n.ns = ns
		}
		c.Nodes = append(c.Nodes, n)
	}
	// The others first, for their Raft addresses; then the first, which
	// bootstraps the cluster of them all.
	peers := []string{c.Nodes[0].ID + "@" + c.raftListen()}
	for _, n := range c.Nodes[1:] {
		if err := c.start(n, nil); err != nil {
			c.Stop()
			return nil, err
		}
		raft, err := c.raftAddr(ctx, n)
		if err != nil {
			c.Stop()
			return nil, err
		}
		peers = append(peers, n.ID+"@"+raft)
	}
	if err := c.start(c.Nodes[0], peers); err != nil {
		c.Stop()
		return nil, err
	}
	for _, n := range c.Nodes {
		if err := c.WaitServing(ctx, n); err != nil {
			c.Stop()
			return nil, err
		}
	}
	return c, nil
}

// prepare writes what every node's arguments name: the ops token, the
// cluster's CA and each node's certificate.
func (c *Cluster) prepare() error {
	if err := os.MkdirAll(c.cfg.Dir, 0o755); err != nil {
		return err
	}
	if c.cfg.Ops {
		c.token = "bench-ops-token"
		if err := os.WriteFile(filepath.Join(c.cfg.Dir, "ops-token"), []byte(c.token+"\n"), 0o600); err != nil {
			return err
		}
	}
	if c.cfg.TLS {
		c.certs = filepath.Join(c.cfg.Dir, "certs")
		if err := os.MkdirAll(c.certs, 0o700); err != nil {
			return err
		}
		ca := tlstest.CA("switchyard bench cluster CA")
		if err := os.WriteFile(filepath.Join(c.certs, "ca.pem"), ca.CertPEM, 0o644); err != nil {
			return err
		}
		for i := range c.cfg.Nodes {
			id := fmt.Sprintf("n%d", i+1)
			if _, _, err := ca.Node(id).WriteFiles(c.certs, id); err != nil {
				return err
			}
		}
	}
	return nil
}

// args are n's arguments: the cluster's, then Args, with Ops's
// --metrics-listen in place of theirs. In a namespace (Net) the nodes
// listen off loopback: without TLS they are told --cluster-insecure.
func (c *Cluster) args(n *ClusterNode, peers []string) []string {
	args := []string{"--node-id", n.ID, "--cluster-listen", c.raftListen(), "--data-dir", n.Dir, "-l", "stderr"}
	if len(peers) > 0 {
		// Its own entry, port 0, stands for the port it gets.
		args = append(args, "--cluster-peers", strings.Join(peers, ","))
	}
	if c.cfg.TLS {
		args = append(args, "--cluster-tls-cert", filepath.Join(c.certs, n.ID+".pem"), "--cluster-tls-key", filepath.Join(c.certs, n.ID+".key"),
			"--cluster-tls-ca", filepath.Join(c.certs, "ca.pem"))
	} else if c.cfg.Net != nil {
		// Off loopback, in a namespace: plain TCP between the nodes only
		// when said so.
		args = append(args, "--cluster-insecure")
	}
	rest := slices.Clone(c.cfg.Args)
	if c.cfg.Ops {
		args = append(args, "--ops-token-file", filepath.Join(c.cfg.Dir, "ops-token"))
		if i := slices.Index(rest, "--metrics-listen"); i >= 0 && i+1 < len(rest) {
			rest = slices.Delete(rest, i, i+2)
		}
		args = append(args, "--metrics-listen", "127.0.0.1:0")
	}
	return append(args, rest...)
}

// start starts n's process; with peers, it bootstraps a cluster of them.
func (c *Cluster) start(n *ClusterNode, peers []string) error {
	if err := os.MkdirAll(n.Dir, 0o755); err != nil {
		return err
	}
	args := c.args(n, peers)
	cmd := exec.Command(c.cfg.Path, args...)
	if n.ns != nil {
		for i, a := range args {
			args[i] = strings.ReplaceAll(a, "127.0.0.1", n.ns.IP)
		}
		cmd = n.ns.Command(c.cfg.Path, args...)
	}
	p := &nodeProc{cmd: cmd, exited: make(chan struct{}), log: &noticeLog{tail: tail{max: 16 << 10}}, started: time.Now()}
	var out io.Writer = p.log
	if c.cfg.Log != nil {
		out = io.MultiWriter(p.log, newPrefixWriter(c.cfg.Log, n.ID+" "))
	}
	p.cmd.Stdout, p.cmd.Stderr = out, out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if n.group == nil {
		g, err := c.cfg.Budget.group(n.ID)
		if err != nil {
			return err
		}
		n.group = g
	}
	if err := startIn(n.group, p.cmd); err != nil {
		return err
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()
	n.cur.Store(p)
	return nil
}

// raftAddr waits for the Raft address n's current process says it
// listens on.
func (c *Cluster) raftAddr(ctx context.Context, n *ClusterNode) (string, error) {
	var raft string
	err := c.poll(ctx, n.ID+"'s raft address", func() (bool, string) {
		if err := n.Alive(); err != nil {
			return false, err.Error()
		}
		f, _ := n.cur.Load().log.latest("cluster node")
		raft, _ = f["raft"].(string)
		return raft != "", n.Output()
	})
	return raft, err
}

// join waits for n's Raft address and has the leader move it there,
// through the operator API (a node restarted on another port).
func (c *Cluster) join(ctx context.Context, n *ClusterNode) error {
	raft, err := c.raftAddr(ctx, n)
	if err != nil {
		return err
	}
	return c.members(ctx, "POST", "/api/cluster/members", url.Values{"id": {n.ID}, "addr": {raft}})
}

// members sends a membership change to the leader's operator API, with
// the ops token.
func (c *Cluster) members(ctx context.Context, method, path string, form url.Values) error {
	if !c.cfg.Ops {
		return errors.New("cluster: a membership change needs the operator API (ClusterConfig.Ops)")
	}
	l, err := c.Leader(ctx)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+l.Addr("metrics")+path, strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Switchyard-Token", c.token)
	resp, err := (&http.Client{Timeout: adminTimeout, Transport: &http.Transport{DialContext: c.Dial}}).Do(req)
	if err != nil {
		return fmt.Errorf("%s %s %v on %s: %w", method, path, form, l.ID, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s %s %v on %s: %s %s", method, path, form, l.ID, resp.Status, strings.TrimSpace(string(b)))
	}
	return nil
}

// poll calls cond until it holds, ctx ends or the cluster's timeout
// passes; the error then has what was waited for and cond's last note.
func (c *Cluster) poll(ctx context.Context, what string, cond func() (bool, string)) error {
	if note, err := Poll(ctx, c.cfg.Timeout, pollInterval, cond); err != nil {
		return fmt.Errorf("cluster: waiting for %s: %w\n%s", what, err, strings.TrimSpace(note))
	}
	return nil
}

// Leader waits until a live node leads and serves on its own Gearman port,
// and returns it. A leader's latest "listening" line says role "leader",
// and its Gearman port answers "getpid" with its own pid: a follower's
// relays answer with the leader's.
func (c *Cluster) Leader(ctx context.Context) (*ClusterNode, error) {
	var leader *ClusterNode
	err := c.poll(ctx, "a leader", func() (bool, string) {
		var b strings.Builder
		for _, n := range c.Nodes {
			if n.Alive() != nil {
				continue
			}
			role := n.Role()
			fmt.Fprintf(&b, "%s: role %q\n", n.ID, role)
			if role != "leader" {
				continue
			}
			if pid, err := GetpidVia(c.Dial, n.Addr("gearman"), time.Second); err == nil && pid == n.PID() {
				leader = n
				return true, ""
			}
		}
		return false, b.String()
	})
	return leader, err
}

// Followers are the live nodes other than leader.
func (c *Cluster) Followers(leader *ClusterNode) []*ClusterNode {
	var out []*ClusterNode
	for _, n := range c.Nodes {
		if n != leader && n.Alive() == nil {
			out = append(out, n)
		}
	}
	return out
}

// WaitServing waits until n's Gearman port, its own or its relay,
// answers "getpid" with the leader's pid.
func (c *Cluster) WaitServing(ctx context.Context, n *ClusterNode) error {
	return c.poll(ctx, n.ID+" serving", func() (bool, string) {
		if err := n.Alive(); err != nil {
			return false, err.Error()
		}
		pid, err := GetpidVia(c.Dial, n.Addr("gearman"), time.Second)
		if err != nil {
			return false, fmt.Sprintf("getpid through %s: %v", n.ID, err)
		}
		// The leader is looked for at each look, not once: a leader just
		// thawed from a pause still says it leads, and answers, until it
		// learns of the new one; waiting for it then waits for ever.
		var b strings.Builder
		for _, m := range c.Nodes {
			if m.Alive() != nil {
				continue
			}
			role := m.Role()
			if m.PID() == pid && role == "leader" {
				return true, ""
			}
			fmt.Fprintf(&b, "; %s (%d): %q", m.ID, m.PID(), role)
		}
		return false, fmt.Sprintf("getpid through %s: %d, no leader's%s", n.ID, pid, b.String())
	})
}

// WaitCaughtUp waits until the leader reports n's replication lag as 0.
func (c *Cluster) WaitCaughtUp(ctx context.Context, n *ClusterNode) error {
	l, err := c.Leader(ctx)
	if err != nil {
		return err
	}
	return c.poll(ctx, n.ID+" caught up", func() (bool, string) {
		text, err := AdminCommandVia(c.Dial, l.Addr("gearman"), "cluster")
		if err != nil {
			return false, err.Error()
		}
		members, err := ParseMembers(text)
		if err != nil {
			return false, err.Error()
		}
		i := slices.IndexFunc(members, func(m Member) bool { return m.ID == n.ID })
		return i >= 0 && members[i].Lag == 0, text
	})
}

// Dial opens a connection as the cluster's clients do: from their
// namespace, with ClusterConfig.Net.
func (c *Cluster) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if c.clients != nil {
		return c.clients.Dial(ctx, network, addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// Cut cuts n off from the other nodes, both ways; the clients still reach
// it. It needs ClusterConfig.Net.
func (c *Cluster) Cut(n *ClusterNode) error {
	if c.cfg.Net == nil || n.ns == nil {
		return errors.New("cluster: no network namespaces to cut")
	}
	var others []*netns.NS
	for _, o := range c.Nodes {
		if o != n {
			others = append(others, o.ns)
		}
	}
	return c.cfg.Net.Partition([]*netns.NS{n.ns}, others)
}

// Heal removes every cut.
func (c *Cluster) Heal() error {
	if c.cfg.Net == nil {
		return errors.New("cluster: no network namespaces to heal")
	}
	return c.cfg.Net.Heal()
}

// Kill kills n with SIGKILL, as a crash would, and returns once it has
// exited. Its CPU time stays in the cluster's Usage.
func (c *Cluster) Kill(n *ClusterNode) error {
	if err := n.Alive(); err != nil {
		return err
	}
	c.keepCPU(n)
	p := n.cur.Load()
	p.killed.Store(true)
	if err := p.cmd.Process.Kill(); err != nil {
		return err
	}
	<-p.exited
	return nil
}

// Restart starts a node that is down again on its data directory, as a
// follower. On a Raft port of the kernel's choosing it has another one
// now, which the leader is told through the operator API (as an operator
// moves a node; it needs Ops); on RaftPort it is where it was. It returns
// once the node serves.
func (c *Cluster) Restart(ctx context.Context, n *ClusterNode) error {
	if c.fixedRaft() {
		return c.Start(ctx, n)
	}
	if n.Alive() == nil {
		return fmt.Errorf("cluster: %s is running", n.ID)
	}
	if err := c.start(n, nil); err != nil {
		return err
	}
	if err := c.join(ctx, n); err != nil {
		return err
	}
	return c.WaitServing(ctx, n)
}

// Start starts nodes that are down on their data directories, all at
// once (Launch), and returns once each serves.
func (c *Cluster) Start(ctx context.Context, nodes ...*ClusterNode) error {
	if err := c.Launch(nodes...); err != nil {
		return err
	}
	for _, n := range nodes {
		if err := c.WaitServing(ctx, n); err != nil {
			return err
		}
	}
	return nil
}

// Launch starts the processes of nodes that are down, on their data
// directories, and returns at once: with RaftPort only, where the nodes
// find each other at the addresses they knew (after a kill of every node,
// none leads to tell of a new one; a node cut off cannot be told).
func (c *Cluster) Launch(nodes ...*ClusterNode) error {
	if !c.fixedRaft() {
		return errors.New("cluster: Launch needs RaftPort")
	}
	for _, n := range nodes {
		if n.Alive() == nil {
			return fmt.Errorf("cluster: %s is running", n.ID)
		}
	}
	for _, n := range nodes {
		if err := c.start(n, nil); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) fixedRaft() bool { return c.cfg.Net != nil && c.cfg.RaftPort > 0 }

// raftListen is a node's --cluster-listen (127.0.0.1 becomes a
// namespace's address in start): RaftPort, or one the kernel picks.
func (c *Cluster) raftListen() string {
	if c.fixedRaft() {
		return fmt.Sprintf("127.0.0.1:%d", c.cfg.RaftPort)
	}
	return "127.0.0.1:0"
}

// Started is when the node's current process was started.
func (n *ClusterNode) Started() time.Time { return n.cur.Load().started }

// Pause stops n with SIGSTOP, as a host frozen (a VM suspended, a long
// GC pause, a stalled disk): its sockets stay open, nothing answers.
func (c *Cluster) Pause(n *ClusterNode) error {
	if err := n.Alive(); err != nil {
		return err
	}
	p := n.cur.Load()
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	p.paused.Store(true)
	return nil
}

// Resume continues a node Pause stopped (SIGCONT); a node not paused is
// left alone.
func (c *Cluster) Resume(n *ClusterNode) error {
	p := n.cur.Load()
	if p == nil || !p.paused.Load() {
		return nil
	}
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil && n.Alive() == nil {
		return err
	}
	p.paused.Store(false)
	return nil
}

// Paused says whether Pause stopped the node's process (and Resume has
// not continued it).
func (n *ClusterNode) Paused() bool {
	p := n.cur.Load()
	return p != nil && p.paused.Load()
}

// Wipe removes a node's data directory, as a disk replaced: the node
// must be down. Restarted, it has no log, no vote and no jobs, and the
// leader sends it the state.
func (c *Cluster) Wipe(n *ClusterNode) error {
	if n.Alive() == nil {
		return fmt.Errorf("cluster: %s is running", n.ID)
	}
	return os.RemoveAll(n.Dir)
}

// AddNode starts a node, id, with an empty data directory (in a network
// namespace of its own, with Net), has the leader add it through the
// operator API (it needs Ops) and returns once it serves. A node of that name that is down (removed)
// is started anew, its data directory emptied.
func (c *Cluster) AddNode(ctx context.Context, id string) (*ClusterNode, error) {
	var n *ClusterNode
	for _, o := range c.Nodes {
		if o.ID == id {
			if o.Alive() == nil {
				return nil, fmt.Errorf("cluster: %s is running", id)
			}
			n = o
		}
	}
	if n == nil {
		n = &ClusterNode{ID: id, Dir: filepath.Join(c.cfg.Dir, id)}
		if c.cfg.Net != nil {
			ns, err := c.cfg.Net.Add(id)
			if err != nil {
				return nil, err
			}
			n.ns = ns
		}
		c.Nodes = append(c.Nodes, n)
	}
	if err := os.RemoveAll(n.Dir); err != nil {
		return n, err
	}
	if err := c.start(n, nil); err != nil {
		return n, err
	}
	if err := c.join(ctx, n); err != nil {
		return n, err
	}
	return n, c.WaitServing(ctx, n)
}

// RemoveNode has the leader take n out of the cluster through the
// operator API (it needs Ops), then kills its process. It stays in Nodes,
// down (AddNode of its name starts it anew).
func (c *Cluster) RemoveNode(ctx context.Context, n *ClusterNode) error {
	if err := c.members(ctx, "DELETE", "/api/cluster/members/"+url.PathEscape(n.ID), nil); err != nil {
		return err
	}
	if n.Alive() == nil {
		return c.Kill(n)
	}
	return nil
}

// NS is the node's network namespace (ClusterConfig.Net), nil without.
func (n *ClusterNode) NS() *netns.NS { return n.ns }

// Clients is the clients' network namespace (ClusterConfig.Net), nil
// without.
func (c *Cluster) Clients() *netns.NS { return c.clients }

// keepCPU adds n's CPU time so far to the cluster's, before it goes.
func (c *Cluster) keepCPU(n *ClusterNode) {
	if u, err := ReadUsage(n.PID()); err == nil {
		c.mu.Lock()
		c.prior += u.CPU
		c.mu.Unlock()
	}
}

// Usage sums the live nodes' memory and CPU; CPU includes the nodes'
// processes that were killed or stopped.
func (c *Cluster) Usage() (Usage, error) {
	var sum Usage
	live := 0
	for _, n := range c.Nodes {
		if n.Alive() != nil {
			continue
		}
		u, err := ReadUsage(n.PID())
		if err != nil {
			return Usage{}, fmt.Errorf("%s: %w", n.ID, err)
		}
		live++
		sum.RSS += u.RSS
		sum.PeakRSS += u.PeakRSS
		sum.Threads += u.Threads
		sum.CPU += u.CPU
	}
	if live == 0 {
		return Usage{}, errors.New("cluster: no node is running")
	}
	c.mu.Lock()
	sum.CPU += c.prior
	c.mu.Unlock()
	return sum, nil
}

// Procs reads the CPU of every live node's process, and its group's
// counters with ClusterConfig.Budget.
func (c *Cluster) Procs() ([]ProcUsage, error) {
	var refs []procRef
	for _, n := range c.Nodes {
		if n.Alive() == nil {
			refs = append(refs, procRef{n.ID, n.PID(), n.group})
		}
	}
	return procsUsage(refs)
}

// Stop stops every node (SIGTERM, then SIGKILL after stopBound) and
// returns an error if one had died that Kill did not kill. Each node's
// group goes with it.
func (c *Cluster) Stop() error {
	var errs []error
	for _, n := range c.Nodes {
		err := n.Alive()
		if err == nil {
			c.keepCPU(n)
			_ = n.cur.Load().cmd.Process.Signal(syscall.SIGTERM)
			_ = c.Resume(n) // a stopped process acts on SIGTERM once continued
		} else if p := n.cur.Load(); p != nil && !p.killed.Load() {
			errs = append(errs, err)
		}
	}
	for _, n := range c.Nodes {
		p := n.cur.Load()
		if p == nil {
			continue
		}
		if err := waitStop(p.exited, stopBound(n.group), p.cmd.Process.Pid); err != nil {
			_ = p.cmd.Process.Kill()
			<-p.exited
			errs = append(errs, fmt.Errorf("%s %w", n.ID, err))
		}
	}
	for _, n := range c.Nodes {
		if err := removeGroup(n.group); err != nil {
			errs = append(errs, err)
		}
		n.group = nil
	}
	return errors.Join(errs...)
}

// stopBound is how long a node may take to stop: stopTimeout on a whole
// CPU, and as much longer as its group's quota is smaller (a leader held
// to 0.3 CPU and throttled in every period took over 10 s to hand over
// its lead and stop).
func stopBound(g *cgroup.Group) time.Duration {
	if g == nil || g.CPUs <= 0 || g.CPUs >= 1 {
		return stopTimeout
	}
	return time.Duration(float64(stopTimeout) / g.CPUs)
}

// waitStop waits for exited within bound, stretched by the share of the
// machine that processes other than this one and pid had meanwhile
// (Within), and says so if it did not come.
func waitStop(exited <-chan struct{}, bound time.Duration, pid int) error {
	w := NewWithin(bound, pid)
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		select {
		case <-exited:
			return nil
		case <-tick.C:
			if w.Over() {
				return fmt.Errorf("did not stop in %v (%v allowed, others had %.0f%% of the machine)",
					time.Since(w.Start).Round(time.Millisecond), w.Allowed().Round(time.Millisecond), 100*w.Share())
			}
		}
	}
}

// PID is the node's current process id.
func (n *ClusterNode) PID() int { return n.cur.Load().cmd.Process.Pid }

// Alive returns an error, with the end of the node's output, if its
// current process has exited.
func (n *ClusterNode) Alive() error {
	p := n.cur.Load()
	if p == nil {
		return fmt.Errorf("%s not started", n.ID)
	}
	select {
	case <-p.exited:
		return fmt.Errorf("%s exited: %v%s", n.ID, p.waitErr, outputNote(p.log.String()))
	default:
		return nil
	}
}

// Addr is the first address the node's latest "listening" line gives
// protocol ("gearman", "metrics", ...), "" if none. A node that changes
// role listens anew, on other ports when they are 0.
func (n *ClusterNode) Addr(protocol string) string {
	f, _ := n.cur.Load().log.latest("listening")
	l, _ := f[protocol].([]any)
	if len(l) == 0 {
		return ""
	}
	s, _ := l[0].(string)
	return s
}

// Role is what the node's latest "listening" line says it runs: "leader"
// or "follower", "" before the first.
func (n *ClusterNode) Role() string {
	f, _ := n.cur.Load().log.latest("listening")
	r, _ := f["role"].(string)
	return r
}

// Output returns the last few kilobytes the node's process wrote.
func (n *ClusterNode) Output() string { return n.cur.Load().log.String() }

func outputNote(out string) string {
	if out = strings.TrimSpace(out); out != "" {
		return "\noutput (end):\n" + out
	}
	return ""
}

// noticeLog takes a node's output: it keeps the end, and the fields of
// the latest notice line of each message.
type noticeLog struct {
	mu      sync.Mutex
	partial []byte
	notices map[string]map[string]any
	times   map[string]time.Time // of the latest of each, by its stamp
	tail    tail
}

func (l *noticeLog) Write(p []byte) (int, error) {
	l.tail.Write(p)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		line := string(l.partial[:i])
		if msg, fields, ok := ParseNotice(line); ok {
			if l.notices == nil {
				l.notices = make(map[string]map[string]any)
				l.times = make(map[string]time.Time)
			}
			l.notices[msg] = fields
			stamp, _, _ := strings.Cut(line, "\t")
			if at, err := time.Parse(logTimeLayout, stamp); err == nil {
				l.times[msg] = at
			} else {
				delete(l.times, msg)
			}
		}
		l.partial = l.partial[i+1:]
	}
	if len(l.partial) == 0 {
		l.partial = nil // let a long line's buffer go
	}
	return len(p), nil
}

func (l *noticeLog) latest(msg string) (map[string]any, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f, ok := l.notices[msg]
	return f, ok
}

func (l *noticeLog) String() string { return l.tail.String() }

// logTimeLayout is a log line's time stamp (zap's ISO 8601 encoder).
const logTimeLayout = "2006-01-02T15:04:05.000Z0700"

// NoticeTime is when the node logged its latest notice msg (the line's
// own time stamp), if it has.
func (n *ClusterNode) NoticeTime(msg string) (time.Time, bool) {
	l := n.cur.Load().log
	l.mu.Lock()
	defer l.mu.Unlock()
	at, ok := l.times[msg]
	return at, ok
}

// ParseNotice parses one of switchyard's log lines at level notice, as
// -l stderr writes them: time, "notice", the message and its fields as a
// JSON object, tab-separated.
//
//	2026-11-26T18:38:57.050Z	notice	listening	{"gearman": ["127.0.0.1:34335"], "role": "leader", "pid": 8477}
func ParseNotice(line string) (msg string, fields map[string]any, ok bool) {
	parts := strings.SplitN(strings.TrimRight(line, "\r"), "\t", 4)
	if len(parts) != 4 || parts[1] != "notice" {
		return "", nil, false
	}
	if err := json.Unmarshal([]byte(parts[3]), &fields); err != nil {
		return "", nil, false
	}
	return parts[2], fields, true
}

// prefixWriter writes to w with a prefix at the start of every line (a
// node's name in the shared server log).
type prefixWriter struct {
	w    io.Writer
	text string
	mid  bool // the last write ended inside a line
}

func newPrefixWriter(w io.Writer, prefix string) *prefixWriter {
	return &prefixWriter{w: w, text: prefix}
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	var out []byte
	for line := range bytes.SplitAfterSeq(b, []byte("\n")) {
		if len(line) == 0 { // after a final newline
			continue
		}
		if !p.mid {
			out = append(out, p.text...)
		}
		out = append(out, line...)
		p.mid = line[len(line)-1] != '\n'
	}
	if _, err := p.w.Write(out); err != nil {
		return 0, err
	}
	return len(b), nil
}

// Member is one line of the admin command "cluster": a node, its Raft
// address, its role and how far its log is behind the leader's (-1 when
// not known).
type Member struct {
	ID, Addr, Role string
	Lag            int64
}

// ParseMembers parses the answer to "cluster": NAME TAB ADDR TAB ROLE TAB
// LAG lines, then ".".
func ParseMembers(text string) ([]Member, error) {
	body, ok := strings.CutSuffix(text, ".\n")
	if !ok {
		return nil, fmt.Errorf("cluster: %q does not end in a line \".\"", text)
	}
	var out []Member
	for line := range strings.SplitSeq(body, "\n") {
		if line == "" {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 4 {
			return nil, fmt.Errorf("cluster: line %q: want name, address, role, lag", line)
		}
		lag, err := strconv.ParseInt(f[3], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("cluster: line %q: %w", line, err)
		}
		out = append(out, Member{ID: f[0], Addr: f[1], Role: f[2], Lag: lag})
	}
	return out, nil
}

// adminTimeout bounds one admin command: a membership change waits for
// its commit.
const adminTimeout = 15 * time.Second

// AdminCommand sends one Gearman admin command on a connection of its own
// and returns the answer: a line, or a listing up to ".\n".
func AdminCommand(addr, cmd string) (string, error) { return AdminCommandVia(nil, addr, cmd) }

// Dialer dials as net.Dialer's DialContext does; nil is net.Dialer.
type Dialer func(ctx context.Context, network, addr string) (net.Conn, error)

func (d Dialer) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	if d == nil {
		return net.DialTimeout(network, addr, timeout)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return d(ctx, network, addr)
}

// AdminCommandVia is AdminCommand on a connection dial opens.
func AdminCommandVia(dial Dialer, addr, cmd string) (string, error) {
	if addr == "" {
		return "", errors.New("no address")
	}
	conn, err := dial.dial("tcp", addr, 2*time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(adminTimeout))
	if _, err := io.WriteString(conn, cmd+"\r\n"); err != nil {
		return "", err
	}
	r := bufio.NewReader(conn)
	var out strings.Builder
	for {
		line, err := r.ReadString('\n')
		out.WriteString(line)
		s := out.String()
		if err != nil {
			return s, err
		}
		// A one-line answer ends in CRLF; a listing's lines in LF, the
		// last one ".".
		if strings.HasSuffix(s, "\r\n") || s == ".\n" || strings.HasSuffix(s, "\n.\n") {
			return s, nil
		}
	}
}
