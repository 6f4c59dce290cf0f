package gearman

import (
	"bytes"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"testing"
)

// unhex decodes a hex dump laid out as in the spec: spaces and newlines are
// ignored.
func unhex(t testing.TB, dump string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(dump), ""))
	if err != nil {
		t.Fatalf("bad hex dump %q: %v", dump, err)
	}
	return b
}

// frame is one complete frame and what Parse must make of it.
type frame struct {
	name  string
	bytes string // raw frame; see hexFrames for the spec's hex dumps
	magic Magic
	typ   Type
	args  []string // binary packets
	text  bool
	line  string
	words []string // text lines
	err   error    // only ErrTruncated: the others leave no frame
}

// specExample is the "reverse" walkthrough at the end of the spec, byte for
// byte: every frame a worker, client and server exchange.
var specExample = []struct {
	name  string
	dump  string
	magic Magic
	typ   Type
	args  []string
}{
	{"worker CAN_DO", `00 52 45 51  00 00 00 01  00 00 00 07  72 65 76 65 72 73 65`,
		Req, CanDo, []string{"reverse"}},
	{"worker GRAB_JOB", `00 52 45 51  00 00 00 09  00 00 00 00`, Req, GrabJob, nil},
	{"server NO_JOB", `00 52 45 53  00 00 00 0a  00 00 00 00`, Res, NoJob, nil},
	{"worker PRE_SLEEP", `00 52 45 51  00 00 00 04  00 00 00 00`, Req, PreSleep, nil},
	{"client SUBMIT_JOB", `00 52 45 51  00 00 00 07  00 00 00 0d
		72 65 76 65 72 73 65 00  00  74 65 73 74`,
		Req, SubmitJob, []string{"reverse", "", "test"}},
	{"server JOB_CREATED", `00 52 45 53  00 00 00 08  00 00 00 07  48 3a 6c 61 70 3a 31`,
		Res, JobCreated, []string{"H:lap:1"}},
	{"server NOOP", `00 52 45 53  00 00 00 06  00 00 00 00`, Res, Noop, nil},
	{"server JOB_ASSIGN", `00 52 45 53  00 00 00 0b  00 00 00 14
		48 3a 6c 61 70 3a 31 00  72 65 76 65 72 73 65 00  74 65 73 74`,
		Res, JobAssign, []string{"H:lap:1", "reverse", "test"}},
	{"worker WORK_COMPLETE", `00 52 45 51  00 00 00 0d  00 00 00 0c
		48 3a 6c 61 70 3a 31 00  74 73 65 74`,
		Req, WorkComplete, []string{"H:lap:1", "tset"}},
	{"server WORK_COMPLETE", `00 52 45 53  00 00 00 0d  00 00 00 0c
		48 3a 6c 61 70 3a 31 00  74 73 65 74`,
		Res, WorkComplete, []string{"H:lap:1", "tset"}},
}

