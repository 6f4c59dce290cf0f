package jepsen

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The protocols of a history.
const (
	Gearman  = "gearman"
	Periodic = "periodic"
	Dwork    = "dwork"
	Memodb   = "memodb"
)

// Protocols in the order reports list them.
var Protocols = []string{Gearman, Periodic, Dwork, Memodb}

// What the checker fails on.
const (
	RuleLost      = "lost"      // an acknowledged job never ran
	RuleStale     = "stale"     // a Periodic run of a payload older than an acknowledged replace
	RuleOrder     = "order"     // a dwork task ran before a predecessor completed
	RuleTwoLive   = "two-live"  // two live jobs for one (function, unique)
	RulePhantom   = "phantom"   // a job ran that was never sent, or a result no run made
	RuleRecovery  = "recovery"  // no acknowledged submit through every node within the bound of a heal
	RuleUnchecked = "unchecked" // porcupine ran out of time: not proven either way
)

// Options tune Check.
type Options struct {
	// RecoverWithin bounds the time from a heal (or a restart) to the
	// moment every node up has acknowledged a submit again; 0: no bound.
	RecoverWithin time.Duration
	// ModelTimeout bounds each porcupine check; 0: a minute.
	ModelTimeout time.Duration
	// Visualize, if set, is called with the name of a model whose check
	// failed and porcupine's visualization of it (HTML).
	Visualize func(name string, html []byte)
}

// Counts are one protocol's submits (Gearman and Periodic submits, dwork
// creates, MemoDB calls) by outcome, and what the jobs did.
type Counts struct {
	Submits, OK, Failed, Unknown int
	// Runs are the runs the workers saw; Duplicated the jobs that ran
	// more than once (at least once allows it), Extra their runs beyond
	// the first.
	Runs, Duplicated, Extra int
	// RefusedRan are jobs whose every submit was refused by the server
	// and that ran all the same (the refusal came after the write reached
	// a majority: at least once allows it); UnknownRan those whose
	// submits got no answer and ran.
	RefusedRan, UnknownRan int
	// Lost are acknowledged jobs that never ran.
	Lost int
}

// Finding is a violation, with the operations that show it.
type Finding struct {
	Rule, Proto, Key, Text string
	Ops                    []Operation
}

// Recovery is how long the cluster took to acknowledge submits through
// every node again after a heal.
type Recovery struct {
	Fault string // the heal's description
	At    int64  // the heal's invocation
	Took  time.Duration
	// Done is false if some node acknowledged nothing before the next
	// fault or the end: Took is then the time until that.
	Done  bool
	Slow  []string // the nodes last to recover, or not recovered
	Nodes int
}

// Result is the checker's verdict on a history.
type Result struct {
	Counts     map[string]*Counts
	Findings   []Finding
	Recoveries []Recovery
	Faults     int // nemesis faults (heals not counted)
	Duration   time.Duration
}

// Valid says whether the history broke no rule.
func (r *Result) Valid() bool { return len(r.Findings) == 0 }

// Lost counts the acknowledged jobs lost, over every protocol.
func (r *Result) Lost() int {
	n := 0
	for _, c := range r.Counts {
		n += c.Lost
	}
	return n
}

// Sum adds up every protocol's counts.
func (r *Result) Sum() Counts {
	var s Counts
	for _, c := range r.Counts {
		s.Submits += c.Submits
		s.OK += c.OK
		s.Failed += c.Failed
		s.Unknown += c.Unknown
		s.Runs += c.Runs
		s.Duplicated += c.Duplicated
		s.Extra += c.Extra
		s.RefusedRan += c.RefusedRan
		s.UnknownRan += c.UnknownRan
		s.Lost += c.Lost
	}
	return s
}

// WorstRecovery is the longest of the recoveries.
func (r *Result) WorstRecovery() time.Duration {
	var w time.Duration
	for _, rc := range r.Recoveries {
		w = max(w, rc.Took)
	}
	return w
}

