package load

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// HTTPClient submits jobs over gearmand's HTTP protocol (gearmand -r http)
// on one connection, one request at a time, as an HTTP client library
// does: POST /FUNCTION with the payload, "Connection: keep-alive". A
// server that closes the connection after its answer anyway (gearmand
// always does) gets a new connection for the next request.
//
// A foreground request counts when its WORK_COMPLETE answer has been read
// whole, a background one (X-Gearman-Background: true) at JOB_CREATED;
// latency is from the request's write to the end of its answer. Anything
// else (another command, a status other than 200) counts as failed.
type HTTPClient struct {
	Addr       string
	Function   string
	Payload    []byte
	Background bool
}

// HTTPResult is what one HTTPClient did.
type HTTPResult struct {
	Measured int64 // answered inside the phase's window
	Finished int64 // answered at any time
	Failed   int64
	Connects int64 // connections opened
	Latency  *hdrhistogram.Histogram
}

// httpConn is the state of one HTTPClient.Run.
type httpConn struct {
	*HTTPClient
	request   []byte // the whole request, built once
	want      []byte // the X-Gearman-Command of success
	conn      net.Conn
	mu        sync.Mutex // guards live
	live      net.Conn   // conn, for the goroutine that cancels
	r         *bufio.Reader
	body      []byte // the last answer's body, its buffer reused
	cancelled atomic.Bool
	res       HTTPResult
}

// httpAnswer is what a request's answer said, as far as the client cares.
type httpAnswer struct {
	status int
	ok     bool // X-Gearman-Command is the one of success
	keep   bool // the server keeps the connection open
}

// Run requests until the phase ends or its budget is spent. Each request
// is bounded by the phase's grace period.
func (c *HTTPClient) Run(ctx context.Context, ph *Phase) (HTTPResult, error) {
	hc := &httpConn{
		HTTPClient: c,
		request:    c.buildRequest(),
		want:       []byte("WORK_COMPLETE"),
		r:          bufio.NewReaderSize(nil, 4<<10),
		res:        HTTPResult{Latency: NewLatencyHistogram()},
	}
	if c.Background {
		hc.want = []byte("JOB_CREATED")
	}
	stop := context.AfterFunc(ctx, func() {
		hc.cancelled.Store(true)
		hc.mu.Lock()
		if hc.live != nil {
			_ = hc.live.SetDeadline(time.Unix(1, 0)) // unblock the read
		}
		hc.mu.Unlock()
	})
	defer stop()
	err := hc.loop(ctx, ph)
	hc.setConn(nil)
	if hc.cancelled.Load() {
		err = nil // a request cut short by the end of the run
	}
	return hc.res, err
}

// setConn makes conn the connection, nil for none. A cancel that comes
// before a new connection is set is caught by the loop's ctx check.
func (hc *httpConn) setConn(conn net.Conn) {
	if hc.conn != nil {
		hc.conn.Close()
	}
	hc.conn = conn
	hc.mu.Lock()
	hc.live = conn
	hc.mu.Unlock()
}

func (c *HTTPClient) buildRequest() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "POST /%s HTTP/1.1\r\nHost: bench\r\nConnection: keep-alive\r\nContent-Length: %d\r\n", c.Function, len(c.Payload))
	if c.Background {
		b.WriteString("X-Gearman-Background: true\r\n")
	}
	b.WriteString("\r\n")
	b.Write(c.Payload)
	return b.Bytes()
}

func (hc *httpConn) loop(ctx context.Context, ph *Phase) error {
	var d net.Dialer
	for {
		start, ok := ph.next(ctx)
		if !ok {
			return nil
		}
		now := time.Now()
		if hc.conn == nil {
			conn, err := d.DialContext(ctx, "tcp", hc.Addr)
			if err != nil {
				return err
			}
			hc.setConn(conn)
			hc.r.Reset(conn)
			hc.res.Connects++
		}
		if err := hc.conn.SetDeadline(now.Add(ph.Grace)); err != nil {
			return err
		}
		if _, err := hc.conn.Write(hc.request); err != nil {
			return err
		}
		a, err := hc.readAnswer()
		if err != nil {
			return err
		}
		done := time.Now()
		hc.res.Finished++
		ph.Progress.Add(1)
		if a.status != 200 || !a.ok {
			hc.res.Failed++
		} else if ph.counts(start, done) {
			hc.res.Measured++
			recordLatency(hc.res.Latency, done.Sub(start))
		}
		if !a.keep {
			hc.setConn(nil)
		}
	}
}

var (
	headerContentLength = []byte("Content-Length")
	headerConnection    = []byte("Connection")
	headerCommand       = []byte("X-Gearman-Command")
)

// readAnswer reads one response: its status line, its headers, and as
// many body bytes as Content-Length says, without allocating once the
// body buffer is large enough.
func (hc *httpConn) readAnswer() (httpAnswer, error) {
	line, err := hc.r.ReadSlice('\n')
	if err != nil {
		return httpAnswer{}, fmt.Errorf("http: status line: %w", err)
	}
	// "HTTP/1.x NNN ..."
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
		return httpAnswer{}, fmt.Errorf("http: status line %q", line)
	}
	a := httpAnswer{status: atoi(line[9:12])}
	http11 := line[7] == '1'
	a.keep = http11
	length := -1
	for {
		line, err = hc.r.ReadSlice('\n')
		if err != nil {
			return httpAnswer{}, fmt.Errorf("http: headers: %w", err)
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte{':'})
		if !ok {
			return httpAnswer{}, fmt.Errorf("http: header %q", line)
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, headerContentLength):
			if length = atoi(value); length < 0 {
				return httpAnswer{}, fmt.Errorf("http: Content-Length %q", value)
			}
		case bytes.EqualFold(name, headerConnection):
			switch {
			case bytes.EqualFold(value, []byte("close")):
				a.keep = false
			case bytes.EqualFold(value, []byte("keep-alive")):
				a.keep = true
			}
		case bytes.EqualFold(name, headerCommand):
			a.ok = bytes.Equal(value, hc.want)
		}
	}
	if length < 0 {
		return httpAnswer{}, errors.New("http: an answer without Content-Length")
	}
	if cap(hc.body) < length {
		hc.body = make([]byte, length)
	}
	hc.body = hc.body[:length]
	if _, err := io.ReadFull(hc.r, hc.body); err != nil {
		return httpAnswer{}, fmt.Errorf("http: body: %w", err)
	}
	return a, nil
}

// atoi reads a decimal number; -1 if b is not one.
func atoi(b []byte) int {
	if len(b) == 0 || len(b) > 18 {
		return -1
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int(c-'0')
	}
	return n
}
