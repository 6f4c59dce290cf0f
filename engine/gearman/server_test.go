package gearman

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	codec "switchyard/codec/gearman"
	"switchyard/engine/internal/servertest"
	"switchyard/sched"
)

// startServer runs a real server on a port of 127.0.0.1 the kernel picks.
func startServer(t *testing.T, cfg Config, scfg sched.Config) (string, *Server) {
	t.Helper()
	cfg.Addrs = []string{"tcp://127.0.0.1:0"}
	srv := runServer(t, cfg, scfg)
	return srv.Addrs()[0].String(), srv
}

// runServer starts a server on cfg's listeners, with the tests' defaults,
// and stops it when the test ends.
func runServer(t *testing.T, cfg Config, scfg sched.Config) *Server {
	t.Helper()
	s := sched.New(scfg)
	t.Cleanup(s.Close)
	if cfg.HandlePrefix == "" {
		cfg.HandlePrefix = "H:lap"
	}
	if cfg.Loops == 0 {
		cfg.Loops = 2
	}
	cfg.Version = "0.0.0-test"
	srv := New(cfg, s, nil)
	servertest.Run(t, srv)
	return srv
}

// waitConns waits until srv has n connections, pinging through p (one of
// them) between looks: a close is seen on its loop, not at once.
func waitConns(t *testing.T, srv *Server, n int, p *peer) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); srv.Conns() != n; {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections, want %d", srv.Conns(), n)
		}
		p.send(req(codec.EchoReq, "poll"))
		p.expect(res(codec.EchoRes, "poll"))
	}
}

// peer is a raw protocol connection with a read deadline on every read.
type peer struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, addr string) *peer {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &peer{t: t, c: c, r: bufio.NewReader(c)}
}

func req(t codec.Type, args ...string) []byte {
	bs := make([][]byte, len(args))
	for i, a := range args {
		bs[i] = []byte(a)
	}
	return codec.AppendPacket(nil, codec.Req, t, bs...)
}

func res(t codec.Type, args ...string) []byte {
	bs := make([][]byte, len(args))
	for i, a := range args {
		bs[i] = []byte(a)
	}
	return codec.AppendPacket(nil, codec.Res, t, bs...)
}

func (p *peer) send(b ...[]byte) {
	p.t.Helper()
	if _, err := p.c.Write(bytes.Join(b, nil)); err != nil {
		p.t.Fatal(err)
	}
}

// packet reads one binary packet and returns its raw bytes.
func (p *peer) packet() []byte {
	p.t.Helper()
	p.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	hdr := make([]byte, 12)
	if _, err := io.ReadFull(p.r, hdr); err != nil {
		p.t.Fatalf("reading header: %v", err)
	}
	body := make([]byte, binary.BigEndian.Uint32(hdr[8:]))
	if _, err := io.ReadFull(p.r, body); err != nil {
		p.t.Fatalf("reading body: %v", err)
	}
	return append(hdr, body...)
}

func (p *peer) expect(want []byte) {
	p.t.Helper()
	if got := p.packet(); !bytes.Equal(got, want) {
		p.t.Fatalf("got  %s\nwant %s", clip(got), clip(want))
	}
}

// clip quotes a packet for a failure message, eliding the middle of a
// large one.
func clip(b []byte) string {
	const keep = 96
	if len(b) <= 2*keep {
		return fmt.Sprintf("%q", b)
	}
	return fmt.Sprintf("%q ...%d bytes... %q", b[:keep], len(b)-2*keep, b[len(b)-keep:])
}

// handle reads a JOB_CREATED and returns its handle.
func (p *peer) handle() string {
	p.t.Helper()
	got := p.packet()
	if binary.BigEndian.Uint32(got[4:]) != uint32(codec.JobCreated) {
		p.t.Fatalf("want JOB_CREATED, got %q", got)
	}
	return string(got[12:])
}

// line reads text up to and including "\n".
func (p *peer) line() string {
	p.t.Helper()
	p.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	s, err := p.r.ReadString('\n')
	if err != nil {
		p.t.Fatalf("reading line: %v (got %q)", err, s)
	}
	return s
}

// listing reads admin lines through the closing ".\n".
func (p *peer) listing() string {
	p.t.Helper()
	var b strings.Builder
	for {
		l := p.line()
		b.WriteString(l)
		if l == ".\n" {
			return b.String()
		}
	}
}

// closed asserts the server hung up.
func (p *peer) closed() {
	p.t.Helper()
	p.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if b, err := p.r.ReadByte(); err != io.EOF {
		p.t.Fatalf("connection still open: %q %v", b, err)
	}
}

