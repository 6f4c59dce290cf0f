package periodic

import (
	"bytes"
	"encoding/json"
	"testing"

	"switchyard/codec/periodic/internal/driver"
)

// seedMax keeps the huge table cases (depth limits, long strings) out of the
// fuzz corpora: mutating them is slow and finds nothing the short ones miss.
const seedMax = 2000

// FuzzParseFrame reads a buffer frame after frame, as a connection does,
// whole and cut at two points chosen by the input, with the default limit
// and a small one: the frames are the same, consumed stays in bounds, and need
// is what the header says.
func FuzzParseFrame(f *testing.F) {
	var all []byte
	for _, fr := range wireFrames() {
		f.Add([]byte(fr.bytes), uint16(3))
		all = append(all, fr.bytes...)
	}
	f.Add(all, uint16(100))
	f.Add([]byte("\x00REQ\x80\x00\x00\x01\x09\x00REQ\x00\x00"), uint16(9))
	f.Add([]byte("\x00REQ\xff\xff\xff\xff"), uint16(0))
	f.Add([]byte("\x00RES\x00\x00\x00\x00"), uint16(1))

	f.Fuzz(func(t *testing.T, data []byte, cut uint16) {
		for _, magic := range []string{ReqMagic, ResMagic} {
			for _, max := range []int{0, 16} {
				want, werr := checkFrames(t, data[:len(data):len(data)], magic, max)
				k := int(cut) % (len(data) + 1)
				for _, chunks := range [][][]byte{
					{data[:k], data[k:]},
					{data[:k/2], data[k/2 : k], data[k:]},
				} {
					got, err := parseStream(chunks, magic, max)
					if err == errNeedTooSmall {
						t.Fatalf("need too small with chunks cut at %d", k)
					}
					if err != werr || len(got) != len(want) {
						t.Fatalf("cut at %d: %d frames, %v; whole: %d frames, %v", k, len(got), err, len(want), werr)
					}
					for i := range want {
						if got[i] != want[i] {
							t.Fatalf("cut at %d: frame %d = %q, whole %q", k, i, got[i], want[i])
						}
					}
				}
			}
		}
	})
}

// checkFrames parses buf frame after frame, checking each result, and
// returns the payloads and the error that stopped it.
func checkFrames(t *testing.T, buf []byte, magic string, max int) ([]string, error) {
	limit := max
	if limit <= 0 {
		limit = DefaultMaxFrame
	}
	var payloads []string
	for {
		p, n, need, err := ParseFrame(buf, magic, max)
		switch {
		case err != nil:
			if n != 0 || need != 0 || p != nil {
				t.Fatalf("%v with (%d, %d, %q)", err, n, need, p)
			}
			if err == ErrBadMagic && bytes.HasPrefix(buf, []byte(magic[:min(len(buf), 4)])) ||
				err == ErrTooLarge && (len(buf) < HeaderSize || frameSize(buf) <= limit) {
				t.Fatalf("%v for %q", err, buf[:min(len(buf), HeaderSize)])
			}
			return payloads, err
		case n == 0:
			want := HeaderSize
			if len(buf) >= HeaderSize {
				want = HeaderSize + frameSize(buf)
			}
			if p != nil || need != want || need <= len(buf) {
				t.Fatalf("need more: (%q, %d), want need %d of %d bytes", p, need, want, len(buf))
			}
			return payloads, nil
		}
		if n != need || n < HeaderSize || n > len(buf) || n-HeaderSize > limit || n != HeaderSize+frameSize(buf) ||
			!bytes.Equal(p, buf[HeaderSize:n]) || cap(p) != len(p) || string(buf[:4]) != magic {
			t.Fatalf("frame (%q, %d, %d) of %q", p, n, need, buf)
		}
		payloads = append(payloads, string(p))
		buf = buf[n:]
	}
}

// frameSize is the header's size as the real server reads it.
func frameSize(b []byte) int {
	return int(uint32(b[4])<<24|uint32(b[5])<<16|uint32(b[6])<<8|uint32(b[7])) & 0x7fffffff
}

