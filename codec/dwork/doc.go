// Package dwork is the wire format of dwork's QueryMsg API (see
// docs/dwork.md; the real implementation is frobnitzem/dwork at commit
// 2ca92dc, whose hub, dhub, it follows): bytes to messages and back, and
// the rules a request must follow, with no sockets and no scheduler.
//
// # Messages
//
// Two protobuf (proto2) messages, declared in dwork.proto with the real
// .proto's package, field numbers and enum numbers, and generated into
// dwork.pb.go: QueryMsg, every request and every reply, and the TaskMsg it
// carries (with its Dep, LogMsg and State). QueryMsg.Type is Create 0,
// Steal 1, Transfer 2, Lookup 3, NotFound 4, OK 5, Exit 6, Error 7.
//
// # Frames
//
// Clients use a ZeroMQ REQ socket against the hub's ROUTER; ZeroMQ
// delivers whole messages, and one message is one serialized QueryMsg, with
// no length prefix or other framing.
//
// # Use
//
// Decode reads one message into a QueryMsg the caller reuses, refusing
// one over MaxMessage or not in protobuf wire format; ValidateRequest
// checks it against the request rules (a table in its comment) and the
// limits (MaxTasks, MaxDeps, MaxLog, MaxName, MaxLocation); StealCount
// says how many tasks a Steal gets. Every error of either is answered
// with a QueryMsg whose only field is type Error. Append writes a reply
// onto the caller's buffer.
//
// # Requests and their replies
//
// What the server sends back, by the spec, with what the real hub does
// where it differs. The hub reuses the request as its reply, clearing what
// it consumed; the fields listed are all the reply has.
//
//	Create     OK.
//	Steal      Transfer with 1 to StealCount tasks, each with name, origin
//	           (the server's host name) and one log entry {Stolen, now in
//	           µs}; or NotFound when nothing is ready.
//	Transfer   (a completion) OK; or, by the spec, NotFound with the tasks
//	           not found. The hub always answers OK and releases the named
//	           tasks' successors whoever completes them.
//	Lookup     by the spec, OK with name and location (where the task was
//	           done), or NotFound. The hub answers Error (its Lookup is
//	           commented out; that code answers as here).
//	Exit       OK, having requeued the worker's tasks; NotFound if the
//	           worker was "not listed as active" (the hub: it has not
//	           stolen or completed a task since it started or last exited).
//	otherwise  Error.
//
// # Where the real implementation differs
//
//   - Enum numbers: the spec's text numbers Exit 5 and OK 6 and has no
//     Error; the real .proto, which real clients are built from, has OK 5,
//     Exit 6, Error 7, and so has this one.
//   - Required fields: the real hub ignores ParseFromArray's result, so it
//     takes a task without an origin. Decode allows missing required
//     fields and ValidateRequest refuses them (ErrMissingField, naming the
//     field): the .proto requires them, and the real clients set them (the
//     dquery and kworker of later commits; 2ca92dc's dquery is a stub that
//     sends nothing, and leaves origin out).
//   - Unknown enum numbers: the C++ hub sees a type it does not know as
//     absent, hence Create (0); Go's protobuf keeps the number, and
//     ValidateRequest refuses it.
//   - Lookup: see above.
//   - The real hub bounds nothing; MaxMessage and the limits in validate.go
//     are ours.
package dwork

//go:generate protoc --go_out=. --go_opt=paths=source_relative dwork.proto
