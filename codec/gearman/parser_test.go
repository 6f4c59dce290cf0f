package gearman

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unsafe"
)

// parsed is what one frame left in a Packet, copied out of the buffers it
// pointed into, and where in the stream the frame ended.
type parsed struct {
	end   int // stream offset just past the frame
	magic Magic
	typ   Type
	text  bool
	line  string
	args  string // Args or Words, quoted and joined
	err   error  // nil or ErrTruncated
}

func capture(p *Packet, end int, err error) parsed {
	r := parsed{end: end, magic: p.Magic, typ: p.Type, text: p.Text, line: string(p.Line), err: err}
	args := p.Args[:p.NArgs]
	if p.Text {
		args = p.Words[:p.NWords]
	}
	r.args = fmt.Sprint(len(args), ":", string(bytes.Join(args, []byte("|"))))
	return r
}

// outcome is what parsing a stream made of it: its frames, then the error
// that ended it (nil if it ended at a frame boundary or inside a frame) and
// how many bytes of the stream had arrived when that error was reported.
type outcome struct {
	frames []parsed
	err    error
	errAt  int
}

func (o outcome) String() string {
	var b strings.Builder
	clip := func(s string) string {
		if len(s) > 80 {
			return fmt.Sprintf("%s...(%d bytes)", s[:80], len(s))
		}
		return s
	}
	for _, f := range o.frames {
		fmt.Fprintf(&b, "end %d magic %d type %d text %v line %q args %s err %v\n",
			f.end, f.magic, f.typ, f.text, clip(f.line), clip(f.args), f.err)
	}
	fmt.Fprintf(&b, "err %v at %d", o.err, o.errAt)
	return b.String()
}

// arrival returns, for the stream's whole parse want, the outcome expected
// when the stream comes in pieces: the same, but an error is reported when
// the piece that brings the byte ruling the frame out arrives.
func arrival(want outcome, pieces [][]byte) outcome {
	if want.err == nil {
		return want
	}
	at := 0
	for _, piece := range pieces {
		if at += len(piece); at >= want.errAt {
			break
		}
	}
	want.errAt = at
	return want
}

func sameOutcome(a, b outcome) bool {
	return slices.Equal(a.frames, b.frames) && a.err == b.err && a.errAt == b.errAt
}

// parseWhole parses the whole stream with the stateless Parse, the
// reference: frame after frame from one buffer. errAt is found by looking
// at growing prefixes: the shortest one that is refused.
func parseWhole(stream []byte, max int) outcome {
	var o outcome
	var p Packet
	start := 0
	for start < len(stream) {
		n, err := Parse(stream[start:len(stream):len(stream)], max, &p)
		if n == 0 {
			if err != nil {
				o.err = err
				// Once refused, a prefix stays refused as it grows.
				lo, hi := start+1, len(stream)
				for lo < hi {
					mid := (lo + hi) / 2
					if _, e := Parse(stream[start:mid:mid], max, &p); e != nil {
						hi = mid
					} else {
						lo = mid + 1
					}
				}
				o.errAt = lo
			}
			break
		}
		start += n
		o.frames = append(o.frames, capture(&p, start, err))
	}
	return o
}

