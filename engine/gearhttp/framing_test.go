package gearhttp

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/textproto"
	"slices"
	"testing"
)

// headEnd is where the framer saw a request head end, and how.
type headEnd struct {
	at  int // offset just past the head's last byte
	how ending
}

// frame feeds raw to a framer a byte at a time and reports where each head
// ended: where the framer left fHead, or stopped.
func frame(raw []byte) []headEnd {
	var f framer
	var ends []headEnd
	for i := range raw {
		st, _ := f.feed(raw[i : i+1])
		switch {
		case st != going:
			return append(ends, headEnd{i + 1, st})
		case (f.state == fBody || f.state == fHeadStart) && int(f.heads) > len(ends):
			ends = append(ends, headEnd{i + 1, going})
		}
	}
	return ends
}

// TestFramer: where heads end and how following ends. A case is its
// heads, each with the body after it (all that follows up to the next
// head), and how the framer ends each head.
func TestFramer(t *testing.T) {
	type part struct {
		head, body string
		how        ending
	}
	for _, tc := range []struct {
		name  string
		parts []part
	}{
		{"GET", []part{{"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "", going}}},
		{"two, with a body", []part{{"POST /f HTTP/1.1\r\nContent-Length: 3\r\n\r\n", "abc", going}, {"GET / HTTP/1.1\r\n\r\n", "", going}}},
		{"CR LF after a POST's body, skipped", []part{{"POST /f HTTP/1.1\r\nContent-Length: 1\r\n\r\n", "x\r\n", going}, {"GET / HTTP/1.1\r\n\r\n", "", going}}},
		{"bare LF line ends", []part{{"GET / HTTP/1.1\nContent-Length: 2\n\n", "xy", going}, {"GET / HTTP/1.1\n\n", "", going}}},
		{"Content-Length and Transfer-Encoding", []part{{"POST /f HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", "", smuggled}}},
		{"in any case, the other way round", []part{{"POST /f HTTP/1.1\r\ntransfer-ENCODING: x\r\nCONTENT-length: 3\r\n\r\n", "", smuggled}}},
		{"with a Content-Length net/http refuses", []part{{"POST /f HTTP/1.1\r\nContent-Length: x\r\nTransfer-Encoding: chunked\r\n\r\n", "", smuggled}}},
		{"with an empty Content-Length", []part{{"POST /f HTTP/1.1\r\nContent-Length:\r\nTransfer-Encoding: chunked\r\n\r\n", "", smuggled}}},
		{"on the second request", []part{{"GET / HTTP/1.1\r\n\r\n", "", going}, {"POST /f HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", "", smuggled}}},
		{"Transfer-Encoding alone: the last one followed", []part{{"POST /f HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", "0\r\n\r\n", lastOne}}},
		{"a Content-Length folded onto the next line", []part{{"GET / HTTP/1.1\r\nContent-Length:\r\n 1\r\n\r\n", "x", going}, {"GET / HTTP/1.1\r\n\r\n", "", going}}},
		{"a folded line that makes it no number", []part{{"GET / HTTP/1.1\r\nContent-Length: 1\r\n 2\r\n\r\n", "", lastOne}}},
		{"names that only begin alike", []part{{"GET / HTTP/1.1\r\nContent-Lengthy: 5\r\nTransfer-Encodin: x\r\n\r\n", "", going}}},
		{"two Content-Lengths, the same", []part{{"GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length:  1 \r\n\r\n", "x", going}}},
		{"two Content-Lengths, different", []part{{"GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", "x", lastOne}}},
		{"an empty request line", []part{{"\r\n", "GET / HTTP/1.1\r\n\r\n", lastOne}}},
		{"too large a Content-Length", []part{{"GET / HTTP/1.1\r\nContent-Length: 9223372036854775808\r\n\r\n", "", lastOne}}},
		{"the largest Content-Length", []part{{"GET / HTTP/1.1\r\nContent-Length: 9223372036854775807\r\n\r\n", "x", going}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var raw []byte
			var want []headEnd
			for _, p := range tc.parts {
				raw = append(raw, p.head...)
				want = append(want, headEnd{len(raw), p.how})
				raw = append(raw, p.body...)
			}
			if got := frame(raw); !slices.Equal(got, want) {
				t.Fatalf("ends %v, want %v", got, want)
			}
		})
	}
	// A CR inside a header line, or a line with no colon: net/http refuses
	// the head; following stops on the spot.
	for _, raw := range []string{"GET / HTTP/1.1\r\nX: a\rb\r\n\r\n", "GET / HTTP/1.1\r\nX\r\n\r\n"} {
		if got := frame([]byte(raw)); len(got) != 1 || got[0].how != lastOne {
			t.Errorf("%q: ends %v, want it the last one", raw, got)
		}
	}
}

// FuzzFraming holds the framer to net/http's own parser: for every request
// net/http reads from the bytes (as its server does, skipping what it skips
// after a POST), up to where the framer stops following, the framer ends
// the head where net/http does, takes the same body, and stops on a head
// with Transfer-Encoding, refusing it when it has a Content-Length as well.
// Fed in two pieces, the framer reaches the same end.
func FuzzFraming(f *testing.F) {
	for _, seed := range []string{
		"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST /f HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST /f HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /x HTTP/1.1\r\n\r\n",
		"POST /f HTTP/1.0\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\nab",
		"POST /f HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
		"GET / HTTP/1.1\nContent-Length:\n 1\n\nxGET / HTTP/1.1\n\n",
		"GET / HTTP/1.1\r\nX: a\r\n\tb\r\nContent-Length: 01\r\nContent-Length: 1\r\n\r\nx",
		"GET / HTTP/1.1\r\n\rContent-Length: 5\r\n\r\n",
	} {
		f.Add([]byte(seed), uint16(len(seed)/2))
	}
	f.Fuzz(func(t *testing.T, raw []byte, split uint16) {
		ends := frame(raw)

		// The same bytes in two pieces end the same way.
		var whole framer
		st1, at1 := whole.feed(raw[:min(int(split), len(raw))])
		st2, at2 := whole.feed(raw[min(int(split), len(raw)):])
		st, at := st1, at1
		if st == going {
			st, at = st2, at2
		}
		if n := len(ends); n > 0 && ends[n-1].how != going {
			if st != ends[n-1].how || at != int64(n) {
				t.Fatalf("in two pieces: %v on head %d; a byte at a time: %v", st, at, ends)
			}
		} else if st != going {
			t.Fatalf("in two pieces: %v on head %d; a byte at a time it goes on: %v", st, at, ends)
		}

		src := bytes.NewReader(raw)
		br := bufio.NewReader(src)
		// taken is how many bytes net/http has taken from raw.
		taken := func() int { return len(raw) - src.Len() - br.Buffered() }
		var lastPost bool
		for k := 0; ; k++ {
			if lastPost {
				// As net/http's server does after a POST.
				peek, _ := br.Peek(4)
				n := 0
				for n < len(peek) && (peek[n] == '\r' || peek[n] == '\n') {
					n++
				}
				br.Discard(n)
			}
			start := taken()
			req, err := http.ReadRequest(br)
			if err != nil {
				return // net/http refuses it and closes the connection
			}
			headEndAt := taken()
			if k >= len(ends) {
				t.Fatalf("net/http read request %d (%q), the framer saw %d heads: %v", k+1, raw[start:headEndAt], len(ends), ends)
			}
			e := ends[k]
			if e.at != headEndAt {
				t.Fatalf("request %d: net/http's head ends at %d, the framer's at %d (%q)", k+1, headEndAt, e.at, raw)
			}
			hasCL, hasTE := fields(raw[start:headEndAt])
			switch {
			case hasCL && hasTE:
				if e.how != smuggled {
					t.Fatalf("request %d has Content-Length and Transfer-Encoding; the framer: %v (%q)", k+1, e.how, raw)
				}
				return
			case e.how == smuggled:
				t.Fatalf("request %d refused, with Content-Length %v and Transfer-Encoding %v (%q)", k+1, hasCL, hasTE, raw)
			case hasTE:
				if e.how != lastOne {
					t.Fatalf("request %d has Transfer-Encoding; the framer: %v (%q)", k+1, e.how, raw)
				}
				return
			case e.how == lastOne:
				return // stopped following: the connection is closed after it
			}
			if len(req.TransferEncoding) > 0 {
				t.Fatalf("request %d is chunked; the framer saw no Transfer-Encoding (%q)", k+1, raw)
			}
			if _, err := io.Copy(io.Discard, req.Body); err != nil {
				return // a body cut short: net/http closes the connection
			}
			bodyEnd := taken()
			if want := int64(bodyEnd - headEndAt); req.ContentLength != want && !(req.ContentLength == -1 && want == 0) {
				t.Fatalf("request %d: Content-Length %d, body %d bytes", k+1, req.ContentLength, want)
			}
			var fr framer
			fr.feed(raw[:headEndAt])
			if got := fr.body; int(got) != bodyEnd-headEndAt {
				t.Fatalf("request %d: net/http's body is %d bytes, the framer's %d (%q)", k+1, bodyEnd-headEndAt, got, raw)
			}
			lastPost = req.Method == "POST"
		}
	})
}

// fields reports whether a request head has Content-Length and
// Transfer-Encoding fields, as net/http's header parser reads it (net/http's
// request parser deletes both).
func fields(head []byte) (cl, te bool) {
	tp := textproto.NewReader(bufio.NewReader(bytes.NewReader(head)))
	if _, err := tp.ReadLine(); err != nil {
		panic(err)
	}
	h, err := tp.ReadMIMEHeader()
	if err != nil {
		panic(err) // net/http read this head
	}
	_, cl = h["Content-Length"]
	_, te = h["Transfer-Encoding"]
	return cl, te
}
