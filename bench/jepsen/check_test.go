package jepsen

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// h builds a hand-made history: each op is one operation, invoked at its
// first time and completed at its second (seconds).
type h []op

type op struct {
	call, ret float64
	e         Event // Process, Proto, F, Node, Key, Value, Handle, Deps, Nodes
	t         Type
	err       string
}

func (hist h) events() []Event {
	var out []Event
	for _, o := range hist {
		inv := o.e
		inv.Type, inv.Time = Invoke, int64(o.call*1e9)
		done := o.e
		done.Type, done.Time, done.Error = o.t, int64(o.ret*1e9), o.err
		out = append(out, inv, done)
	}
	// As a recorder writes them: by the time of the completion.
	slices.SortStableFunc(out, func(a, b Event) int { return int(a.Time - b.Time) })
	for i := range out {
		out[i].Index = i
	}
	return out
}

// Shorthands: a Gearman submit of unique u answered with handle hd, a run
// of it, a completion.
func gsubmit(call, ret float64, proc, node, u, hd string, t Type) op {
	return op{call, ret, Event{Process: proc, Proto: Gearman, F: "submit", Node: node, Key: u, Handle: hd}, t, ""}
}
func grun(call, ret float64, proc, u, hd string) op {
	return op{call, ret, Event{Process: proc, Proto: Gearman, F: "run", Node: "n1", Key: u, Handle: hd}, OK, ""}
}
func gdone(at float64, proc, u, hd string) op {
	return op{at, at, Event{Process: proc, Proto: Gearman, F: "complete", Key: u, Handle: hd}, Unknown, ""}
}
func psubmit(call, ret float64, proc, name string, v int, t Type) op {
	return op{call, ret, Event{Process: proc, Proto: Periodic, F: "submit", Node: "n1", Key: name, Value: fmt.Sprintf("v%d", v)}, t, ""}
}
func prun(call, ret float64, proc, name string, v int) op {
	return op{call, ret, Event{Process: proc, Proto: Periodic, F: "run", Node: "n1", Key: name, Value: fmt.Sprintf("v%d", v)}, OK, ""}
}
func pdone(at float64, proc, name string, v int) op {
	return op{at, at, Event{Process: proc, Proto: Periodic, F: "complete", Key: name, Value: fmt.Sprintf("v%d", v)}, Unknown, ""}
}
func dcreate(call, ret float64, proc, task string, t Type, deps ...string) op {
	return op{call, ret, Event{Process: proc, Proto: Dwork, F: "create", Node: "n1", Key: task, Deps: deps}, t, ""}
}
func drun(call, ret float64, proc, task string) op {
	return op{call, ret, Event{Process: proc, Proto: Dwork, F: "run", Node: "n1", Key: task}, OK, ""}
}
func ddone(call, ret float64, proc, task string, t Type) op {
	return op{call, ret, Event{Process: proc, Proto: Dwork, F: "complete", Node: "n1", Key: task}, t, ""}
}
func mcall(call, ret float64, proc, key, result string, t Type) op {
	return op{call, ret, Event{Process: proc, Proto: Memodb, F: "call", Node: "n1", Key: key, Value: result}, t, ""}
}
func mrun(call, ret float64, proc, key string) op {
	return op{call, ret, Event{Process: proc, Proto: Memodb, F: "run", Node: "n1", Key: key}, OK, ""}
}
func nem(call, ret float64, f string, nodes ...string) op {
	return op{call, ret, Event{Process: nemesis, F: f, Nodes: nodes}, Info, ""}
}
func refused(o op, why string) op { o.err = why; return o }

