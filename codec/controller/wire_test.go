package controller

import (
	"encoding/binary"

	"google.golang.org/protobuf/proto"
)

// wireFrame is one whole frame written by hand from the spec, and the
// message and extra bytes it holds.
type wireFrame struct {
	name  string
	kind  Kind
	msg   proto.Message // what the message bytes decode to
	extra string
	bytes string // the whole frame: length, message, extra
}

// rawFrame builds a frame by hand, independently of the encoders: the
// message's length as a uint64 little-endian, the message, the extra bytes.
func rawFrame(msg, extra string) string {
	var size [LenSize]byte
	binary.LittleEndian.PutUint64(size[:], uint64(len(msg)))
	return string(size[:]) + msg + extra
}

func u64(v uint64) *uint64 { return &v }

// wireFrames returns every frame the tables know. The message bytes are
// protobuf wire format written out by hand: a tag byte (field<<3 | 0 for a
// varint) and the varint, fields in number order as protobuf-go writes
// them, a zero-valued proto3 field not sent at all, a set `optional` field
// sent even when 0.
func wireFrames() []wireFrame {
	return []wireFrame{
		// WorkerPulse: type=1, worker_id=2, task_id=3, next_pulse=4.
		{"pulse register", KindWorkerPulse,
			&WorkerPulse{Type: PulseType_PULSE_REGISTER, NextPulse: 60}, "",
			rawFrame("\x20\x3c", "")},
		{"pulse register, all zero", KindWorkerPulse,
			&WorkerPulse{}, "",
			rawFrame("", "")},
		{"pulse ok", KindWorkerPulse,
			&WorkerPulse{Type: PulseType_PULSE_OK, WorkerId: 7, NextPulse: 60}, "",
			rawFrame("\x08\x01\x10\x07\x20\x3c", "")},
		{"pulse ok with a task", KindWorkerPulse,
			&WorkerPulse{Type: PulseType_PULSE_OK, WorkerId: 7, TaskId: 300, NextPulse: 45}, "",
			rawFrame("\x08\x01\x10\x07\x18\xac\x02\x20\x2d", "")},
		{"pulse fetch me", KindWorkerPulse,
			&WorkerPulse{Type: PulseType_PULSE_FETCH_ME, WorkerId: 3, TaskId: 9, NextPulse: 60}, "",
			rawFrame("\x08\x02\x10\x03\x18\x09\x20\x3c", "")},
		{"pulse shutdown", KindWorkerPulse,
			&WorkerPulse{Type: PulseType_PULSE_SHUTDOWN, WorkerId: 1}, "",
			rawFrame("\x08\x03\x10\x01", "")},
		{"pulse with the largest ids", KindWorkerPulse,
			&WorkerPulse{Type: PulseType_PULSE_OK, WorkerId: 1<<64 - 1, TaskId: 1 << 63, NextPulse: 1},
			"", rawFrame("\x08\x01"+
				"\x10\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"+
				"\x18\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01"+
				"\x20\x01", "")},

		// PulseResponse: error=1, optional worker_id=2.
		{"response register ok", KindPulseResponse,
			&PulseResponse{Error: ControllerError_CTRL_ERR_OK, WorkerId: u64(1)}, "",
			rawFrame("\x10\x01", "")},
		{"response ok", KindPulseResponse,
			&PulseResponse{}, "",
			rawFrame("", "")},
		{"response ok, worker_id set to 0", KindPulseResponse,
			&PulseResponse{WorkerId: u64(0)}, "",
			rawFrame("\x10\x00", "")},
		{"response unknown type", KindPulseResponse,
			&PulseResponse{Error: ControllerError_CTRL_ERR_UNKNOWN_TYPE}, "",
			rawFrame("\x08\x01", "")},
		{"response unknown id", KindPulseResponse,
			&PulseResponse{Error: ControllerError_CTRL_ERR_UNKNOWN_ID}, "",
			rawFrame("\x08\x02", "")},
		{"response failed", KindPulseResponse,
			&PulseResponse{Error: ControllerError_CTRL_ERR_FAILED}, "",
			rawFrame("\x08\x03", "")},

		// ControlMsg: type=1, extra_size=2, optional task_id=3; extra follows.
		{"control restart", KindControlMsg,
			&ControlMsg{Type: ControlType_CTRL_RESTART}, "",
			rawFrame("", "")},
		{"control fetch", KindControlMsg,
			&ControlMsg{Type: ControlType_CTRL_FETCH}, "",
			rawFrame("\x08\x01", "")},
		{"control set task", KindControlMsg,
			&ControlMsg{Type: ControlType_CTRL_SET_TASK, ExtraSize: 5, TaskId: u64(9)}, "hello",
			rawFrame("\x08\x02\x10\x05\x18\x09", "hello")},
		{"control set task, empty task", KindControlMsg,
			&ControlMsg{Type: ControlType_CTRL_SET_TASK, TaskId: u64(1)}, "",
			rawFrame("\x08\x02\x18\x01", "")},
		{"control set task, 200 bytes", KindControlMsg,
			&ControlMsg{Type: ControlType_CTRL_SET_TASK, ExtraSize: 200, TaskId: u64(1 << 20)}, string(make([]byte, 200)),
			rawFrame("\x08\x02\x10\xc8\x01\x18\x80\x80\x40", string(make([]byte, 200)))},
		{"control get status", KindControlMsg,
			&ControlMsg{Type: ControlType_CTRL_GET_STATUS}, "",
			rawFrame("\x08\x03", "")},
		{"control restart, extra ignored", KindControlMsg,
			&ControlMsg{Type: ControlType_CTRL_RESTART, ExtraSize: 3}, "xyz",
			rawFrame("\x10\x03", "xyz")},

		// WorkerResponse: error=1, task_id=2, extra_size=3; extra follows.
		{"worker ok, no task", KindWorkerResponse,
			&WorkerResponse{}, "",
			rawFrame("", "")},
		{"worker result", KindWorkerResponse,
			&WorkerResponse{Error: WorkerError_WORKER_ERR_OK, TaskId: 9, ExtraSize: 6}, "result",
			rawFrame("\x10\x09\x18\x06", "result")},
		{"worker status", KindWorkerResponse,
			&WorkerResponse{TaskId: 9}, "",
			rawFrame("\x10\x09", "")},
		{"worker no fetch", KindWorkerResponse,
			&WorkerResponse{Error: WorkerError_WORKER_ERR_NO_FETCH, TaskId: 9}, "",
			rawFrame("\x08\x01\x10\x09", "")},
		{"worker busy", KindWorkerResponse,
			&WorkerResponse{Error: WorkerError_WORKER_ERR_BUSY, TaskId: 4}, "",
			rawFrame("\x08\x02\x10\x04", "")},
		{"worker task failed with a text", KindWorkerResponse,
			&WorkerResponse{Error: WorkerError_WORKER_ERR_TASK_FAILED, TaskId: 9, ExtraSize: 4}, "boom",
			rawFrame("\x08\x03\x10\x09\x18\x04", "boom")},
		{"worker failed", KindWorkerResponse,
			&WorkerResponse{Error: WorkerError_WORKER_ERR_FAILED}, "",
			rawFrame("\x08\x04", "")},
	}
}

// msgLen is the length prefix of a whole frame.
func msgLen(f wireFrame) int {
	return int(binary.LittleEndian.Uint64([]byte(f.bytes)))
}
