package load

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// startHTTPServer serves answers as gearmand's HTTP module or switchyard's
// would: closing after each one unless keepAlive, and with the given
// X-Gearman-Command.
func startHTTPServer(t *testing.T, keepAlive bool, command string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path != "/f" || (r.Header.Get("X-Gearman-Background") == "true") != (command == "JOB_CREATED") {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		if !keepAlive {
			w.Header().Set("Connection", "close")
		}
		w.Header().Set("X-Gearman-Job-Handle", "H:x:1")
		w.Header().Set("X-Gearman-Command", command)
		if command == "JOB_CREATED" {
			body = nil
		}
		w.Write(body)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

func TestHTTPClient(t *testing.T) {
	tests := []struct {
		name       string
		keepAlive  bool
		background bool
		command    string
		connects   int64 // for 50 requests
		failed     int64
	}{
		{"keep-alive", true, false, "WORK_COMPLETE", 1, 0},
		{"a connection a request", false, false, "WORK_COMPLETE", 50, 0},
		{"background", true, true, "JOB_CREATED", 1, 0},
		{"failures", true, false, "WORK_FAIL", 1, 50},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			addr := startHTTPServer(t, tc.keepAlive, tc.command)
			c := &HTTPClient{Addr: addr, Function: "f", Payload: []byte("payload"), Background: tc.background}
			ph := &Phase{Start: time.Now(), Budget: NewBudget(50), Grace: 10 * time.Second}
			res, err := c.Run(context.Background(), ph)
			if err != nil {
				t.Fatal(err)
			}
			if res.Finished != 50 || res.Failed != tc.failed || res.Measured != 50-tc.failed || res.Connects != tc.connects {
				t.Fatalf("finished %d failed %d measured %d connects %d", res.Finished, res.Failed, res.Measured, res.Connects)
			}
			if got := res.Latency.TotalCount(); got != res.Measured {
				t.Fatalf("%d latencies for %d jobs", got, res.Measured)
			}
		})
	}
}

// An answer is read without allocating: the load generator must not be
// what a run measures.
func TestHTTPAnswerAllocs(t *testing.T) {
	answer := "HTTP/1.0 200 OK\r\nX-Gearman-Job-Handle: H:vm:1\r\nX-Gearman-Command: WORK_COMPLETE\r\n" +
		"Content-Length: 7\r\nServer: Gearman/1.1.20\r\n\r\npayload"
	src := strings.NewReader(answer)
	hc := &httpConn{HTTPClient: &HTTPClient{}, want: []byte("WORK_COMPLETE"), r: bufio.NewReaderSize(src, 4<<10)}
	var a httpAnswer
	read := func() {
		src.Reset(answer)
		hc.r.Reset(src)
		var err error
		if a, err = hc.readAnswer(); err != nil {
			t.Fatal(err)
		}
	}
	read()
	if a != (httpAnswer{status: 200, ok: true, keep: false}) || string(hc.body) != "payload" {
		t.Fatalf("%+v %q", a, hc.body)
	}
	if n := testing.AllocsPerRun(100, read); n != 0 {
		t.Fatalf("%v allocations per answer", n)
	}
}

func TestHTTPAnswers(t *testing.T) {
	tests := []struct {
		answer string
		want   httpAnswer
		err    bool
	}{
		{"HTTP/1.1 200 OK\r\nX-Gearman-Command: WORK_COMPLETE\r\nContent-Length: 0\r\n\r\n", httpAnswer{200, true, true}, false},
		{"HTTP/1.1 200 OK\r\nconnection: Close\r\nx-gearman-command: WORK_COMPLETE\r\ncontent-length: 0\r\n\r\n", httpAnswer{200, true, false}, false},
		{"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nX-Gearman-Command: WORK_FAIL\r\nContent-Length: 0\r\n\r\n", httpAnswer{200, false, true}, false},
		{"HTTP/1.0 404 NOT_FOUND\r\nServer: Gearman/1.1.20+ds\r\nContent-Length: 0\r\n\r\n", httpAnswer{404, false, false}, false},
		{"HTTP/1.1 200 OK\r\nX-Gearman-Command: WORK_COMPLETE\r\n\r\n", httpAnswer{}, true},
		{"ddTP/1.0 200 OK\r\n\r\n", httpAnswer{}, true},
		{"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab", httpAnswer{}, true},
	}
	for _, tc := range tests {
		hc := &httpConn{HTTPClient: &HTTPClient{}, want: []byte("WORK_COMPLETE"), r: bufio.NewReader(strings.NewReader(tc.answer))}
		a, err := hc.readAnswer()
		if (err != nil) != tc.err || a != tc.want {
			t.Errorf("%q: %+v, %v; want %+v, error %v", tc.answer, a, err, tc.want, tc.err)
		}
	}
}