// frames returns every frame the table tests know: the spec's example and
// more, binary and text, including packets that parse with ErrTruncated.
func frames(t testing.TB) []frame {
	var fs []frame
	for _, e := range specExample {
		fs = append(fs, frame{name: "spec " + e.name, bytes: string(unhex(t, e.dump)),
			magic: e.magic, typ: e.typ, args: e.args})
	}
	bin := func(name string, m Magic, typ Type, body string, args ...string) frame {
		return frame{name: name, bytes: string(AppendHeader(nil, m, typ, len(body))) + body,
			magic: m, typ: typ, args: args}
	}
	fs = append(fs,
		bin("SUBMIT_JOB_BG payload with NULs", Req, SubmitJobBg, "f\x00u\x00a\x00b\x00", "f", "u", "a\x00b\x00"),
		bin("SUBMIT_JOB_HIGH empty payload", Req, SubmitJobHigh, "f\x00\x00", "f", "", ""),
		bin("SUBMIT_JOB_EPOCH", Req, SubmitJobEpoch, "f\x00u\x001700000000\x00data", "f", "u", "1700000000", "data"),
		bin("SUBMIT_JOB_SCHED", Req, SubmitJobSched, "f\x00u\x001\x002\x003\x004\x005\x00data",
			"f", "u", "1", "2", "3", "4", "5", "data"),
		bin("SUBMIT_REDUCE_JOB", Req, SubmitReduceJob, "map\x00u\x00red\x00\x00data", "map", "u", "red", "", "data"),
		bin("JOB_ASSIGN_UNIQ", Res, JobAssignUniq, "H:x:1\x00f\x00u\x00data", "H:x:1", "f", "u", "data"),
		bin("JOB_ASSIGN_ALL", Res, JobAssignAll, "H:x:1\x00f\x00u\x00red\x00data", "H:x:1", "f", "u", "red", "data"),
		bin("WORK_STATUS", Req, WorkStatus, "H:x:1\x0050\x00100", "H:x:1", "50", "100"),
		bin("STATUS_RES", Res, StatusRes, "H:x:1\x001\x000\x0050\x00100", "H:x:1", "1", "0", "50", "100"),
		bin("STATUS_RES_UNIQUE", Res, StatusResUnique, "u\x001\x001\x000\x000\x002", "u", "1", "1", "0", "0", "2"),
		bin("CAN_DO_TIMEOUT", Req, CanDoTimeout, "f\x001000", "f", "1000"),
		bin("CAN_DO name with NUL", Req, CanDo, "rev\x00erse", "rev\x00erse"),
		bin("CAN_DO empty", Req, CanDo, "", ""),
		bin("ECHO_REQ", Req, EchoReq, "a\x00b", "a\x00b"),
		bin("ERROR", Res, Error, "INVALID_MAGIC\x00Request magic expected", "INVALID_MAGIC", "Request magic expected"),
		bin("OPTION_REQ", Req, OptionReq, "exceptions", "exceptions"),
		bin("GRAB_JOB body ignored", Req, GrabJob, "junk\x00"),
		bin("RES magic on a request type", Res, SubmitJob, "f\x00u\x00x", "f", "u", "x"),
		bin("unknown type 43", Req, 43, "a\x00b", "a\x00b"),
		bin("unknown type 5", Req, 5, "", ""),
		bin("unknown type 0", Req, 0, "x", "x"),
		bin("unknown type max", Req, 0xffffffff, "x", "x"),
	)
	trunc := func(name string, typ Type, body string, args ...string) frame {
		f := bin(name, Req, typ, body, args...)
		f.err = ErrTruncated
		return f
	}
	fs = append(fs,
		trunc("SUBMIT_JOB no NUL", SubmitJob, "reverse", "reverse"),
		trunc("SUBMIT_JOB one NUL", SubmitJob, "reverse\x00test", "reverse", "test"),
		trunc("WORK_COMPLETE empty", WorkComplete, "", ""),
		trunc("SUBMIT_JOB_SCHED short", SubmitJobSched, "f\x00u\x001\x002", "f", "u", "1", "2"),
	)
	text := func(name, raw, line string, words ...string) frame {
		return frame{name: name, bytes: raw, text: true, line: line, words: words}
	}
	fs = append(fs,
		text("status LF", "status\n", "status", "status"),
		text("status CRLF", "status\r\n", "status", "status"),
		text("extra spaces", "  maxqueue   f  10  \r\n", "  maxqueue   f  10  ", "maxqueue", "f", "10"),
		text("empty line", "\n", ""),
		text("empty CRLF line", "\r\n", ""),
		text("only spaces", "   \n", "   "),
		text("lone CR kept", "a\rb\r\r\n", "a\rb\r", "a\rb\r"),
		text("tab is not a separator", "show\tjobs\n", "show\tjobs", "show\tjobs"),
		text("eight words", "1 2 3 4 5 6 7 8\n", "1 2 3 4 5 6 7 8", "1", "2", "3", "4", "5", "6", "7", "8"),
		text("rest in last word", "1 2 3 4 5 6 7 8  9 10  \n", "1 2 3 4 5 6 7 8  9 10  ",
			"1", "2", "3", "4", "5", "6", "7", "8  9 10"),
	)
	return fs
}

