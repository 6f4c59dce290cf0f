package harness

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"switchyard/bench/cgroup"
)

func TestParseNATSPorts(t *testing.T) {
	tests := []struct {
		name, data            string
		wantClient, wantRoute string
		wantErr               bool
	}{
		{"client and route", `{"nats":["nats://127.0.0.1:38555"],"cluster":["nats://127.0.0.1:39115"]}`, "nats://127.0.0.1:38555", "nats://127.0.0.1:39115", false},
		{"with monitoring", `{"nats":["nats://127.0.0.1:1"],"monitoring":["http://127.0.0.1:2"],"cluster":["nats://127.0.0.1:3"]}`, "nats://127.0.0.1:1", "nats://127.0.0.1:3", false},
		{"no route", `{"nats":["nats://127.0.0.1:38555"]}`, "", "", true},
		{"port 0", `{"nats":["nats://127.0.0.1:0"],"cluster":["nats://127.0.0.1:39115"]}`, "", "", true},
		{"short read", `{"nats":["nats://127.0.0.1:38555"],"clus`, "", "", true},
		{"empty", ``, "", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client, route, err := ParseNATSPorts([]byte(tt.data))
			if (err != nil) != tt.wantErr || client != tt.wantClient || route != tt.wantRoute {
				t.Errorf("got %q, %q, %v; want %q, %q, error %v", client, route, err, tt.wantClient, tt.wantRoute, tt.wantErr)
			}
		})
	}
}