// TestServerAddrs: with port 0 the kernel picks the port, and Addrs names
// what was bound, one per configured address and in that order, so that a
// test never has to pick a free port and hope it stays free.
func TestServerAddrs(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "g.sock")
	tests := []struct {
		name  string
		addrs []string
		ipv6  bool
		want  []string // network and host of each address; the port must not be 0
	}{
		{"tcp port 0", []string{"tcp://127.0.0.1:0"}, false, []string{"tcp 127.0.0.1"}},
		{"tcp4 port 0", []string{"tcp4://127.0.0.1:0"}, false, []string{"tcp 127.0.0.1"}},
		{"two listeners", []string{"tcp6://[::1]:0", "tcp://127.0.0.1:0"}, true, []string{"tcp ::1", "tcp 127.0.0.1"}},
		{"unix socket", []string{"unix://" + sock}, false, []string{"unix " + sock}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.ipv6 {
				// Only to see whether ::1 exists; its port is not reused.
				l, err := net.Listen("tcp6", "[::1]:0")
				if err != nil {
					t.Skipf("no IPv6 loopback: %v", err)
				}
				l.Close()
			}
			s := sched.New(sched.Config{})
			t.Cleanup(s.Close)
			srv := New(Config{Addrs: tt.addrs, Loops: 1}, s, nil)
			if err := srv.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				srv.Stop(ctx)
			})
			got := srv.Addrs()
			if len(got) != len(tt.want) {
				t.Fatalf("Addrs() = %v, want %d addresses", got, len(tt.want))
			}
			for i, a := range got {
				var desc string
				switch a := a.(type) {
				case *net.TCPAddr:
					if a.Port == 0 {
						t.Errorf("Addrs()[%d] = %v: port 0", i, a)
					}
					desc = "tcp " + a.IP.String()
				case *net.UnixAddr:
					desc = "unix " + a.Name
				}
				if desc != tt.want[i] {
					t.Errorf("Addrs()[%d] = %v (%T), want %s", i, a, a, tt.want[i])
				}
				// The address is this server's: it answers ECHO.
				c, err := net.DialTimeout(a.Network(), a.String(), 5*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				p := &peer{t: t, c: c, r: bufio.NewReader(c)}
				p.send(req(codec.EchoReq, "here"))
				p.expect(res(codec.EchoRes, "here"))
				c.Close()
			}
		})
	}
}

// TestServerAddrsRefused: gnet tells listeners apart by the address they
// were given, so one given twice is refused rather than misreported.
func TestServerAddrsRefused(t *testing.T) {
	for _, addrs := range [][]string{nil, {"tcp://127.0.0.1:0", "tcp://127.0.0.1:0"}} {
		s := sched.New(sched.Config{})
		srv := New(Config{Addrs: addrs, Loops: 1}, s, nil)
		if err := srv.Start(); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			srv.Stop(ctx)
			cancel()
			t.Errorf("Start with %q succeeded", addrs)
		}
		s.Close()
	}
}

// TestSpecExample replays the byte-exact walkthrough of the protocol document.
func TestSpecExample(t *testing.T) {
	addr, _ := startServer(t, Config{}, sched.Config{})
	w := dial(t, addr)
	w.send([]byte("\x00REQ\x00\x00\x00\x01\x00\x00\x00\x07reverse"))
	w.send([]byte("\x00REQ\x00\x00\x00\x09\x00\x00\x00\x00"))
	w.expect([]byte("\x00RES\x00\x00\x00\x0a\x00\x00\x00\x00"))
	w.send([]byte("\x00REQ\x00\x00\x00\x04\x00\x00\x00\x00"))
	// PRE_SLEEP has no reply; ECHO proves the server has processed it.
	w.send(req(codec.EchoReq, "sync"))
	w.expect(res(codec.EchoRes, "sync"))

	c := dial(t, addr)
	c.send([]byte("\x00REQ\x00\x00\x00\x07\x00\x00\x00\x0dreverse\x00\x00test"))
	h := c.handle()
	if !strings.HasPrefix(h, "H:lap:") {
		t.Fatalf("handle %q", h)
	}
	w.expect([]byte("\x00RES\x00\x00\x00\x06\x00\x00\x00\x00"))
	w.send([]byte("\x00REQ\x00\x00\x00\x09\x00\x00\x00\x00"))
	w.expect(res(codec.JobAssign, h, "reverse", "test"))
	w.send(req(codec.WorkComplete, h, "tset"))
	c.expect(res(codec.WorkComplete, h, "tset"))
}

