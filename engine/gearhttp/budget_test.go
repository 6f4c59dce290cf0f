package gearhttp

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"switchyard/bench/harness"
	"switchyard/engine/budget"
	"switchyard/sched"
)

// A body the memory budget cannot take is answered 503, and the
// connection closed; the budget holds nothing afterwards.
func TestBodyOverBudget(t *testing.T) {
	b := budget.New(256 << 10)
	e := start(t, Config{Budget: b}, sched.Config{})
	c, err := net.Dial("tcp", e.http)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	body := strings.Repeat("b", 1<<20)
	go fmt.Fprintf(c, "POST /f HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nX-Gearman-Background: true\r\n\r\n%s", len(body), body)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || !resp.Close {
		t.Errorf("answered %s, close %v; want 503 and close", resp.Status, resp.Close)
	}
	if b.Used() != 0 || b.Refused() == 0 {
		t.Errorf("used %d, refused %d after the request", b.Used(), b.Refused())
	}
}

// A client that sends a head with a large Content-Length and then too
// little of its body (slowloris) is cut off once a read of the body waits
// too long, and holds next to nothing meanwhile.
func TestSlowBody(t *testing.T) {
	b := budget.New(0) // counting only
	e := start(t, Config{Budget: b, BodyIdle: 200 * time.Millisecond}, sched.Config{})
	c, err := net.Dial("tcp", e.http)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /f HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n0123456789", 60<<20)
	w := harness.NewWithin(5 * time.Second) // for a body idle for 200 ms
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadAll(c); err != nil {
		t.Fatalf("the connection was not closed: %v", err)
	}
	if d := time.Since(w.Start); w.Exceeds(d) {
		t.Errorf("closed after %v, want at most %v", d, w)
	}
	// The most it held, meanwhile: the body's buffer, once it was read.
	// (A poll of what it holds could miss the 200 ms it held it.)
	if held := b.Peak(); held == 0 || held > 128<<10 {
		t.Errorf("at most %d bytes held for a body of 10 bytes so far", held)
	}
}
