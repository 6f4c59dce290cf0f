package jepsen

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// Type is what an event of the history says of its operation.
type Type string

const (
	// Invoke: the operation was begun (a request about to be sent).
	Invoke Type = "invoke"
	// OK: the server acknowledged it.
	OK Type = "ok"
	// Fail: it did not happen as far as the client knows: the server
	// refused it (it may still have been committed: a refused submit may
	// run), or it was never sent (Error says "not sent": it cannot run).
	Fail Type = "fail"
	// Unknown: no answer came in time, or the protocol gives none (a
	// worker's completion): it may or may not have happened.
	Unknown Type = "unknown"
	// Info: the nemesis's, once a fault is in place or undone.
	Info Type = "info"
)

// Event is one line of a history: the invocation of an operation, or its
// completion (ok, fail, unknown, info), which names the same process. A
// process does one operation at a time: its events pair up in order.
type Event struct {
	Index   int    `json:"index"`
	Time    int64  `json:"time"` // ns since the history began
	Process string `json:"process"`
	Type    Type   `json:"type"`
	// Proto is the protocol of a client's or worker's operation; empty for
	// the nemesis.
	Proto string `json:"proto,omitempty"`
	// F is what the operation does: submit, run, complete (a worker's
	// report of a job done), create (dwork), call (MemoDB), and the
	// nemesis's faults.
	F string `json:"f"`
	// Node is the node the operation's connection went to.
	Node string `json:"node,omitempty"`
	// Key names the job: a Gearman unique, a Periodic name, a dwork task,
	// a MemoDB job's payload.
	Key string `json:"key,omitempty"`
	// Value is what the job carries or got: a Periodic payload's version,
	// a MemoDB result.
	Value string `json:"value,omitempty"`
	// Handle is the server's name of the job: a Gearman handle, a Periodic
	// job_id.
	Handle string `json:"handle,omitempty"`
	// Deps are a dwork task's predecessors; Nodes the nodes a fault acts
	// on.
	Deps  []string `json:"deps,omitempty"`
	Nodes []string `json:"nodes,omitempty"`
	Error string   `json:"error,omitempty"`
}

// Operation is an invocation and its completion, paired.
type Operation struct {
	Process, Proto, F, Node, Key, Value, Handle string
	Deps, Nodes                                 []string
	// Type is the completion's: OK, Fail, Unknown or Info (Unknown for an
	// invocation the history ends without a completion of).
	Type  Type
	Error string
	// Call and Return are the invocation's and the completion's times, ns
	// since the history began. Index is the invocation's line.
	Call, Return int64
	Index        int
}

// notSent is the Error of a Fail whose request never left the client
// (alone, or followed by ": " and why).
const notSent = "not sent"

// isNotSent says whether a Fail's Error is notSent's.
func isNotSent(e string) bool { return e == notSent || strings.HasPrefix(e, notSent+": ") }

// Recorder writes a history as JSON lines, and keeps it.
type Recorder struct {
	start time.Time

	mu     sync.Mutex
	w      *bufio.Writer
	f      *os.File
	events []Event
	err    error
}

// NewRecorder starts a history at path ("" keeps it in memory only).
func NewRecorder(path string) (*Recorder, error) {
	r := &Recorder{start: time.Now()}
	if path != "" {
		f, err := os.Create(path)
		if err != nil {
			return nil, err
		}
		r.f, r.w = f, bufio.NewWriterSize(f, 64<<10)
	}
	return r, nil
}

// Now is the history's time now.
func (r *Recorder) Now() int64 { return int64(time.Since(r.start)) }

// At is the history's time t.
func (r *Recorder) At(t time.Time) int64 { return int64(t.Sub(r.start)) }

// Add appends events, in order, as one step: an operation's invocation
// and its completion go in together (a worker learns what it ran only
// when the job arrives), each with its own time.
func (r *Recorder) Add(evs ...Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range evs {
		e.Index = len(r.events)
		r.events = append(r.events, e)
		if r.w != nil && r.err == nil {
			b, err := json.Marshal(e)
			if err == nil {
				b = append(b, '\n')
				_, err = r.w.Write(b)
			}
			r.err = err
		}
	}
}

// Op records a whole operation: its invocation at call, with inv's
// fields, and its completion now, of type t, with done's fields (Type,
// Time, Process and Proto are set here).
func (r *Recorder) Op(call int64, inv Event, t Type, done Event) {
	inv.Time, inv.Type = call, Invoke
	done.Time, done.Type, done.Process, done.Proto = r.Now(), t, inv.Process, inv.Proto
	if done.F == "" {
		done.F = inv.F
	}
	r.Add(inv, done)
}

// Events is a copy of the history so far.
func (r *Recorder) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// Close flushes the file.
func (r *Recorder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		return r.err
	}
	err := r.err
	if ferr := r.w.Flush(); err == nil {
		err = ferr
	}
	if cerr := r.f.Close(); err == nil {
		err = cerr
	}
	r.f = nil
	return err
}

// ReadHistory reads a history's JSON lines.
func ReadHistory(rd io.Reader) ([]Event, error) {
	var out []Event
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for line := 1; sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("history line %d: %w", line, err)
		}
		out = append(out, e)
	}
	return out, sc.Err()
}

// Pair pairs each process's invocations with their completions, in the
// order of the lines. An invocation without a completion ends Unknown at
// the history's last time; a completion without an invocation, or an
// invocation while the process has one open, is an error.
func Pair(events []Event) ([]Operation, error) {
	open := map[string]int{} // process -> index in out
	var out []Operation
	var end int64
	for _, e := range events {
		end = max(end, e.Time)
		if e.Type == Invoke {
			if i, ok := open[e.Process]; ok {
				return nil, fmt.Errorf("history line %d: %s invokes %s with %s (line %d) open", e.Index, e.Process, e.F, out[i].F, out[i].Index)
			}
			open[e.Process] = len(out)
			out = append(out, Operation{Process: e.Process, Proto: e.Proto, F: e.F, Node: e.Node, Key: e.Key,
				Value: e.Value, Handle: e.Handle, Deps: e.Deps, Nodes: e.Nodes, Call: e.Time, Index: e.Index, Type: Unknown})
			continue
		}
		i, ok := open[e.Process]
		if !ok {
			return nil, fmt.Errorf("history line %d: %s completes %s, never invoked", e.Index, e.Process, e.F)
		}
		delete(open, e.Process)
		o := &out[i]
		o.Type, o.Return, o.Error = e.Type, e.Time, e.Error
		// What the completion learnt: a handle, a key, a value.
		if e.Node != "" {
			o.Node = e.Node
		}
		if e.Key != "" {
			o.Key = e.Key
		}
		if e.Value != "" {
			o.Value = e.Value
		}
		if e.Handle != "" {
			o.Handle = e.Handle
		}
		if len(e.Deps) > 0 {
			o.Deps = e.Deps
		}
		if len(e.Nodes) > 0 {
			o.Nodes = e.Nodes
		}
	}
	for _, i := range open {
		out[i].Return = end
	}
	slices.SortStableFunc(out, func(a, b Operation) int {
		if a.Call != b.Call {
			if a.Call < b.Call {
				return -1
			}
			return 1
		}
		return a.Index - b.Index
	})
	return out, nil
}