// Check checks a history's operations (Pair's) against every rule.
func Check(ops []Operation, o Options) *Result {
	if o.ModelTimeout == 0 {
		o.ModelTimeout = time.Minute
	}
	r := &Result{Counts: map[string]*Counts{}}
	for _, p := range Protocols {
		r.Counts[p] = &Counts{}
	}
	var end int64
	for _, op := range ops {
		end = max(end, op.Return, op.Call)
		if op.Process == nemesis && !heals[op.F] {
			r.Faults++
		}
	}
	r.Duration = time.Duration(end)
	byProto := map[string][]Operation{}
	for _, op := range ops {
		if op.Proto != "" {
			byProto[op.Proto] = append(byProto[op.Proto], op)
		}
	}
	r.checkGearman(byProto[Gearman], end, o)
	r.checkPeriodic(byProto[Periodic], end, o)
	r.checkDwork(byProto[Dwork])
	r.checkMemodb(byProto[Memodb])
	r.checkRecovery(ops, end, o.RecoverWithin)
	return r
}

func (r *Result) add(f Finding) { r.Findings = append(r.Findings, f) }

// jobs groups a protocol's operations by key: submits (f), runs and
// completions.
type jobOps struct {
	submits, runs, completes []Operation
}

func groupByKey(ops []Operation, submit string) map[string]*jobOps {
	m := map[string]*jobOps{}
	get := func(k string) *jobOps {
		j := m[k]
		if j == nil {
			j = &jobOps{}
			m[k] = j
		}
		return j
	}
	for _, op := range ops {
		switch {
		case op.F == submit:
			get(op.Key).submits = append(get(op.Key).submits, op)
		case op.F == "run" && op.Type == OK:
			get(op.Key).runs = append(get(op.Key).runs, op)
		case op.F == "complete":
			get(op.Key).completes = append(get(op.Key).completes, op)
		}
	}
	return m
}

// countSubmits counts the submits by outcome, and the jobs refused or
// unanswered that ran; it reports a run of a key never sent.
func (r *Result) countSubmits(proto string, jobs map[string]*jobOps) {
	c := r.Counts[proto]
	for _, k := range slices.Sorted(maps.Keys(jobs)) {
		j := jobs[k]
		acked, refused, sent := false, false, false
		for _, s := range j.submits {
			c.Submits++
			switch s.Type {
			case OK:
				c.OK++
				acked, sent = true, true
			case Fail:
				c.Failed++
				if !isNotSent(s.Error) {
					refused, sent = true, true
				}
			default:
				c.Unknown++
				sent = true
			}
		}
		c.Runs += len(j.runs)
		if len(j.runs) == 0 {
			continue
		}
		switch {
		case !sent:
			r.add(Finding{Rule: RulePhantom, Proto: proto, Key: k, Text: "ran, but no submit of it was ever sent",
				Ops: append(slices.Clone(j.submits), j.runs...)})
		case acked:
		case refused:
			c.RefusedRan++
		default:
			c.UnknownRan++
		}
	}
}

// countDuplicates counts the jobs run more than once: runs of one key
// and one id (a handle, a version) beyond the first.
func (r *Result) countDuplicates(proto string, jobs map[string]*jobOps, id func(Operation) string) {
	c := r.Counts[proto]
	for _, j := range jobs {
		seen := map[string]int{}
		for _, run := range j.runs {
			seen[id(run)]++
		}
		for _, n := range seen {
			if n > 1 {
				c.Duplicated++
				c.Extra += n - 1
			}
		}
	}
}

// lostUnlessRan reports every acknowledged submit of a key that has no
// run.
func (r *Result) lostUnlessRan(proto string, jobs map[string]*jobOps) {
	for _, k := range slices.Sorted(maps.Keys(jobs)) {
		j := jobs[k]
		if len(j.runs) > 0 {
			continue
		}
		for _, s := range j.submits {
			if s.Type == OK {
				r.Counts[proto].Lost++
				r.add(Finding{Rule: RuleLost, Proto: proto, Key: k, Text: "acknowledged, never ran", Ops: j.submits})
				break
			}
		}
	}
}