// TestBadInput checks each refusal against the bytes gearmand 1.1.20 sends,
// and that the connection (or at least the server) keeps serving.
func TestBadInput(t *testing.T) {
	long := strings.Repeat("u", 65)
	tests := []struct {
		name   string
		send   []byte
		want   []byte
		closes bool
	}{
		{"request magic RES", codec.AppendPacket(nil, codec.Res, codec.EchoReq, []byte("x")),
			[]byte("\x00RES\x00\x00\x00\x13\x00\x00\x00\x24INVALID_MAGIC\x00Request magic expected"), false},
		{"unused type 5", req(5, "x"), []byte("\x00RES\x00\x00\x00\x13\x00\x00\x00\x24INVALID_COMMAND\x00Command not expected"), false},
		{"unknown type 99", req(99, "x"), []byte("\x00RES\x00\x00\x00\x13\x00\x00\x00\x24INVALID_COMMAND\x00Command not expected"), false},
		{"response as request", req(codec.Noop), []byte("\x00RES\x00\x00\x00\x13\x00\x00\x00\x24INVALID_COMMAND\x00Command not expected"), false},
		{"SUBMIT_JOB_SCHED", req(codec.SubmitJobSched, "f", "", "1", "2", "3", "4", "5", "x"), []byte("\x00RES\x00\x00\x00\x13\x00\x00\x00\x24INVALID_COMMAND\x00Command not expected"), false},
		{"ALL_YOURS", req(codec.AllYours), []byte("\x00RES\x00\x00\x00\x13\x00\x00\x00\x24INVALID_COMMAND\x00Command not expected"), false},
		{"unknown option", req(codec.OptionReq, "foo"), []byte("\x00RES\x00\x00\x00\x13\x00\x00\x00\x35UNKNOWN_OPTION\x00Server does not recognize given option"), false},
		{"complete unknown handle", req(codec.WorkComplete, "H:lap:999", "x"), []byte("\x00RES\x00\x00\x00\x13\x00\x00\x00\x30JOB_NOT_FOUND\x00Job given in work result not found"), false},
		{"status unknown handle", req(codec.WorkStatus, "H:lap:999", "1", "2"), []byte("\x00RES\x00\x00\x00\x13\x00\x00\x00\x30JOB_NOT_FOUND\x00Job given in work result not found"), false},
		{"fail unknown handle", req(codec.WorkFail, "nonsense"), []byte("\x00RES\x00\x00\x00\x13\x00\x00\x00\x30JOB_NOT_FOUND\x00Job given in work result not found"), false},
		{"data unknown handle", req(codec.WorkData, "H:lap:999", "x"), []byte("\x00RES\x00\x00\x00\x13\x00\x00\x00\x2aJOB_NOT_FOUND\x00Job does not exist on server"), false},
		{"warning unknown handle", req(codec.WorkWarning, "H:lap:999", "x"), []byte("\x00RES\x00\x00\x00\x13\x00\x00\x00\x2aJOB_NOT_FOUND\x00Job does not exist on server"), false},
		{"exception unknown handle", req(codec.WorkException, "H:lap:999", "x"), []byte("\x00RES\x00\x00\x00\x13\x00\x00\x00\x45JOB_NOT_FOUND\x00An exception was received for a job that does not exist"), false},
		{"unique too large", req(codec.SubmitJob, "f", long, "x"), []byte("\x00RES\x00\x00\x00\x13\x00\x00\x00\x29ARGUMENT_TOO_LARGE\x00Unique value too large"), false},
		{"unique too large bg", req(codec.SubmitJobBg, "f", long, "x"), []byte("\x00RES\x00\x00\x00\x13\x00\x00\x00\x29ARGUMENT_TOO_LARGE\x00Unique value too large"), false},
		// A packet missing arguments closes the connection without a reply,
		// as gearmand does once bytes follow it; what came before is answered.
		{"truncated arguments", []byte("\x00REQ\x00\x00\x00\x07\x00\x00\x00\x02fn"), nil, true},
		{"truncated after an echo", append(req(codec.EchoReq, "first"), req(codec.SubmitJobBg, "f\x00u")...), res(codec.EchoRes, "first"), true},
		{"complete with only a handle", []byte("\x00REQ\x00\x00\x00\x0d\x00\x00\x00\x09H:lap:999"), nil, true},
		{"status with two arguments", req(codec.WorkStatus, "H:lap:999\x001"), nil, true},
		{"large truncated packet", req(codec.SubmitJob, strings.Repeat("f", 100<<10)), nil, true},
		{"garbage magic", []byte("\x00XYZ\x00\x00\x00\x10\x00\x00\x00\x00"), codec.AppendError(nil, "INVALID_MAGIC", "Request magic expected"), true},
		{"oversized packet", []byte("\x00REQ\x00\x00\x00\x10\x7f\xff\xff\xff"), codec.AppendError(nil, "ARGUMENT_TOO_LARGE", "Packet exceeds the maximum packet size"), true},
	}
	addr, _ := startServer(t, Config{MaxPacket: 1 << 20}, sched.Config{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := dial(t, addr)
			p.send(tt.send)
			if tt.want != nil {
				p.expect(tt.want)
			}
			if tt.closes {
				p.closed()
			} else {
				p.send(req(codec.EchoReq, "still here"))
				p.expect(res(codec.EchoRes, "still here"))
			}
			// Everyone else is still served.
			q := dial(t, addr)
			q.send(req(codec.EchoReq, "ok"))
			q.expect(res(codec.EchoRes, "ok"))
		})
	}
}

func TestUnique64Accepted(t *testing.T) {
	addr, _ := startServer(t, Config{}, sched.Config{})
	c := dial(t, addr)
	c.send(req(codec.SubmitJobBg, "f", strings.Repeat("u", 64), "x"))
	c.handle()
}

func TestEchoOptionAndStatus(t *testing.T) {
	addr, _ := startServer(t, Config{}, sched.Config{})
	c := dial(t, addr)
	c.send(req(codec.EchoReq, ""), req(codec.EchoReq, "a\x00b"), req(codec.OptionReq, "exceptions"))
	c.expect(res(codec.EchoRes, ""))
	c.expect(res(codec.EchoRes, "a\x00b"))
	c.expect(res(codec.OptionRes, "exceptions"))

	c.send(req(codec.GetStatus, "H:lap:12345"))
	c.expect(res(codec.StatusRes, "H:lap:12345", "0", "0", "0", "0"))
	c.send(req(codec.GetStatusUnique, "nope"))
	c.expect(res(codec.StatusResUnique, "nope", "0", "0", "0", "0", "0"))

	c.send(req(codec.SubmitJob, "f", "u1", "x"))
	h := c.handle()
	c.send(req(codec.GetStatus, h))
	c.expect(res(codec.StatusRes, h, "1", "0", "0", "0"))
	c.send(req(codec.GetStatusUnique, "u1"))
	c.expect(res(codec.StatusResUnique, "u1", "1", "0", "0", "0", "1"))

	w := dial(t, addr)
	w.send(req(codec.CanDo, "f"), req(codec.GrabJobUniq))
	w.expect(res(codec.JobAssignUniq, h, "f", "u1", "x"))
	w.send(req(codec.WorkStatus, h, "3", "10"))
	c.expect(res(codec.WorkStatus, h, "3", "10"))
	c.send(req(codec.GetStatus, h))
	c.expect(res(codec.StatusRes, h, "1", "1", "3", "10"))
	w.send(req(codec.WorkData, h, "d"), req(codec.WorkWarning, h, "w"), req(codec.WorkComplete, h, "r"))
	c.expect(res(codec.WorkData, h, "d"))
	c.expect(res(codec.WorkWarning, h, "w"))
	c.expect(res(codec.WorkComplete, h, "r"))
	c.send(req(codec.GetStatus, h))
	c.expect(res(codec.StatusRes, h, "0", "0", "0", "0"))
}

