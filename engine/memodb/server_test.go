package memodb

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.nanomsg.org/mangos/v3"
	reqsock "go.nanomsg.org/mangos/v3/protocol/req"
	"go.uber.org/zap"

	codec "switchyard/codec/memodb"
	"switchyard/sched"
)

// waitFor bounds every wait for a reply or an event: a failure, not a pace.
const waitFor = 10 * time.Second

// fixture is a running server on its own scheduler.
type fixture struct {
	t     testing.TB
	sched *sched.Sched
	srv   *Server
	url   string
	notes chan string
}

func start(t testing.TB, cfg Config) *fixture {
	t.Helper()
	sc := sched.New(sched.Config{})
	t.Cleanup(sc.Close)
	if cfg.Addrs == nil {
		cfg.Addrs = []string{"tcp://127.0.0.1:0"}
	}
	f := &fixture{t: t, sched: sc, notes: make(chan string, 1024)}
	f.srv = New(cfg, sc, zap.NewNop())
	f.srv.note = func(what string) { f.notes <- what }
	if err := f.srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		if err := f.srv.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	f.url = f.srv.Addrs()[0]
	return f
}

// on is f for a subtest.
func (f *fixture) on(t testing.TB) *fixture {
	g := *f
	g.t = t
	return &g
}

// noted waits for the server to note what.
func (f *fixture) noted(what string) {
	f.t.Helper()
	select {
	case got := <-f.notes:
		if got != what {
			f.t.Fatalf("the server noted %q, want %q", got, what)
		}
	case <-time.After(waitFor):
		f.t.Fatalf("the server did not note %q", what)
	}
}

// dial opens a REQ socket to the server. Its requests are never resent
// (resend time 0): a test sees exactly what it sent.
func (f *fixture) dial() mangos.Socket {
	f.t.Helper()
	return f.dialURL(f.url)
}

// dialURL is dial to url.
func (f *fixture) dialURL(url string) mangos.Socket {
	f.t.Helper()
	s, err := reqsock.NewSocket()
	if err != nil {
		f.t.Fatal(err)
	}
	if err := s.SetOption(mangos.OptionRetryTime, time.Duration(0)); err != nil {
		f.t.Fatal(err)
	}
	if err := s.SetOption(mangos.OptionMaxRecvSize, 16<<20); err != nil { // mangos's default is 1 MiB
		f.t.Fatal(err)
	}
	if err := s.Dial(url); err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { s.Close() })
	return s
}

// peer is one REQ context: a client or a worker, one request at a time.
type peer struct {
	t   testing.TB
	ctx mangos.Context
	id  []byte // a worker's id, once it has one
}

func (f *fixture) peer(s mangos.Socket) *peer {
	f.t.Helper()
	c, err := s.OpenContext()
	if err != nil {
		f.t.Fatal(err)
	}
	if err := c.SetOption(mangos.OptionRecvDeadline, waitFor); err != nil {
		f.t.Fatal(err)
	}
	return &peer{t: f.t, ctx: c}
}

func (p *peer) send(b []byte) {
	p.t.Helper()
	if err := p.ctx.Send(b); err != nil {
		p.t.Fatalf("send: %v", err)
	}
}

// recv waits for the reply and decodes it.
func (p *peer) recv() codec.Message {
	p.t.Helper()
	b, err := p.ctx.Recv()
	if err != nil {
		p.t.Fatalf("no reply: %v", err)
	}
	var m codec.Message
	if err := codec.Decode(b, codec.Reply, &m); err != nil {
		p.t.Fatalf("reply % x: %v", b, err)
	}
	return m
}

func (p *peer) ask(b []byte) codec.Message {
	p.t.Helper()
	p.send(b)
	return p.recv()
}

// try is ask for a goroutine of the test's: it returns errors.
func (p *peer) try(b []byte) (codec.Message, error) {
	var m codec.Message
	if err := p.ctx.Send(b); err != nil {
		return m, err
	}
	r, err := p.ctx.Recv()
	if err != nil {
		return m, err
	}
	return m, codec.Decode(r, codec.Reply, &m)
}

