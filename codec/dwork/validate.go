package dwork

import (
	"errors"
	"fmt"
)

// Limits ValidateRequest enforces, and the server with it. The real hub
// bounds nothing; these keep one request's cost (the tasks it creates, the
// dependency edges it adds, the bytes of every name it keeps) proportionate
// to MaxMessage.
const (
	// MaxTasks bounds the tasks of one Create or completion (Transfer).
	// The real dquery client sends Create in blocks of 16.
	MaxTasks = 4096
	// MaxDeps bounds one task's pred plus succ entries.
	MaxDeps = 4096
	// MaxLog bounds one task's log entries (one per state it entered; a
	// task the hub hands out carries one).
	MaxLog = 64
	// MaxName bounds a task name in bytes: TaskMsg.name, Dep.name and
	// Lookup's QueryMsg.name.
	MaxName = 4096
	// MaxLocation bounds a host name or URL in bytes: QueryMsg.location,
	// TaskMsg.origin and Dep.location.
	MaxLocation = 1024
	// MaxSteal bounds the tasks one Steal is given, whatever its n asks
	// (see StealCount). Not an error: the reply may always hold fewer.
	MaxSteal = 1024
)

// Valid reports whether t is a QueryMsg.Type the .proto defines. Go's
// protobuf keeps any number in an enum field, proto2 or not.
func (t QueryMsg_Type) Valid() bool {
	return t >= QueryMsg_Create && t <= QueryMsg_Error
}

// IsRequest reports whether a client may send t: Create, Steal, Transfer,
// Lookup or Exit. NotFound, OK and Error are replies only.
func (t QueryMsg_Type) IsRequest() bool {
	switch t {
	case QueryMsg_Create, QueryMsg_Steal, QueryMsg_Transfer, QueryMsg_Lookup, QueryMsg_Exit:
		return true
	}
	return false
}

// Valid reports whether s is a TaskMsg.State the .proto defines.
func (s TaskMsg_State) Valid() bool {
	return s >= TaskMsg_Pending && s <= TaskMsg_Recorded
}

// Errors returned by ValidateRequest, wrapped with what was wrong and where;
// test them with errors.Is. The server answers every one with
// QueryMsg{type: Error}, as the real hub answers an ill-formed query.
var (
	// ErrUnknownType: QueryMsg.type is a number the .proto does not define.
	ErrUnknownType = errors.New("dwork: unknown query type")
	// ErrNotRequest: QueryMsg.type is a reply (NotFound, OK, Error).
	ErrNotRequest = errors.New("dwork: not a request type")
	// ErrMissingField: a field the request type requires is absent (task,
	// name, location), or a field the .proto marks required is (type;
	// a task's name or origin; a dependency's name; a log entry's state or
	// time).
	ErrMissingField = errors.New("dwork: missing field")
	// ErrUnexpectedField: a field the request type must not have is
	// present (the spec: "Components of QueryMsg not explicitly listed
	// below must be absent from the message").
	ErrUnexpectedField = errors.New("dwork: unexpected field")
	// ErrUnknownState: a task's log entry has a state the .proto does not
	// define.
	ErrUnknownState = errors.New("dwork: unknown task state")
	// ErrLimit: a count or a length is above one of the limits above.
	ErrLimit = errors.New("dwork: over a limit")
)

