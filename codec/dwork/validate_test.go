package dwork

import (
	"errors"
	"math"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
)

func TestValidEnums(t *testing.T) {
	for v := int32(-2); v < 10; v++ {
		if got, want := QueryMsg_Type(v).Valid(), v >= 0 && v <= 7; got != want {
			t.Errorf("QueryMsg_Type(%d).Valid() = %v", v, got)
		}
		if got, want := TaskMsg_State(v).Valid(), v >= 0 && v <= 7; got != want {
			t.Errorf("TaskMsg_State(%d).Valid() = %v", v, got)
		}
		// The generated name tables hold exactly the valid values.
		_, ok := QueryMsg_Type_name[v]
		_, ok2 := TaskMsg_State_name[v]
		if ok != QueryMsg_Type(v).Valid() || ok2 != TaskMsg_State(v).Valid() {
			t.Errorf("name tables disagree with Valid at %d", v)
		}
		want := v == 0 || v == 1 || v == 2 || v == 3 || v == 6
		if got := QueryMsg_Type(v).IsRequest(); got != want {
			t.Errorf("QueryMsg_Type(%d).IsRequest() = %v", v, got)
		}
	}
}

func typ(t QueryMsg_Type) *QueryMsg_Type { return t.Enum() }

// stolen is a task as the hub hands it out: its name, origin the hub's host
// name, one log entry Stolen at 1700000000000000 µs.
func stolen(name string) *TaskMsg {
	return &TaskMsg{Name: proto.String(name), Origin: proto.String("hub"),
		Log: []*TaskMsg_LogMsg{{State: TaskMsg_Stolen.Enum(), Time: proto.Int64(1700000000000000)}}}
}

// task is a well-formed task with the given name.
func task(name string) *TaskMsg {
	return &TaskMsg{Name: proto.String(name), Origin: proto.String("h")}
}

func tasks(n int) []*TaskMsg {
	ts := make([]*TaskMsg, n)
	for i := range ts {
		ts[i] = task("t")
	}
	return ts
}

func deps(n int) []*TaskMsg_Dep {
	ds := make([]*TaskMsg_Dep, n)
	for i := range ds {
		ds[i] = &TaskMsg_Dep{Name: proto.String("d")}
	}
	return ds
}

func logs(n int) []*TaskMsg_LogMsg {
	ls := make([]*TaskMsg_LogMsg, n)
	for i := range ls {
		ls[i] = &TaskMsg_LogMsg{State: TaskMsg_Started.Enum(), Time: proto.Int64(int64(i))}
	}
	return ls
}

func create(ts ...*TaskMsg) *QueryMsg { return &QueryMsg{Type: typ(QueryMsg_Create), Task: ts} }

func complete(ts ...*TaskMsg) *QueryMsg {
	return &QueryMsg{Type: typ(QueryMsg_Transfer), Task: ts, Location: proto.String("w1")}
}

func steal() *QueryMsg { return &QueryMsg{Type: typ(QueryMsg_Steal), Location: proto.String("w1")} }

func lookup() *QueryMsg { return &QueryMsg{Type: typ(QueryMsg_Lookup), Name: proto.String("a")} }

func exit() *QueryMsg { return &QueryMsg{Type: typ(QueryMsg_Exit), Location: proto.String("w1")} }

// with returns m after f has changed it.
func with(m *QueryMsg, f func(*QueryMsg)) *QueryMsg {
	f(m)
	return m
}

