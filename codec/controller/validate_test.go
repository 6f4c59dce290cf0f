package controller

import (
	"errors"
	"math"
	"testing"
	"time"
)

func TestValidEnums(t *testing.T) {
	for v := int32(-2); v < 8; v++ {
		if got, want := PulseType(v).Valid(), v >= 0 && v <= 3; got != want {
			t.Errorf("PulseType(%d).Valid() = %v", v, got)
		}
		if got, want := ControllerError(v).Valid(), v >= 0 && v <= 3; got != want {
			t.Errorf("ControllerError(%d).Valid() = %v", v, got)
		}
		if got, want := ControlType(v).Valid(), v >= 0 && v <= 3; got != want {
			t.Errorf("ControlType(%d).Valid() = %v", v, got)
		}
		if got, want := WorkerError(v).Valid(), v >= 0 && v <= 4; got != want {
			t.Errorf("WorkerError(%d).Valid() = %v", v, got)
		}
	}
	// The generated name tables hold exactly the valid values.
	for v := int32(-2); v < 8; v++ {
		_, ok := PulseType_name[v]
		_, ok2 := WorkerError_name[v]
		if ok != PulseType(v).Valid() || ok2 != WorkerError(v).Valid() {
			t.Errorf("name tables disagree with Valid at %d", v)
		}
	}
}

// TestEnumNumbers pins the spec's numbers (the protocol description's, not
// moevm/grpc_server's, which shift everything behind an *_INVALID = 0; see
// docs/controller.md).
func TestEnumNumbers(t *testing.T) {
	for name, got := range map[string]int32{
		"PULSE_REGISTER": int32(PulseType_PULSE_REGISTER), "PULSE_OK": int32(PulseType_PULSE_OK),
		"PULSE_FETCH_ME": int32(PulseType_PULSE_FETCH_ME), "PULSE_SHUTDOWN": int32(PulseType_PULSE_SHUTDOWN),
		"CTRL_ERR_OK": int32(ControllerError_CTRL_ERR_OK), "CTRL_ERR_UNKNOWN_TYPE": int32(ControllerError_CTRL_ERR_UNKNOWN_TYPE),
		"CTRL_ERR_UNKNOWN_ID": int32(ControllerError_CTRL_ERR_UNKNOWN_ID), "CTRL_ERR_FAILED": int32(ControllerError_CTRL_ERR_FAILED),
		"CTRL_RESTART": int32(ControlType_CTRL_RESTART), "CTRL_FETCH": int32(ControlType_CTRL_FETCH),
		"CTRL_SET_TASK": int32(ControlType_CTRL_SET_TASK), "CTRL_GET_STATUS": int32(ControlType_CTRL_GET_STATUS),
		"WORKER_ERR_OK": int32(WorkerError_WORKER_ERR_OK), "WORKER_ERR_NO_FETCH": int32(WorkerError_WORKER_ERR_NO_FETCH),
		"WORKER_ERR_BUSY": int32(WorkerError_WORKER_ERR_BUSY), "WORKER_ERR_TASK_FAILED": int32(WorkerError_WORKER_ERR_TASK_FAILED),
		"WORKER_ERR_FAILED": int32(WorkerError_WORKER_ERR_FAILED),
	} {
		want := map[string]int32{
			"PULSE_REGISTER": 0, "PULSE_OK": 1, "PULSE_FETCH_ME": 2, "PULSE_SHUTDOWN": 3,
			"CTRL_ERR_OK": 0, "CTRL_ERR_UNKNOWN_TYPE": 1, "CTRL_ERR_UNKNOWN_ID": 2, "CTRL_ERR_FAILED": 3,
			"CTRL_RESTART": 0, "CTRL_FETCH": 1, "CTRL_SET_TASK": 2, "CTRL_GET_STATUS": 3,
			"WORKER_ERR_OK": 0, "WORKER_ERR_NO_FETCH": 1, "WORKER_ERR_BUSY": 2, "WORKER_ERR_TASK_FAILED": 3, "WORKER_ERR_FAILED": 4,
		}[name]
		if got != want {
			t.Errorf("%s = %d, want %d", name, got, want)
		}
	}
}