// checkFrame compares what Parse made of f.
func checkFrame(t *testing.T, f frame, p *Packet, n int, err error) {
	t.Helper()
	if n != len(f.bytes) || !errors.Is(err, f.err) && err != f.err {
		t.Fatalf("%s: Parse = (%d, %v), want (%d, %v)", f.name, n, err, len(f.bytes), f.err)
	}
	if p.Text != f.text {
		t.Fatalf("%s: Text = %v", f.name, p.Text)
	}
	if f.text {
		if string(p.Line) != f.line {
			t.Errorf("%s: Line = %q, want %q", f.name, p.Line, f.line)
		}
		if got := strs(p.Words[:p.NWords]); !slices.Equal(got, f.words) {
			t.Errorf("%s: Words = %q, want %q", f.name, got, f.words)
		}
		if p.NArgs != 0 || p.Magic != 0 || p.Type != 0 {
			t.Errorf("%s: text packet has NArgs %d, Magic %d, Type %d", f.name, p.NArgs, p.Magic, p.Type)
		}
		return
	}
	if p.Magic != f.magic || p.Type != f.typ {
		t.Errorf("%s: Magic %v Type %v, want %v %v", f.name, p.Magic, p.Type, f.magic, f.typ)
	}
	if got := strs(p.Args[:p.NArgs]); !slices.Equal(got, f.args) {
		t.Errorf("%s: Args = %q, want %q", f.name, got, f.args)
	}
	if p.NWords != 0 || p.Line != nil {
		t.Errorf("%s: binary packet has NWords %d, Line %q", f.name, p.NWords, p.Line)
	}
}

func strs(bs [][]byte) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = string(b)
	}
	return out
}

func TestParseSpecExample(t *testing.T) {
	for _, e := range specExample {
		raw := unhex(t, e.dump)
		var p Packet
		n, err := Parse(raw, 0, &p)
		if err != nil || n != len(raw) {
			t.Fatalf("%s: Parse = (%d, %v), want (%d, nil)", e.name, n, err, len(raw))
		}
		if p.Magic != e.magic || p.Type != e.typ || !slices.Equal(strs(p.Args[:p.NArgs]), e.args) {
			t.Errorf("%s: got %v %v %q", e.name, p.Magic, p.Type, strs(p.Args[:p.NArgs]))
		}
		args := make([][]byte, len(e.args))
		for i, a := range e.args {
			args[i] = []byte(a)
		}
		if enc := AppendPacket(nil, e.magic, e.typ, args...); !bytes.Equal(enc, raw) {
			t.Errorf("%s: AppendPacket =\n% x\nwant\n% x", e.name, enc, raw)
		}
	}
}

func TestParseFrames(t *testing.T) {
	for _, f := range frames(t) {
		var p Packet
		n, err := Parse([]byte(f.bytes), 0, &p)
		checkFrame(t, f, &p, n, err)
	}
}

// TestParseSplit feeds every frame one byte at a time: every proper prefix is
// "need more", the whole frame is the frame. Each prefix is capped at its
// length so that reading past it panics instead of finding the next bytes.
func TestParseSplit(t *testing.T) {
	for _, f := range frames(t) {
		raw := []byte(f.bytes)
		var p Packet
		for k := 0; k < len(raw); k++ {
			n, err := Parse(raw[:k:k], 0, &p)
			if n != 0 || err != nil {
				t.Fatalf("%s: prefix %d/%d: Parse = (%d, %v), want need-more", f.name, k, len(raw), n, err)
			}
		}
		n, err := Parse(raw[:len(raw):len(raw)], 0, &p)
		checkFrame(t, f, &p, n, err)
	}
}

// TestParsePipelined parses all frames from one buffer, as a connection that
// pipelines requests delivers them, and the same with a packet reused
// across them so that no stale field leaks from one frame to the next.
func TestParsePipelined(t *testing.T) {
	fs := frames(t)
	var all []byte
	for _, f := range fs {
		all = append(all, f.bytes...)
	}
	buf := all[:len(all):len(all)]
	var p Packet
	for _, f := range fs {
		n, err := Parse(buf, 0, &p)
		checkFrame(t, f, &p, n, err)
		buf = buf[n:]
	}
	if len(buf) != 0 {
		t.Fatalf("%d bytes left over", len(buf))
	}
	if n, err := Parse(buf, 0, &p); n != 0 || err != nil {
		t.Fatalf("Parse(empty) = (%d, %v)", n, err)
	}
}

