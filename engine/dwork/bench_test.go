package dwork

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	codec "switchyard/codec/dwork"
	"switchyard/sched"
)

// The benchmarks run whole DAGs through a server on 127.0.0.1 with zmq4
// REQ clients, as dwork's are: Create in blocks of at most MaxTasks, then
// hosts that steal a batch and report it done in one completion, until
// every task is done. tasks/s counts each task once (created, stolen and
// completed), over one DAG per iteration.

func benchServer(b *testing.B) string {
	b.Helper()
	s := sched.New(sched.Config{})
	b.Cleanup(s.Close)
	srv := New(Config{Addrs: []string{"tcp://127.0.0.1:0"}, Host: "hub"}, s, nil)
	if err := srv.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Stop(b.Context()) })
	return srv.Addrs()[0].String()
}

// createAll creates tasks in blocks of at most codec.MaxTasks.
func createAll(b *testing.B, c *client, tasks []*codec.TaskMsg) {
	for len(tasks) > 0 {
		n := min(len(tasks), codec.MaxTasks)
		if r := c.do(createReq(tasks[:n]...)); r.GetType() != codec.QueryMsg_OK {
			b.Fatalf("create: %v", r)
		}
		tasks = tasks[n:]
	}
}

// runDAG creates tasks and runs them with hosts stealing up to batch
// each, until total tasks are done; it reports tasks/s.
func runDAG(b *testing.B, addr string, tasks []*codec.TaskMsg, total, hosts int, batch int32) {
	creator := dialAddr(b, addr)
	cs := make([]*client, hosts)
	for i := range cs {
		cs[i] = dialAddr(b, addr)
	}
	var done atomic.Int64
	start := time.Now()
	createAll(b, creator, tasks)
	var wg sync.WaitGroup
	for i, c := range cs {
		loc := fmt.Sprint("h", i)
		wg.Go(func() {
			for done.Load() < int64(total) {
				r := c.do(stealReq(loc, batch))
				if r.GetType() != codec.QueryMsg_Transfer {
					continue // what dwork's workers do: ask again
				}
				names := make([]string, len(r.Task))
				for i, t := range r.Task {
					names[i] = t.GetName()
				}
				if d := c.do(doneReq(loc, names...)); d.GetType() != codec.QueryMsg_OK {
					b.Errorf("completion: %v", d)
					return
				}
				done.Add(int64(len(names)))
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(total)/time.Since(start).Seconds(), "tasks/s")
}

// A wide DAG: a root, width tasks after it, and a sink after all of them
// (created in parts: a task has at most MaxDeps predecessors a Create),
// run by 4 hosts stealing up to 64 at a time.
func BenchmarkWideDAG(b *testing.B) {
	const width = 20000
	addr := benchServer(b)
	for i := 0; b.Loop(); i++ {
		p := fmt.Sprintf("w%d-", i)
		root, sink := p+"root", p+"sink"
		tasks := []*codec.TaskMsg{task(root)}
		var preds []string
		for j := range width {
			name := fmt.Sprint(p, j)
			tasks = append(tasks, task(name, root))
			preds = append(preds, name)
		}
		for len(preds) > 0 {
			n := min(len(preds), codec.MaxDeps)
			tasks = append(tasks, task(sink, preds[:n]...))
			preds = preds[n:]
		}
		runDAG(b, addr, tasks, width+2, 4, 64)
	}
}

// A chain: each task after the one before, run by one host: two round
// trips a task, nothing to batch.
func BenchmarkChain(b *testing.B) {
	const length = 5000
	addr := benchServer(b)
	for i := 0; b.Loop(); i++ {
		p := fmt.Sprintf("c%d-", i)
		tasks := []*codec.TaskMsg{task(p + "0")}
		for j := 1; j < length; j++ {
			tasks = append(tasks, task(fmt.Sprint(p, j), fmt.Sprint(p, j-1)))
		}
		runDAG(b, addr, tasks, length, 1, 1)
	}
}

// The handler alone, no sockets: Create, Steal and complete one task per
// op; its allocations are protobuf's decoding, sched's job and Find's
// copy of the name.
func BenchmarkHandle(b *testing.B) {
	s := sched.New(sched.Config{})
	defer s.Close()
	var draining atomic.Bool
	h := newHandler(s, "dwork", "hub", newLocations(s, "dwork", 16, defaultLocationTTL), &draining, nil)
	steal := marshal(b, stealReq("h"))
	creates, dones := make([][]byte, b.N), make([][]byte, b.N)
	for i := range b.N {
		name := fmt.Sprint("t", i)
		creates[i], dones[i] = marshal(b, createReq(task(name))), marshal(b, doneReq("h", name))
	}
	// A REQ peer's envelope, as zmq4's ROUTER gives it: its identity (a
	// UUID when it sends none) and the empty delimiter.
	env := [][]byte{[]byte("4b9c5a4e-36a1-4a52-9f23-5d1c1a0f6e2b"), {}}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		for _, m := range [][]byte{creates[i], steal, dones[i]} {
			if out := h.handle(m, env); len(out) < 2 || out[1] == byte(codec.QueryMsg_Error) {
				b.Fatalf("reply %x", out)
			}
		}
	}
}

func marshal(b *testing.B, m *codec.QueryMsg) []byte {
	out, err := proto.Marshal(m)
	if err != nil {
		b.Fatal(err)
	}
	return out
}
