// Package controller is the wire format of the Worker–Controller protocol
// (see docs/controller.md; the real implementation is moevm/grpc_server):
// bytes to frames and messages and back, with no sockets and no scheduler.
//
// # Messages
//
// The four messages and their enums are protobuf (proto3), declared in
// controller.proto and generated into controller.pb.go:
//
//	worker -> controller, main socket:  WorkerPulse, answered by PulseResponse
//	controller -> worker, its socket:   ControlMsg,  answered by WorkerResponse
//
// Each connection carries one request and its answer, then is closed.
//
// # Frames
//
// Every message on a stream is preceded by its length:
//
//	8 bytes     length      uint64, little-endian: the message's size
//	length      message     the serialized protobuf message
//	extra_size  extra       raw bytes (ControlMsg and WorkerResponse only)
//
// ControlMsg (field 2) and WorkerResponse (field 3) carry an extra_size
// field: exactly that many raw bytes follow the message (the task for
// SET_TASK, the result after FETCH, an error text). WorkerPulse and
// PulseResponse carry none. The length prefix covers the message only,
// never the extra bytes, so a reader must decode extra_size from the
// message to find the frame's end; ParseFrame does that itself.
//
// # Use
//
// ParseFrame reads one frame of a given Kind from the front of a buffer and
// returns views into it: consumed == 0 with a nil error means more bytes are
// needed, and need says how many the buffer must hold. It copies and
// allocates nothing. Unmarshal decodes a frame's message into a message the
// caller reuses; the Validate functions check what the spec requires of each
// message, and ControllerErrorFor turns their errors into the PulseResponse
// error code to send. The Append functions write a frame (length, message,
// extra bytes) onto the caller's buffer.
//
// # Where the real implementation differs
//
//   - Enum numbers: the spec's are used (PULSE_REGISTER = 0 ...), as the
//     protocol's description has them. The real code's .proto adds
//     *_INVALID = 0, shifts every other value up by one and swaps REGISTER
//     (2) and OK (1); a worker built from it does not speak these numbers.
//   - Because REGISTER, CTRL_ERR_OK, CTRL_RESTART and WORKER_ERR_OK are 0,
//     proto3 does not send them: an empty message (the 8-byte length 0) is a
//     valid WorkerPulse REGISTER, an OK PulseResponse, a RESTART with no
//     extra bytes, or an OK WorkerResponse for task 0.
//   - The real code bounds nothing; ParseFrame bounds a frame's message plus
//     extra bytes by a limit the caller gives (DefaultMaxFrame if none).
package controller

//go:generate protoc --go_out=. --go_opt=paths=source_relative controller.proto
