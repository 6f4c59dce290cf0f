package gearhttp

import (
	"testing"

	codec "switchyard/codec/gearman"
	"switchyard/sched"
)

// What a foreground request answers for each sequence of worker reports:
// gearmand's HTTP module ends the response at the first report that is not
// WORK_DATA, and the WORK_DATA before it come first in the body.
func TestResult(t *testing.T) {
	data := func(s string) sched.Update { return sched.Update{Kind: sched.Data, Data: []byte(s)} }
	complete := func(s string) sched.Update { return sched.Update{Kind: sched.Complete, Data: []byte(s)} }
	tests := []struct {
		name       string
		exceptions bool
		max        int64
		updates    []sched.Update
		ended      bool
		command    codec.Type
		body       string
		overflow   bool
	}{
		{name: "complete", updates: []sched.Update{complete("r")}, ended: true, command: codec.WorkComplete, body: "r"},
		{name: "empty complete", updates: []sched.Update{complete("")}, ended: true, command: codec.WorkComplete},
		{name: "data then complete", updates: []sched.Update{data("d1"), data("d2"), complete("done")},
			ended: true, command: codec.WorkComplete, body: "d1d2done"},
		{name: "data only", updates: []sched.Update{data("d1")}},
		{name: "status ends it", updates: []sched.Update{data("d"), {Kind: sched.Status, Data: []byte("1"), Den: []byte("2")}, complete("late")},
			ended: true, command: codec.WorkStatus, body: "d"},
		{name: "warning ends it", updates: []sched.Update{{Kind: sched.Warning, Data: []byte("w")}, complete("late")},
			ended: true, command: codec.WorkWarning, body: "w"},
		{name: "fail", updates: []sched.Update{data("d"), {Kind: sched.Fail}}, ended: true, command: codec.WorkFail, body: "d"},
		{name: "exception as fail", updates: []sched.Update{{Kind: sched.Exception, Data: []byte("boom")}},
			ended: true, command: codec.WorkFail},
		{name: "exception", exceptions: true, updates: []sched.Update{{Kind: sched.Exception, Data: []byte("boom")}},
			ended: true, command: codec.WorkException, body: "boom"},
		{name: "data over the limit", max: 3, updates: []sched.Update{data("ab"), data("cd"), complete("x")},
			ended: true, body: "ab", overflow: true},
		{name: "result over the limit", max: 3, updates: []sched.Update{data("ab"), complete("cd")},
			ended: true, command: codec.WorkComplete, body: "ab", overflow: true},
		{name: "at the limit", max: 4, updates: []sched.Update{data("ab"), complete("cd")},
			ended: true, command: codec.WorkComplete, body: "abcd"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := &result{max: tc.max, exceptions: tc.exceptions, done: make(chan struct{})}
			if res.max == 0 {
				res.max = DefaultMaxBody
			}
			for i := range tc.updates {
				u := tc.updates[i]
				res.Notify(7, &u)
				// The data is the caller's again after Notify.
				for j := range u.Data {
					u.Data[j] = '!'
				}
			}
			select {
			case <-res.done:
				if !tc.ended {
					t.Fatal("ended")
				}
			default:
				if tc.ended {
					t.Fatal("not ended")
				}
				return
			}
			if res.command != tc.command || string(res.body) != tc.body || res.overflow != tc.overflow {
				t.Fatalf("command %v, body %q, overflow %v; want %v, %q, %v",
					res.command, res.body, res.overflow, tc.command, tc.body, tc.overflow)
			}
		})
	}
}