// feed plays a connection: the stream's pieces arrive one after another; the
// bytes Parse leaves unconsumed stay at the front of the buffer and the next
// piece is appended to them. With lazy, the parser is called only once Need
// bytes are there, as the engine calls it; otherwise at every piece. Bytes
// the parser consumed are overwritten once their frame has been captured,
// so that a parser still reading them is caught.
func feed(t *testing.T, pieces [][]byte, max int, lazy bool) outcome {
	t.Helper()
	var o outcome
	ps := Parser{MaxSize: max}
	var p Packet
	var pending []byte
	received, consumed := 0, 0
	for _, piece := range pieces {
		received += len(piece)
		pending = append(pending, piece...)
		if lazy && len(pending) < ps.Need() {
			continue
		}
		for len(pending) > 0 {
			buf := pending[:len(pending):len(pending)]
			resumed := ps.state == inLine
			n, frame, err := ps.Parse(buf, &p)
			if n < 0 || n > len(buf) || frame && n == 0 {
				t.Fatalf("Parse(%d bytes) = (%d, %v, %v)", len(buf), n, frame, err)
			}
			if err != nil && !frame {
				if n != 0 {
					t.Fatalf("%v with consumed %d", err, n)
				}
				o.err, o.errAt = err, received
				return o
			}
			if err != nil && err != ErrTruncated {
				t.Fatalf("frame with error %v", err)
			}
			consumed += n
			if frame {
				checkPointsInto(t, &p, buf, resumed)
				o.frames = append(o.frames, capture(&p, consumed, err))
			}
			for i := range buf[:n] {
				buf[i] = 0xAA
			}
			pending = pending[n:]
			if !frame {
				if n > 0 && len(pending) > 0 {
					t.Fatalf("a line's start kept, yet %d bytes left", len(pending))
				}
				break
			}
		}
	}
	return o
}

// checkPointsInto checks that p's slices lie in buf, or, for a line whose
// start came in earlier calls (resumed), all outside it: in the parser's
// copy of the line.
func checkPointsInto(t *testing.T, p *Packet, buf []byte, resumed bool) {
	t.Helper()
	in := func(s []byte) bool { return within(buf, s) }
	if resumed {
		in = func(s []byte) bool { return len(s) == 0 || !overlaps(buf, s) }
	}
	ok := true
	if p.Text {
		ok = in(p.Line)
		for _, w := range p.Words[:p.NWords] {
			ok = ok && in(w)
		}
	} else {
		for _, a := range p.Args[:p.NArgs] {
			ok = ok && in(a)
		}
	}
	if !ok {
		t.Fatalf("frame %+v points outside the buffers", capture(p, 0, nil))
	}
}

// overlaps reports whether s shares a byte with buf.
func overlaps(buf, s []byte) bool {
	if len(s) == 0 || len(buf) == 0 {
		return false
	}
	lo, hi := uintptr(unsafe.Pointer(unsafe.SliceData(buf))), uintptr(unsafe.Pointer(unsafe.SliceData(s)))
	return hi < lo+uintptr(len(buf)) && lo < hi+uintptr(len(s))
}

// splits returns the ways the table tests cut a stream: whole, in two at
// every offset, one byte at a time, and in pieces of a few odd sizes. In a
// stream of kilobytes, the middle offsets of the cut in two are sampled.
func splits(stream []byte) (names []string, cuts [][][]byte) {
	add := func(name string, pieces ...[]byte) {
		names = append(names, name)
		cuts = append(cuts, pieces)
	}
	add("whole", stream)
	const ends = smallLine + 64
	for k := 1; k < len(stream); k++ {
		if k > ends && k < len(stream)-ends && k%61 != 0 {
			continue
		}
		add(fmt.Sprintf("split at %d", k), stream[:k], stream[k:])
	}
	for _, size := range []int{1, 3, 7, 100} {
		if size >= len(stream) {
			continue
		}
		var pieces [][]byte
		for rest := stream; len(rest) > 0; {
			n := min(size, len(rest))
			pieces = append(pieces, rest[:n])
			rest = rest[n:]
		}
		add(fmt.Sprintf("%d at a time", size), pieces...)
	}
	return names, cuts
}

// checkSplits feeds stream cut every way splits knows, lazily and not: the
// outcome must be the whole stream's.
func checkSplits(t *testing.T, stream []byte, max int) {
	t.Helper()
	want := parseWhole(stream, max)
	names, cuts := splits(stream)
	for i, pieces := range cuts {
		for _, lazy := range []bool{false, true} {
			got := feed(t, pieces, max, lazy)
			if want := arrival(want, pieces); !sameOutcome(got, want) {
				t.Fatalf("%s (lazy %v):\n%v\nwant\n%v", names[i], lazy, got, want)
			}
		}
	}
}