// checkGearman: every acknowledged unique ran; no two live jobs for one
// unique (porcupine, uniqueModel).
func (r *Result) checkGearman(ops []Operation, end int64, o Options) {
	jobs := groupByKey(ops, "submit")
	r.countSubmits(Gearman, jobs)
	r.countDuplicates(Gearman, jobs, func(op Operation) string { return op.Handle })
	r.lostUnlessRan(Gearman, jobs)
	var hist []Operation
	for _, k := range slices.Sorted(maps.Keys(jobs)) {
		j := jobs[k]
		handles := map[string]bool{}
		for _, op := range append(slices.Clone(j.submits), j.runs...) {
			if op.Handle != "" {
				handles[op.Handle] = true
			}
		}
		if len(handles) < 2 {
			continue // one job: nothing to tell apart
		}
		hist = append(hist, j.submits...)
		hist = append(hist, j.runs...)
		hist = append(hist, j.completes...)
	}
	r.model(Gearman, RuleTwoLive, uniqueModel, hist, end, o)
}

// checkPeriodic: the latest acknowledged version of every name ran (or a
// later one did); no run of a version older than an acknowledged replace
// (porcupine, registerModel).
func (r *Result) checkPeriodic(ops []Operation, end int64, o Options) {
	jobs := groupByKey(ops, "submit")
	r.countSubmits(Periodic, jobs)
	r.countDuplicates(Periodic, jobs, func(op Operation) string { return op.Value })
	c := r.Counts[Periodic]
	var hist []Operation
	for _, k := range slices.Sorted(maps.Keys(jobs)) {
		j := jobs[k]
		acked := -1
		for _, s := range j.submits {
			if s.Type == OK {
				acked = max(acked, version(s.Value))
			}
		}
		ran := -1
		for _, run := range j.runs {
			ran = max(ran, version(run.Value))
		}
		if acked >= 0 && ran < acked {
			c.Lost++
			text := fmt.Sprintf("version %d acknowledged, never ran", acked)
			if ran >= 0 {
				text += fmt.Sprintf(" (the latest run was of version %d)", ran)
			}
			r.add(Finding{Rule: RuleLost, Proto: Periodic, Key: k, Text: text, Ops: append(slices.Clone(j.submits), j.runs...)})
		}
		hist = append(hist, j.submits...)
		hist = append(hist, j.runs...)
		hist = append(hist, j.completes...)
	}
	r.model(Periodic, RuleStale, registerModel, hist, end, o)
}

// version reads a Periodic payload's version, "v3"; -1 if it is none.
func version(v string) int {
	n, err := strconv.Atoi(strings.TrimPrefix(v, "v"))
	if err != nil || !strings.HasPrefix(v, "v") {
		return -1
	}
	return n
}

// checkDwork: every acknowledged task ran, and none before a predecessor
// whose create was acknowledged before its own was sent had been reported
// complete.
func (r *Result) checkDwork(ops []Operation) {
	jobs := groupByKey(ops, "create")
	r.countSubmits(Dwork, jobs)
	r.countDuplicates(Dwork, jobs, func(Operation) string { return "" })
	r.lostUnlessRan(Dwork, jobs)
	for _, k := range slices.Sorted(maps.Keys(jobs)) {
		j := jobs[k]
		for _, run := range j.runs {
			for _, create := range j.submits {
				if create.Call > run.Return {
					continue // a create after the run adds nothing to it
				}
				for _, p := range create.Deps {
					pj := jobs[p]
					if pj == nil || !ackedBefore(pj.submits, create.Call) {
						continue // may not exist: counts as done
					}
					if !calledBefore(pj.completes, run.Return) {
						r.add(Finding{Rule: RuleOrder, Proto: Dwork, Key: k,
							Text: fmt.Sprintf("ran before its predecessor %s was reported complete", p),
							Ops:  append(append([]Operation{create, run}, pj.submits...), pj.completes...)})
					}
				}
			}
		}
	}
}