// FuzzParseMessage compares ParseMessage with the reference copy of the
// real server's ParseCommand, and checks that the views lie in the payload
// and that a message re-encoded with AppendRequest parses the same.
func FuzzParseMessage(f *testing.F) {
	for _, fr := range wireFrames() {
		f.Add([]byte(fr.bytes[HeaderSize:]))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		payload = payload[:len(payload):len(payload)]
		checkAgainstReference(t, payload)
		var m Message
		if ParseMessage(payload, &m) != nil {
			return
		}
		if !within(payload, m.ID) || !within(payload, m.Data) || cap(m.ID) != len(m.ID) {
			t.Fatalf("views outside the payload: %q %q", m.ID, m.Data)
		}
		if bytes.Contains(m.ID, sepBytes) {
			t.Fatalf("ID %q holds a Sep", m.ID)
		}
		// The message written as a client writes it parses back to itself
		// (nil and empty Data alike: a trailing Sep gives nil).
		var args [][]byte
		if m.Data != nil {
			args = [][]byte{m.Data}
		}
		frame := AppendRequest(nil, m.ID, m.Cmd, args...)
		var m2 Message
		if err := ParseMessage(frame[HeaderSize:], &m2); err != nil || !bytes.Equal(m2.ID, m.ID) ||
			m2.Cmd != m.Cmd || !bytes.Equal(m2.Data, m.Data) {
			t.Fatalf("re-encoded %q parses as {%q %v %q} %v, want {%q %v %q}", frame, m2.ID, m2.Cmd, m2.Data, err, m.ID, m.Cmd, m.Data)
		}
	})
}

func addJobSeeds(f *testing.F) {
	for _, s := range decodeCases {
		if len(s) <= seedMax {
			f.Add([]byte(s))
		}
	}
}

// FuzzDecodeJob compares DecodeJob with json.Unmarshal into the real
// struct: the same job, the same error. A job that decodes re-encodes as the
// real server would write it.
func FuzzDecodeJob(f *testing.F) {
	addJobSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		if d := diffDecodeJob(data); d != "" {
			t.Fatalf("DecodeJob(%q):\n%s", data, d)
		}
		var j Job
		if DecodeJob(data, &j) != nil {
			return
		}
		if got, want := AppendJob(nil, &j), marshalReal(t, &j); !bytes.Equal(got, want) {
			t.Fatalf("AppendJob after DecodeJob(%q) =\n%s\nencoding/json:\n%s", data, got, want)
		}
	})
}

// FuzzAppendJob compares AppendJob with json.Marshal of the real struct,
// and decodes the result back.
func FuzzAppendJob(f *testing.F) {
	for i, s := range awkward {
		if len(s) <= seedMax {
			n := extremeInts[i%len(extremeInts)]
			f.Add([]byte(s), []byte("func"), []byte(awkward[(i+5)%len(awkward)]), n, -n, n/7, int64(i), int64(1), i%2 == 0)
		}
	}
	f.Fuzz(func(t *testing.T, name, fn, workload []byte, id, timeout, schedAt, runAt, counter int64, processing bool) {
		j := Job{ID: id, Name: name, Func: fn, Workload: workload, Timeout: timeout, SchedAt: schedAt,
			RunAt: runAt, Counter: counter, Processing: processing}
		got, want := AppendJob([]byte("x"), &j), marshalReal(t, &j)
		if string(got[1:]) != string(want) {
			t.Fatalf("AppendJob(%+v) =\n%q\nencoding/json:\n%q", j, got[1:], want)
		}
		var back Job
		var rj driver.Job
		if err := DecodeJob(got[1:], &back); err != nil || json.Unmarshal(want, &rj) != nil || fromJob(&back) != rj ||
			back.Processing != processing {
			t.Fatalf("DecodeJob(AppendJob) = %+v, %v; encoding/json %+v", fromJob(&back), err, rj)
		}
	})
}

// FuzzDecodeJobList compares DecodeJobList with json.Unmarshal into the real
// server's map[string][]driver.Job: the same jobs of "jobs", the same error,
// and no job given to fn when there is an error.
func FuzzDecodeJobList(f *testing.F) {
	for _, s := range listCases {
		if len(s) <= seedMax {
			f.Add([]byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if d := diffDecodeJobList(data); d != "" {
			t.Fatalf("DecodeJobList(%q):\n%s", data, d)
		}
	})
}
