package gearhttp

import (
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"switchyard/sched"
)

// panicLog keeps the log lines that say a handler panicked: net/http
// recovers a handler's panic and only logs it.
type panicLog struct {
	zapcore.LevelEnabler
	mu     sync.Mutex
	panics []string
}

func (l *panicLog) With([]zapcore.Field) zapcore.Core { return l }
func (l *panicLog) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	return ce.AddCore(e, l)
}
func (l *panicLog) Write(e zapcore.Entry, _ []zapcore.Field) error {
	if strings.Contains(e.Message, "panic") {
		l.mu.Lock()
		l.panics = append(l.panics, e.Message)
		l.mu.Unlock()
	}
	return nil
}
func (l *panicLog) Sync() error { return nil }

// FuzzServer sends any bytes to a running server as a request, then a
// well-formed background request on a new connection: the server must not
// panic and must go on answering. Foreground jobs (nobody works them) end
// at a short timeout.
func FuzzServer(f *testing.F) {
	for _, seed := range []string{
		post("f", "", "hello"),
		post("f", "X-Gearman-Background: true\r\nX-Gearman-Unique: u\r\nX-Gearman-Priority: high\r\n", "x"),
		"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
		"HEAD / HTTP/1.0\r\n\r\n",
		"HEAD /f HTTP/1.1\r\nHost: x\r\n\r\n",
		"TRACE /f HTTP/1.1\r\nHost: x\r\n\r\n",
		"DELETE /f HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST /f HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
		"POST /f HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999\r\n\r\n",
		"POST /f HTTP/1.1\r\nHost: x\r\nX-Gearman-Background: true\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\nx" + post("g", "", "y"),
		"POST /f HTTP/2.0\r\n\r\n",
		"POST /f HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + post("g", "", "y"),
		"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n",
		"garbage\r\n\r\n",
	} {
		f.Add([]byte(seed))
	}
	log := &panicLog{LevelEnabler: zapcore.DebugLevel}
	s := sched.New(sched.Config{})
	defer s.Close()
	srv := New(Config{Addr: "127.0.0.1:0", HandlePrefix: "H:lap", Timeout: 10 * time.Millisecond, MaxBody: 1 << 20}, s, zap.New(log))
	if err := srv.Start(); err != nil {
		f.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Stop(ctx)
	}()
	addr := srv.Addr().String()

	f.Fuzz(func(t *testing.T, raw []byte) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.Write(raw)
		c.(*net.TCPConn).CloseWrite() // the request is all there is
		c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		io.Copy(io.Discard, c) // whatever comes, until the server closes or the deadline
		c.Close()

		r := tryExchange(addr, post("alive", "X-Gearman-Background: true\r\n", "ok"))
		if r.err != nil {
			t.Fatalf("after %q: %v", raw, r.err)
		}
		r.conn.Close()
		if r.resp.StatusCode != 200 || r.resp.Header.Get("X-Gearman-Command") != "JOB_CREATED" {
			t.Fatalf("after %q: %d %v", raw, r.resp.StatusCode, r.resp.Header)
		}
		log.mu.Lock()
		defer log.mu.Unlock()
		if len(log.panics) > 0 {
			t.Fatalf("after %q: %q", raw, log.panics)
		}
	})
}