// TestCheck runs the checker over histories made by hand, each breaking
// one rule or keeping to them all, and checks its verdict and counts.
func TestCheck(t *testing.T) {
	tests := []struct {
		name  string
		hist  h
		rules []string // the findings' rules, in order; none: valid
		check func(t *testing.T, r *Result)
	}{
		{"gearman: acknowledged, run, completed", h{
			gsubmit(0, 1, "c1", "n1", "u1", "H:s:1", OK),
			grun(0.5, 2, "w1", "u1", "H:s:1"),
			gdone(2.1, "w1", "u1", "H:s:1"),
		}, nil, func(t *testing.T, r *Result) {
			if c := r.Counts[Gearman]; c.Submits != 1 || c.OK != 1 || c.Runs != 1 || c.Duplicated != 0 {
				t.Errorf("counts %+v", *c)
			}
		}},
		{"gearman: acknowledged, never ran", h{
			gsubmit(0, 1, "c1", "n1", "u1", "H:s:1", OK),
			gsubmit(1, 2, "c1", "n1", "u2", "H:s:2", OK),
			grun(2, 3, "w1", "u2", "H:s:2"),
		}, []string{RuleLost}, func(t *testing.T, r *Result) {
			if r.Lost() != 1 || r.Findings[0].Key != "u1" {
				t.Errorf("lost %d, %+v", r.Lost(), r.Findings)
			}
		}},
		{"gearman: refused, unanswered and run twice: at least once", h{
			refused(gsubmit(0, 1, "c1", "n1", "u1", "", Fail), "QUEUE_ERROR"),
			gsubmit(1, 6, "c1", "n1", "u2", "", Unknown),
			refused(gsubmit(6, 6, "c1", "n1", "u3", "", Fail), notSent),
			gsubmit(6, 7, "c1", "n1", "u4", "H:s:4", OK),
			grun(2, 3, "w1", "u1", "H:s:1"),
			grun(3, 4, "w1", "u2", "H:s:2"),
			grun(7, 8, "w1", "u4", "H:s:4"),
			grun(8, 9, "w2", "u4", "H:s:4"),
		}, nil, func(t *testing.T, r *Result) {
			if c := r.Counts[Gearman]; c.RefusedRan != 1 || c.UnknownRan != 1 || c.Failed != 2 || c.Unknown != 1 || c.Duplicated != 1 || c.Extra != 1 {
				t.Errorf("counts %+v", *c)
			}
		}},
		{"gearman: a job never sent ran", h{
			refused(gsubmit(0, 0, "c1", "n1", "u1", "", Fail), notSent),
			grun(1, 2, "w1", "u1", "H:s:1"),
		}, []string{RulePhantom}, nil},
		{"gearman: coalesced into the live job", h{
			gsubmit(0, 1, "c1", "n1", "u1", "H:s:1", OK),
			gsubmit(1.5, 2, "c2", "n2", "u1", "H:s:1", OK),
			grun(2.5, 3, "w1", "u1", "H:s:1"),
			gdone(3.5, "w1", "u1", "H:s:1"),
		}, nil, nil},
		{"gearman: a second job for the unique once the first completed", h{
			gsubmit(0, 1, "c1", "n1", "u1", "H:s:1", OK),
			grun(1, 2, "w1", "u1", "H:s:1"),
			gdone(2.5, "w1", "u1", "H:s:1"),
			gsubmit(3, 4, "c2", "n2", "u1", "H:s:7", OK),
			grun(4, 5, "w1", "u1", "H:s:7"),
		}, nil, nil},
		{"gearman: two live jobs for one unique", h{
			gsubmit(0, 1, "c1", "n1", "u1", "H:s:1", OK),
			gsubmit(2, 3, "c2", "n2", "u1", "H:s:7", OK),
			grun(4, 5, "w1", "u1", "H:s:1"),
			grun(4, 5, "w2", "u1", "H:s:7"),
		}, []string{RuleTwoLive}, nil},
		{"gearman: an unanswered submit made the job another acknowledged coalesced into", h{
			gsubmit(0, 5, "c1", "n1", "u1", "", Unknown),
			gsubmit(2, 3, "c2", "n2", "u1", "H:s:3", OK),
			grun(3, 4, "w1", "u1", "H:s:3"),
		}, nil, nil},
		{"gearman: a completed job ran again after a second job for its unique", h{
			gsubmit(0, 1, "c1", "n1", "u1", "H:s:1", OK),
			grun(1, 2, "w1", "u1", "H:s:1"),
			gdone(2, "w1", "u1", "H:s:1"),
			gsubmit(3, 4, "c2", "n2", "u1", "H:s:9", OK),
			grun(5, 6, "w2", "u1", "H:s:1"),
			grun(7, 8, "w2", "u1", "H:s:9"),
		}, []string{RuleTwoLive}, nil},
		{"periodic: replaced, the new version ran", h{
			psubmit(0, 1, "c1", "p1", 1, OK),
			prun(0.5, 1.5, "w1", "p1", 1), // its grab came before the replace
			psubmit(2, 3, "c1", "p1", 2, OK),
			pdone(3.5, "w1", "p1", 1),
			prun(3, 4, "w2", "p1", 2),
			pdone(4.5, "w2", "p1", 2),
		}, nil, nil},
		{"periodic: a run of a version older than an acknowledged replace", h{
			psubmit(0, 1, "c1", "p1", 1, OK),
			psubmit(2, 3, "c1", "p1", 2, OK),
			prun(4, 5, "w1", "p1", 1),
			prun(5, 6, "w1", "p1", 2),
		}, []string{RuleStale}, nil},
		{"periodic: the acknowledged version never ran", h{
			psubmit(0, 1, "c1", "p1", 1, OK),
			prun(1, 2, "w1", "p1", 1),
			psubmit(3, 4, "c1", "p1", 2, OK),
		}, []string{RuleLost}, nil},
		{"periodic: a refused replace that ran after all", h{
			psubmit(0, 1, "c1", "p1", 1, OK),
			refused(psubmit(2, 3, "c1", "p1", 2, Fail), "not committed"),
			prun(4, 5, "w1", "p1", 2),
		}, nil, nil},
		{"periodic: an unanswered replace ran, was lost with its leader, and the acknowledged version ran", h{
			psubmit(0, 1, "c1", "p1", 1, OK),
			psubmit(2, 5, "c1", "p1", 2, Unknown),
			prun(2.5, 3, "w1", "p1", 2),
			prun(6, 7, "w2", "p1", 1),
			psubmit(8, 9, "c1", "p1", 3, OK),
			prun(10, 11, "w1", "p1", 3),
		}, nil, nil},
		{"periodic: an unanswered replace ran, then a version older than the acknowledged one", h{
			psubmit(0, 1, "c1", "p1", 1, OK),
			psubmit(1.5, 1.8, "c1", "p1", 2, OK),
			psubmit(2, 5, "c1", "p1", 3, Unknown),
			prun(2.5, 3, "w1", "p1", 3),
			prun(6, 7, "w2", "p1", 1),
			prun(8, 9, "w2", "p1", 2),
		}, []string{RuleStale}, nil},
		{"periodic: a run again of a version whose completion was lost", h{
			psubmit(0, 1, "c1", "p1", 1, OK),
			prun(1, 2, "w1", "p1", 1),
			pdone(2, "w1", "p1", 1),
			prun(4, 5, "w2", "p1", 1),
		}, nil, func(t *testing.T, r *Result) {
			if c := r.Counts[Periodic]; c.Duplicated != 1 {
				t.Errorf("counts %+v", *c)
			}
		}},
		{"dwork: in order", h{
			dcreate(0, 1, "c1", "a", OK),
			dcreate(1, 2, "c1", "b", OK, "a"),
			drun(2, 3, "w1", "a"),
			ddone(3, 4, "w1", "a", OK),
			drun(3.5, 5, "w2", "b"),
			ddone(5, 6, "w2", "b", OK),
		}, nil, nil},
		{"dwork: a task ran before its predecessor completed", h{
			dcreate(0, 1, "c1", "a", OK),
			dcreate(1, 2, "c1", "b", OK, "a"),
			drun(2, 3, "w1", "a"),
			drun(2.5, 3.5, "w2", "b"),
			ddone(4, 5, "w1", "a", OK),
		}, []string{RuleOrder}, nil},
		{"dwork: a predecessor whose create got no answer counts as done", h{
			dcreate(0, 9, "c1", "a", Unknown),
			dcreate(9, 10, "c1", "b", OK, "a"),
			drun(10, 11, "w1", "b"),
		}, nil, nil},
		{"dwork: an acknowledged task never ran", h{
			dcreate(0, 1, "c1", "a", OK),
		}, []string{RuleLost}, nil},
		{"memodb: answered with its own result after a run", h{
			mcall(0, 3, "c1", "m1", MemoResult("m1"), OK),
			mrun(1, 2, "w1", "m1"),
			mcall(3, 8, "c1", "m2", "", Unknown),
		}, nil, nil},
		{"memodb: answered with another job's result", h{
			mcall(0, 3, "c1", "m1", MemoResult("m2"), OK),
			mrun(1, 2, "w1", "m1"),
		}, []string{RulePhantom}, nil},
		{"memodb: answered before any run", h{
			mcall(0, 1, "c1", "m1", MemoResult("m1"), OK),
			mrun(1, 2, "w1", "m1"),
		}, []string{RuleLost}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ops, err := Pair(tt.hist.events())
			if err != nil {
				t.Fatal(err)
			}
			r := Check(ops, Options{ModelTimeout: 10 * time.Second})
			var rules []string
			for _, f := range r.Findings {
				rules = append(rules, f.Rule)
			}
			if !slices.Equal(rules, tt.rules) {
				var b strings.Builder
				r.WriteText(&b)
				t.Errorf("findings %v, want %v\n%s", rules, tt.rules, b.String())
			}
			if r.Valid() != (len(tt.rules) == 0) {
				t.Errorf("Valid %v with findings %v", r.Valid(), rules)
			}
			if tt.check != nil {
				tt.check(t, r)
			}
		})
	}
}