func ackedBefore(ops []Operation, t int64) bool {
	for _, op := range ops {
		if op.Type == OK && op.Return <= t {
			return true
		}
	}
	return false
}

func calledBefore(ops []Operation, t int64) bool {
	for _, op := range ops {
		if op.Call < t && op.Type != Fail {
			return true
		}
	}
	return false
}

// MemoResult is what the workload's MemoDB workers answer a job with.
func MemoResult(key string) string { return "ran " + key }

// checkMemodb: every result a client got is its own job's, made by a run
// that came before it. MemoDB jobs are the clients' (foreground): what is
// acknowledged is the result itself.
func (r *Result) checkMemodb(ops []Operation) {
	jobs := groupByKey(ops, "call")
	r.countSubmits(Memodb, jobs)
	r.countDuplicates(Memodb, jobs, func(Operation) string { return "" })
	c := r.Counts[Memodb]
	for _, k := range slices.Sorted(maps.Keys(jobs)) {
		j := jobs[k]
		for _, call := range j.submits {
			if call.Type != OK {
				continue
			}
			if call.Value != MemoResult(k) {
				r.add(Finding{Rule: RulePhantom, Proto: Memodb, Key: k, Text: fmt.Sprintf("answered %q, not its own job's result", call.Value), Ops: []Operation{call}})
				continue
			}
			if !slices.ContainsFunc(j.runs, func(run Operation) bool { return run.Return <= call.Return }) {
				c.Lost++
				r.add(Finding{Rule: RuleLost, Proto: Memodb, Key: k, Text: "answered with a result before any worker ran it", Ops: append([]Operation{call}, j.runs...)})
			}
		}
	}
}

// The nemesis's operations. A heal ends a fault; the others make one.
const nemesis = "nemesis"

// heals are the nemesis operations that end faults: after each, every
// node up must acknowledge submits again within the bound. A restart
// while the network is cut (or a node paused) ends nothing yet: the heal
// that follows is measured.
var heals = map[string]bool{"heal": true, "restart": true, "start": true}

// netFaults are the faults a heal undoes.
var netFaults = map[string]bool{"partition": true, "oneway": true, "loss": true, "pause": true}

// checkRecovery measures, for every heal, the time until every node up
// (and named by some client's operation) has acknowledged a submit since
// its invocation, up to the next fault.
func (r *Result) checkRecovery(ops []Operation, end int64, bound time.Duration) {
	clientNodes := map[string]bool{}
	var acks []Operation
	for _, op := range ops {
		if op.Proto == "" || op.Node == "" {
			continue
		}
		if op.F == "submit" || op.F == "create" {
			clientNodes[op.Node] = true
			if op.Type == OK {
				acks = append(acks, op)
			}
		}
	}
	slices.SortFunc(acks, func(a, b Operation) int { return cmp.Compare(a.Return, b.Return) })
	var nem []Operation
	for _, op := range ops {
		if op.Process == nemesis {
			nem = append(nem, op)
		}
	}
	down := map[string]bool{}
	cut := false
	for i, op := range nem {
		cut = cut && op.F != "heal" || netFaults[op.F]
		switch op.F {
		case "kill", "remove":
			for _, n := range op.Nodes {
				down[n] = true
			}
		case "restart", "start", "add":
			for _, n := range op.Nodes {
				delete(down, n)
			}
		}
		if !heals[op.F] || cut {
			continue
		}
		until := end
		if i+1 < len(nem) {
			until = nem[i+1].Call
		}
		want := map[string]bool{}
		for n := range clientNodes {
			if !down[n] {
				want[n] = true
			}
		}
		rc := Recovery{Fault: describe(op), At: op.Call, Nodes: len(want)}
		last := op.Call
		for _, a := range acks {
			if len(want) == 0 || a.Return > until {
				break
			}
			if a.Return >= op.Call && want[a.Node] {
				delete(want, a.Node)
				last = a.Return
				if len(want) == 0 {
					rc.Slow = []string{a.Node}
				}
			}
		}
		rc.Done = len(want) == 0
		if rc.Done {
			rc.Took = time.Duration(last - op.Call)
		} else {
			rc.Took = time.Duration(until - op.Call)
			rc.Slow = slices.Sorted(maps.Keys(want))
		}
		r.Recoveries = append(r.Recoveries, rc)
		if bound > 0 && (!rc.Done || rc.Took > bound) {
			what := fmt.Sprintf("%s: every node acknowledged a submit again only after %v (bound %v; last: %s)", rc.Fault, rc.Took.Round(time.Millisecond), bound, strings.Join(rc.Slow, " "))
			if !rc.Done {
				what = fmt.Sprintf("%s: no submit acknowledged through %s in the %v before the next fault or the end", rc.Fault, strings.Join(rc.Slow, " "), rc.Took.Round(time.Millisecond))
			}
			r.add(Finding{Rule: RuleRecovery, Text: what, Ops: []Operation{op}})
		}
	}
}

