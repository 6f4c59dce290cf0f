package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"switchyard/bench/cgroup"
)

// NATSConfig says how to start a NATS cluster with JetStream on this
// machine: the peer the cluster scenarios set switchyard's cluster
// against.
type NATSConfig struct {
	Path  string // nats-server
	Nodes int    // 0 means 3
	// Dir holds each server's configuration, JetStream store and ports
	// file.
	Dir string
	// Log, when set, also receives every server's output.
	Log io.Writer
	// Timeout bounds a server's start; 0 means 30 s.
	Timeout time.Duration
	// Budget, when set, runs each server, the seed too, in a CPU cgroup
	// of its own.
	Budget *CPUBudget
}

// NATSCluster is nats-server processes clustered on loopback, each with
// JetStream on. No port is picked before it is bound: every server is
// told port -1 (the kernel picks) for clients and for routes, and writes
// the ports it got to a ports file (ports_file_dir), which is read back.
// A JetStream server in a cluster must be given routes when it starts,
// which the first one could not have. So a seed comes first, a
// nats-server without JetStream (n0) that only routes: each JetStream
// server is given its route port, and the servers gossip the others', so
// that every one is routed to every other. The seed holds no stream and
// no client; its CPU counts in Usage all the same. (Reloading the first
// JetStream server's configuration with routes, which nats-server 2.9
// supports, left some streams without a leader for minutes.)
type NATSCluster struct {
	Servers []*NATSServer // the JetStream servers
	seed    *NATSServer
}

// NATSServer is one nats-server process.
type NATSServer struct {
	Name string
	// ClientURL is where clients connect (nats://127.0.0.1:PORT), RouteURL
	// where the other servers do, MonitorURL its HTTP monitoring
	// (http://127.0.0.1:PORT, for /jsz).
	ClientURL, RouteURL, MonitorURL string

	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
	output  *tail
	group   *cgroup.Group // with NATSConfig.Budget
}

// StartNATS starts cfg.Nodes servers and returns once each has written
// its ports. Whether JetStream has formed its cluster is for the caller
// to find out (a stream with replicas 3 can be created once it has).
func StartNATS(ctx context.Context, cfg NATSConfig) (*NATSCluster, error) {
	if cfg.Nodes == 0 {
		cfg.Nodes = 3
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 30 * time.Second
	}
	c := &NATSCluster{}
	seed, err := c.start(ctx, cfg, "n0", nil, false)
	if err != nil {
		c.Stop()
		return nil, err
	}
	for i := range cfg.Nodes {
		if _, err := c.start(ctx, cfg, fmt.Sprintf("n%d", i+1), []string{seed.RouteURL}, true); err != nil {
			c.Stop()
			return nil, err
		}
	}
	return c, nil
}

