package controller

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Valid reports whether t is one of the spec's pulse types. proto3 enums
// are open: Unmarshal keeps any number, so a server must check.
func (t PulseType) Valid() bool {
	return t >= PulseType_PULSE_REGISTER && t <= PulseType_PULSE_SHUTDOWN
}

// Valid reports whether e is one of the spec's controller errors.
func (e ControllerError) Valid() bool {
	return e >= ControllerError_CTRL_ERR_OK && e <= ControllerError_CTRL_ERR_FAILED
}

// Valid reports whether t is one of the spec's control types.
func (t ControlType) Valid() bool {
	return t >= ControlType_CTRL_RESTART && t <= ControlType_CTRL_GET_STATUS
}

// Valid reports whether e is one of the spec's worker errors.
func (e WorkerError) Valid() bool {
	return e >= WorkerError_WORKER_ERR_OK && e <= WorkerError_WORKER_ERR_FAILED
}

// Errors returned by the Validate functions, wrapped with the offending
// values; test them with errors.Is.
var (
	// ErrUnknownPulseType: WorkerPulse.type is none of the spec's. The
	// spec's answer is CTRL_ERR_UNKNOWN_TYPE.
	ErrUnknownPulseType = errors.New("controller: unknown pulse type")
	// ErrNoWorkerID: an OK, FETCH_ME or SHUTDOWN pulse with worker_id 0,
	// which no worker has (ids count from 1); the spec's answer is
	// CTRL_ERR_UNKNOWN_ID. Also a PulseResponse that accepts a REGISTER
	// without giving the worker an id.
	ErrNoWorkerID = errors.New("controller: no worker_id")
	// ErrUnknownControllerError: PulseResponse.error is none of the spec's.
	ErrUnknownControllerError = errors.New("controller: unknown controller error")
	// ErrUnknownControlType: ControlMsg.type is none of the spec's.
	ErrUnknownControlType = errors.New("controller: unknown control type")
	// ErrNoTaskID: a SET_TASK without a task_id (task ids count from 1),
	// or a WorkerResponse to FETCH, with a result or TASK_FAILED, that
	// names no task.
	ErrNoTaskID = errors.New("controller: no task_id")
	// ErrUnknownWorkerError: WorkerResponse.error is none of the spec's.
	// The spec has no answer for it; WORKER_ERR_FAILED ("any other error")
	// is the nearest.
	ErrUnknownWorkerError = errors.New("controller: unknown worker error")
	// ErrUnexpectedWorkerError: a worker error the spec gives only to
	// another control type (NO_FETCH and TASK_FAILED answer FETCH, BUSY
	// answers SET_TASK).
	ErrUnexpectedWorkerError = errors.New("controller: worker error does not answer this control type")
	// ErrUnexpectedExtra: a successful GET_STATUS answer with extra bytes;
	// the spec says it has none.
	ErrUnexpectedExtra = errors.New("controller: unexpected extra bytes")
)

// ValidateWorkerPulse checks what the spec requires of a pulse before the
// controller looks up the worker: a known type, and for OK, FETCH_ME and
// SHUTDOWN a worker_id (REGISTER's worker_id and task_id are ignored).
// task_id may be anything, 0 meaning no task; next_pulse is not checked
// (see NextPulse). Send ControllerErrorFor(err) back.
func ValidateWorkerPulse(p *WorkerPulse) error {
	t := p.GetType()
	if !t.Valid() {
		return fmt.Errorf("%w %d", ErrUnknownPulseType, int32(t))
	}
	if t != PulseType_PULSE_REGISTER && p.GetWorkerId() == 0 {
		return fmt.Errorf("%w in %v pulse", ErrNoWorkerID, t)
	}
	return nil
}

// ControllerErrorFor is the PulseResponse error code the spec prescribes
// for err, an error of ValidateWorkerPulse or of the server's own: OK for
// nil, UNKNOWN_TYPE for ErrUnknownPulseType, UNKNOWN_ID for ErrNoWorkerID,
// FAILED for anything else (an undecodable message included).
func ControllerErrorFor(err error) ControllerError {
	switch {
	case err == nil:
		return ControllerError_CTRL_ERR_OK
	case errors.Is(err, ErrUnknownPulseType):
		return ControllerError_CTRL_ERR_UNKNOWN_TYPE
	case errors.Is(err, ErrNoWorkerID):
		return ControllerError_CTRL_ERR_UNKNOWN_ID
	}
	return ControllerError_CTRL_ERR_FAILED
}