// TestPipelinedAndSplit sends many packets in one write, then one packet a
// byte at a time: replies are complete and in order either way.
func TestPipelinedAndSplit(t *testing.T) {
	addr, _ := startServer(t, Config{}, sched.Config{})
	c := dial(t, addr)
	var batch [][]byte
	for i := 0; i < 200; i++ {
		batch = append(batch, req(codec.EchoReq, fmt.Sprint(i)))
	}
	c.send(batch...)
	for i := 0; i < 200; i++ {
		c.expect(res(codec.EchoRes, fmt.Sprint(i)))
	}
	for _, b := range req(codec.EchoReq, "slowly") {
		c.send([]byte{b})
	}
	c.expect(res(codec.EchoRes, "slowly"))
	// Text and binary mixed on one connection.
	c.send([]byte("version\n"), req(codec.EchoReq, "hi"))
	if l := c.line(); l != "OK 0.0.0-test\n" {
		t.Fatalf("version %q", l)
	}
	c.expect(res(codec.EchoRes, "hi"))
}

// TestInterleavedResults: one client connection with many jobs in flight
// gets every result, whatever order the workers finish in.
func TestInterleavedResults(t *testing.T) {
	addr, _ := startServer(t, Config{}, sched.Config{})
	c := dial(t, addr)
	const n = 50
	var batch [][]byte
	for i := 0; i < n; i++ {
		batch = append(batch, req(codec.SubmitJob, "f", "", fmt.Sprint(i)))
	}
	c.send(batch...)
	handles := make([]string, n)
	for i := range handles {
		handles[i] = c.handle()
	}
	w1, w2 := dial(t, addr), dial(t, addr)
	w1.send(req(codec.CanDo, "f"))
	w2.send(req(codec.CanDo, "f"))
	type held struct {
		w      *peer
		handle string
	}
	var running []held
	for i := 0; i < n; i++ {
		w := []*peer{w1, w2}[i%2]
		w.send(req(codec.GrabJob))
		a := w.packet()
		h := string(a[12 : 12+bytes.IndexByte(a[12:], 0)])
		running = append(running, held{w, h})
	}
	// Finish in reverse order.
	want := map[string]bool{}
	for i := len(running) - 1; i >= 0; i-- {
		running[i].w.send(req(codec.WorkComplete, running[i].handle, "r"+running[i].handle))
		want[string(res(codec.WorkComplete, running[i].handle, "r"+running[i].handle))] = true
	}
	for i := 0; i < n; i++ {
		got := string(c.packet())
		if !want[got] {
			t.Fatalf("unexpected or duplicate %q", got)
		}
		delete(want, got)
	}
}

func TestPriorities(t *testing.T) {
	addr, _ := startServer(t, Config{}, sched.Config{})
	c := dial(t, addr)
	c.send(req(codec.SubmitJobLowBg, "f", "", "low"), req(codec.SubmitJobBg, "f", "", "normal"), req(codec.SubmitJobHighBg, "f", "", "high"))
	hl, hn, hh := c.handle(), c.handle(), c.handle()
	w := dial(t, addr)
	w.send(req(codec.CanDo, "f"), req(codec.GrabJob), req(codec.GrabJob), req(codec.GrabJob), req(codec.GrabJob))
	w.expect(res(codec.JobAssign, hh, "f", "high"))
	w.expect(res(codec.JobAssign, hn, "f", "normal"))
	w.expect(res(codec.JobAssign, hl, "f", "low"))
	w.expect(res(codec.NoJob))
}

func TestCoalescingOverTheWire(t *testing.T) {
	addr, _ := startServer(t, Config{}, sched.Config{})
	c1, c2 := dial(t, addr), dial(t, addr)
	c1.send(req(codec.SubmitJob, "f", "same", "first"))
	h := c1.handle()
	c2.send(req(codec.SubmitJob, "f", "same", "second"))
	if h2 := c2.handle(); h2 != h {
		t.Fatalf("not coalesced: %s vs %s", h, h2)
	}
	c2.send(req(codec.SubmitJob, "f", "-", "payload"), req(codec.SubmitJob, "f", "-", "payload"), req(codec.SubmitJob, "f", "", "payload"))
	d1, d2, d3 := c2.handle(), c2.handle(), c2.handle()
	if d1 != d2 || d1 == d3 {
		t.Fatalf(`"-" coalescing: %s %s %s`, d1, d2, d3)
	}
	w := dial(t, addr)
	w.send(req(codec.CanDo, "f"), req(codec.GrabJob))
	w.expect(res(codec.JobAssign, h, "f", "first"))
	w.send(req(codec.WorkComplete, h, "done"))
	c1.expect(res(codec.WorkComplete, h, "done"))
	c2.expect(res(codec.WorkComplete, h, "done"))
}

