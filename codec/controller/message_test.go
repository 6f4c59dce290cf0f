package controller

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/proto"
)

// appendAny appends the frame of m, a message of kind k, with the encoder
// for that kind. m is cloned first: the encoders set ExtraSize.
func appendAny(dst []byte, k Kind, m proto.Message, extra []byte) []byte {
	switch m := proto.Clone(m).(type) {
	case *WorkerPulse:
		return AppendWorkerPulse(dst, m)
	case *PulseResponse:
		return AppendPulseResponse(dst, m)
	case *ControlMsg:
		return AppendControlMsg(dst, m, extra)
	case *WorkerResponse:
		return AppendWorkerResponse(dst, m, extra)
	}
	panic("appendAny: " + k.String())
}

// newOf returns an empty message of kind k.
func newOf(k Kind) proto.Message {
	switch k {
	case KindWorkerPulse:
		return new(WorkerPulse)
	case KindPulseResponse:
		return new(PulseResponse)
	case KindControlMsg:
		return new(ControlMsg)
	case KindWorkerResponse:
		return new(WorkerResponse)
	}
	panic("newOf: " + k.String())
}

// TestAppendGolden: the encoders write exactly the bytes written by hand
// from the spec, after whatever dst already held.
func TestAppendGolden(t *testing.T) {
	for _, f := range wireFrames() {
		got := appendAny([]byte("prefix"), f.kind, f.msg, []byte(f.extra))
		if want := "prefix" + f.bytes; string(got) != want {
			t.Errorf("%s: appended %q, want %q", f.name, got, want)
		}
	}
}

// TestUnmarshalGolden: every hand-written frame parses and decodes to its
// message, into one message per kind reused across frames.
func TestUnmarshalGolden(t *testing.T) {
	reused := map[Kind]proto.Message{}
	for _, f := range wireFrames() {
		fr, n, _, err := ParseFrame([]byte(f.bytes), f.kind, 0)
		if err != nil || n != len(f.bytes) {
			t.Fatalf("%s: ParseFrame = %d, %v", f.name, n, err)
		}
		m := reused[f.kind]
		if m == nil {
			m = newOf(f.kind)
			reused[f.kind] = m
		}
		if err := Unmarshal(fr.Msg, m); err != nil {
			t.Fatalf("%s: Unmarshal: %v", f.name, err)
		}
		if !proto.Equal(m, f.msg) {
			t.Errorf("%s: decoded %v, want %v", f.name, m, f.msg)
		}
		if string(fr.Extra) != f.extra {
			t.Errorf("%s: extra %q, want %q", f.name, fr.Extra, f.extra)
		}
	}
}

// roundTrip appends m and extra, parses the frame back and decodes it.
func roundTrip(t *testing.T, k Kind, m proto.Message, extra []byte) {
	t.Helper()
	buf := appendAny(nil, k, m, extra)
	f, n, need, err := ParseFrame(buf, k, 0)
	if err != nil || n != len(buf) || need != n {
		t.Fatalf("%v %v: ParseFrame = %d, %d, %v; frame is %d bytes", k, m, n, need, err, len(buf))
	}
	if !bytes.Equal(f.Extra, extra) {
		t.Fatalf("%v %v: extra %q, want %q", k, m, f.Extra, extra)
	}
	got := newOf(k)
	if err := Unmarshal(f.Msg, got); err != nil {
		t.Fatalf("%v %v: Unmarshal: %v", k, m, err)
	}
	want := proto.Clone(m)
	switch w := want.(type) {
	case *ControlMsg:
		w.ExtraSize = uint64(len(extra))
	case *WorkerResponse:
		w.ExtraSize = uint64(len(extra))
	}
	if !proto.Equal(got, want) {
		t.Fatalf("%v: round trip gave %v, want %v", k, got, want)
	}
}

