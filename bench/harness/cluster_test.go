package harness

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"switchyard/bench/netns"
)

func TestParseNotice(t *testing.T) {
	tests := []struct {
		name, line string
		wantMsg    string
		wantFields map[string]any
		wantOK     bool
	}{
		{"listening", "2026-11-26T18:38:57.050Z\tnotice\tlistening\t{\"gearman\": [\"127.0.0.1:34335\"], \"role\": \"leader\", \"pid\": 8477}",
			"listening", map[string]any{"gearman": []any{"127.0.0.1:34335"}, "role": "leader", "pid": float64(8477)}, true},
		{"cluster node", "2026-11-26T18:38:55.338Z\tnotice\tcluster node\t{\"node\": \"n1\", \"raft\": \"127.0.0.1:42759\"}\r",
			"cluster node", map[string]any{"node": "n1", "raft": "127.0.0.1:42759"}, true},
		{"another level", "2026-11-26T18:38:55.338Z\twarn\tcluster: close\t{\"error\": \"x\"}", "", nil, false},
		{"no fields", "2026-11-26T18:38:55.338Z\tnotice\tshutting down", "", nil, false},
		{"broken JSON", "2026-11-26T18:38:55.338Z\tnotice\tlistening\t{\"gearman\": [", "", nil, false},
		{"raft's own line", "2026-11-26T18:38:55.338Z [WARN]  raft: heartbeat timeout reached", "", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg, fields, ok := ParseNotice(tt.line)
			if msg != tt.wantMsg || ok != tt.wantOK || !reflect.DeepEqual(fields, tt.wantFields) {
				t.Errorf("got %q %v %v, want %q %v %v", msg, fields, ok, tt.wantMsg, tt.wantFields, tt.wantOK)
			}
		})
	}
}

// TestNoticeLog feeds a node's output in pieces that split lines: the
// latest line of each message wins, whole lines only.
func TestNoticeLog(t *testing.T) {
	out := "t\tnotice\tcluster node\t{\"raft\": \"127.0.0.1:1\"}\n" +
		"t\tnotice\tlistening\t{\"gearman\": [\"127.0.0.1:2\"], \"role\": \"follower\"}\n" +
		"t\tinfo\tsomething\t{}\n" +
		"2026-11-26T18:38:57.050+0100\tnotice\telected\t{\"term\": 3}\n" +
		"t\tnotice\tlistening\t{\"gearman\": [\"127.0.0.1:3\"], \"role\": \"leader\"}\n" +
		"t\tnotice\tlistening\t{\"gearman\": [\"127.0.0.1:4\"], \"role\": \"follo" // not yet whole
	for _, size := range []int{1, 7, len(out)} {
		l := &noticeLog{tail: tail{max: 1 << 10}}
		for rest := out; rest != ""; {
			n := min(size, len(rest))
			l.Write([]byte(rest[:n]))
			rest = rest[n:]
		}
		f, _ := l.latest("listening")
		if f["role"] != "leader" || !reflect.DeepEqual(f["gearman"], []any{"127.0.0.1:3"}) {
			t.Errorf("writes of %d: latest listening %v", size, f)
		}
		if f, ok := l.latest("cluster node"); !ok || f["raft"] != "127.0.0.1:1" {
			t.Errorf("writes of %d: cluster node %v", size, f)
		}
		if at := l.times["elected"]; !at.Equal(time.Date(2026, 11, 26, 17, 38, 57, 50e6, time.UTC)) {
			t.Errorf("writes of %d: the elected line's time %v", size, at)
		}
		if _, ok := l.times["listening"]; ok {
			t.Errorf("writes of %d: a time for a line with no stamp", size)
		}
		if _, ok := l.latest("something"); ok {
			t.Errorf("writes of %d: an info line taken", size)
		}
		if l.String() != out {
			t.Errorf("writes of %d: tail %q", size, l.String())
		}
	}
}

