package gearman

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	codec "switchyard/codec/gearman"
	"switchyard/engine/tlstest"
	"switchyard/sched"
)

// tlsServer is a server with a TLS listener and, unless TLS only, a plain
// one, both on ports of 127.0.0.1 the kernel picks.
type tlsServer struct {
	srv   *Server
	plain string // "" when TLS only
	tls   string
	cert  *tlstest.Cert
}

func startTLSServer(t *testing.T, cfg Config, tlsOnly bool) *tlsServer {
	t.Helper()
	cert := tlstest.Server("switchyard")
	if !tlsOnly {
		cfg.Addrs = []string{"tcp://127.0.0.1:0"}
	}
	cfg.TLSAddrs = []string{"127.0.0.1:0"}
	cfg.TLS = &tls.Config{Certificates: []tls.Certificate{cert.TLS()}}
	srv := runServer(t, cfg, sched.Config{})
	ts := &tlsServer{srv: srv, tls: srv.TLSAddrs()[0].String(), cert: cert}
	if !tlsOnly {
		ts.plain = srv.Addrs()[0].String()
	}
	return ts
}

// dial connects in plain text or with TLS, verifying the server's
// certificate.
func (ts *tlsServer) dial(t *testing.T, withTLS bool) *peer {
	t.Helper()
	if !withTLS {
		return dial(t, ts.plain)
	}
	c, err := tls.Dial("tcp", ts.tls, &tls.Config{RootCAs: ts.cert.Pool()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &peer{t: t, c: c, r: bufio.NewReader(c)}
}

// A job goes from a client to a worker and back whichever listener each
// came through, and "workers" shows the TLS peers' address, not the
// socketpair's.
func TestTLSJobAcrossListeners(t *testing.T) {
	tests := []struct {
		name                 string
		clientTLS, workerTLS bool
	}{
		{"client TLS, worker plain", true, false},
		{"client plain, worker TLS", false, true},
		{"both TLS", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := startTLSServer(t, Config{}, false)
			w := ts.dial(t, tt.workerTLS)
			w.send(req(codec.SetClientID, "the-worker"), req(codec.CanDo, "reverse"), req(codec.EchoReq, "sync"))
			w.expect(res(codec.EchoRes, "sync"))

			c := ts.dial(t, tt.clientTLS)
			c.send(req(codec.SetClientID, "the-client"), req(codec.SubmitJob, "reverse", "", "test"))
			h := c.handle()
			w.send(req(codec.GrabJob))
			w.expect(res(codec.JobAssign, h, "reverse", "test"))
			w.send(req(codec.WorkComplete, h, "tset"))
			c.expect(res(codec.WorkComplete, h, "tset"))

			for _, adminTLS := range []bool{false, true} {
				a := ts.dial(t, adminTLS)
				a.send([]byte("workers\n"))
				got := a.listing()
				for _, re := range []string{`(?m)^\d+ 127\.0\.0\.1 the-worker : reverse$`, `(?m)^\d+ 127\.0\.0\.1 the-client :$`} {
					if !regexp.MustCompile(re).MatchString(got) {
						t.Errorf("admin over TLS %v: workers lacks %s:\n%s", adminTLS, re, got)
					}
				}
			}
		})
	}
}

// With TLS only (gearmand's --ssl), there is no plain listener: the TLS
// port answers both protocols, and a plain-text peer there gets nothing.
func TestTLSOnly(t *testing.T) {
	ts := startTLSServer(t, Config{}, true)
	if a := ts.srv.Addrs(); len(a) != 0 {
		t.Errorf("Addrs() = %v, want none", a)
	}
	if a := ts.srv.TLSAddrs()[0].(*net.TCPAddr); a.Port == 0 {
		t.Errorf("TLSAddrs() = %v: port 0", a)
	}
	p := ts.dial(t, true)
	p.send(req(codec.EchoReq, "over tls"))
	p.expect(res(codec.EchoRes, "over tls"))
	p.send([]byte("version\r\n"))
	if got := p.line(); got != "OK 0.0.0-test\n" {
		t.Errorf("version: %q", got)
	}

	raw := dial(t, ts.tls)
	raw.send([]byte("version\r\n")) // not a ClientHello
	raw.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if got, _ := raw.r.ReadString('\n'); strings.HasPrefix(got, "OK") {
		t.Errorf("plain text on the TLS port answered %q", got)
	}
}

// A TLS client that sends its command and half-closes (close_notify) gets
// its listing, as a plain one does (see testListingHalfClose), also when
// the listing is built off the loop and gnet has closed the connection
// meanwhile.
func TestTLSListingHalfClose(t *testing.T) {
	for _, offLoop := range []bool{false, true} {
		t.Run(fmt.Sprintf("offloop=%v", offLoop), func(t *testing.T) {
			ts := startTLSServer(t, Config{}, false)
			release := make(chan struct{})
			if offLoop {
				ts.srv.hooks.Store(&testHooks{inline: -1, building: func() { <-release }})
			}
			c := ts.dial(t, false)
			c.send(req(codec.SubmitJobBg, "f", "u", "x"))
			c.handle()
			a := ts.dial(t, true)
			a.send([]byte("show unique jobs\n"))
			if err := a.c.(*tls.Conn).CloseWrite(); err != nil {
				t.Fatal(err)
			}
			if offLoop {
				for deadline := time.Now().Add(5 * time.Second); ts.srv.Conns() > 1; {
					if time.Now().After(deadline) {
						t.Fatal("half-closed connection never closed")
					}
					time.Sleep(time.Millisecond) // polling for gnet's close
				}
				close(release)
			}
			if got := a.listing(); got != "u\n.\n" {
				t.Fatalf("listing %q", got)
			}
			a.closed()
		})
	}
}

// A drain refuses new TLS connections at connect, like plain ones, while
// an open TLS connection is still served.
func TestTLSDrainRefuses(t *testing.T) {
	ts := startTLSServer(t, Config{}, false)
	open := ts.dial(t, true)
	open.send(req(codec.EchoReq, "before"))
	open.expect(res(codec.EchoRes, "before"))
	if err := ts.srv.Drain(context.Background()); err != nil { // nothing runs: returns at once
		t.Fatal(err)
	}
	if c, err := net.Dial("tcp", ts.tls); err == nil {
		c.Close()
		t.Fatal("TLS port still accepting during the drain")
	}
	open.send(req(codec.EchoReq, "during"))
	open.expect(res(codec.EchoRes, "during"))
}