// none checks that no reply came for the request sent. Only valid once a
// reply sent after it on the same connection has arrived: replies on one
// connection arrive in order, so a reply would be there already.
func (p *peer) none() {
	p.t.Helper()
	if err := p.ctx.SetOption(mangos.OptionRecvDeadline, 20*time.Millisecond); err != nil {
		p.t.Fatal(err)
	}
	b, err := p.ctx.Recv()
	if !errors.Is(err, mangos.ErrRecvTimeout) {
		p.t.Fatalf("a reply % x (%v), want none", b, err)
	}
	p.ctx.SetOption(mangos.OptionRecvDeadline, waitFor)
}

func job(service string, timeoutMS uint64, payload string) []byte {
	return append(codec.AppendJob(nil, nil, service, timeoutMS), payload...)
}

func ready(services ...string) []byte { return codec.AppendReady(nil, services) }

func result(id []byte, payload string) []byte {
	return append(codec.AppendResult(nil, id), payload...)
}

// wantJob checks that m is a JOB for the worker and returns its payload.
func (p *peer) wantJob(m codec.Message, service string, timeoutMS uint64) string {
	p.t.Helper()
	if m.Type != codec.Job || m.Service != service || m.Timeout != timeoutMS || (p.id != nil && !bytes.Equal(m.ID, p.id)) {
		p.t.Fatalf("got %s %+v, want JOB of %s, timeout %d, to %x", m.Type, m, service, timeoutMS, p.id)
	}
	p.id = m.ID
	return string(m.Payload)
}

// wantResult checks that m is a client's RESULT with payload.
func (p *peer) wantResult(m codec.Message, payload string) {
	p.t.Helper()
	if m.Type != codec.Result || len(m.ID) != 0 || m.HasDisconnecting || string(m.Payload) != payload {
		p.t.Fatalf("got %s %+v, want RESULT %q", m.Type, m, payload)
	}
}

func (p *peer) wantType(m codec.Message, t codec.Type) {
	p.t.Helper()
	if m.Type != t || !bytes.Equal(m.ID, p.id) || len(m.Payload) != 0 {
		p.t.Fatalf("got %s %+v, want %s to %x", m.Type, m, t, p.id)
	}
}

// The bound port is read back from the listener: tcp://127.0.0.1:0
// becomes a real port, and both tcp and ipc listeners serve.
func TestListenAddrs(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "memodb.sock")
	f := start(t, Config{Addrs: []string{"tcp://127.0.0.1:0", "ipc://" + sock}})
	addrs := f.srv.Addrs()
	if len(addrs) != 2 || !strings.HasPrefix(addrs[0], "tcp://127.0.0.1:") || addrs[0] == "tcp://127.0.0.1:0" || addrs[1] != "ipc://"+sock {
		t.Fatalf("Addrs = %v", addrs)
	}
	for _, url := range addrs {
		t.Run(url[:3], func(t *testing.T) {
			f := f.on(t)
			f.url = url
			c, w := f.peer(f.dial()), f.peer(f.dial())
			c.send(job("echo-"+url[:3], 1000, "over "+url[:3]))
			got := w.wantJob(w.ask(ready("echo-"+url[:3])), "echo-"+url[:3], 1000)
			w.send(result(w.id, got+"!"))
			c.wantResult(c.recv(), "over "+url[:3]+"!")
		})
	}
}

func TestCheckURL(t *testing.T) {
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"tcp://127.0.0.1:12703", true},
		{"tcp://[::1]:12701", true},
		{"tcp://:12703", true},
		{"tcp://localhost:0", true},
		{"ipc:///tmp/memodb.socket", true},
		{"tls+tcp://127.0.0.1:12703", true},
		{"tls+tcp://127.0.0.1", false},
		{"tls://127.0.0.1:12703", false},
		{"ipc://relative", false},
		{"tcp://127.0.0.1", false},
		{"tcp://127.0.0.1:1/x", false},
		{"tcp://127.0.0.1:99999", false},
		{"udp://127.0.0.1:1", false},
		{"127.0.0.1:12703", false},
		{"", false},
	} {
		if err := CheckURL(tc.url); (err == nil) != tc.ok {
			t.Errorf("CheckURL(%q) = %v, want ok %v", tc.url, err, tc.ok)
		}
	}
}