func TestRoundTrip(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 4096)
	for _, tc := range []struct {
		kind  Kind
		msg   proto.Message
		extra []byte
	}{
		{KindWorkerPulse, &WorkerPulse{}, nil},
		{KindWorkerPulse, &WorkerPulse{Type: PulseType_PULSE_OK, WorkerId: 1, TaskId: 0, NextPulse: 60}, nil},
		{KindWorkerPulse, &WorkerPulse{Type: PulseType_PULSE_FETCH_ME, WorkerId: 1 << 40, TaskId: 77, NextPulse: 1<<64 - 1}, nil},
		{KindWorkerPulse, &WorkerPulse{Type: PulseType_PULSE_SHUTDOWN, WorkerId: 5}, nil},
		{KindWorkerPulse, &WorkerPulse{Type: PulseType(42), WorkerId: 5}, nil},
		{KindWorkerPulse, &WorkerPulse{Type: PulseType(-1)}, nil},
		{KindPulseResponse, &PulseResponse{}, nil},
		{KindPulseResponse, &PulseResponse{WorkerId: u64(0)}, nil},
		{KindPulseResponse, &PulseResponse{WorkerId: u64(1<<64 - 1)}, nil},
		{KindPulseResponse, &PulseResponse{Error: ControllerError_CTRL_ERR_UNKNOWN_ID}, nil},
		{KindPulseResponse, &PulseResponse{Error: ControllerError_CTRL_ERR_FAILED, WorkerId: u64(3)}, nil},
		{KindPulseResponse, &PulseResponse{Error: ControllerError(9)}, nil},
		{KindControlMsg, &ControlMsg{}, nil},
		{KindControlMsg, &ControlMsg{Type: ControlType_CTRL_FETCH}, nil},
		{KindControlMsg, &ControlMsg{Type: ControlType_CTRL_SET_TASK, TaskId: u64(1)}, []byte("task")},
		{KindControlMsg, &ControlMsg{Type: ControlType_CTRL_SET_TASK, TaskId: u64(1<<64 - 1)}, big},
		{KindControlMsg, &ControlMsg{Type: ControlType_CTRL_SET_TASK, TaskId: u64(0)}, []byte{}},
		{KindControlMsg, &ControlMsg{Type: ControlType_CTRL_GET_STATUS, ExtraSize: 99}, nil}, // ExtraSize is overwritten
		{KindControlMsg, &ControlMsg{Type: ControlType_CTRL_RESTART}, []byte("ignored")},
		{KindWorkerResponse, &WorkerResponse{}, nil},
		{KindWorkerResponse, &WorkerResponse{TaskId: 12}, []byte("the result")},
		{KindWorkerResponse, &WorkerResponse{TaskId: 12}, big},
		{KindWorkerResponse, &WorkerResponse{Error: WorkerError_WORKER_ERR_NO_FETCH}, nil},
		{KindWorkerResponse, &WorkerResponse{Error: WorkerError_WORKER_ERR_BUSY, TaskId: 3}, nil},
		{KindWorkerResponse, &WorkerResponse{Error: WorkerError_WORKER_ERR_TASK_FAILED, TaskId: 3}, []byte("division by zero")},
		{KindWorkerResponse, &WorkerResponse{Error: WorkerError_WORKER_ERR_FAILED, ExtraSize: 1}, nil},
		{KindWorkerResponse, &WorkerResponse{Error: WorkerError(1000)}, []byte{0}},
	} {
		roundTrip(t, tc.kind, tc.msg, tc.extra)
	}
}

// TestRoundTripRandom round-trips messages with values of every varint
// length, so each field's encoding is exercised at 1 to 10 bytes.
func TestRoundTripRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	val := func() uint64 { return r.Uint64() >> r.IntN(65) }
	enum := func() int32 { return int32(r.IntN(6)) - 1 }
	for range 2000 {
		extra := make([]byte, r.IntN(40))
		for i := range extra {
			extra[i] = byte(r.Uint32())
		}
		var opt *uint64
		if r.IntN(2) == 0 {
			opt = u64(val())
		}
		roundTrip(t, KindWorkerPulse, &WorkerPulse{Type: PulseType(enum()), WorkerId: val(), TaskId: val(), NextPulse: val()}, nil)
		roundTrip(t, KindPulseResponse, &PulseResponse{Error: ControllerError(enum()), WorkerId: opt}, nil)
		roundTrip(t, KindControlMsg, &ControlMsg{Type: ControlType(enum()), TaskId: opt}, extra)
		roundTrip(t, KindWorkerResponse, &WorkerResponse{Error: WorkerError(enum()), TaskId: val()}, extra)
	}
}

// TestAppendMatchesMarshal: the frame's message is proto.Marshal's bytes and
// its prefix their length; nothing but the prefix is added around them.
func TestAppendMatchesMarshal(t *testing.T) {
	for _, f := range wireFrames() {
		m := proto.Clone(f.msg)
		buf := appendAny(nil, f.kind, m, []byte(f.extra))
		want, err := proto.MarshalOptions{Deterministic: true}.Marshal(f.msg)
		if err != nil {
			t.Fatal(err)
		}
		if got := buf[LenSize : len(buf)-len(f.extra)]; !bytes.Equal(got, want) || msgLen(wireFrame{bytes: string(buf)}) != len(want) {
			t.Errorf("%s: frame %q, proto.Marshal %q", f.name, buf, want)
		}
	}
}