func TestValidateWorkerPulse(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    *WorkerPulse
		err  error
		code ControllerError
		text string
	}{
		{"register", &WorkerPulse{NextPulse: 60}, nil, ControllerError_CTRL_ERR_OK, ""},
		{"register ignores worker and task ids", &WorkerPulse{WorkerId: 9, TaskId: 4}, nil, ControllerError_CTRL_ERR_OK, ""},
		{"ok", &WorkerPulse{Type: PulseType_PULSE_OK, WorkerId: 1, NextPulse: 60}, nil, ControllerError_CTRL_ERR_OK, ""},
		{"ok with next_pulse 0", &WorkerPulse{Type: PulseType_PULSE_OK, WorkerId: 1}, nil, ControllerError_CTRL_ERR_OK, ""},
		{"fetch me", &WorkerPulse{Type: PulseType_PULSE_FETCH_ME, WorkerId: 2, TaskId: 5}, nil, ControllerError_CTRL_ERR_OK, ""},
		{"shutdown", &WorkerPulse{Type: PulseType_PULSE_SHUTDOWN, WorkerId: 3}, nil, ControllerError_CTRL_ERR_OK, ""},
		{"ok without worker id", &WorkerPulse{Type: PulseType_PULSE_OK, NextPulse: 60}, ErrNoWorkerID,
			ControllerError_CTRL_ERR_UNKNOWN_ID, "controller: no worker_id in PULSE_OK pulse"},
		{"fetch me without worker id", &WorkerPulse{Type: PulseType_PULSE_FETCH_ME}, ErrNoWorkerID, ControllerError_CTRL_ERR_UNKNOWN_ID, ""},
		{"shutdown without worker id", &WorkerPulse{Type: PulseType_PULSE_SHUTDOWN}, ErrNoWorkerID, ControllerError_CTRL_ERR_UNKNOWN_ID, ""},
		{"type 4", &WorkerPulse{Type: 4, WorkerId: 1}, ErrUnknownPulseType,
			ControllerError_CTRL_ERR_UNKNOWN_TYPE, "controller: unknown pulse type 4"},
		{"type -1", &WorkerPulse{Type: -1}, ErrUnknownPulseType, ControllerError_CTRL_ERR_UNKNOWN_TYPE, "controller: unknown pulse type -1"},
		{"unknown type before missing id", &WorkerPulse{Type: 100}, ErrUnknownPulseType, ControllerError_CTRL_ERR_UNKNOWN_TYPE, ""},
	} {
		err := ValidateWorkerPulse(tc.p)
		if !errors.Is(err, tc.err) || (err == nil) != (tc.err == nil) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.err)
		}
		if tc.text != "" && (err == nil || err.Error() != tc.text) {
			t.Errorf("%s: text %q, want %q", tc.name, err, tc.text)
		}
		if got := ControllerErrorFor(err); got != tc.code {
			t.Errorf("%s: ControllerErrorFor = %v, want %v", tc.name, got, tc.code)
		}
	}
	if got := ControllerErrorFor(errors.New("registry full")); got != ControllerError_CTRL_ERR_FAILED {
		t.Errorf("other error: %v", got)
	}
	if got := ControllerErrorFor(Unmarshal([]byte("\x80"), new(WorkerPulse))); got != ControllerError_CTRL_ERR_FAILED {
		t.Errorf("undecodable pulse: %v", got)
	}
}

func TestNextPulse(t *testing.T) {
	for _, tc := range []struct {
		s    uint64
		want time.Duration
	}{
		{0, 0}, {1, time.Second}, {60, time.Minute},
		{maxNextPulse, time.Duration(maxNextPulse) * time.Second},
		{maxNextPulse + 1, math.MaxInt64}, {1<<64 - 1, math.MaxInt64},
	} {
		if got := NextPulse(&WorkerPulse{NextPulse: tc.s}); got != tc.want || got < 0 {
			t.Errorf("NextPulse(%d) = %v, want %v", tc.s, got, tc.want)
		}
	}
}

func TestValidatePulseResponse(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  PulseType
		r    *PulseResponse
		err  error
	}{
		{"register ok", PulseType_PULSE_REGISTER, &PulseResponse{WorkerId: u64(1)}, nil},
		{"register ok without id", PulseType_PULSE_REGISTER, &PulseResponse{}, ErrNoWorkerID},
		{"register ok with id 0", PulseType_PULSE_REGISTER, &PulseResponse{WorkerId: u64(0)}, ErrNoWorkerID},
		{"register failed", PulseType_PULSE_REGISTER, &PulseResponse{Error: ControllerError_CTRL_ERR_FAILED}, nil},
		{"ok", PulseType_PULSE_OK, &PulseResponse{}, nil},
		{"ok with a worker id, ignored", PulseType_PULSE_OK, &PulseResponse{WorkerId: u64(5)}, nil},
		{"unknown id", PulseType_PULSE_SHUTDOWN, &PulseResponse{Error: ControllerError_CTRL_ERR_UNKNOWN_ID}, nil},
		{"unknown error", PulseType_PULSE_OK, &PulseResponse{Error: 4}, ErrUnknownControllerError},
	} {
		if err := ValidatePulseResponse(tc.req, tc.r); !errors.Is(err, tc.err) || (err == nil) != (tc.err == nil) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.err)
		}
	}
}