// Many clients and workers, each a context, multiplexed over one socket
// each side: every result goes back to the context that asked.
func TestManyContextsOneSocket(t *testing.T) {
	f := start(t, Config{})
	const workers, clients, each = 8, 32, 20
	wsock, csock := f.dial(), f.dial()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	ran := make([]int, workers)
	for i := range workers {
		w := f.peer(wsock)
		wg.Go(func() {
			m, err := w.try(ready("upper"))
			for err == nil {
				switch m.Type {
				case codec.Heartbeat:
					m, err = w.try(codec.AppendHeartbeat(nil, m.ID))
				case codec.Job:
					ran[i]++
					m, err = w.try(result(m.ID, strings.ToUpper(string(m.Payload))))
				default:
					t.Errorf("worker %d: %s", i, m.Type)
					return
				}
			}
			if ctx.Err() == nil {
				t.Errorf("worker %d: %v", i, err)
			}
		})
	}
	var cg sync.WaitGroup
	for i := range clients {
		c := f.peer(csock)
		cg.Go(func() {
			for k := range each {
				want := fmt.Sprintf("client %d job %d", i, k)
				if m := c.ask(job("upper", 5000, want)); m.Type != codec.Result || string(m.Payload) != strings.ToUpper(want) {
					t.Errorf("client %d: %s %q, want %q", i, m.Type, m.Payload, strings.ToUpper(want))
					return
				}
			}
		})
	}
	cg.Wait()
	cancel()
	wsock.Close() // the workers' parked requests end: ErrClosed
	wg.Wait()
	total := 0
	for _, n := range ran {
		total += n
	}
	if total != clients*each {
		t.Fatalf("the workers ran %d jobs, want %d", total, clients*each)
	}
}

// rawConn speaks NNG's SP over TCP itself, for what a mangos socket would
// not send.
type rawConn struct {
	t testing.TB
	c net.Conn
}

func (f *fixture) raw() *rawConn {
	f.t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(f.url, "tcp://"))
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(waitFor))
	// SP header: 0, 'S', 'P', version 0, protocol REQ (48), reserved.
	if _, err := c.Write([]byte{0, 'S', 'P', 0, 0, 48, 0, 0}); err != nil {
		f.t.Fatal(err)
	}
	var h [8]byte
	if _, err := io.ReadFull(c, h[:]); err != nil || h != [8]byte{0, 'S', 'P', 0, 0, 49, 0, 0} {
		f.t.Fatalf("SP header % x: %v", h, err)
	}
	return &rawConn{t: f.t, c: c}
}

// request sends body as request id (high bit set, as REQ does).
func (r *rawConn) request(id uint32, body []byte) error {
	msg := make([]byte, 12, 12+len(body))
	binary.BigEndian.PutUint64(msg, uint64(4+len(body)))
	binary.BigEndian.PutUint32(msg[8:], id|1<<31)
	_, err := r.c.Write(append(msg, body...))
	return err
}

// reply reads one reply: its request id and body.
func (r *rawConn) reply() (uint32, []byte, error) {
	var h [12]byte
	if _, err := io.ReadFull(r.c, h[:]); err != nil {
		return 0, nil, err
	}
	body := make([]byte, binary.BigEndian.Uint64(h[:8])-4)
	_, err := io.ReadFull(r.c, body)
	return binary.BigEndian.Uint32(h[8:]) &^ (1 << 31), body, err
}

// Bad input is not answered (memodb-broker's way: the client's REQ socket
// resends after its resend time); the request's context is reused and the
// connection serves the next request. Each bad request goes before a good
// one on the same connection, whose answer shows it was read.
func TestBadInputNotAnswered(t *testing.T) {
	f := start(t, Config{Receivers: 1})
	r := f.raw()
	id := uint32(1)
	for _, tc := range []struct {
		name string
		body []byte
	}{
		{"empty", nil},
		{"not CBOR", []byte{0xff, 0xfe}},
		{"cut short", job("f", 1, "")[:5]},
		{"not deterministic", append([]byte{0x85, 0x66}, append([]byte("memo01"), 0x18, 0x02, 0x40, 0x61, 'f', 0x01)...)},
		{"wrong version", bytes.Replace(job("f", 1, "x"), []byte("memo01"), []byte("memo02"), 1)},
		{"indefinite array", append([]byte{0x9f}, append(job("f", 1, "")[1:], 0xff)...)},
		{"DISCONNECT to the broker", codec.AppendDisconnect(nil, []byte{1, 2, 3, 4})},
		{"READY with a payload", append(ready("f"), 0)},
		{"a worker's JOB", codec.AppendJob(nil, []byte{1, 2, 3, 4}, "f", 1)},
		{"a HEARTBEAT with a short id", codec.AppendHeartbeat(nil, []byte{1, 2, 3})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id++
			if err := r.request(id, tc.body); err != nil {
				t.Fatal(err)
			}
			f.noted("invalid")
			id++
			if err := r.request(id, codec.AppendHeartbeat(nil, []byte{0, 0, 0, 0})); err != nil {
				t.Fatal(err)
			}
			got, body, err := r.reply()
			if err != nil || got != id {
				t.Fatalf("reply to request %d: request %d % x, %v", id, got, body, err)
			}
			var m codec.Message
			if err := codec.Decode(body, codec.Reply, &m); err != nil || m.Type != codec.Disconnect {
				t.Fatalf("an unknown worker's HEARTBEAT got % x (%v), want DISCONNECT", body, err)
			}
		})
	}
}