// ValidateRequest checks a request against the rules of the real hub
// (frobnitzem/dwork 2ca92dc, Hub::valid_query in src/dhub.cc) and, for
// Lookup, which that hub refuses, against the spec (the .proto's comments:
// "Lookup: lookup a location", "name: task to lookup"). A field is present
// when it is set, as the hub's has_*() says: an empty string is present.
//
//	type      task        name      n          location
//	Create    1 or more   absent    absent     absent
//	Steal     none        absent    optional   present
//	Transfer  1 or more   absent    absent     present    (a completion)
//	Lookup    none        present   absent     absent
//	Exit      none        absent    absent     present
//	NotFound, OK, Error: refused (ErrNotRequest); absent type: refused
//	(ErrMissingField); another number: refused (ErrUnknownType).
//
// Each task of a Create or completion must have what the .proto requires:
// a name and an origin, a name in each pred and succ, a state (one the
// .proto defines) and a time in each log entry; pred is ignored on a
// completion and succ on a Create, but both are checked, as the .proto
// declares them. The real hub checks none of that (its parse failures are
// ignored) and would take a task without an origin; its own clients always
// send one.
//
// The limits: at most MaxTasks tasks, MaxDeps pred plus succ per task,
// MaxLog log entries per task, MaxName bytes per name and MaxLocation per
// location or origin. Steal's n is not checked (see StealCount).
func ValidateRequest(m *QueryMsg) error {
	if m.Type == nil {
		return fmt.Errorf("%w: type", ErrMissingField)
	}
	t := *m.Type
	if !t.Valid() {
		return fmt.Errorf("%w %d", ErrUnknownType, int32(t))
	}
	if !t.IsRequest() {
		return fmt.Errorf("%w: %v", ErrNotRequest, t)
	}

	// What each request type needs and must not have.
	var needTasks, needName, needLocation, allowN bool
	switch t {
	case QueryMsg_Create:
		needTasks = true
	case QueryMsg_Steal:
		needLocation, allowN = true, true
	case QueryMsg_Transfer:
		needTasks, needLocation = true, true
	case QueryMsg_Lookup:
		needName = true
	case QueryMsg_Exit:
		needLocation = true
	}
	switch {
	case needTasks && len(m.Task) == 0:
		return fmt.Errorf("%w: %v without a task", ErrMissingField, t)
	case !needTasks && len(m.Task) != 0:
		return fmt.Errorf("%w: %v with %d tasks", ErrUnexpectedField, t, len(m.Task))
	case needName && m.Name == nil:
		return fmt.Errorf("%w: %v without a name", ErrMissingField, t)
	case !needName && m.Name != nil:
		return fmt.Errorf("%w: %v with a name", ErrUnexpectedField, t)
	case !allowN && m.N != nil:
		return fmt.Errorf("%w: %v with n", ErrUnexpectedField, t)
	case needLocation && m.Location == nil:
		return fmt.Errorf("%w: %v without a location", ErrMissingField, t)
	case !needLocation && m.Location != nil:
		return fmt.Errorf("%w: %v with a location", ErrUnexpectedField, t)
	}

	if len(m.Task) > MaxTasks {
		return fmt.Errorf("%w: %d tasks, at most %d", ErrLimit, len(m.Task), MaxTasks)
	}
	if m.Name != nil && len(*m.Name) > MaxName {
		return fmt.Errorf("%w: name of %d bytes, at most %d", ErrLimit, len(*m.Name), MaxName)
	}
	if m.Location != nil && len(*m.Location) > MaxLocation {
		return fmt.Errorf("%w: location of %d bytes, at most %d", ErrLimit, len(*m.Location), MaxLocation)
	}
	for i, task := range m.Task {
		if err := validateTask(task); err != nil {
			return fmt.Errorf("task[%d]: %w", i, err)
		}
	}
	return nil
}

// validateTask checks one task's required fields and limits.
func validateTask(task *TaskMsg) error {
	switch {
	case task == nil || task.Name == nil:
		return fmt.Errorf("%w: name", ErrMissingField)
	case len(*task.Name) > MaxName:
		return fmt.Errorf("%w: name of %d bytes, at most %d", ErrLimit, len(*task.Name), MaxName)
	case task.Origin == nil:
		return fmt.Errorf("%w: origin", ErrMissingField)
	case len(*task.Origin) > MaxLocation:
		return fmt.Errorf("%w: origin of %d bytes, at most %d", ErrLimit, len(*task.Origin), MaxLocation)
	case len(task.Pred)+len(task.Succ) > MaxDeps:
		return fmt.Errorf("%w: %d pred and %d succ, at most %d in all", ErrLimit, len(task.Pred), len(task.Succ), MaxDeps)
	case len(task.Log) > MaxLog:
		return fmt.Errorf("%w: %d log entries, at most %d", ErrLimit, len(task.Log), MaxLog)
	}
	if err := validateDeps("pred", task.Pred); err != nil {
		return err
	}
	if err := validateDeps("succ", task.Succ); err != nil {
		return err
	}
	for i, l := range task.Log {
		switch {
		case l == nil || l.State == nil:
			return fmt.Errorf("%w: log[%d].state", ErrMissingField, i)
		case !l.State.Valid():
			return fmt.Errorf("log[%d]: %w %d", i, ErrUnknownState, int32(*l.State))
		case l.Time == nil:
			return fmt.Errorf("%w: log[%d].time", ErrMissingField, i)
		}
	}
	return nil
}

// validateDeps checks a task's pred or succ list.
func validateDeps(field string, deps []*TaskMsg_Dep) error {
	for i, d := range deps {
		switch {
		case d == nil || d.Name == nil:
			return fmt.Errorf("%w: %s[%d].name", ErrMissingField, field, i)
		case len(*d.Name) > MaxName:
			return fmt.Errorf("%w: %s[%d].name of %d bytes, at most %d", ErrLimit, field, i, len(*d.Name), MaxName)
		case d.Location != nil && len(*d.Location) > MaxLocation:
			return fmt.Errorf("%w: %s[%d].location of %d bytes, at most %d", ErrLimit, field, i, len(*d.Location), MaxLocation)
		}
	}
	return nil
}

// StealCount is how many ready tasks a valid Steal is to be given at most:
// n, 1 when n is absent (the real hub's default), 0 when n is 0 or negative
// (the real hub then hands out nothing and answers NotFound), MaxSteal when
// n is above it.
func StealCount(m *QueryMsg) int {
	if m.N == nil {
		return 1
	}
	return int(max(0, min(*m.N, MaxSteal)))
}
