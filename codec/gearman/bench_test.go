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

// BenchmarkParsePipelined parses a buffer of many frames, as OnTraffic does:
// with the connection's Parser.
func BenchmarkParsePipelined(b *testing.B) {
	var buf []byte
	for range 16 {
		for _, bp := range benchPackets {
			buf = append(buf, bp.raw...)
		}
	}
	var ps Parser
	var p Packet
	b.ReportAllocs()
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		for rest := buf; len(rest) > 0; {
			n, frame, err := ps.Parse(rest, &p)
			if !frame || err != nil {
				b.Fatal(n, frame, err)
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

// fedFrames are a text line at the longest allowed and at an eighth of it,
// and a binary packet at the largest size a connection keeps in gnet's
// buffer before reading it into its own (64 KiB) and at 1 MiB.
var fedFrames = []struct {
	name string
	raw  []byte
}{
	{"line/1KiB", benchLine(MaxLineSize / 8)},
	{"line/8KiB", benchLine(MaxLineSize)},
	{"packet/64KiB", benchSubmit(64 << 10)},
	{"packet/1MiB", benchSubmit(1 << 20)},
}

// benchLine is an admin line of n bytes, "\r\n" included.
func benchLine(n int) []byte {
	line := []byte("create function ")
	for len(line) < n-2 {
		line = append(line, 'f')
	}
	return append(line, "\r\n"...)
}

// benchSubmit is a SUBMIT_JOB packet of n bytes.
func benchSubmit(n int) []byte {
	payload := make([]byte, n-HeaderSize-len(benchFunc)-len(benchUnique)-2)
	for i := range payload {
		payload[i] = 'a' + byte(i%26)
	}
	return AppendPacket(nil, Req, SubmitJob, benchFunc, benchUnique, payload)
}

// BenchmarkParseFed feeds one large frame to the parser in pieces of 1 and
// of 100 bytes, as a slow sender's bytes reach a connection. The bytes per
// second must not fall as the frame grows: each byte costs the same
// however many came before it.
func BenchmarkParseFed(b *testing.B) {
	for _, f := range fedFrames {
		for _, step := range []int{1, 100} {
			b.Run(f.name+"/step="+strconv.Itoa(step), func(b *testing.B) {
				var ps Parser
				var p Packet
				b.ReportAllocs()
				b.SetBytes(int64(len(f.raw)))
				for b.Loop() {
					if n := feedPieces(&ps, f.raw, step, &p); n != len(f.raw) {
						b.Fatalf("parsed %d of %d bytes", n, len(f.raw))
					}
				}
			})
		}
	}
}

// feedPieces makes the bytes of one frame, raw, arrive step at a time and
// parses as the Gearman engine does: with the connection's Parser, called
// at each arrival that brings Need bytes, given the bytes it has not
// consumed. It returns the frame's length as the Parser reports it.
func feedPieces(ps *Parser, raw []byte, step int, p *Packet) int {
	start, done := 0, 0 // start of the bytes not consumed
	for have := 0; have < len(raw); {
		have = min(have+step, len(raw))
		if have-start < ps.Need() {
			continue
		}
		n, frame, err := ps.Parse(raw[start:have], p)
		done += n
		if err != nil || frame {
			return done
		}
		start += n
	}
	return 0
}