// maxNextPulse is the largest next_pulse that converts to a time.Duration.
const maxNextPulse = uint64(math.MaxInt64 / int64(time.Second))

// NextPulse is p.NextPulse seconds as a duration, saturated rather than
// overflowed for a hostile value. The spec gives no lower bound: 0 means
// the worker is overdue at once.
func NextPulse(p *WorkerPulse) time.Duration {
	s := p.GetNextPulse()
	if s > maxNextPulse {
		return math.MaxInt64
	}
	return time.Duration(s) * time.Second
}

// ValidatePulseResponse checks a controller's answer to a pulse of type
// req: a known error, and for an accepted REGISTER a worker_id (the worker
// has no other way to learn it). For the other types the spec says
// worker_id is not set and the worker ignores it; it is not checked.
func ValidatePulseResponse(req PulseType, r *PulseResponse) error {
	e := r.GetError()
	if !e.Valid() {
		return fmt.Errorf("%w %d", ErrUnknownControllerError, int32(e))
	}
	if req == PulseType_PULSE_REGISTER && e == ControllerError_CTRL_ERR_OK && r.GetWorkerId() == 0 {
		return fmt.Errorf("%w in the answer to REGISTER", ErrNoWorkerID)
	}
	return nil
}

// ValidateControlMsg checks a control message: a known type, and for
// SET_TASK a task_id of at least 1. RESTART, FETCH and GET_STATUS ignore
// task_id and their extra bytes. extra_size is the framer's business
// (AppendControlMsg sets it).
func ValidateControlMsg(m *ControlMsg) error {
	t := m.GetType()
	if !t.Valid() {
		return fmt.Errorf("%w %d", ErrUnknownControlType, int32(t))
	}
	if t == ControlType_CTRL_SET_TASK && m.GetTaskId() == 0 {
		return fmt.Errorf("%w in SET_TASK", ErrNoTaskID)
	}
	return nil
}

// ValidateWorkerResponse checks a worker's answer to a control message of
// type req:
//   - the error is one of the spec's;
//   - NO_FETCH and TASK_FAILED answer only FETCH, BUSY only SET_TASK
//     (RESTART's answer is not checked further: the controller ignores its
//     error and removes the worker);
//   - a FETCH answered OK (the result) or TASK_FAILED names its task, since
//     the controller completes or requeues that task;
//   - a GET_STATUS answered OK has no extra bytes.
//
// Any error may carry extra bytes (an error text). task_id is not checked
// against the task the controller sent: the real worker (moevm/grpc_server
// worker.cpp) fills it before handling SET_TASK, so its answer to SET_TASK
// names the task it held before, usually 0.
func ValidateWorkerResponse(req ControlType, r *WorkerResponse) error {
	e := r.GetError()
	if !e.Valid() {
		return fmt.Errorf("%w %d", ErrUnknownWorkerError, int32(e))
	}
	if req == ControlType_CTRL_RESTART {
		return nil
	}
	switch e {
	case WorkerError_WORKER_ERR_NO_FETCH, WorkerError_WORKER_ERR_TASK_FAILED:
		if req != ControlType_CTRL_FETCH {
			return fmt.Errorf("%w: %v answering %v", ErrUnexpectedWorkerError, e, req)
		}
	case WorkerError_WORKER_ERR_BUSY:
		if req != ControlType_CTRL_SET_TASK {
			return fmt.Errorf("%w: %v answering %v", ErrUnexpectedWorkerError, e, req)
		}
	}
	switch req {
	case ControlType_CTRL_FETCH:
		if (e == WorkerError_WORKER_ERR_OK || e == WorkerError_WORKER_ERR_TASK_FAILED) && r.GetTaskId() == 0 {
			return fmt.Errorf("%w in %v answering FETCH", ErrNoTaskID, e)
		}
	case ControlType_CTRL_GET_STATUS:
		if e == WorkerError_WORKER_ERR_OK && r.GetExtraSize() != 0 {
			return fmt.Errorf("%w: %d in the answer to GET_STATUS", ErrUnexpectedExtra, r.GetExtraSize())
		}
	}
	return nil
}