// TestParserSplitFrames: every frame of the table, cut every way, parses as
// it does whole.
func TestParserSplitFrames(t *testing.T) {
	for _, f := range frames(t) {
		t.Run(f.name, func(t *testing.T) {
			checkSplits(t, []byte(f.bytes), 0)
		})
	}
}

// TestParserSplitStreams: streams of several frames, so that a piece ends
// inside one frame and the next holds its end and what follows, and streams
// that end in each refusal, cut every way.
func TestParserSplitStreams(t *testing.T) {
	var all []byte
	for _, f := range frames(t) {
		all = append(all, f.bytes...)
	}
	long := func(n int, end string) string { return strings.Repeat("w ", n/2) + strings.Repeat("x", n%2) + end }
	echo := string(AppendPacket(nil, Req, EchoReq, []byte("echo")))
	tests := []struct {
		name   string
		stream string
		max    int
	}{
		{"every frame", string(all), 0},
		{"every frame, small limit", string(all), 16},
		{"lines and packets", "status\r\n" + echo + "workers\n" + echo + "\n" + echo, 0},
		{"around the kept buffer's size", long(smallLine-2, "\n") + long(smallLine-1, "\n") +
			long(smallLine, "\n") + long(smallLine+1, "\r\n") + "version\n", 0},
		{"longest line", long(MaxLineSize-1, "\n") + echo, 0},
		{"longest CRLF line", long(MaxLineSize-2, "\r\n") + echo, 0},
		{"line one too long", long(MaxLineSize, "\n"), 0},
		{"line too long after a line", "status\n" + long(MaxLineSize+10, ""), 0},
		{"unterminated line", "status\nwork", 0},
		{"bad magic", echo + "\x00REX\x00\x00\x00\x10\x00\x00\x00\x00", 0},
		{"bad magic at once", "\x00\x00", 0},
		{"bad magic after a line", "status\n\x00RE\x00", 0},
		{"too large", echo + string(AppendHeader(nil, Req, SubmitJob, 17)), 16},
		{"largest", string(AppendPacket(nil, Req, EchoReq, bytes.Repeat([]byte("e"), 16))), 16},
		{"unfinished packet", echo + echo[:len(echo)-1], 0},
		{"unfinished header", echo + echo[:7], 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkSplits(t, []byte(tt.stream), tt.max)
		})
	}
}

// TestParserNeed follows Need through a packet fed a byte at a time: one
// more byte while the header comes, the packet's length once it has, 1 at
// a frame's start and inside a line.
func TestParserNeed(t *testing.T) {
	pkt := AppendPacket(nil, Req, EchoReq, []byte("abc"))
	stream := append(append([]byte("ok\n"), pkt...), "status\n"...)
	var want []int
	for k := 1; k <= len(stream); k++ {
		switch {
		case k <= 3: // inside "ok\n", then at the packet's start
			want = append(want, 1)
		case k-3 < HeaderSize:
			want = append(want, k-3+1)
		case k-3 < len(pkt):
			want = append(want, len(pkt))
		default: // the packet parsed; then inside "status\n" or past it
			want = append(want, 1)
		}
	}
	var ps Parser
	var p Packet
	var pending []byte
	for k := 1; k <= len(stream); k++ {
		pending = append(pending, stream[k-1])
		for len(pending) > 0 {
			n, frame, err := ps.Parse(pending, &p)
			if err != nil {
				t.Fatalf("byte %d: %v", k, err)
			}
			pending = pending[n:]
			if !frame {
				break
			}
		}
		if got := ps.Need(); got != want[k-1] {
			t.Errorf("after %d bytes: Need() = %d, want %d", k, got, want[k-1])
		}
	}
}