func TestExceptions(t *testing.T) {
	for _, global := range []bool{false, true} {
		t.Run(fmt.Sprint("--exceptions=", global), func(t *testing.T) {
			addr, _ := startServer(t, Config{Exceptions: global}, sched.Config{})
			plain, asked := dial(t, addr), dial(t, addr)
			asked.send(req(codec.OptionReq, "exceptions"))
			asked.expect(res(codec.OptionRes, "exceptions"))
			plain.send(req(codec.SubmitJob, "f", "u", "x"))
			h := plain.handle()
			asked.send(req(codec.SubmitJob, "f", "u", "x"))
			asked.handle()
			w := dial(t, addr)
			w.send(req(codec.CanDo, "f"), req(codec.GrabJob))
			w.packet()
			w.send(req(codec.WorkException, h, "boom"))
			asked.expect(res(codec.WorkException, h, "boom"))
			if global {
				plain.expect(res(codec.WorkException, h, "boom"))
			} else {
				plain.expect(res(codec.WorkFail, h+"\x00")) // gearmand's bytes
			}
		})
	}
}

func TestSleepWakeAndImmediateNoop(t *testing.T) {
	addr, _ := startServer(t, Config{}, sched.Config{WorkerWakeup: 1})
	w1, w2 := dial(t, addr), dial(t, addr)
	for _, w := range []*peer{w1, w2} {
		w.send(req(codec.CanDo, "f"), req(codec.PreSleep), req(codec.EchoReq, "s"))
		w.expect(res(codec.EchoRes, "s"))
	}
	c := dial(t, addr)
	c.send(req(codec.SubmitJobBg, "f", "", "x"))
	c.handle()
	// -w 1: exactly one of the two sleepers gets a NOOP. The NOOP is queued
	// before JOB_CREATED is written, so an ECHO after it tells the two apart.
	woken := 0
	for _, w := range []*peer{w1, w2} {
		w.send(req(codec.EchoReq, "s"))
		got := w.packet()
		if bytes.Equal(got, res(codec.Noop)) {
			woken++
			got = w.packet()
		}
		if !bytes.Equal(got, res(codec.EchoRes, "s")) {
			t.Fatalf("got %q", got)
		}
	}
	if woken != 1 {
		t.Fatalf("%d sleepers woken with -w 1", woken)
	}
	// A worker that goes to sleep while work waits is answered at once.
	w3 := dial(t, addr)
	w3.send(req(codec.CanDo, "f"), req(codec.PreSleep))
	w3.expect(res(codec.Noop))
}

func TestWorkerDisconnectRequeues(t *testing.T) {
	addr, _ := startServer(t, Config{}, sched.Config{})
	c := dial(t, addr)
	c.send(req(codec.SubmitJob, "f", "", "payload"))
	h := c.handle()
	w1 := dial(t, addr)
	w1.send(req(codec.CanDo, "f"), req(codec.GrabJob))
	w1.expect(res(codec.JobAssign, h, "f", "payload"))
	w2 := dial(t, addr)
	w2.send(req(codec.CanDo, "f"), req(codec.PreSleep), req(codec.EchoReq, "s"))
	w2.expect(res(codec.EchoRes, "s"))
	w1.c.Close()
	w2.expect(res(codec.Noop))
	w2.send(req(codec.GrabJob))
	w2.expect(res(codec.JobAssign, h, "f", "payload"))
	w2.send(req(codec.WorkComplete, h, "ok"))
	c.expect(res(codec.WorkComplete, h, "ok"))
}

func TestJobRetriesFail(t *testing.T) {
	addr, _ := startServer(t, Config{}, sched.Config{JobRetries: 1})
	c := dial(t, addr)
	c.send(req(codec.SubmitJob, "f", "", "x"))
	h := c.handle()
	w := dial(t, addr)
	w.send(req(codec.CanDo, "f"), req(codec.GrabJob))
	w.packet()
	w.c.Close()
	c.expect(res(codec.WorkFail, h))
}

func TestQueueFull(t *testing.T) {
	addr, _ := startServer(t, Config{}, sched.Config{})
	c := dial(t, addr)
	c.send([]byte("create function mq\r\nmaxqueue mq 1 2 3\r\n"))
	if l := c.line() + c.line(); l != "OK\r\nOK\r\n" {
		t.Fatalf("%q", l)
	}
	c.send(req(codec.SubmitJobBg, "mq", "", "1"))
	c.handle()
	c.send(req(codec.SubmitJobHighBg, "mq", "", "2"))
	c.expect([]byte("\x00RES\x00\x00\x00\x13\x00\x00\x00\x1dQUEUE_ERROR\x00Job queue is full"))
	c.send(req(codec.SubmitJobBg, "mq", "", "3"), req(codec.SubmitJobLowBg, "mq", "", "4"))
	c.handle()
	c.handle()
	c.send(req(codec.SubmitJobLow, "mq", "", "5"))
	c.expect([]byte("\x00RES\x00\x00\x00\x13\x00\x00\x00\x1dQUEUE_ERROR\x00Job queue is full"))
}

