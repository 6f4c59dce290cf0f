package gearman

import (
	"strconv"
	"testing"
)

// The hot packets: what every job costs on the client and worker side.
var (
	benchHandle   = []byte("H:switchyard.example.com:123456")
	benchFunc     = []byte("reverse")
	benchUnique   = []byte("0b6e5d0c-8f1e-4e6a-9c53-3c1b3c0e7f21")
	benchWorkload = []byte("a workload of a hundred bytes or so, which is what most jobs carry: an id, a path, a small document..")
	benchResult   = []byte("a result of a similar size, because most jobs answer with about as much as they were given..........")
)

var benchPackets = []struct {
	name string
	raw  []byte
}{
	{"SUBMIT_JOB", AppendPacket(nil, Req, SubmitJob, benchFunc, benchUnique, benchWorkload)},
	{"JOB_CREATED", AppendPacket(nil, Res, JobCreated, benchHandle)},
	{"GRAB_JOB", AppendPacket(nil, Req, GrabJob)},
	{"JOB_ASSIGN", AppendPacket(nil, Res, JobAssign, benchHandle, benchFunc, benchWorkload)},
	{"WORK_COMPLETE/worker", AppendPacket(nil, Req, WorkComplete, benchHandle, benchResult)},
	{"WORK_COMPLETE/client", AppendPacket(nil, Res, WorkComplete, benchHandle, benchResult)},
	{"NOOP", AppendPacket(nil, Res, Noop)},
	{"PRE_SLEEP", AppendPacket(nil, Req, PreSleep)},
}

func BenchmarkParse(b *testing.B) {
	for _, bp := range benchPackets {
		b.Run(bp.name, func(b *testing.B) {
			var p Packet
			b.ReportAllocs()
			b.SetBytes(int64(len(bp.raw)))
			for b.Loop() {
				if n, err := Parse(bp.raw, 0, &p); n != len(bp.raw) || err != nil {
					b.Fatal(n, err)
				}
			}
		})
	}
}

// BenchmarkParsePipelined parses a buffer of many frames, as OnTraffic does.
func BenchmarkParsePipelined(b *testing.B) {
	var buf []byte
	for range 16 {
		for _, bp := range benchPackets {
			buf = append(buf, bp.raw...)
		}
	}
	var p Packet
	b.ReportAllocs()
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		for rest := buf; len(rest) > 0; {
			n, err := Parse(rest, 0, &p)
			if n == 0 || err != nil {
				b.Fatal(n, err)
			}
			rest = rest[n:]
		}
	}
}

func BenchmarkParseText(b *testing.B) {
	line := []byte("maxqueue reverse 100 100 100\r\n")
	var p Packet
	b.ReportAllocs()
	for b.Loop() {
		if n, err := Parse(line, 0, &p); n != len(line) || err != nil {
			b.Fatal(n, err)
		}
	}
}

// The encoders write into a reused buffer, as a connection's outbound buffer
// is reused: steady state must not allocate.
func BenchmarkAppend(b *testing.B) {
	encoders := []struct {
		name string
		enc  func(dst []byte) []byte
	}{
		{"SUBMIT_JOB", func(dst []byte) []byte {
			return AppendPacket(dst, Req, SubmitJob, benchFunc, benchUnique, benchWorkload)
		}},
		{"JOB_CREATED", func(dst []byte) []byte {
			// How the engine writes a handle: prefix and counter, in place.
			dst, start := Begin(dst, Res, JobCreated)
			dst = append(dst, "H:switchyard.example.com:"...)
			dst = strconv.AppendUint(dst, 123456, 10)
			return End(dst, start)
		}},
		{"GRAB_JOB", func(dst []byte) []byte { return AppendPacket(dst, Req, GrabJob) }},
		{"JOB_ASSIGN", func(dst []byte) []byte {
			return AppendPacket(dst, Res, JobAssign, benchHandle, benchFunc, benchWorkload)
		}},
		{"WORK_COMPLETE/worker", func(dst []byte) []byte {
			return AppendPacket(dst, Req, WorkComplete, benchHandle, benchResult)
		}},
		{"WORK_COMPLETE/client", func(dst []byte) []byte {
			return AppendPacket(dst, Res, WorkComplete, benchHandle, benchResult)
		}},
		{"NOOP", func(dst []byte) []byte { return AppendHeader(dst, Res, Noop, 0) }},
		{"PRE_SLEEP", func(dst []byte) []byte { return AppendHeader(dst, Req, PreSleep, 0) }},
		{"ERROR", func(dst []byte) []byte {
			return AppendError(dst, "JOB_NOT_FOUND", "Job given in work result not found")
		}},
	}
	for _, e := range encoders {
		b.Run(e.name, func(b *testing.B) {
			buf := make([]byte, 0, 4096)
			b.ReportAllocs()
			b.SetBytes(int64(len(e.enc(nil))))
			for b.Loop() {
				buf = e.enc(buf[:0])
			}
		})
	}
}
