package gearman

import (
	"bytes"
	"fmt"
	"strconv"
	"testing"
)

// TestRoundTrip encodes every type 1..42 with Argc() arguments, both magics,
// and parses it back.
func TestRoundTrip(t *testing.T) {
	for typ := Type(1); typ <= maxType; typ++ {
		for _, m := range []Magic{Req, Res} {
			argc := typ.Argc()
			if argc < 0 {
				argc = 1 // unknown: the whole body is one argument
			}
			args := make([][]byte, argc)
			for i := range args {
				args[i] = []byte(fmt.Sprintf("arg%d", i))
			}
			if argc > 0 {
				args[argc-1] = []byte("last\x00with\x00NULs") // the last argument may hold NULs
			}
			if argc > 1 {
				args[0] = nil // empty arguments survive too
			}
			raw := AppendPacket([]byte("prefix"), m, typ, args...)[len("prefix"):]
			var p Packet
			n, err := Parse(raw, 0, &p)
			if n != len(raw) || err != nil {
				t.Fatalf("%v %v: Parse = (%d, %v), want (%d, nil)", m, typ, n, err, len(raw))
			}
			if p.Magic != m || p.Type != typ || p.NArgs != argc {
				t.Fatalf("%v %v: got %v %v NArgs %d", m, typ, p.Magic, p.Type, p.NArgs)
			}
			for i := range args {
				if !bytes.Equal(p.Arg(i), args[i]) {
					t.Errorf("%v %v: arg %d = %q, want %q", m, typ, i, p.Arg(i), args[i])
				}
			}
			if again := AppendPacket(nil, p.Magic, p.Type, p.Args[:p.NArgs]...); !bytes.Equal(again, raw) {
				t.Errorf("%v %v: re-encoding differs:\n% x\n% x", m, typ, again, raw)
			}
		}
	}
}

func TestAppendHeader(t *testing.T) {
	got := AppendHeader([]byte{0xff}, Req, SubmitJobEpoch, 0x01020304)
	want := []byte{0xff, 0, 'R', 'E', 'Q', 0, 0, 0, 36, 1, 2, 3, 4}
	if !bytes.Equal(got, want) {
		t.Errorf("AppendHeader = % x, want % x", got, want)
	}
	got = AppendHeader(nil, Res, Type(0x0a0b0c0d), 0)
	want = []byte{0, 'R', 'E', 'S', 0x0a, 0x0b, 0x0c, 0x0d, 0, 0, 0, 0}
	if !bytes.Equal(got, want) {
		t.Errorf("AppendHeader = % x, want % x", got, want)
	}
}

func TestBeginEnd(t *testing.T) {
	dst := []byte("earlier packets")
	dst, start := Begin(dst, Res, JobCreated)
	if start != len("earlier packets") {
		t.Fatalf("start = %d", start)
	}
	dst = append(dst, "H:lap:"...)
	dst = strconv.AppendUint(dst, 1, 10)
	dst = End(dst, start)
	want := AppendPacket([]byte("earlier packets"), Res, JobCreated, []byte("H:lap:1"))
	if !bytes.Equal(dst, want) {
		t.Errorf("Begin/End =\n% x\nwant\n% x", dst, want)
	}

	// An empty body.
	dst, start = Begin(nil, Res, Noop)
	if dst = End(dst, start); !bytes.Equal(dst, AppendPacket(nil, Res, Noop)) {
		t.Errorf("Begin/End empty = % x", dst)
	}
}

func TestEndTail(t *testing.T) {
	dst, start := Begin([]byte("x"), Res, JobAssign)
	dst = append(dst, "H:lap:1\x00f\x00"...)
	dst = EndTail(dst, start, len("payload"))
	got := append(dst, "payload"...)
	want := AppendPacket([]byte("x"), Res, JobAssign, []byte("H:lap:1"), []byte("f"), []byte("payload"))
	if !bytes.Equal(got, want) {
		t.Errorf("EndTail + tail =\n% x\nwant\n% x", got, want)
	}
}

func TestAppendError(t *testing.T) {
	got := AppendError(nil, "INVALID_MAGIC", "Request magic expected")
	want := AppendPacket(nil, Res, Error, []byte("INVALID_MAGIC"), []byte("Request magic expected"))
	if !bytes.Equal(got, want) {
		t.Errorf("AppendError =\n% x\nwant\n% x", got, want)
	}
	var p Packet
	if n, err := Parse(got, 0, &p); n != len(got) || err != nil ||
		p.Type != Error || string(p.Arg(0)) != "INVALID_MAGIC" || string(p.Arg(1)) != "Request magic expected" {
		t.Errorf("Parse(AppendError) = (%d, %v) %v %q", n, err, p.Type, p.Args[:p.NArgs])
	}
}

func TestAppendPacketNoArgs(t *testing.T) {
	want := []byte{0, 'R', 'E', 'S', 0, 0, 0, 10, 0, 0, 0, 0}
	if got := AppendPacket(nil, Res, NoJob); !bytes.Equal(got, want) {
		t.Errorf("AppendPacket(NO_JOB) = % x", got)
	}
	// One empty argument is an empty body too.
	if got := AppendPacket(nil, Res, NoJob, nil); !bytes.Equal(got, want) {
		t.Errorf("AppendPacket(NO_JOB, nil) = % x", got)
	}
}
