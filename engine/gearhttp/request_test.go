package gearhttp

import (
	"bufio"
	"net/http"
	"strings"
	"testing"

	"switchyard/sched"
)

// readRequest parses raw request bytes as the server does.
func readRequest(t *testing.T, raw string) *http.Request {
	t.Helper()
	r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
	if err != nil {
		t.Fatalf("%q: %v", raw, err)
	}
	return r
}

// The headers as gearmand 1.1.20 reads them (checked against it with the
// same requests): values compared whole and case-blind; only "true" makes
// a job background; a bad priority is normal; an empty unique is none.
func TestParseSubmit(t *testing.T) {
	tests := []struct {
		name    string
		target  string
		headers string
		want    submit
	}{
		{"bare", "/f", "", submit{fn: "f", unique: "-", priority: sched.Normal}},
		{"leading slashes", "//f", "", submit{fn: "f", unique: "-", priority: sched.Normal}},
		{"path and query are the name", "/a/b?x=1&y=%20", "", submit{fn: "a/b?x=1&y=%20", unique: "-", priority: sched.Normal}},
		{"no function", "/", "", submit{fn: "", unique: "-", priority: sched.Normal}},
		{"unique", "/f", "X-Gearman-Unique: u1\r\n", submit{fn: "f", unique: "u1", priority: sched.Normal}},
		{"empty unique", "/f", "X-Gearman-Unique: \r\n", submit{fn: "f", unique: "-", priority: sched.Normal}},
		{"lower-case name", "/f", "x-gearman-unique: u1\r\n", submit{fn: "f", unique: "u1", priority: sched.Normal}},
		{"last unique wins", "/f", "X-Gearman-Unique: a\r\nX-Gearman-Unique: b\r\n", submit{fn: "f", unique: "b", priority: sched.Normal}},
		{"background true", "/f", "X-Gearman-Background: true\r\n", submit{fn: "f", unique: "-", priority: sched.Normal, background: true}},
		{"background TRUE", "/f", "X-Gearman-Background: TRUE\r\n", submit{fn: "f", unique: "-", priority: sched.Normal, background: true}},
		{"background yes", "/f", "X-Gearman-Background: yes\r\n", submit{fn: "f", unique: "-", priority: sched.Normal}},
		{"background 1", "/f", "X-Gearman-Background: 1\r\n", submit{fn: "f", unique: "-", priority: sched.Normal}},
		{"background false", "/f", "X-Gearman-Background: false\r\n", submit{fn: "f", unique: "-", priority: sched.Normal}},
		{"priority high", "/f", "X-Gearman-Priority: high\r\n", submit{fn: "f", unique: "-", priority: sched.High}},
		{"priority High", "/f", "X-Gearman-Priority: High\r\n", submit{fn: "f", unique: "-", priority: sched.High}},
		{"priority low", "/f", "X-Gearman-Priority: low\r\n", submit{fn: "f", unique: "-", priority: sched.Low}},
		{"priority normal", "/f", "X-Gearman-Priority: normal\r\n", submit{fn: "f", unique: "-", priority: sched.Normal}},
		{"priority bad", "/f", "X-Gearman-Priority: urgent\r\n", submit{fn: "f", unique: "-", priority: sched.Normal}},
		{"bad priority keeps an earlier one", "/f", "X-Gearman-Priority: low\r\nX-Gearman-Priority: bad\r\n", submit{fn: "f", unique: "-", priority: sched.Low}},
		{"everything", "/f", "X-Gearman-Unique: u\r\nX-Gearman-Background: true\r\nX-Gearman-Priority: high\r\n",
			submit{fn: "f", unique: "u", priority: sched.High, background: true}},
	}
	for _, tc := range tests {
		for _, m := range []string{"GET", "POST", "PUT", "HEAD"} {
			r := readRequest(t, m+" "+tc.target+" HTTP/1.1\r\nHost: x\r\n"+tc.headers+"\r\n")
			want := tc.want
			want.readBody = m == "POST" || m == "PUT"
			if got := parseSubmit(r); got != want {
				t.Errorf("%s %s: %+v, want %+v", tc.name, m, got, want)
			}
		}
	}
}

func TestUniqueTooLong(t *testing.T) {
	for n, want := range map[int]bool{63: false, 64: false, 65: true} {
		sub := submit{unique: strings.Repeat("u", n)}
		if got := sub.uniqueTooLong(); got != want {
			t.Errorf("unique of %d bytes: too long %v, want %v", n, got, want)
		}
	}
}

func TestMethodOf(t *testing.T) {
	tests := map[string]method{
		"GET": methodSubmit, "POST": methodSubmit, "PUT": methodSubmit,
		"HEAD": methodHead, "TRACE": methodTrace,
		"DELETE": methodRefused, "OPTIONS": methodRefused, "PATCH": methodRefused, "CONNECT": methodRefused,
		"get": methodRefused, // gearmand compares case-sensitively, as HTTP does
	}
	for m, want := range tests {
		if got := methodOf(m); got != want {
			t.Errorf("methodOf(%q) = %d, want %d", m, got, want)
		}
	}
}

func TestKeepAlive(t *testing.T) {
	tests := []struct {
		req  string
		want bool
	}{
		{"GET /f HTTP/1.1\r\nHost: x\r\n\r\n", false},
		{"GET /f HTTP/1.0\r\n\r\n", false},
		{"GET /f HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n", true},
		{"GET /f HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", true},
		{"GET /f HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, keep-alive\r\n\r\n", true},
		{"GET /f HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", false},
		{"GET /f HTTP/1.1\r\nHost: x\r\nConnection: keep-alives\r\n\r\n", false},
	}
	for _, tc := range tests {
		if got := keepAlive(readRequest(t, tc.req)); got != tc.want {
			t.Errorf("%q: keep-alive %v, want %v", tc.req, got, tc.want)
		}
	}
}