func TestParseMembers(t *testing.T) {
	tests := []struct {
		name, text string
		want       []Member
		wantErr    bool
	}{
		{"three", "n1\t127.0.0.1:1\tleader\t0\nn2\t127.0.0.1:2\tfollower\t12\nn3\t127.0.0.1:3\tfollower\t-1\n.\n",
			[]Member{{"n1", "127.0.0.1:1", "leader", 0}, {"n2", "127.0.0.1:2", "follower", 12}, {"n3", "127.0.0.1:3", "follower", -1}}, false},
		{"none", ".\n", nil, false},
		{"no end", "n1\t127.0.0.1:1\tleader\t0\n", nil, true},
		{"an error line", "ERR NOT_LEADER x\r\n", nil, true},
		{"short line", "n1\t127.0.0.1:1\tleader\n.\n", nil, true},
		{"bad lag", "n1\t127.0.0.1:1\tleader\tmany\n.\n", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseMembers(tt.text)
			if (err != nil) != tt.wantErr || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, %v; want %v, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestPrefixWriter(t *testing.T) {
	var b strings.Builder
	p := newPrefixWriter(&b, "n1 ")
	for _, chunk := range []string{"a\nb", "c\n", "\n", "d"} {
		if n, err := p.Write([]byte(chunk)); n != len(chunk) || err != nil {
			t.Fatalf("Write(%q): %d, %v", chunk, n, err)
		}
	}
	if want := "n1 a\nn1 bc\nn1 \nn1 d"; b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}

// TestClusterInNamespaces drives a cluster of three nodes, each in a
// network namespace of its own with its Raft on a fixed port, through
// what bench/jepsen's nemesis asks of it: a pause of the leader (another
// leads; continued, it serves again), a kill of every node and a start
// of them all (they find each other where they were), a follower killed,
// wiped and started (it serves, and catches up), and a fourth node added
// and removed.
func TestClusterInNamespaces(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a cluster; skipped with -short")
	}
	if err := netns.Available(); err != nil {
		t.Skip(err) // needs root, ip and iptables
	}
	bin := filepath.Join(t.TempDir(), "switchyard")
	build := exec.Command("go", "build", "-o", bin, "switchyard/cmd/switchyard")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	n, err := netns.New("syj")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Error(err)
		}
	})
	c, err := StartCluster(ctx, ClusterConfig{Path: bin, Dir: t.TempDir(), Net: n, RaftPort: 7000, Ops: true,
		Args: []string{"-L", "127.0.0.1", "-p", "0", "--periodic-listen", "off", "--controller-socket", "off",
			"--dwork-listen", "off", "--memodb-listen", "off", "--metrics-listen", "off"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // before the namespaces go
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	})
	for _, x := range c.Nodes {
		if f, _ := x.cur.Load().log.latest("cluster node"); f["raft"] != x.NS().IP+":7000" {
			t.Errorf("%s: raft on %v, want %s:7000", x.ID, f["raft"], x.NS().IP)
		}
	}

	l, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Pause(l); err != nil || !l.Paused() {
		t.Fatalf("pause %s: %v, paused %v", l.ID, err, l.Paused())
	}
	next, err := c.Leader(ctx)
	if err != nil || next == l {
		t.Fatalf("while %s is paused, the leader is %v (%v)", l.ID, next, err)
	}
	if err := c.Resume(l); err != nil || l.Paused() {
		t.Fatalf("resume %s: %v", l.ID, err)
	}
	if err := c.WaitServing(ctx, l); err != nil {
		t.Fatal(err)
	}

	for _, x := range c.Nodes {
		if err := c.Kill(x); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Start(ctx, c.Nodes...); err != nil {
		t.Fatalf("all killed, then started: %v", err)
	}

	l, err = c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f := c.Followers(l)[0]
	if err := c.Wipe(f); err == nil {
		t.Error("a running node wiped")
	}
	if err := c.Kill(f); err != nil {
		t.Fatal(err)
	}
	if err := c.Wipe(f); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(f.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s after Wipe: %v", f.Dir, err)
	}
	if err := c.Restart(ctx, f); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitCaughtUp(ctx, f); err != nil {
		t.Fatal(err)
	}

	x, err := c.AddNode(ctx, "n4")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WaitCaughtUp(ctx, x); err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveNode(ctx, x); err != nil {
		t.Fatal(err)
	}
	l, err = c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	text, err := AdminCommandVia(c.Dial, l.Addr("gearman"), "cluster")
	if err != nil {
		t.Fatal(err)
	}
	if m, err := ParseMembers(text); err != nil || len(m) != 3 || slices.ContainsFunc(m, func(m Member) bool { return m.ID == "n4" }) {
		t.Errorf("members after n4 was removed: %v, %v", m, err)
	}
	if x.Alive() == nil {
		t.Error("n4 still runs after its removal")
	}
}
