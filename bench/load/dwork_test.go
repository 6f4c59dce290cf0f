package load

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"switchyard/bench/harness"
	codec "switchyard/codec/dwork"
	"switchyard/engine/dwork"
	"switchyard/sched"
)

func TestWideDAG(t *testing.T) {
	const n = 2*codec.MaxDeps + 5
	d := WideDAG("w-", n)
	if d.Total != n+2 {
		t.Fatalf("%d tasks, want %d", d.Total, n+2)
	}
	// The root, the middle, then the sink in three parts, the middle
	// split among them.
	if len(d.Tasks) != n+4 || d.Tasks[0].GetName() != "w-root" || len(d.Tasks[0].Pred) != 0 {
		t.Fatalf("%d Create entries, first %v", len(d.Tasks), d.Tasks[0])
	}
	preds := 0
	for _, task := range d.Tasks[n+1:] {
		if task.GetName() != "w-sink" || len(task.Pred) > codec.MaxDeps {
			t.Fatalf("sink part %s with %d predecessors", task.GetName(), len(task.Pred))
		}
		preds += len(task.Pred)
	}
	if preds != n {
		t.Errorf("the sink waits for %d tasks, want %d", preds, n)
	}
	for _, task := range d.Tasks {
		if err := codec.ValidateRequest(&codec.QueryMsg{Type: dworkType(codec.QueryMsg_Create), Task: []*codec.TaskMsg{task}}); err != nil {
			t.Fatalf("task %s: %v", task.GetName(), err)
		}
	}
}

func TestDAGTakeChecksOrder(t *testing.T) {
	tasks := func(names ...string) []*codec.TaskMsg {
		var out []*codec.TaskMsg
		for _, n := range names {
			out = append(out, &codec.TaskMsg{Name: proto.String(n)})
		}
		return out
	}
	d := ChainDAG("c-", 3)
	if err := d.take(tasks("c-1")); err == nil || !strings.Contains(err.Error(), "before its 1 ancestors") {
		t.Errorf("c-1 before c-0 was done: %v", err)
	}
	if err := d.take(tasks("c-0")); err != nil {
		t.Fatal(err)
	}
	if err := d.take(tasks("c-0")); err == nil || !strings.Contains(err.Error(), "again") {
		t.Errorf("c-0 twice: %v", err)
	}
	if err := d.take(tasks("x")); err == nil {
		t.Error("a task of no DAG taken")
	}
	d.reported.Add(1)
	if err := d.take(tasks("c-1")); err != nil {
		t.Errorf("c-1 after c-0 was reported: %v", err)
	}
}

// dworkServer runs switchyard's dwork frontend in this process.
func dworkServer(t *testing.T) string {
	t.Helper()
	s := sched.New(sched.Config{})
	t.Cleanup(s.Close)
	srv := dwork.New(dwork.Config{Addrs: []string{"tcp://127.0.0.1:0"}, Host: "hub"}, s, nil)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop(context.Background()) })
	return srv.Addrs()[0].String()
}

// The hosts run whole DAGs against the real frontend, every task once and
// in order.
func TestDworkHostsRunDAGs(t *testing.T) {
	addr := dworkServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tt := range []struct {
		name  string
		dag   *DworkDAG
		hosts int
		steal int32
	}{
		{"wide", WideDAG("w-", codec.MaxDeps+100), 3, 16},
		{"chain", ChainDAG("c-", 200), 1, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := DialDwork(ctx, addr)
			if err != nil {
				t.Fatal(err)
			}
			creates, err := tt.dag.Create(c)
			c.Close()
			if err != nil || creates < 1 {
				t.Fatalf("%d Creates: %v", creates, err)
			}
			res, err := DworkHosts{Addr: addr, Hosts: tt.hosts, Steal: tt.steal, Name: tt.name}.Run(ctx, tt.dag)
			if err != nil {
				t.Fatal(err)
			}
			if res.Done != tt.dag.Total || res.End.Before(res.Start) || res.StealLatency.TotalCount() != res.Steals ||
				res.DoneLatency.TotalCount() != res.Steals || res.Steals < tt.dag.Total/int64(tt.steal) {
				t.Errorf("implausible result: %+v", res)
			}
		})
	}
}

// ctx bounds a run: hosts that find nothing to steal stop when it ends,
// and say how much was left.
func TestDworkHostsStopAtDeadline(t *testing.T) {
	addr := dworkServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	w := harness.NewWithin(5 * time.Second)
	res, err := DworkHosts{Addr: addr, Hosts: 2, Steal: 4, Name: "h"}.Run(ctx, ChainDAG("never-created-", 10))
	if err == nil || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "0 of 10 tasks done") {
		t.Errorf("error %v", err)
	}
	if took := time.Since(w.Start); w.Exceeds(took) {
		t.Errorf("stopped %v after the start of its 300ms, want at most %v", took, w)
	}
	if res.Empty == 0 {
		t.Errorf("no empty Steal: %+v", res)
	}
}

// A server that accepts and never greets: the dial ends with ctx.
func TestDialDworkBoundedByContext(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	w := harness.NewWithin(2 * time.Second)
	if c, err := DialDwork(ctx, ln.Addr().String()); err == nil {
		c.Close()
		t.Fatal("dialed a server that never greets")
	}
	if took := time.Since(w.Start); w.Exceeds(took) {
		t.Errorf("dial returned after %v, want at most %v", took, w)
	}
}
