package ops

import (
	"fmt"
	"strings"
	"testing"

	"switchyard/engine/workerline"
	"switchyard/sched"
)

// /api/connections gathers every protocol's list, with the jobs each
// worker holds, and searches, sorts and pages it on the server.
func TestAPIConnections(t *testing.T) {
	sc := sched.New(sched.Config{Tick: -1, Latency: true})
	defer sc.Close()
	c := sc.NewClient(nopListener{})
	for range 3 {
		c.Submit(&sched.SubmitReq{Func: []byte("resize"), Unique: nil, Background: true})
	}
	busy := sc.NewWorker(nopWaker{})
	busy.CanDo([]byte("resize"), 0)
	busy.Grab()
	busy.Grab()
	idle := sc.NewWorker(nopWaker{})
	idle.CanDo([]byte("mail"), 0)
	srv := New(Config{Sched: sc})
	srv.AddConns(Conns{Protocol: "gearman", Open: func() int { return 3 }, List: func() []workerline.Worker {
		return []workerline.Worker{
			{FD: 9, Peer: "10.0.0.9", ID: "busy-host", Funcs: []string{"resize"}, Sched: busy, Bytes: 100},
			{FD: 8, Peer: "10.0.0.8", ID: "client"},
			{FD: 7, Peer: "10.0.0.7", ID: "idle-host", Funcs: []string{"mail"}, Sched: idle, Bytes: 5},
		}
	}})
	srv.AddConns(Conns{Protocol: "periodic", Open: func() int { return 1 }, List: func() []workerline.Worker {
		return []workerline.Worker{{FD: 4, Peer: "unix:/run/p.sock", Funcs: []string{"cron"}}}
	}})
	srv.AddConns(Conns{Protocol: "dwork", Open: func() int { return 0 }}) // lists none

	ids := func(p connPage) string {
		var out []string
		for _, c := range p.Connections {
			out = append(out, fmt.Sprint(c.Protocol, ":", c.FD))
		}
		return strings.Join(out, " ")
	}
	for _, tc := range []struct {
		query string
		total int
		want  string
	}{
		{"", 4, "gearman:9 gearman:8 gearman:7 periodic:4"},
		{"limit=2&offset=1", 4, "gearman:8 gearman:7"},
		{"q=MAIL", 1, "gearman:7"},
		{"q=unix:", 1, "periodic:4"},
		{"q=periodic", 1, "periodic:4"},
		{"workers=1", 2, "gearman:9 gearman:7"},
		{"sort=bytes&desc=1", 4, "gearman:9 gearman:7 gearman:8 periodic:4"},
		{"sort=fd", 4, "periodic:4 gearman:7 gearman:8 gearman:9"},
		{"sort=held_for&desc=1&limit=1", 4, "gearman:9"},
		{"sort=peer&desc=1", 4, "periodic:4 gearman:9 gearman:8 gearman:7"},
	} {
		var p connPage
		getJSON(t, srv, "/api/connections?"+tc.query, &p)
		if p.Total != tc.total || ids(p) != tc.want {
			t.Errorf("%q: %d, %q; want %d, %q", tc.query, p.Total, ids(p), tc.total, tc.want)
		}
	}
	var p connPage
	getJSON(t, srv, "/api/connections", &p)
	b := p.Connections[0]
	if !b.Worker || len(b.Jobs) != 2 || b.Jobs[0].Function != "resize" || b.Bytes != 100 || !(b.HeldFor > 0) {
		t.Errorf("the busy worker: %+v", b)
	}
	// Idle is null while it holds a job.
	var raw struct {
		Connections []map[string]any `json:"connections"`
	}
	getJSON(t, srv, "/api/connections?limit=1", &raw)
	if v, ok := raw.Connections[0]["idle"]; !ok || v != nil {
		t.Errorf("the busy worker's idle: %v", v)
	}
	if p.Workers != 2 {
		t.Errorf("%d workers, want 2", p.Workers)
	}
	if i := p.Connections[2]; !i.Worker || len(i.Jobs) != 0 || !(float64(i.Idle) >= 0) {
		t.Errorf("the idle worker: %+v", i)
	}
	if cl := p.Connections[1]; cl.Worker || len(cl.Functions) != 0 {
		t.Errorf("the client: %+v", cl)
	}
}