func TestParseNATSMonitor(t *testing.T) {
	tests := []struct {
		name, data, want string
		wantErr          bool
	}{
		{"with monitoring", `{"nats":["nats://127.0.0.1:1"],"monitoring":["http://127.0.0.1:2"],"cluster":["nats://127.0.0.1:3"]}`, "http://127.0.0.1:2", false},
		{"none", `{"nats":["nats://127.0.0.1:1"],"cluster":["nats://127.0.0.1:3"]}`, "", true},
		{"short read", `{"nats":["nats://127.0.0.1:1"],"moni`, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseNATSMonitor([]byte(tt.data))
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("got %q, %v; want %q, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// TestOneMetaGroup: one meta group is one leader that every server
// names and that has every other server as a current replica; the split
// seen under CPU quotas (two leaders, each of part of the servers) is
// not.
func TestOneMetaGroup(t *testing.T) {
	type r = struct {
		Name    string `json:"name"`
		Current bool   `json:"current"`
		Offline bool   `json:"offline"`
	}
	lead := func(self string, size int, replicas ...r) MetaView {
		return MetaView{Self: self, Leader: self, Size: size, Replicas: replicas}
	}
	follow := func(self, leader string, size int) MetaView { return MetaView{Self: self, Leader: leader, Size: size} }
	tests := []struct {
		name  string
		views []MetaView
		want  bool
	}{
		{"formed", []MetaView{lead("n1", 3, r{"n2", true, false}, r{"n3", true, false}), follow("n2", "n1", 3), follow("n3", "n1", 3)}, true},
		{"formed, the leader last", []MetaView{follow("n1", "n3", 3), follow("n2", "n3", 3), lead("n3", 3, r{"n1", true, false}, r{"n2", true, false})}, true},
		{"split in two", []MetaView{lead("n1", 2, r{"n2", true, false}), follow("n2", "n1", 2), lead("n3", 3, r{"n4", true, false}, r{"n5", true, false}),
			follow("n4", "n3", 3), follow("n5", "n3", 3)}, false},
		{"all name one leader of fewer", []MetaView{lead("n1", 2, r{"n2", true, false}), follow("n2", "n1", 2), follow("n3", "n1", 2)}, false},
		{"a replica behind", []MetaView{lead("n1", 3, r{"n2", true, false}, r{"n3", false, false}), follow("n2", "n1", 3), follow("n3", "n1", 3)}, false},
		{"a replica offline", []MetaView{lead("n1", 3, r{"n2", true, false}, r{"n3", true, true}), follow("n2", "n1", 3), follow("n3", "n1", 3)}, false},
		{"no leader yet", []MetaView{follow("n1", "", 3), follow("n2", "", 3), follow("n3", "", 3)}, false},
		{"a server not read", []MetaView{lead("n1", 3, r{"n2", true, false}, r{"n3", true, false}), follow("n2", "n1", 3), {Self: "n3", Err: os.ErrDeadlineExceeded}}, false},
		{"none", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := OneMetaGroup(tt.views); got != tt.want {
				t.Errorf("OneMetaGroup = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestNATSServerConfig(t *testing.T) {
	tests := []struct {
		name      string
		routes    []string
		jetstream bool
		want      []string
		not       []string
	}{
		{"first, before the others", nil, false,
			[]string{`server_name: "n1"`, `host: "127.0.0.1"`, "port: -1", `http: "127.0.0.1:-1"`, `ports_file_dir: "/d/n1"`, `name: "switchyard-bench"`},
			[]string{"jetstream", "routes"}},
		{"with routes and jetstream", []string{"nats://127.0.0.1:1", "nats://127.0.0.1:2"}, true,
			[]string{`store_dir: "/d/n1/jetstream"`, `routes: ["nats://127.0.0.1:1", "nats://127.0.0.1:2"]`}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conf := NATSServerConfig("n1", "/d/n1", tt.routes, tt.jetstream)
			for _, w := range tt.want {
				if !strings.Contains(conf, w) {
					t.Errorf("no %q in\n%s", w, conf)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(conf, n) {
					t.Errorf("%q in\n%s", n, conf)
				}
			}
			// Both listeners: port -1, the kernel's pick.
			if strings.Count(conf, "port: -1") != 2 {
				t.Errorf("want two listeners on port -1:\n%s", conf)
			}
		})
	}
}

// natsServer is Debian's nats-server, or the test is skipped: make
// bench-deps installs it, CI does not.
func natsServer(t *testing.T) string {
	t.Helper()
	const path = "/usr/sbin/nats-server"
	if _, err := os.Stat(path); err != nil {
		t.Skip("nats-server is not installed (make bench-deps)")
	}
	return path
}

// TestStartNATS starts three JetStream servers and their seed and checks
// that each wrote its ports, that they are distinct servers and that
// Usage and Procs read every process, and that JetStream forms one meta
// group; Stop stops them. As root each runs
// in a CPU cgroup of its own, which Stop removes.
func TestStartNATS(t *testing.T) {
	path := natsServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var budget *CPUBudget
	if err := cgroup.Available(); err == nil {
		budget = &CPUBudget{CPUs: 0.5, Prefix: "sysc"}
	} else {
		t.Logf("the servers run without a CPU budget: %v", err)
	}
	c, err := StartNATS(ctx, NATSConfig{Path: path, Dir: t.TempDir(), Budget: budget})
	if err != nil {
		t.Fatal(err)
	}
	procs, err := c.Procs()
	if err != nil || len(procs) != 4 || procs[0].Name != "n0" || procs[3].Name != "n3" {
		t.Fatalf("procs %+v, %v", procs, err)
	}
	var groups []string
	for _, p := range procs {
		if (p.Quota == 0.5) != (budget != nil) || p.PID <= 0 {
			t.Errorf("proc %+v", p)
		}
	}
	for _, s := range c.all() {
		if s.group != nil {
			groups = append(groups, s.group.Dir())
		}
	}
	if budget != nil && len(groups) != 4 {
		t.Errorf("groups %q", groups)
	}
	seen := map[string]bool{}
	for _, s := range c.Servers {
		if s.ClientURL == "" || s.RouteURL == "" || s.MonitorURL == "" || seen[s.ClientURL] || seen[s.RouteURL] || seen[s.MonitorURL] {
			t.Errorf("%s: client %q, route %q, monitor %q", s.Name, s.ClientURL, s.RouteURL, s.MonitorURL)
		}
		seen[s.ClientURL], seen[s.RouteURL], seen[s.MonitorURL] = true, true, true
	}
	if len(c.Servers) != 3 || c.Find("n2") != c.Servers[1] || c.Find("n4") != nil {
		t.Errorf("servers: %+v", c.Servers)
	}
	if err := c.WaitJetStream(ctx, 30*time.Second); err != nil {
		t.Error(err)
	}
	u, err := c.Usage()
	if err != nil || u.Threads < 4 || u.RSS <= 0 { // the seed's included
		t.Errorf("usage %+v, %v", u, err)
	}
	if err := c.Stop(); err != nil {
		t.Error(err)
	}
	if _, err := c.Usage(); err == nil {
		t.Error("usage of stopped servers")
	}
	for _, g := range groups {
		if _, err := os.Stat(g); !os.IsNotExist(err) {
			t.Errorf("group %s still there after Stop", g)
		}
	}
}