func TestReduceAndGrabAll(t *testing.T) {
	addr, _ := startServer(t, Config{}, sched.Config{})
	c := dial(t, addr)
	c.send(req(codec.SubmitReduceJobBackground, "f", "u", "red", "", "data"))
	h := c.handle()
	w := dial(t, addr)
	w.send(req(codec.CanDo, "f"), req(codec.GrabJobAll))
	w.expect(res(codec.JobAssignAll, h, "f", "u", "red", "data"))
	// Without a reducer GRAB_JOB_ALL gets JOB_ASSIGN_UNIQ, as from gearmand.
	c.send(req(codec.SubmitJobBg, "f", "v", "plain"))
	h2 := c.handle()
	w.send(req(codec.GrabJobAll))
	w.expect(res(codec.JobAssignUniq, h2, "f", "v", "plain"))
}

func TestEpochJobRunsWhenDue(t *testing.T) {
	addr, _ := startServer(t, Config{}, sched.Config{Tick: time.Millisecond})
	w := dial(t, addr)
	w.send(req(codec.CanDo, "f"), req(codec.PreSleep), req(codec.EchoReq, "s"))
	w.expect(res(codec.EchoRes, "s"))
	c := dial(t, addr)
	due := time.Now().Add(time.Second).Unix() + 1
	c.send(req(codec.SubmitJobEpoch, "f", "", fmt.Sprint(due), "later"))
	h := c.handle()
	w.expect(res(codec.Noop)) // woken when it comes due
	if now := time.Now().Unix(); now < due {
		t.Fatalf("woken at %d before the epoch %d", now, due)
	}
	w.send(req(codec.GrabJob))
	w.expect(res(codec.JobAssign, h, "f", "later"))
}

func TestCanDoTimeoutRequeues(t *testing.T) {
	addr, _ := startServer(t, Config{}, sched.Config{Tick: time.Millisecond})
	c := dial(t, addr)
	c.send(req(codec.SubmitJob, "f", "", "x"))
	h := c.handle()
	slow := dial(t, addr)
	slow.send(req(codec.CanDoTimeout, "f", "1000"), req(codec.GrabJob))
	slow.expect(res(codec.JobAssign, h, "f", "x"))
	fast := dial(t, addr)
	fast.send(req(codec.CanDo, "f"), req(codec.PreSleep), req(codec.EchoReq, "s"))
	fast.expect(res(codec.EchoRes, "s"))
	fast.expect(res(codec.Noop)) // the timeout put the job back
	fast.send(req(codec.GrabJob))
	fast.expect(res(codec.JobAssign, h, "f", "x"))
	// The slow attempt ends first: its result is the job's (gearmand's
	// would be JOB_NOT_FOUND) and the second attempt's is dropped quietly.
	slow.send(req(codec.WorkComplete, h, "late"))
	c.expect(res(codec.WorkComplete, h, "late"))
	fast.send(req(codec.WorkComplete, h, "ok"), req(codec.EchoReq, "quiet"))
	fast.expect(res(codec.EchoRes, "quiet"))
	c.send(req(codec.EchoReq, "once"))
	c.expect(res(codec.EchoRes, "once"))
}

func TestClientGoneDropsQueuedJob(t *testing.T) {
	addr, _ := startServer(t, Config{}, sched.Config{})
	c := dial(t, addr)
	c.send(req(codec.SubmitJob, "f", "", "fg"), req(codec.SubmitJobBg, "f", "", "bg"))
	c.handle()
	hb := c.handle()
	c.c.Close()
	a := dial(t, addr)
	// Wait until the server has seen the close: the queued foreground job leaves.
	deadline := time.Now().Add(5 * time.Second)
	for {
		a.send([]byte("status\n"))
		if got := a.listing(); got == "f\t1\t0\t0\n.\n" {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("status %q", got)
		}
	}
	w := dial(t, addr)
	w.send(req(codec.CanDo, "f"), req(codec.GrabJob), req(codec.GrabJob))
	w.expect(res(codec.JobAssign, hb, "f", "bg"))
	w.expect(res(codec.NoJob))
}

// TestOneLoop runs clients and workers on a single event loop, where every
// update and wake-up takes the same-loop path instead of a gnet wake.
func TestOneLoop(t *testing.T) {
	addr, srv := startServer(t, Config{Loops: 1}, sched.Config{})
	defer func() {
		if n := srv.loop.Wakes(); n != 0 {
			t.Errorf("%d gnet wakes with one loop, want 0", n)
		}
	}()
	w := dial(t, addr)
	w.send(req(codec.CanDo, "f"), req(codec.PreSleep), req(codec.EchoReq, "s"))
	w.expect(res(codec.EchoRes, "s"))
	c1, c2 := dial(t, addr), dial(t, addr)
	c1.send(req(codec.SubmitJob, "f", "u", "x"))
	h := c1.handle()
	c2.send(req(codec.SubmitJob, "f", "u", "x"))
	if c2.handle() != h {
		t.Fatal("not coalesced")
	}
	w.expect(res(codec.Noop))
	w.send(req(codec.GrabJob))
	w.expect(res(codec.JobAssign, h, "f", "x"))
	w.send(req(codec.WorkData, h, "d"), req(codec.WorkComplete, h, "r"))
	for _, c := range []*peer{c1, c2} {
		c.expect(res(codec.WorkData, h, "d"))
		c.expect(res(codec.WorkComplete, h, "r"))
	}
	// One connection as client and worker at once.
	both := dial(t, addr)
	both.send(req(codec.CanDo, "g"), req(codec.SubmitJob, "g", "", "self"), req(codec.GrabJob))
	hs := both.handle()
	both.expect(res(codec.JobAssign, hs, "g", "self"))
	both.send(req(codec.WorkComplete, hs, "done"))
	both.expect(res(codec.WorkComplete, hs, "done"))
}