// start starts one server and reads its ports.
func (c *NATSCluster) start(ctx context.Context, cfg NATSConfig, name string, routes []string, jetstream bool) (*NATSServer, error) {
	dir := filepath.Join(cfg.Dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	conf := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(conf, []byte(NATSServerConfig(name, dir, routes, jetstream)), 0o644); err != nil {
		return nil, err
	}
	s := &NATSServer{Name: name, exited: make(chan struct{}), output: &tail{max: 16 << 10}}
	s.cmd = exec.Command(cfg.Path, "-c", conf)
	var out io.Writer = s.output
	if cfg.Log != nil {
		out = io.MultiWriter(s.output, newPrefixWriter(cfg.Log, name+" "))
	}
	s.cmd.Stdout, s.cmd.Stderr = out, out
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	g, err := cfg.Budget.group(name)
	if err != nil {
		return nil, err
	}
	if err := startIn(g, s.cmd); err != nil {
		return nil, errors.Join(err, removeGroup(g))
	}
	s.group = g
	go func() {
		s.waitErr = s.cmd.Wait()
		close(s.exited)
	}()
	if jetstream {
		c.Servers = append(c.Servers, s)
	} else {
		c.seed = s
	}
	ports := filepath.Join(dir, fmt.Sprintf("%s_%d.ports", filepath.Base(cfg.Path), s.cmd.Process.Pid))
	err = s.waitOutput(ctx, cfg.Timeout, func(string) bool {
		// The server writes the file whole but not atomically: a short
		// read does not parse and is read again.
		data, err := os.ReadFile(ports)
		if err == nil {
			s.ClientURL, s.RouteURL, err = ParseNATSPorts(data)
		}
		if err == nil {
			s.MonitorURL, err = parseNATSMonitor(data)
		}
		return err == nil
	})
	return s, err
}

// NATSServerConfig is one server's configuration: its name, client,
// route and monitoring listeners on 127.0.0.1 with ports the kernel
// picks, its ports file
// in dir, routes to the other servers given and, if jetstream, JetStream
// with its store in dir.
func NATSServerConfig(name, dir string, routes []string, jetstream bool) string {
	var b strings.Builder
	q := strconv.Quote
	fmt.Fprintf(&b, "server_name: %s\nhost: \"127.0.0.1\"\nport: -1\nhttp: \"127.0.0.1:-1\"\nports_file_dir: %s\n", q(name), q(dir))
	if jetstream {
		fmt.Fprintf(&b, "jetstream {\n  store_dir: %s\n}\n", q(filepath.Join(dir, "jetstream")))
	}
	b.WriteString("cluster {\n  name: \"switchyard-bench\"\n  host: \"127.0.0.1\"\n  port: -1\n")
	if len(routes) > 0 {
		quoted := make([]string, len(routes))
		for i, r := range routes {
			quoted[i] = q(r)
		}
		fmt.Fprintf(&b, "  routes: [%s]\n", strings.Join(quoted, ", "))
	}
	b.WriteString("}\n")
	return b.String()
}

// waitOutput polls cond, given the end of the server's output, until it
// holds, the server exits or timeout passes.
func (s *NATSServer) waitOutput(ctx context.Context, timeout time.Duration, cond func(out string) bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for !cond(s.output.String()) {
		select {
		case <-s.exited:
			return fmt.Errorf("nats-server %s exited: %v%s", s.Name, s.waitErr, outputNote(s.output.String()))
		case <-ctx.Done():
			return fmt.Errorf("nats-server %s: %w%s", s.Name, ctx.Err(), outputNote(s.output.String()))
		case <-tick.C:
		}
	}
	return nil
}

// ParseNATSPorts reads a nats-server ports file (ports_file_dir): a JSON
// object of URL lists by listener. It returns the first client URL and
// the first route URL.
//
//	{"nats":["nats://127.0.0.1:38555"],"cluster":["nats://127.0.0.1:39115"]}
func ParseNATSPorts(data []byte) (client, route string, err error) {
	var ports struct {
		Nats    []string `json:"nats"`
		Cluster []string `json:"cluster"`
	}
	if err := json.Unmarshal(data, &ports); err != nil {
		return "", "", fmt.Errorf("ports file: %w", err)
	}
	if len(ports.Nats) == 0 || len(ports.Cluster) == 0 {
		return "", "", fmt.Errorf("ports file %s: want a client and a route URL", data)
	}
	for _, u := range []string{ports.Nats[0], ports.Cluster[0]} {
		p, err := url.Parse(u)
		if err != nil || p.Port() == "" || p.Port() == "0" {
			return "", "", fmt.Errorf("ports file: URL %q has no port", u)
		}
	}
	return ports.Nats[0], ports.Cluster[0], nil
}

// parseNATSMonitor returns the first monitoring URL of a ports file.
func parseNATSMonitor(data []byte) (string, error) {
	var ports struct {
		Monitoring []string `json:"monitoring"`
	}
	if err := json.Unmarshal(data, &ports); err != nil {
		return "", fmt.Errorf("ports file: %w", err)
	}
	if len(ports.Monitoring) == 0 {
		return "", fmt.Errorf("ports file %s: no monitoring URL", data)
	}
	return ports.Monitoring[0], nil
}

// WaitJetStream waits, for at most timeout, until the JetStream servers
// form one meta group: every one names the same meta leader, and that
// leader has every other as a current replica. Servers started one after
// the other, each routed only to the seed, do not always: under CPU
// quotas nats-server 2.9 has been seen to elect two meta leaders, each
// of a part of the servers, that never merge, and a stream of three
// replicas then cannot be created through a server of the smaller part.
// The error says what each server saw last.
func (c *NATSCluster) WaitJetStream(ctx context.Context, timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond) // polling the servers' /jsz
	defer tick.Stop()
	for {
		// Each read bounded on its own (metaView), not by the deadline:
		// the last views, which the error gives, are whole.
		views := make([]MetaView, len(c.Servers))
		for i, s := range c.Servers {
			views[i] = s.metaView(ctx)
		}
		if OneMetaGroup(views) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("nats-server: waiting for JetStream's meta group: %w", ctx.Err())
		case <-deadline.C:
			var seen []string
			for i, v := range views {
				seen = append(seen, c.Servers[i].Name+": "+v.String())
			}
			return fmt.Errorf("nats-server: JetStream did not form one meta group of %d in %v: %s", len(c.Servers), timeout, strings.Join(seen, "; "))
		case <-tick.C:
		}
	}
}