func describe(op Operation) string {
	s := op.F
	if op.Value != "" {
		s += " " + op.Value
	} else if len(op.Nodes) > 0 {
		s += " " + strings.Join(op.Nodes, " ")
	}
	return s
}

// WriteText writes the verdict for a reader: the counts, each finding
// with its operations, the recoveries.
func (r *Result) WriteText(w io.Writer) {
	verdict := "VALID"
	if !r.Valid() {
		verdict = fmt.Sprintf("INVALID: %d findings", len(r.Findings))
	}
	fmt.Fprintf(w, "%s (%d faults, %v)\n\n", verdict, r.Faults, r.Duration.Round(time.Millisecond))
	fmt.Fprintf(w, "%-9s %8s %8s %7s %8s %7s %5s %11s %6s %8s %8s\n", "protocol", "submits", "acked", "failed", "unknown", "runs", "lost", "duplicated", "extra", "refused+", "unknown+")
	for _, p := range Protocols {
		c := r.Counts[p]
		fmt.Fprintf(w, "%-9s %8d %8d %7d %8d %7d %5d %11d %6d %8d %8d\n", p, c.Submits, c.OK, c.Failed, c.Unknown, c.Runs, c.Lost, c.Duplicated, c.Extra, c.RefusedRan, c.UnknownRan)
	}
	fmt.Fprintf(w, "\n(duplicated: jobs run more than once, extra: their runs beyond the first; refused+: jobs whose every submit\n"+
		"was refused that ran; unknown+: jobs whose submits got no answer that ran: all allowed by at least once)\n")
	if len(r.Recoveries) > 0 {
		fmt.Fprintf(w, "\nrecoveries (time from a heal until every node up acknowledged a submit), worst %v:\n", r.WorstRecovery().Round(time.Millisecond))
		for _, rc := range r.Recoveries {
			state := ""
			if !rc.Done {
				state = " NOT RECOVERED"
			}
			fmt.Fprintf(w, "  %10.3fs %-32s %8v%s (last: %s)\n", float64(rc.At)/1e9, rc.Fault, rc.Took.Round(time.Millisecond), state, strings.Join(rc.Slow, " "))
		}
	}
	for i, f := range r.Findings {
		fmt.Fprintf(w, "\nfinding %d: %s %s %s: %s\n", i+1, f.Rule, f.Proto, f.Key, f.Text)
		for _, op := range f.Ops {
			fmt.Fprintf(w, "    %s\n", formatOp(op))
		}
	}
}

func formatOp(op Operation) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[%.3fs..%.3fs] %s %s %s", float64(op.Call)/1e9, float64(op.Return)/1e9, op.Process, op.F, op.Type)
	for _, kv := range [][2]string{{"node", op.Node}, {"key", op.Key}, {"value", op.Value}, {"handle", op.Handle},
		{"deps", strings.Join(op.Deps, ",")}, {"nodes", strings.Join(op.Nodes, ",")}, {"error", op.Error}} {
		if kv[1] != "" {
			fmt.Fprintf(&b, " %s=%s", kv[0], kv[1])
		}
	}
	fmt.Fprintf(&b, " (line %d)", op.Index)
	return b.String()
}