// TestLargePayload sends a packet bigger than gnet's read buffer in pieces.
func TestLargePayload(t *testing.T) {
	addr, _ := startServer(t, Config{}, sched.Config{})
	big := strings.Repeat("x", 3<<20)
	c, w := dial(t, addr), dial(t, addr)
	w.send(req(codec.CanDo, "f"))
	pkt := req(codec.SubmitJob, "f", "", big)
	for len(pkt) > 0 {
		n := min(len(pkt), 100<<10)
		c.send(pkt[:n])
		pkt = pkt[n:]
	}
	h := c.handle()
	w.send(req(codec.GrabJob))
	w.expect(res(codec.JobAssign, h, "f", big))
	w.send(req(codec.WorkComplete, h, big))
	c.expect(res(codec.WorkComplete, h, big))
}

// TestLargePacketSplits: a large packet is read straight into its own
// buffer, however its bytes are split, and the packets pipelined behind it
// in the same write are still parsed.
func TestLargePacketSplits(t *testing.T) {
	big := strings.Repeat("y", largeBody+12345)
	for _, chunk := range []int{1 << 30, 1, 11, 12, 13, 4096 + 3, largeBody - 1, largeBody + 1} {
		t.Run(fmt.Sprint(chunk), func(t *testing.T) {
			addr, _ := startServer(t, Config{}, sched.Config{})
			c, w := dial(t, addr), dial(t, addr)
			w.send(req(codec.CanDo, "f"))
			var stream []byte
			stream = append(stream, req(codec.SubmitJob, "f", "", big)...)
			stream = append(stream, req(codec.EchoReq, "after")...)
			if chunk == 1 {
				// Byte by byte only through the header and the first
				// arguments: three million writes would prove nothing more.
				for _, b := range stream[:40] {
					c.send([]byte{b})
				}
				stream = stream[40:]
			}
			for len(stream) > 0 {
				n := min(len(stream), chunk)
				c.send(stream[:n])
				stream = stream[n:]
			}
			h := c.handle()
			c.expect(res(codec.EchoRes, "after"))
			w.send(req(codec.GrabJob))
			w.expect(res(codec.JobAssign, h, "f", big))
			w.send(req(codec.WorkComplete, h, big), req(codec.EchoReq, "w"))
			w.expect(res(codec.EchoRes, "w"))
			c.expect(res(codec.WorkComplete, h, big))
		})
	}
}

// TestLargePacketBuffersAreReused: large payloads and results go through
// recycled buffers; every job must still carry its own bytes, queued behind
// each other and after earlier jobs' buffers came back.
func TestLargePacketBuffersAreReused(t *testing.T) {
	addr, _ := startServer(t, Config{}, sched.Config{})
	c, w := dial(t, addr), dial(t, addr)
	w.send(req(codec.CanDo, "f"))
	payload := func(i int) string { return strings.Repeat(string(rune('a'+i)), 200<<10+i) }
	result := func(i int) string { return strings.Repeat(string(rune('A'+i)), 150<<10+i) }
	for round := 0; round < 3; round++ {
		const jobs = 6
		var batch [][]byte
		for i := 0; i < jobs; i++ {
			batch = append(batch, req(codec.SubmitJob, "f", "", payload(i)))
		}
		c.send(batch...) // one write: each body is followed by the next header
		handles := make([]string, jobs)
		for i := range handles {
			handles[i] = c.handle()
		}
		for i := 0; i < jobs; i++ {
			w.send(req(codec.GrabJob))
			w.expect(res(codec.JobAssign, handles[i], "f", payload(i)))
			w.send(req(codec.WorkComplete, handles[i], result(i)))
			c.expect(res(codec.WorkComplete, handles[i], result(i)))
		}
	}
}