// TestParserReset: a connection that takes an unfinished packet's bytes
// elsewhere resets the parser, which then starts at the next frame.
func TestParserReset(t *testing.T) {
	pkt := AppendPacket(nil, Req, EchoReq, []byte("abc"))
	for _, prefix := range []string{string(pkt[:5]), string(pkt[:HeaderSize+1]), "stat"} {
		var ps Parser
		var p Packet
		if n, frame, err := ps.Parse([]byte(prefix), &p); frame || err != nil {
			t.Fatalf("%q: Parse = (%d, %v, %v)", prefix, n, frame, err)
		}
		ps.Reset()
		if ps.Need() != 1 {
			t.Errorf("%q: Need() = %d after Reset", prefix, ps.Need())
		}
		n, frame, err := ps.Parse([]byte("version\n"), &p)
		if n != 8 || !frame || err != nil || !p.Text || string(p.Line) != "version" {
			t.Errorf("%q: after Reset: Parse = (%d, %v, %v) %q", prefix, n, frame, err, p.Line)
		}
	}
}

// TestParserLineBuffer: a line split across calls is kept in a small
// buffer, reused; a long one in a pooled buffer, held until the next call
// and then given back. Neither costs an allocation once warm.
func TestParserLineBuffer(t *testing.T) {
	var ps Parser
	var p Packet
	parseIn2 := func(line []byte) {
		t.Helper()
		h := len(line) / 2
		if n, frame, err := ps.Parse(line[:h], &p); n != h || frame || err != nil {
			t.Fatalf("first half of %d: (%d, %v, %v)", len(line), n, frame, err)
		}
		if n, frame, err := ps.Parse(line[h:], &p); n != len(line)-h || !frame || err != nil {
			t.Fatalf("second half of %d: (%d, %v, %v)", len(line), n, frame, err)
		}
		if !bytes.Equal(p.Line, line[:len(line)-1]) {
			t.Fatalf("line %q", p.Line)
		}
	}
	status, workers := []byte("status\n"), []byte("workers\n")
	long := append(bytes.Repeat([]byte("x"), MaxLineSize-1), '\n')
	parseIn2(status)
	if cap(ps.small) != smallLine || !within(ps.small[:smallLine], p.Line) || ps.long != nil {
		t.Fatalf("short line not in the small buffer")
	}
	small := &ps.small[:1][0]
	parseIn2(workers)
	if &ps.small[:1][0] != small || !within(ps.small[:smallLine], p.Line) {
		t.Errorf("small buffer not reused")
	}
	parseIn2(long)
	if ps.long == nil || !within(ps.long[:], p.Line) {
		t.Fatalf("long line not in a long buffer")
	}
	if n, frame, err := ps.Parse(workers, &p); !frame || err != nil || n != len(workers) {
		t.Fatalf("Parse(workers) = (%d, %v, %v)", n, frame, err)
	}
	if ps.long != nil || ps.line != nil {
		t.Errorf("long buffer held past the next call")
	}
	if allocs := testing.AllocsPerRun(100, func() { parseIn2(status) }); allocs != 0 {
		t.Errorf("a short split line costs %v allocations", allocs)
	}
	if allocs := testing.AllocsPerRun(100, func() { parseIn2(long) }); allocs != 0 {
		t.Errorf("a long split line costs %v allocations", allocs)
	}
}

// TestParserNoAllocs: whole frames, pipelined in one buffer, cost nothing.
func TestParserNoAllocs(t *testing.T) {
	var buf []byte
	for _, bp := range benchPackets {
		buf = append(buf, bp.raw...)
	}
	buf = append(buf, "maxqueue reverse 100 100 100\r\n"...)
	var ps Parser
	var p Packet
	allocs := testing.AllocsPerRun(100, func() {
		for rest := buf; len(rest) > 0; {
			n, frame, err := ps.Parse(rest, &p)
			if !frame || err != nil {
				t.Fatal(n, frame, err)
			}
			rest = rest[n:]
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations", allocs)
	}
}
