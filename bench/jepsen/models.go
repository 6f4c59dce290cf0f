package jepsen

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"slices"

	"github.com/anishathalye/porcupine"
)

// The porcupine models. A history's operations on one key (a Gearman
// unique, a Periodic name) are checked alone. An operation that may or may
// not have happened (a submit refused or unanswered: a refused write may
// still have been committed; a worker's completion, which the protocols do
// not answer) may take effect at any time after its call, or never: its
// return is the history's end, and the models step it both ways.

// uniqueModel is Gearman's coalescing: a (function, unique) has at most
// one live job. Its state is that job's handle, "" for none, or "?" for
// one whose handle no operation has shown yet (a submit with no answer
// that made one).
var uniqueModel = (&porcupine.NondeterministicModel{
	Init: func() []any { return []any{""} },
	Step: func(state, input, _ any) []any {
		s, op := state.(string), input.(Operation)
		switch op.F {
		case "submit":
			switch {
			case op.Type == OK && (s == "" || s == "?" || s == op.Handle):
				return []any{op.Handle} // a new job, or coalesced into the live one
			case op.Type == OK:
				return nil // a second live job
			case op.Type == Fail && isNotSent(op.Error):
				return []any{s}
			case s == "":
				return []any{s, "?"}
			}
			return []any{s}
		case "run":
			if s == op.Handle || s == "?" {
				return []any{op.Handle}
			}
			return nil // a job ran that is not the live one
		case "complete":
			if s == op.Handle {
				return []any{s, ""}
			}
			return []any{s}
		}
		return []any{s}
	},
	DescribeOperation: func(input, _ any) string { return describeModelOp(input.(Operation)) },
	DescribeState: func(state any) string {
		if state.(string) == "" {
			return "no live job"
		}
		return "live: " + state.(string)
	},
}).ToModel()

// registerModel is a Periodic (func, name): its state is the version of
// the job's payload that waits or runs (0: none), and the version the last
// acknowledged submit left. A submit acknowledged sets both; one refused
// or unanswered may have replaced the first, or not. A run reads the
// first, or the acknowledged one: a replace never acknowledged may have
// run (its leader handed it out) and still be lost with that leader, and
// then the acknowledged version runs again. That is at least once; a run
// older than an acknowledged replace is not. A completion of the version
// that waits removes it.
var registerModel = (&porcupine.NondeterministicModel{
	Init: func() []any { return []any{register{}} },
	Step: func(state, input, _ any) []any {
		s, op := state.(register), input.(Operation)
		v := version(op.Value)
		switch op.F {
		case "submit":
			switch {
			case op.Type == OK:
				return []any{register{v, v}}
			case op.Type == Fail && isNotSent(op.Error):
				return []any{s}
			}
			return []any{s, register{v, s.acked}}
		case "run":
			switch v {
			case s.cur:
				return []any{s}
			case s.acked:
				return []any{register{s.acked, s.acked}} // the replace was lost
			}
			return nil // older than an acknowledged replace, or gone
		case "complete":
			if s.cur == v {
				return []any{s, register{}}
			}
			return []any{s}
		}
		return []any{s}
	},
	DescribeOperation: func(input, _ any) string { return describeModelOp(input.(Operation)) },
	DescribeState: func(state any) string {
		s := state.(register)
		if s.cur == 0 {
			return "no job"
		}
		if s.acked != s.cur {
			return fmt.Sprintf("v%d (acknowledged v%d)", s.cur, s.acked)
		}
		return fmt.Sprintf("v%d", s.cur)
	},
}).ToModel()

// register is registerModel's state.
type register struct{ cur, acked int }

func describeModelOp(op Operation) string {
	s := fmt.Sprintf("%s %s %s", op.Process, op.F, op.Type)
	if op.Value != "" {
		s += " " + op.Value
	}
	if op.Handle != "" {
		s += " " + op.Handle
	}
	if op.Node != "" {
		s += " via " + op.Node
	}
	return s
}

// maybe says whether an operation may or may not have taken effect.
func maybe(op Operation) bool {
	return op.Type == Unknown || op.Type == Fail && !isNotSent(op.Error)
}

// model checks each key's operations against m, one key at a time; a key
// that is not linearizable is a finding of rule, one that porcupine ran
// out of time on a finding of RuleUnchecked.
func (r *Result) model(proto, rule string, m porcupine.Model, ops []Operation, end int64, o Options) {
	byKey := map[string][]porcupine.Operation{}
	clients := map[string]int{}
	for _, op := range ops {
		if op.F == "run" && op.Type != OK {
			continue
		}
		ret := op.Return
		if maybe(op) {
			ret = end + 1
		}
		id, ok := clients[op.Process]
		if !ok {
			id = len(clients)
			clients[op.Process] = id
		}
		byKey[op.Key] = append(byKey[op.Key], porcupine.Operation{ClientId: id, Input: op, Call: op.Call, Return: ret})
	}
	for _, k := range slices.Sorted(maps.Keys(byKey)) {
		hist := byKey[k]
		res, info := porcupine.CheckOperationsVerbose(m, hist, o.ModelTimeout)
		if res == porcupine.Ok {
			continue
		}
		var shown []Operation
		for _, h := range hist {
			shown = append(shown, h.Input.(Operation))
		}
		slices.SortFunc(shown, func(a, b Operation) int { return cmp.Compare(a.Call, b.Call) })
		if res == porcupine.Unknown {
			r.add(Finding{Rule: RuleUnchecked, Proto: proto, Key: k, Text: fmt.Sprintf("porcupine gave up after %v: not proven either way", o.ModelTimeout), Ops: shown})
			continue
		}
		text := map[string]string{
			RuleTwoLive: "no order of these operations keeps one live job for the unique",
			RuleStale:   "no order of these operations has every run read the version that waits: a run older than an acknowledged replace",
		}[rule]
		r.add(Finding{Rule: rule, Proto: proto, Key: k, Text: text, Ops: shown})
		if o.Visualize != nil {
			var b bytes.Buffer
			if err := porcupine.Visualize(m, info, &b); err == nil {
				o.Visualize(fmt.Sprintf("%s-%s-%s", proto, rule, k), b.Bytes())
			}
		}
	}
}
