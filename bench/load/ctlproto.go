package load

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protowire"
)

// The Worker–Controller wire format (moevm/grpc_server's protocol, see
// docs/controller.md), written
// and read here by hand, as the other protocols are, rather than with
// switchyard's codec/controller: each message is a uint64 little-endian
// length, the protobuf message, then (for ControlMsg and WorkerResponse)
// extra_size raw bytes. Every field of the four messages is a varint, so
// protowire's tag and varint functions are the whole codec, and nothing is
// allocated. Enum numbers are the protocol description's (docs/controller.md).

// ctlLenSize is a frame's length prefix.
const ctlLenSize = 8

// maxCtlMsg bounds a message (not its extra bytes): the largest is four
// varints, 44 bytes.
const maxCtlMsg = 1 << 10

// WorkerPulse.type (PulseType).
const (
	pulseRegister = 0
	pulseOK       = 1
	pulseFetchMe  = 2
	pulseShutdown = 3
)

// PulseResponse.error (ControllerError).
const (
	ctrlErrOK        = 0
	ctrlErrUnknownID = 2
)

// ControlMsg.type (ControlType).
const (
	ctlRestart   = 0
	ctlFetch     = 1
	ctlSetTask   = 2
	ctlGetStatus = 3
)

// WorkerResponse.error (WorkerError).
const (
	workerErrOK      = 0
	workerErrNoFetch = 1
	workerErrBusy    = 2
	workerErrFailed  = 4
)

// ctlErrName names a PulseResponse error for messages.
func ctlErrName(e uint64) string {
	switch e {
	case 0:
		return "OK"
	case 1:
		return "UNKNOWN_TYPE"
	case 2:
		return "UNKNOWN_ID"
	case 3:
		return "FAILED"
	}
	return fmt.Sprintf("error %d", e)
}

// appendVarintField appends field num = v, leaving out a zero as proto3
// does.
func appendVarintField(dst []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return dst
	}
	dst = protowire.AppendTag(dst, num, protowire.VarintType)
	return protowire.AppendVarint(dst, v)
}

// beginFrame reserves a frame's length prefix; endFrame fills it in.
func beginFrame(dst []byte) ([]byte, int) {
	return append(dst, make([]byte, ctlLenSize)...), len(dst)
}

func endFrame(dst []byte, start int) []byte {
	binary.LittleEndian.PutUint64(dst[start:], uint64(len(dst)-start-ctlLenSize))
	return dst
}

// appendWorkerPulse appends a WorkerPulse frame: type = 1, worker_id = 2,
// task_id = 3, next_pulse = 4.
func appendWorkerPulse(dst []byte, typ, workerID, taskID, nextPulse uint64) []byte {
	dst, start := beginFrame(dst)
	dst = appendVarintField(dst, 1, typ)
	dst = appendVarintField(dst, 2, workerID)
	dst = appendVarintField(dst, 3, taskID)
	dst = appendVarintField(dst, 4, nextPulse)
	return endFrame(dst, start)
}

// appendWorkerResponse appends a WorkerResponse frame (error = 1,
// task_id = 2, extra_size = 3) and its extra bytes.
func appendWorkerResponse(dst []byte, code, taskID uint64, extra []byte) []byte {
	dst, start := beginFrame(dst)
	dst = appendVarintField(dst, 1, code)
	dst = appendVarintField(dst, 2, taskID)
	dst = appendVarintField(dst, 3, uint64(len(extra)))
	return append(endFrame(dst, start), extra...)
}

// ctlFields are the varint fields 1 to 4 of a message, as proto3 reads
// them: absent is 0, the last occurrence wins. has says which were present
// (PulseResponse.worker_id is `optional`).
type ctlFields struct {
	v   [5]uint64
	has [5]bool
}

var errCtlMalformed = errors.New("controller message is not valid protobuf")

// parseCtlFields reads msg's fields 1 to 4; any other field is skipped.
func parseCtlFields(msg []byte) (ctlFields, error) {
	var f ctlFields
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return f, errCtlMalformed
		}
		msg = msg[n:]
		if num >= 1 && num <= 4 && typ == protowire.VarintType {
			v, n := protowire.ConsumeVarint(msg)
			if n < 0 {
				return f, errCtlMalformed
			}
			f.v[num], f.has[num] = v, true
			msg = msg[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, msg)
		if n < 0 {
			return f, errCtlMalformed
		}
		msg = msg[n:]
	}
	return f, nil
}

// readCtlMsg reads one frame's length and message into *buf (reused) and
// returns the message; the extra bytes, if any, are the caller's to read.
func readCtlMsg(r io.Reader, buf *[]byte) ([]byte, error) {
	b := growBuf(*buf, ctlLenSize)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint64(b)
	if n > maxCtlMsg {
		return nil, fmt.Errorf("controller message of %d bytes, more than %d", n, maxCtlMsg)
	}
	b = growBuf(b, int(n))
	*buf = b
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	return b, nil
}

// growBuf returns b resized to n, reallocated only when too small.
func growBuf(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n, max(n, 2*cap(b)))
	}
	return b[:n]
}