// TestValidateRequest: every rule of the table in ValidateRequest's
// comment, each field of each request type present and absent, every
// required field of a task, and every limit at and past its bound.
func TestValidateRequest(t *testing.T) {
	long := func(n int) *string { return proto.String(strings.Repeat("x", n)) }
	for _, tc := range []struct {
		name string
		m    *QueryMsg
		err  error
		text string // the whole error text, when given
	}{
		// The type.
		{"no type", &QueryMsg{Location: proto.String("w1")}, ErrMissingField, "dwork: missing field: type"},
		{"type 8", &QueryMsg{Type: typ(8)}, ErrUnknownType, "dwork: unknown query type 8"},
		{"type -1", &QueryMsg{Type: typ(-1)}, ErrUnknownType, ""},
		{"NotFound", &QueryMsg{Type: typ(QueryMsg_NotFound)}, ErrNotRequest, "dwork: not a request type: NotFound"},
		{"OK", &QueryMsg{Type: typ(QueryMsg_OK)}, ErrNotRequest, ""},
		{"Error", &QueryMsg{Type: typ(QueryMsg_Error)}, ErrNotRequest, ""},
		{"OK shaped like a Steal", with(steal(), func(m *QueryMsg) { m.Type = typ(QueryMsg_OK) }), ErrNotRequest, ""},
		{"NotFound with tasks", &QueryMsg{Type: typ(QueryMsg_NotFound), Task: tasks(1)}, ErrNotRequest, ""},

		// Create: task >= 1; no name, n or location.
		{"create", create(task("a")), nil, ""},
		{"create MaxTasks", create(tasks(MaxTasks)...), nil, ""},
		{"create with preds", create(&TaskMsg{Name: proto.String("b"), Origin: proto.String("h"), Pred: deps(3)}), nil, ""},
		{"create no task", create(), ErrMissingField, "dwork: missing field: Create without a task"},
		{"create with name", with(create(task("a")), func(m *QueryMsg) { m.Name = proto.String("a") }),
			ErrUnexpectedField, "dwork: unexpected field: Create with a name"},
		{"create with empty name", with(create(task("a")), func(m *QueryMsg) { m.Name = proto.String("") }), ErrUnexpectedField, ""},
		{"create with n", with(create(task("a")), func(m *QueryMsg) { m.N = proto.Int32(1) }),
			ErrUnexpectedField, "dwork: unexpected field: Create with n"},
		{"create with n 0", with(create(task("a")), func(m *QueryMsg) { m.N = proto.Int32(0) }), ErrUnexpectedField, ""},
		{"create with location", with(create(task("a")), func(m *QueryMsg) { m.Location = proto.String("w1") }),
			ErrUnexpectedField, "dwork: unexpected field: Create with a location"},
		{"create MaxTasks+1", create(tasks(MaxTasks + 1)...), ErrLimit, "dwork: over a limit: 4097 tasks, at most 4096"},

		// Steal: location; n optional; no task or name.
		{"steal", steal(), nil, ""},
		{"steal n", with(steal(), func(m *QueryMsg) { m.N = proto.Int32(8) }), nil, ""},
		{"steal n 0", with(steal(), func(m *QueryMsg) { m.N = proto.Int32(0) }), nil, ""},
		{"steal n -1", with(steal(), func(m *QueryMsg) { m.N = proto.Int32(-1) }), nil, ""},
		{"steal n max", with(steal(), func(m *QueryMsg) { m.N = proto.Int32(math.MaxInt32) }), nil, ""},
		{"steal empty location", with(steal(), func(m *QueryMsg) { m.Location = proto.String("") }), nil, ""},
		{"steal no location", with(steal(), func(m *QueryMsg) { m.Location = nil }),
			ErrMissingField, "dwork: missing field: Steal without a location"},
		{"steal with task", with(steal(), func(m *QueryMsg) { m.Task = tasks(1) }),
			ErrUnexpectedField, "dwork: unexpected field: Steal with 1 tasks"},
		{"steal with name", with(steal(), func(m *QueryMsg) { m.Name = proto.String("w1") }), ErrUnexpectedField, ""},

		// Transfer (a completion): task >= 1 and location; no name or n.
		{"complete", complete(task("a")), nil, ""},
		{"complete two", complete(task("a"), stolen("b")), nil, ""},
		{"complete MaxTasks", complete(tasks(MaxTasks)...), nil, ""},
		{"complete no task", complete(), ErrMissingField, "dwork: missing field: Transfer without a task"},
		{"complete no location", with(complete(task("a")), func(m *QueryMsg) { m.Location = nil }),
			ErrMissingField, "dwork: missing field: Transfer without a location"},
		{"complete with name", with(complete(task("a")), func(m *QueryMsg) { m.Name = proto.String("a") }), ErrUnexpectedField, ""},
		{"complete with n", with(complete(task("a")), func(m *QueryMsg) { m.N = proto.Int32(1) }), ErrUnexpectedField, ""},
		{"complete MaxTasks+1", complete(tasks(MaxTasks + 1)...), ErrLimit, ""},

		// Lookup (the spec): name; no task, n or location.
		{"lookup", lookup(), nil, ""},
		{"lookup empty name", with(lookup(), func(m *QueryMsg) { m.Name = proto.String("") }), nil, ""},
		{"lookup no name", with(lookup(), func(m *QueryMsg) { m.Name = nil }),
			ErrMissingField, "dwork: missing field: Lookup without a name"},
		{"lookup with task", with(lookup(), func(m *QueryMsg) { m.Task = tasks(1) }), ErrUnexpectedField, ""},
		{"lookup with n", with(lookup(), func(m *QueryMsg) { m.N = proto.Int32(1) }), ErrUnexpectedField, ""},
		{"lookup with location", with(lookup(), func(m *QueryMsg) { m.Location = proto.String("w1") }), ErrUnexpectedField, ""},

		// Exit: location only.
		{"exit", exit(), nil, ""},
		{"exit no location", with(exit(), func(m *QueryMsg) { m.Location = nil }), ErrMissingField, ""},
		{"exit with task", with(exit(), func(m *QueryMsg) { m.Task = tasks(2) }), ErrUnexpectedField, ""},
		{"exit with name", with(exit(), func(m *QueryMsg) { m.Name = proto.String("") }), ErrUnexpectedField, ""},
		{"exit with n", with(exit(), func(m *QueryMsg) { m.N = proto.Int32(1) }), ErrUnexpectedField, ""},

		// Names and locations.
		{"lookup name MaxName", with(lookup(), func(m *QueryMsg) { m.Name = long(MaxName) }), nil, ""},
		{"lookup name MaxName+1", with(lookup(), func(m *QueryMsg) { m.Name = long(MaxName + 1) }),
			ErrLimit, "dwork: over a limit: name of 4097 bytes, at most 4096"},
		{"steal location MaxLocation", with(steal(), func(m *QueryMsg) { m.Location = long(MaxLocation) }), nil, ""},
		{"steal location MaxLocation+1", with(steal(), func(m *QueryMsg) { m.Location = long(MaxLocation + 1) }), ErrLimit, ""},
		{"exit location MaxLocation+1", with(exit(), func(m *QueryMsg) { m.Location = long(MaxLocation + 1) }), ErrLimit, ""},
		{"complete location MaxLocation+1", with(complete(task("a")), func(m *QueryMsg) { m.Location = long(MaxLocation + 1) }), ErrLimit, ""},

		// Each task's required fields.
		{"nil task", create(nil), ErrMissingField, "task[0]: dwork: missing field: name"},
		{"task without name", create(&TaskMsg{Origin: proto.String("h")}), ErrMissingField, "task[0]: dwork: missing field: name"},
		{"second task without origin", complete(task("a"), &TaskMsg{Name: proto.String("b")}),
			ErrMissingField, "task[1]: dwork: missing field: origin"},
		{"task with empty name and origin", create(&TaskMsg{Name: proto.String(""), Origin: proto.String("")}), nil, ""},
		{"pred without name", create(&TaskMsg{Name: proto.String("b"), Origin: proto.String("h"),
			Pred: []*TaskMsg_Dep{{Name: proto.String("a")}, {Location: proto.String("u")}}}),
			ErrMissingField, "task[0]: dwork: missing field: pred[1].name"},
		{"nil pred", create(&TaskMsg{Name: proto.String("b"), Origin: proto.String("h"), Pred: []*TaskMsg_Dep{nil}}), ErrMissingField, ""},
		{"succ without name", complete(&TaskMsg{Name: proto.String("b"), Origin: proto.String("h"),
			Succ: []*TaskMsg_Dep{{}}}), ErrMissingField, "task[0]: dwork: missing field: succ[0].name"},
		{"log without state", complete(&TaskMsg{Name: proto.String("b"), Origin: proto.String("h"),
			Log: []*TaskMsg_LogMsg{{Time: proto.Int64(1)}}}), ErrMissingField, "task[0]: dwork: missing field: log[0].state"},
		{"log without time", complete(&TaskMsg{Name: proto.String("b"), Origin: proto.String("h"),
			Log: []*TaskMsg_LogMsg{{State: TaskMsg_Done.Enum(), Time: proto.Int64(1)}, {State: TaskMsg_Done.Enum()}}}),
			ErrMissingField, "task[0]: dwork: missing field: log[1].time"},
		{"nil log", complete(&TaskMsg{Name: proto.String("b"), Origin: proto.String("h"), Log: []*TaskMsg_LogMsg{nil}}), ErrMissingField, ""},
		{"log state 8", complete(&TaskMsg{Name: proto.String("b"), Origin: proto.String("h"),
			Log: []*TaskMsg_LogMsg{{State: TaskMsg_State(8).Enum(), Time: proto.Int64(1)}}}),
			ErrUnknownState, "task[0]: log[0]: dwork: unknown task state 8"},
		{"log state -1", complete(&TaskMsg{Name: proto.String("b"), Origin: proto.String("h"),
			Log: []*TaskMsg_LogMsg{{State: TaskMsg_State(-1).Enum(), Time: proto.Int64(1)}}}), ErrUnknownState, ""},
		{"log every state, any time", complete(&TaskMsg{Name: proto.String("b"), Origin: proto.String("h"),
			Log: []*TaskMsg_LogMsg{
				{State: TaskMsg_Pending.Enum(), Time: proto.Int64(math.MinInt64)}, {State: TaskMsg_Stolen.Enum(), Time: proto.Int64(0)},
				{State: TaskMsg_Waiting.Enum(), Time: proto.Int64(-1)}, {State: TaskMsg_Copying.Enum(), Time: proto.Int64(1)},
				{State: TaskMsg_Ready.Enum(), Time: proto.Int64(2)}, {State: TaskMsg_Started.Enum(), Time: proto.Int64(3)},
				{State: TaskMsg_Done.Enum(), Time: proto.Int64(4)}, {State: TaskMsg_Recorded.Enum(), Time: proto.Int64(math.MaxInt64)},
			}}), nil, ""},

		// Each task's limits.
		{"task name MaxName", create(&TaskMsg{Name: long(MaxName), Origin: proto.String("h")}), nil, ""},
		{"task name MaxName+1", create(&TaskMsg{Name: long(MaxName + 1), Origin: proto.String("h")}),
			ErrLimit, "task[0]: dwork: over a limit: name of 4097 bytes, at most 4096"},
		{"origin MaxLocation", create(&TaskMsg{Name: proto.String("a"), Origin: long(MaxLocation)}), nil, ""},
		{"origin MaxLocation+1", create(&TaskMsg{Name: proto.String("a"), Origin: long(MaxLocation + 1)}), ErrLimit, ""},
		{"pred name MaxName+1", create(&TaskMsg{Name: proto.String("a"), Origin: proto.String("h"),
			Pred: []*TaskMsg_Dep{{Name: long(MaxName + 1)}}}), ErrLimit, ""},
		{"succ location MaxLocation+1", create(&TaskMsg{Name: proto.String("a"), Origin: proto.String("h"),
			Succ: []*TaskMsg_Dep{{Name: proto.String("b"), Location: long(MaxLocation + 1)}}}), ErrLimit, ""},
		{"dep location MaxLocation", create(&TaskMsg{Name: proto.String("a"), Origin: proto.String("h"),
			Pred: []*TaskMsg_Dep{{Name: long(MaxName), Location: long(MaxLocation)}}}), nil, ""},
		{"MaxDeps in pred and succ", create(&TaskMsg{Name: proto.String("a"), Origin: proto.String("h"),
			Pred: deps(MaxDeps - 10), Succ: deps(10)}), nil, ""},
		{"MaxDeps+1 in pred and succ", create(&TaskMsg{Name: proto.String("a"), Origin: proto.String("h"),
			Pred: deps(MaxDeps - 10), Succ: deps(11)}), ErrLimit, "task[0]: dwork: over a limit: 4086 pred and 11 succ, at most 4096 in all"},
		{"MaxLog", complete(&TaskMsg{Name: proto.String("a"), Origin: proto.String("h"), Log: logs(MaxLog)}), nil, ""},
		{"MaxLog+1", complete(&TaskMsg{Name: proto.String("a"), Origin: proto.String("h"), Log: logs(MaxLog + 1)}), ErrLimit, ""},
	} {
		err := ValidateRequest(tc.m)
		if !errors.Is(err, tc.err) || (err == nil) != (tc.err == nil) {
			t.Errorf("%s: ValidateRequest = %v, want %v", tc.name, err, tc.err)
			continue
		}
		if tc.text != "" && (err == nil || err.Error() != tc.text) {
			t.Errorf("%s: error text %q, want %q", tc.name, err, tc.text)
		}
		if want := wantValid(tc.m); (err == nil) != want {
			t.Errorf("%s: wantValid = %v, but ValidateRequest = %v", tc.name, want, err)
		}
		// A valid request is one the .proto calls initialized.
		if err == nil {
			if ierr := proto.CheckInitialized(tc.m); ierr != nil {
				t.Errorf("%s: valid, but %v", tc.name, ierr)
			}
		}
	}
}

func TestStealCount(t *testing.T) {
	for _, tc := range []struct {
		n    *int32
		want int
	}{
		{nil, 1},
		{proto.Int32(1), 1},
		{proto.Int32(7), 7},
		{proto.Int32(0), 0},
		{proto.Int32(-3), 0},
		{proto.Int32(math.MinInt32), 0},
		{proto.Int32(MaxSteal), MaxSteal},
		{proto.Int32(MaxSteal + 1), MaxSteal},
		{proto.Int32(math.MaxInt32), MaxSteal},
	} {
		m := steal()
		m.N = tc.n
		if got := StealCount(m); got != tc.want {
			t.Errorf("StealCount(n=%v) = %d, want %d", m.N, got, tc.want)
		}
	}
}