// TestCheckRecovery: after each heal, every node up must acknowledge a
// submit within the bound; a node killed is not waited for until it is
// restarted.
func TestCheckRecovery(t *testing.T) {
	base := h{
		gsubmit(0, 0.1, "c1", "n1", "a", "H:s:1", OK),
		gsubmit(0, 0.1, "c2", "n2", "b", "H:s:2", OK),
		grun(0.1, 0.2, "w1", "a", "H:s:1"),
		grun(0.1, 0.2, "w2", "b", "H:s:2"),
		nem(1, 1.1, "partition", "n1"),
		nem(3, 3.1, "heal"),
		gsubmit(2, 4, "c1", "n1", "c", "H:s:3", OK),
		gsubmit(3.5, 9.5, "c2", "n2", "d", "H:s:4", OK), // 6.5 s after the heal
		grun(9.5, 9.6, "w1", "c", "H:s:3"),
		grun(9.5, 9.6, "w2", "d", "H:s:4"),
		nem(10, 10.1, "kill", "n2"),
		nem(11, 11.1, "heal"),
		gsubmit(11, 11.5, "c1", "n1", "e", "H:s:5", OK), // n2 is down
		grun(11.5, 11.6, "w1", "e", "H:s:5"),
		nem(12, 14, "restart", "n2"),
		gsubmit(12, 20, "c1", "n1", "f", "H:s:6", OK),
		grun(20, 20.1, "w1", "f", "H:s:6"),
	}
	tests := []struct {
		name  string
		bound time.Duration
		want  []string
	}{
		{"within 10 s", 10 * time.Second, []string{RuleRecovery}}, // n2 never acknowledges after its restart
		{"within 5 s", 5 * time.Second, []string{RuleRecovery, RuleRecovery}},
		{"no bound", 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ops, err := Pair(base.events())
			if err != nil {
				t.Fatal(err)
			}
			r := Check(ops, Options{RecoverWithin: tt.bound})
			var rules []string
			for _, f := range r.Findings {
				rules = append(rules, f.Rule)
			}
			if !slices.Equal(rules, tt.want) {
				var b strings.Builder
				r.WriteText(&b)
				t.Errorf("findings %v, want %v\n%s", rules, tt.want, b.String())
			}
			if len(r.Recoveries) != 3 || r.Faults != 2 {
				t.Fatalf("recoveries %+v, faults %d", r.Recoveries, r.Faults)
			}
			if rc := r.Recoveries[0]; !rc.Done || rc.Took != 6500*time.Millisecond || rc.Nodes != 2 || !slices.Equal(rc.Slow, []string{"n2"}) {
				t.Errorf("first recovery %+v", rc)
			}
			if rc := r.Recoveries[1]; !rc.Done || rc.Took != 500*time.Millisecond || rc.Nodes != 1 {
				t.Errorf("second recovery (n2 down) %+v", rc)
			}
			if rc := r.Recoveries[2]; rc.Done || !slices.Equal(rc.Slow, []string{"n2"}) {
				t.Errorf("third recovery (n2 silent) %+v", rc)
			}
		})
	}
}