// A message over MaxMessage closes its connection (mangos reads no more of
// it); other connections, and new ones, are served.
func TestOversizeClosesConnection(t *testing.T) {
	f := start(t, Config{MaxMessage: 1 << 10})
	other := f.peer(f.dial())
	// One byte over: within what mangos lets through for NNG's header,
	// refused by the server; far over: refused by mangos unread.
	for _, size := range []int{1<<10 + 1, 1 << 11} {
		big := f.raw()
		body := job("f", 1, "")
		body = append(body, strings.Repeat("x", size-len(body))...)
		if err := big.request(1, body); err != nil {
			t.Fatal(err)
		}
		if _, got, err := big.reply(); !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !isReset(err) {
			t.Fatalf("after a message of %d bytes: % x, %v; want the connection closed", size, got, err)
		}
	}
	// Just under the limit is served.
	c, w := f.peer(f.dial()), other
	payload := strings.Repeat("y", 1<<10-len(job("f", 1000, "")))
	c.send(job("f", 1000, payload))
	got := w.wantJob(w.ask(ready("f")), "f", 1000)
	w.send(result(w.id, "ok"))
	c.wantResult(c.recv(), "ok")
	if got != payload {
		t.Fatalf("the worker got %d bytes, want %d", len(got), len(payload))
	}
}

func isReset(err error) bool {
	return err != nil && strings.Contains(err.Error(), "connection reset")
}

// Stop gives back what MemoDB workers hold and withdraws what MemoDB
// clients queued; a Stop of a server never started does nothing.
func TestStop(t *testing.T) {
	if err := New(Config{}, nil, nil).Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	f := start(t, Config{Receivers: 1})
	c, w := f.peer(f.dial()), f.peer(f.dial())
	c.send(job("held", 0, "a"))
	w.wantJob(w.ask(ready("held")), "held", 0)
	qsock := f.dial()
	f.peer(qsock).send(job("queued", 0, "b"))
	f.handled(qsock)
	if st := statOf(f.sched, "queued"); st.Total() != 1 {
		t.Fatalf("queued before Stop: %+v", st)
	}
	if err := f.srv.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := statOf(f.sched, "held"); st.Running != 0 || st.Total() != 0 {
		t.Fatalf("held after Stop: %+v (its client is gone: the job with it)", st)
	}
	if st := statOf(f.sched, "queued"); st.Total() != 0 {
		t.Fatalf("queued after Stop: %+v", st)
	}
	if n := f.srv.Workers(); n != 0 {
		t.Fatalf("%d workers after Stop", n)
	}
}

func statOf(s *sched.Sched, fn string) sched.FuncStat {
	for _, st := range s.Funcs() {
		if st.Name == fn {
			return st
		}
	}
	return sched.FuncStat{}
}

// handled returns once every request sent on sock before it has been
// handled: with one receiver, a connection's requests are handled in the
// order they came, and an unknown worker's HEARTBEAT is answered at once.
func (f *fixture) handled(sock mangos.Socket) {
	f.t.Helper()
	p := f.peer(sock)
	p.id = []byte{0, 0, 0, 0}
	if f.srv.cfg.Receivers != 1 {
		f.t.Fatal("handled needs a server with one receiver")
	}
	p.wantType(p.ask(codec.AppendHeartbeat(nil, p.id)), codec.Disconnect)
}