// TestLargeResultsByReference: a worker's large results reach clients on
// the other loop by reference to the buffer the result was read into,
// which goes back to the pool, and into the next packet, once the last
// client has written it. Several clients wait on each job, one of them
// hangs up without reading, and the worker sends every result back to back
// while its loop keeps reading into recycled buffers: each client must
// still get each result byte for byte, in order.
func TestLargeResultsByReference(t *testing.T) {
	addr, srv := startServer(t, Config{Loops: 2}, sched.Config{})
	w := dial(t, addr)
	w.send(req(codec.CanDo, "f"), req(codec.EchoReq, "w"))
	w.expect(res(codec.EchoRes, "w"))
	// gnet hands connections to its loops in turn: with the worker first,
	// clients land on both loops.
	const clients, jobs = 5, 24
	cs := make([]*peer, clients)
	for i := range cs {
		cs[i] = dial(t, addr)
	}
	leaver := dial(t, addr)
	// Results differ in every byte position from job to job, so a buffer
	// written before its last reader is done shows.
	result := func(kind byte, j int) string {
		b := make([]byte, largeTail+1+j*4099)
		for i := range b {
			b[i] = byte(i*7 + j*31 + int(kind))
		}
		return string(b)
	}
	handles := make([]string, jobs)
	for j := range jobs {
		u := fmt.Sprint("u", j)
		for i, c := range append(cs, leaver) {
			c.send(req(codec.SubmitJob, "f", u, "p"))
			h := c.handle()
			if i == 0 {
				handles[j] = h
			} else if h != handles[j] {
				t.Fatalf("client %d got %s for %s, want the coalesced %s", i, h, u, handles[j])
			}
		}
	}
	for range jobs {
		w.send(req(codec.GrabJob))
		w.packet()
	}
	leaver.c.Close()
	var batch [][]byte
	for j, h := range handles {
		batch = append(batch, req(codec.WorkData, h, result('d', j)), req(codec.WorkComplete, h, result('c', j)))
	}
	wrote := make(chan error, 1)
	go func() { // the clients read meanwhile: the sockets cannot hold it all
		_, err := w.c.Write(bytes.Join(batch, nil))
		wrote <- err
	}()
	errs := make(chan error, clients)
	for _, c := range cs {
		go func() {
			for j, h := range handles {
				for _, want := range [][]byte{res(codec.WorkData, h, result('d', j)), res(codec.WorkComplete, h, result('c', j))} {
					if got, err := readPacket(c); err != nil || !bytes.Equal(got, want) {
						errs <- fmt.Errorf("job %d: got %s (%v)\nwant %s", j, clip(got), err, clip(want))
						return
					}
				}
			}
			errs <- nil
		}()
	}
	for range cs {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	if srv.loop.Wakes() == 0 {
		t.Fatal("no result crossed loops")
	}
}

// readPacket reads one binary packet off p, for goroutines other than the
// test's (peer.packet fails the test from its own goroutine only).
func readPacket(p *peer) ([]byte, error) {
	p.c.SetReadDeadline(time.Now().Add(20 * time.Second))
	hdr := make([]byte, 12)
	if _, err := io.ReadFull(p.r, hdr); err != nil {
		return nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(hdr[8:]))
	if _, err := io.ReadFull(p.r, body); err != nil {
		return hdr, err
	}
	return append(hdr, body...), nil
}

// TestLargePacketPeerLeaves: a client that hangs up halfway through a large
// packet is closed and forgotten; nothing of its packet runs.
func TestLargePacketPeerLeaves(t *testing.T) {
	addr, srv := startServer(t, Config{}, sched.Config{})
	w := dial(t, addr)
	w.send(req(codec.CanDo, "f"))
	c := dial(t, addr)
	pkt := req(codec.SubmitJob, "f", "", strings.Repeat("z", 1<<20))
	c.send(pkt[:len(pkt)/2])
	c.c.Close()
	waitConns(t, srv, 1, w)
	w.send(req(codec.GrabJob))
	w.expect(res(codec.NoJob))
}

// TestSlowReaderIsDropped: a client that stops reading while its results
// pile up is disconnected once they pass MaxOutbound, instead of growing
// the server's memory without bound; everyone else is still served.
func TestSlowReaderIsDropped(t *testing.T) {
	addr, srv := startServer(t, Config{MaxOutbound: 1 << 20}, sched.Config{})
	slow := dial(t, addr)
	if tc, ok := slow.c.(*net.TCPConn); ok {
		tc.SetReadBuffer(4 << 10) // keep the kernel from absorbing it all
	}
	const jobs = 64
	var batch [][]byte
	for i := 0; i < jobs; i++ {
		batch = append(batch, req(codec.SubmitJob, "f", "", fmt.Sprint(i)))
	}
	slow.send(batch...)
	handles := make([]string, jobs)
	for i := range handles {
		handles[i] = slow.handle()
	}
	// From here on the slow client reads nothing.
	w := dial(t, addr)
	w.send(req(codec.CanDo, "f"))
	result := strings.Repeat("r", 256<<10)
	done := 0
	for ; done < jobs; done++ {
		w.send(req(codec.GrabJob))
		a := w.packet()
		if bytes.Equal(a, res(codec.NoJob)) {
			break // the slow client is gone, and its queued jobs with it
		}
		h := string(a[12 : 12+bytes.IndexByte(a[12:], 0)])
		w.send(req(codec.WorkComplete, h, result))
	}
	w.send(req(codec.EchoReq, "done"))
	w.expect(res(codec.EchoRes, "done"))
	waitConns(t, srv, 1, w) // only the worker is left
}

// TestPeerLeavesMidPacketAfterWaking: a connection whose event woke a
// worker on the same loop and then hit EOF inside a large packet must still
// flush that worker's NOOP.
func TestPeerLeavesMidPacketAfterWaking(t *testing.T) {
	addr, _ := startServer(t, Config{Loops: 1}, sched.Config{})
	w := dial(t, addr)
	w.send(req(codec.CanDo, "f"), req(codec.PreSleep), req(codec.EchoReq, "asleep"))
	w.expect(res(codec.EchoRes, "asleep"))
	c := dial(t, addr)
	big := req(codec.SubmitJobBg, "f", "", strings.Repeat("z", 1<<20))
	c.send(req(codec.SubmitJobBg, "f", "", "wake"), big[:len(big)/2])
	c.c.Close()
	w.expect(res(codec.Noop))
}