func TestValidateControlMsg(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    *ControlMsg
		err  error
	}{
		{"restart", &ControlMsg{}, nil},
		{"fetch", &ControlMsg{Type: ControlType_CTRL_FETCH}, nil},
		{"get status", &ControlMsg{Type: ControlType_CTRL_GET_STATUS, TaskId: u64(0)}, nil},
		{"set task", &ControlMsg{Type: ControlType_CTRL_SET_TASK, TaskId: u64(1), ExtraSize: 3}, nil},
		{"set task without task id", &ControlMsg{Type: ControlType_CTRL_SET_TASK, ExtraSize: 3}, ErrNoTaskID},
		{"set task with task id 0", &ControlMsg{Type: ControlType_CTRL_SET_TASK, TaskId: u64(0)}, ErrNoTaskID},
		{"type 4", &ControlMsg{Type: 4}, ErrUnknownControlType},
	} {
		if err := ValidateControlMsg(tc.m); !errors.Is(err, tc.err) || (err == nil) != (tc.err == nil) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.err)
		}
	}
}

func TestValidateWorkerResponse(t *testing.T) {
	const (
		restart = ControlType_CTRL_RESTART
		fetch   = ControlType_CTRL_FETCH
		setTask = ControlType_CTRL_SET_TASK
		status  = ControlType_CTRL_GET_STATUS
		ok      = WorkerError_WORKER_ERR_OK
		noFetch = WorkerError_WORKER_ERR_NO_FETCH
		busy    = WorkerError_WORKER_ERR_BUSY
		failed  = WorkerError_WORKER_ERR_TASK_FAILED
		wfailed = WorkerError_WORKER_ERR_FAILED
	)
	for _, tc := range []struct {
		name string
		req  ControlType
		r    *WorkerResponse
		err  error
	}{
		{"restart ok", restart, &WorkerResponse{}, nil},
		{"restart, any error ignored", restart, &WorkerResponse{Error: busy, ExtraSize: 3}, nil},
		{"restart, unknown error", restart, &WorkerResponse{Error: 5}, ErrUnknownWorkerError},
		{"fetch result", fetch, &WorkerResponse{TaskId: 9, ExtraSize: 6}, nil},
		{"fetch empty result", fetch, &WorkerResponse{TaskId: 9}, nil},
		{"fetch result without task", fetch, &WorkerResponse{ExtraSize: 6}, ErrNoTaskID},
		{"fetch nothing", fetch, &WorkerResponse{Error: noFetch}, nil},
		{"fetch task failed", fetch, &WorkerResponse{Error: failed, TaskId: 9, ExtraSize: 4}, nil},
		{"fetch task failed without task", fetch, &WorkerResponse{Error: failed}, ErrNoTaskID},
		{"fetch busy", fetch, &WorkerResponse{Error: busy, TaskId: 9}, ErrUnexpectedWorkerError},
		{"fetch failed", fetch, &WorkerResponse{Error: wfailed, ExtraSize: 10}, nil},
		{"set task ok", setTask, &WorkerResponse{}, nil},
		{"set task ok naming the old task (real worker)", setTask, &WorkerResponse{TaskId: 3}, nil},
		{"set task busy", setTask, &WorkerResponse{Error: busy, TaskId: 3}, nil},
		{"set task no fetch", setTask, &WorkerResponse{Error: noFetch}, ErrUnexpectedWorkerError},
		{"set task task failed", setTask, &WorkerResponse{Error: failed, TaskId: 3}, ErrUnexpectedWorkerError},
		{"set task failed", setTask, &WorkerResponse{Error: wfailed}, nil},
		{"status idle", status, &WorkerResponse{}, nil},
		{"status busy with a task", status, &WorkerResponse{TaskId: 3}, nil},
		{"status with extra bytes", status, &WorkerResponse{TaskId: 3, ExtraSize: 1}, ErrUnexpectedExtra},
		{"status failed with a text", status, &WorkerResponse{Error: wfailed, ExtraSize: 5}, nil},
		{"status busy", status, &WorkerResponse{Error: busy}, ErrUnexpectedWorkerError},
		{"unknown error", status, &WorkerResponse{Error: -1}, ErrUnknownWorkerError},
	} {
		if err := ValidateWorkerResponse(tc.req, tc.r); !errors.Is(err, tc.err) || (err == nil) != (tc.err == nil) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.err)
		}
	}
	// The texts name what is wrong.
	for _, tc := range []struct {
		req  ControlType
		r    *WorkerResponse
		text string
	}{
		{fetch, &WorkerResponse{Error: busy}, "controller: worker error does not answer this control type: WORKER_ERR_BUSY answering CTRL_FETCH"},
		{fetch, &WorkerResponse{}, "controller: no task_id in WORKER_ERR_OK answering FETCH"},
		{status, &WorkerResponse{ExtraSize: 2}, "controller: unexpected extra bytes: 2 in the answer to GET_STATUS"},
		{status, &WorkerResponse{Error: 7}, "controller: unknown worker error 7"},
	} {
		if err := ValidateWorkerResponse(tc.req, tc.r); err == nil || err.Error() != tc.text {
			t.Errorf("%v %v: %q, want %q", tc.req, tc.r, err, tc.text)
		}
	}
}