// TestCheckRestartWhileCut: a node restarted while the network is cut
// cannot serve; the heal after is what is measured.
func TestCheckRestartWhileCut(t *testing.T) {
	hist := h{
		nem(1, 1.1, "partition", "n3"),
		nem(1.2, 1.3, "kill", "n3"),
		nem(1.4, 1.5, "restart", "n3"),
		gsubmit(1, 1.5, "c1", "n1", "a", "H:s:1", OK),
		grun(1.5, 1.6, "w1", "a", "H:s:1"),
		gsubmit(1, 5, "c3", "n3", "b", "", Unknown),
		nem(5, 5.1, "heal"),
		gsubmit(5, 5.5, "c1", "n1", "c", "H:s:3", OK),
		gsubmit(5, 6, "c3", "n3", "d", "H:s:4", OK),
		grun(6, 6.1, "w1", "c", "H:s:3"),
		grun(6.1, 6.2, "w1", "d", "H:s:4"),
	}
	ops, err := Pair(hist.events())
	if err != nil {
		t.Fatal(err)
	}
	r := Check(ops, Options{RecoverWithin: 2 * time.Second})
	if !r.Valid() || len(r.Recoveries) != 1 || r.Recoveries[0].Took != time.Second || r.Faults != 2 {
		var b strings.Builder
		r.WriteText(&b)
		t.Errorf("recoveries %+v, faults %d\n%s", r.Recoveries, r.Faults, b.String())
	}
}

// TestPair: events pair up by process; a completion never invoked, and
// an invocation while one is open, are errors; an invocation the history
// ends with is unknown.
func TestPair(t *testing.T) {
	ev := func(i int, at int64, proc string, typ Type) Event {
		return Event{Index: i, Time: at, Process: proc, Type: typ, F: "submit", Proto: Gearman, Key: proc}
	}
	ops, err := Pair([]Event{ev(0, 1, "a", Invoke), ev(1, 2, "b", Invoke), ev(2, 3, "a", OK), ev(3, 4, "c", Invoke), ev(4, 5, "c", Fail)})
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 3 || ops[0].Type != OK || ops[0].Return != 3 || ops[1].Type != Unknown || ops[1].Return != 5 || ops[2].Type != Fail {
		t.Errorf("paired %+v", ops)
	}
	if _, err := Pair([]Event{ev(0, 1, "a", OK)}); err == nil {
		t.Error("a completion never invoked")
	}
	if _, err := Pair([]Event{ev(0, 1, "a", Invoke), ev(1, 2, "a", Invoke)}); err == nil {
		t.Error("two invocations open")
	}
}
