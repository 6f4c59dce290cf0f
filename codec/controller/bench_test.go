package controller

import (
	"bytes"
	"testing"
)

// benchTask is a task as SET_TASK carries it, and a result as FETCH's
// answer carries it.
var benchTask = bytes.Repeat([]byte("x"), 256)

// BenchmarkParseDecode is what the controller does with each frame it
// reads: frame it, decode it into a reused message, validate it. (The
// frames are built here, not in package variables: those are initialized
// before controller.pb.go's init registers the message types.)
func BenchmarkParseDecode(b *testing.B) {
	benchPulse := AppendWorkerPulse(nil, &WorkerPulse{Type: PulseType_PULSE_FETCH_ME, WorkerId: 17, TaskId: 1 << 33, NextPulse: 60})
	benchResult := AppendWorkerResponse(nil, &WorkerResponse{TaskId: 1 << 33}, benchTask)
	b.Run("WorkerPulse", func(b *testing.B) {
		var p WorkerPulse
		b.ReportAllocs()
		b.SetBytes(int64(len(benchPulse)))
		for b.Loop() {
			f, n, _, err := ParseFrame(benchPulse, KindWorkerPulse, 0)
			if n != len(benchPulse) || err != nil {
				b.Fatal(n, err)
			}
			if err := Unmarshal(f.Msg, &p); err != nil {
				b.Fatal(err)
			}
			if err := ValidateWorkerPulse(&p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("WorkerResponse", func(b *testing.B) {
		var r WorkerResponse
		b.ReportAllocs()
		b.SetBytes(int64(len(benchResult)))
		for b.Loop() {
			f, n, _, err := ParseFrame(benchResult, KindWorkerResponse, 0)
			if n != len(benchResult) || err != nil {
				b.Fatal(n, err)
			}
			if err := Unmarshal(f.Msg, &r); err != nil {
				b.Fatal(err)
			}
			if err := ValidateWorkerResponse(ControlType_CTRL_FETCH, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkAppend is what the controller writes: a pulse's answer, and a
// SET_TASK with its task, into a reused buffer.
func BenchmarkAppend(b *testing.B) {
	b.Run("PulseResponse", func(b *testing.B) {
		dst := make([]byte, 0, 64)
		m := &PulseResponse{WorkerId: new(uint64)}
		*m.WorkerId = 17
		b.ReportAllocs()
		for b.Loop() {
			dst = AppendPulseResponse(dst[:0], m)
		}
	})
	b.Run("ControlMsg", func(b *testing.B) {
		dst := make([]byte, 0, 512)
		id := uint64(1 << 33)
		m := &ControlMsg{Type: ControlType_CTRL_SET_TASK, TaskId: &id}
		b.ReportAllocs()
		b.SetBytes(int64(len(benchTask)))
		for b.Loop() {
			dst = AppendControlMsg(dst[:0], m, benchTask)
		}
	})
}