// MetaView is what one JetStream server says of its meta group (/jsz's
// meta_cluster).
type MetaView struct {
	Leader   string `json:"leader"`
	Size     int    `json:"cluster_size"`
	Replicas []struct {
		Name    string `json:"name"`
		Current bool   `json:"current"`
		Offline bool   `json:"offline"`
	} `json:"replicas"`
	Self string `json:"-"` // the server's name
	Err  error  `json:"-"` // why it could not be read
}

func (v MetaView) String() string {
	if v.Err != nil {
		return v.Err.Error()
	}
	current := 0
	for _, r := range v.Replicas {
		if r.Current && !r.Offline {
			current++
		}
	}
	return fmt.Sprintf("leader %q, a group of %d, %d of %d replicas current", v.Leader, v.Size, current, len(v.Replicas))
}

// OneMetaGroup says whether views, one from each server, are of one
// meta group with every server in it: one leader that all name, and
// whose own view has every other server as a current replica.
func OneMetaGroup(views []MetaView) bool {
	if len(views) == 0 {
		return false
	}
	leader := views[0].Leader
	var lead *MetaView
	for i, v := range views {
		if v.Err != nil || v.Leader == "" || v.Leader != leader {
			return false
		}
		if v.Self == leader {
			lead = &views[i]
		}
	}
	if lead == nil || lead.Size != len(views) {
		return false
	}
	current := map[string]bool{}
	for _, r := range lead.Replicas {
		if r.Current && !r.Offline {
			current[r.Name] = true
		}
	}
	for _, v := range views {
		if v.Self != leader && !current[v.Self] {
			return false
		}
	}
	return true
}

// metaView reads the server's /jsz.
func (s *NATSServer) metaView(ctx context.Context) MetaView {
	v := MetaView{Self: s.Name}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.MonitorURL+"/jsz", nil)
	if err != nil {
		v.Err = err
		return v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		v.Err = err
		return v
	}
	defer resp.Body.Close()
	var jsz struct {
		Meta *MetaView `json:"meta_cluster"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&jsz); err != nil {
		v.Err = fmt.Errorf("/jsz: %w", err)
		return v
	}
	if jsz.Meta == nil {
		v.Err = errors.New("/jsz: no meta_cluster yet")
		return v
	}
	jsz.Meta.Self = s.Name
	return *jsz.Meta
}

// Find returns the server named name, nil if none.
func (c *NATSCluster) Find(name string) *NATSServer {
	for _, s := range c.Servers {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// all is every server, the seed first.
func (c *NATSCluster) all() []*NATSServer {
	if c.seed == nil {
		return c.Servers
	}
	return append([]*NATSServer{c.seed}, c.Servers...)
}

// Usage sums the servers' memory and CPU, the seed's included.
func (c *NATSCluster) Usage() (Usage, error) {
	var sum Usage
	for _, s := range c.all() {
		if err := s.Alive(); err != nil {
			return Usage{}, err
		}
		u, err := ReadUsage(s.cmd.Process.Pid)
		if err != nil {
			return Usage{}, fmt.Errorf("nats-server %s: %w", s.Name, err)
		}
		sum.RSS += u.RSS
		sum.PeakRSS += u.PeakRSS
		sum.Threads += u.Threads
		sum.CPU += u.CPU
	}
	return sum, nil
}

// Procs reads the CPU of every server's process, the seed's first, and
// its group's counters with NATSConfig.Budget.
func (c *NATSCluster) Procs() ([]ProcUsage, error) {
	var refs []procRef
	for _, s := range c.all() {
		if err := s.Alive(); err != nil {
			return nil, err
		}
		refs = append(refs, procRef{s.Name, s.cmd.Process.Pid, s.group})
	}
	return procsUsage(refs)
}

// Alive returns an error, with the end of its output, if the server has
// exited.
func (s *NATSServer) Alive() error {
	select {
	case <-s.exited:
		return fmt.Errorf("nats-server %s exited: %v%s", s.Name, s.waitErr, outputNote(s.output.String()))
	default:
		return nil
	}
}

// Stop stops every server (SIGTERM, then SIGKILL after stopBound) and
// returns an error if one had died before.
func (c *NATSCluster) Stop() error {
	var errs []error
	for _, s := range c.all() {
		if err := s.Alive(); err != nil {
			errs = append(errs, err)
			continue
		}
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, s := range c.all() {
		if err := waitStop(s.exited, stopBound(s.group), s.cmd.Process.Pid); err != nil {
			_ = s.cmd.Process.Kill()
			<-s.exited
			errs = append(errs, fmt.Errorf("nats-server %s %w", s.Name, err))
		}
		if err := removeGroup(s.group); err != nil {
			errs = append(errs, err)
		}
		s.group = nil
	}
	return errors.Join(errs...)
}

// Output returns the last few kilobytes the server wrote.
func (s *NATSServer) Output() string { return s.output.String() }