// TestUnmarshalResets: decoding into a reused message leaves nothing of the
// previous frame, the optional fields' presence included.
func TestUnmarshalResets(t *testing.T) {
	p := &WorkerPulse{Type: PulseType_PULSE_SHUTDOWN, WorkerId: 9, TaskId: 9, NextPulse: 9}
	if err := Unmarshal([]byte("\x10\x02"), p); err != nil || !proto.Equal(p, &WorkerPulse{WorkerId: 2}) {
		t.Errorf("WorkerPulse: %v, %v", p, err)
	}
	c := &ControlMsg{Type: ControlType_CTRL_SET_TASK, ExtraSize: 5, TaskId: u64(3)}
	if err := Unmarshal([]byte("\x08\x01"), c); err != nil || c.TaskId != nil || c.ExtraSize != 0 || c.Type != ControlType_CTRL_FETCH {
		t.Errorf("ControlMsg: %v, %v", c, err)
	}
	r := &PulseResponse{WorkerId: u64(4)}
	if err := Unmarshal(nil, r); err != nil || r.WorkerId != nil {
		t.Errorf("PulseResponse: %v, %v", r, err)
	}
}

// TestUnmarshalLenient: what a worker built from another .proto may send
// still decodes: unknown fields are dropped, unknown enum numbers kept, a
// repeated field's last value wins.
func TestUnmarshalLenient(t *testing.T) {
	var p WorkerPulse
	if err := Unmarshal([]byte("\x08\x07\x10\x01\x10\x02\x2a\x03abc\x48\x01"), &p); err != nil {
		t.Fatal(err)
	}
	if p.Type != PulseType(7) || p.WorkerId != 2 || len(p.ProtoReflect().GetUnknown()) != 0 {
		t.Errorf("decoded %v, unknown %q", &p, p.ProtoReflect().GetUnknown())
	}
}

// TestMalformedAgrees: where ParseFrame finds the message malformed,
// proto.Unmarshal refuses it too, so the parser refuses nothing a
// protobuf peer would accept.
func TestMalformedAgrees(t *testing.T) {
	for _, msg := range []string{
		"\x10\x80", "\x80", "\x00\x01", "\x2a\x05", "\x2c",
		"\x10\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02", "\x0b\x10\x01", "\x0b\x10\x01\x14",
		"00\x80\x80\x80\x8000",             // field 6<<28, above MaxValidNumber (found by FuzzParseFrame)
		"\x0b\x80\x80\x80\x80\x30\x01\x0c", // the same number inside a group, which Unmarshal skips
	} {
		for _, k := range []Kind{KindControlMsg, KindWorkerResponse} {
			_, _, _, perr := ParseFrame([]byte(le(uint64(len(msg)))+msg), k, 0)
			uerr := Unmarshal([]byte(msg), newOf(k))
			if (perr == ErrMalformed) != (uerr != nil) {
				t.Errorf("%v %q: ParseFrame %v, Unmarshal %v", k, msg, perr, uerr)
			}
		}
	}
}

// TestAllocs: with room in dst, the encoders allocate nothing; decoding the
// two messages the controller reads allocates nothing.
func TestAllocs(t *testing.T) {
	dst := make([]byte, 0, 256)
	pulse := &WorkerPulse{Type: PulseType_PULSE_OK, WorkerId: 7, TaskId: 300, NextPulse: 60}
	resp := &PulseResponse{WorkerId: u64(7)}
	ctl := &ControlMsg{Type: ControlType_CTRL_SET_TASK, TaskId: u64(9)}
	wr := &WorkerResponse{TaskId: 9}
	extra := []byte("hello")
	if n := testing.AllocsPerRun(100, func() {
		b := AppendWorkerPulse(dst, pulse)
		b = AppendPulseResponse(b, resp)
		b = AppendControlMsg(b, ctl, extra)
		_ = AppendWorkerResponse(b, wr, extra)
	}); n != 0 {
		t.Errorf("encoders: %v allocations", n)
	}

	pulseFrame := AppendWorkerPulse(nil, pulse)
	respFrame := AppendWorkerResponse(nil, &WorkerResponse{Error: WorkerError_WORKER_ERR_TASK_FAILED, TaskId: 1 << 50}, extra)
	var p WorkerPulse
	var r WorkerResponse
	if n := testing.AllocsPerRun(100, func() {
		f, _, _, _ := ParseFrame(pulseFrame, KindWorkerPulse, 0)
		if Unmarshal(f.Msg, &p) != nil {
			panic("pulse")
		}
		f, _, _, _ = ParseFrame(respFrame, KindWorkerResponse, 0)
		if Unmarshal(f.Msg, &r) != nil {
			panic("response")
		}
	}); n != 0 {
		t.Errorf("parse and decode: %v allocations", n)
	}
}