func TestParseBadMagic(t *testing.T) {
	for _, raw := range []string{
		"\x00X",
		"\x00RX",
		"\x00REX",
		"\x00RE\x00",
		"\x00req\x00\x00\x00\x07\x00\x00\x00\x00",
		"\x00\x00\x00\x00\x00\x00\x00\x07\x00\x00\x00\x00",
	} {
		var p Packet
		if n, err := Parse([]byte(raw), 0, &p); n != 0 || err != ErrBadMagic {
			t.Errorf("Parse(%q) = (%d, %v), want (0, ErrBadMagic)", raw, n, err)
		}
	}
	// A good prefix of the magic is not an error yet.
	for _, raw := range []string{"\x00", "\x00R", "\x00RE", "\x00REQ", "\x00RES"} {
		var p Packet
		if n, err := Parse([]byte(raw), 0, &p); n != 0 || err != nil {
			t.Errorf("Parse(%q) = (%d, %v), want need-more", raw, n, err)
		}
	}
}

func TestParseTooLarge(t *testing.T) {
	for _, tc := range []struct {
		size, max int
		err       error
	}{
		{100, 100, nil},
		{101, 100, ErrTooLarge},
		{DefaultMaxPacket, 0, nil},
		{DefaultMaxPacket + 1, 0, ErrTooLarge},
		{DefaultMaxPacket + 1, -1, ErrTooLarge},
		{0xffffffff, 0, ErrTooLarge},
		{0, 1, nil},
	} {
		hdr := AppendHeader(nil, Req, CanDo, tc.size)
		var p Packet
		// The header alone decides: no body has arrived.
		n, err := Parse(hdr, tc.max, &p)
		if n != 0 && tc.size != 0 || err != tc.err {
			t.Errorf("size %d max %d: Parse(header) = (%d, %v), want (0, %v)", tc.size, tc.max, n, err, tc.err)
		}
	}
}

func TestParseLineTooLong(t *testing.T) {
	long := bytes.Repeat([]byte("a"), MaxLineSize)
	var p Packet
	if n, err := Parse(long[:MaxLineSize-1], 0, &p); n != 0 || err != nil {
		t.Errorf("Parse(%d bytes, no newline) = (%d, %v), want need-more", MaxLineSize-1, n, err)
	}
	if n, err := Parse(long, 0, &p); n != 0 || err != ErrLineTooLong {
		t.Errorf("Parse(%d bytes, no newline) = (%d, %v), want ErrLineTooLong", MaxLineSize, n, err)
	}
	// The longest line accepted: MaxLineSize bytes, newline included.
	ok := append(bytes.Repeat([]byte("a"), MaxLineSize-1), '\n')
	if n, err := Parse(ok, 0, &p); n != MaxLineSize || err != nil || len(p.Line) != MaxLineSize-1 {
		t.Errorf("Parse(longest line) = (%d, %v), want (%d, nil)", n, err, MaxLineSize)
	}
	// A newline beyond the limit does not save it.
	over := append(bytes.Repeat([]byte("a"), MaxLineSize), '\n')
	if n, err := Parse(over, 0, &p); n != 0 || err != ErrLineTooLong {
		t.Errorf("Parse(line of %d) = (%d, %v), want ErrLineTooLong", len(over), n, err)
	}
}

func TestArg(t *testing.T) {
	var p Packet
	raw := AppendPacket(nil, Req, WorkComplete, []byte("H:x:1"), []byte("ok"))
	if _, err := Parse(raw, 0, &p); err != nil {
		t.Fatal(err)
	}
	if string(p.Arg(0)) != "H:x:1" || string(p.Arg(1)) != "ok" || p.Arg(2) != nil || p.Arg(-1) != nil {
		t.Errorf("Arg: %q %q %q %q", p.Arg(0), p.Arg(1), p.Arg(2), p.Arg(-1))
	}
	// Arguments are capped: appending to one must not overwrite the next.
	_ = append(p.Args[0], 'X')
	if string(p.Arg(1)) != "ok" || raw[HeaderSize+5] != 0 {
		t.Errorf("append to Args[0] overwrote the buffer: % x", raw)
	}
}
