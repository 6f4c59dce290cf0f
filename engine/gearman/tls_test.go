package gearman

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	codec "switchyard/codec/gearman"
	"switchyard/engine/certs"
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

// clientCertServer is a server whose TLS listener asks for a client
// certificate from clientCA (verify), or asks for none, beside a plain
// listener; its "whoami" command answers who the caller is.
func clientCertServer(t *testing.T, verify bool, clientCA *tlstest.Cert) *tlsServer {
	t.Helper()
	cert := tlstest.Server("switchyard")
	src, err := certs.New(func() (*certs.Bundle, error) {
		return &certs.Bundle{Cert: cert.TLS(), CAs: []*x509.Certificate{clientCA.Cert}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Addrs: []string{"tcp://127.0.0.1:0"}, TLSAddrs: []string{"127.0.0.1:0"}, TLS: certs.ServerConfig(src, verify),
		Commands: map[string]func(Caller, []string) string{"whoami": func(c Caller, _ []string) string {
			return fmt.Sprintf("OK cert=%q\r\n", c.Cert)
		}}}
	srv := runServer(t, cfg, sched.Config{})
	return &tlsServer{srv: srv, tls: srv.TLSAddrs()[0].String(), plain: srv.Addrs()[0].String(), cert: cert}
}

// dialCert connects with TLS presenting client (nil: no certificate), and
// returns the connection, or the error of the handshake or, TLS 1.3 telling
// a refused certificate after it, of an echo.
func (ts *tlsServer) dialCert(t *testing.T, client *tlstest.Cert) (*peer, error) {
	t.Helper()
	cfg := &tls.Config{RootCAs: ts.cert.Pool()}
	if client != nil {
		cfg.Certificates = []tls.Certificate{client.TLS()}
	}
	c, err := tls.Dial("tcp", ts.tls, cfg)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { c.Close() })
	p := &peer{t: t, c: c, r: bufio.NewReader(c)}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(req(codec.EchoReq, "hello")); err != nil {
		return nil, err
	}
	if _, err := p.r.Peek(1); err != nil {
		return nil, err
	}
	p.expect(res(codec.EchoRes, "hello"))
	c.SetDeadline(time.Time{})
	return p, nil
}

// TestTLSClientCertificates: with client certificates required, a client
// without one, with one of another CA, or an expired one gets no answer;
// one the client CA issued is served.
func TestTLSClientCertificates(t *testing.T) {
	clientCA, otherCA := tlstest.CA("client CA"), tlstest.CA("other CA")
	alice := clientCA.Client("alice")
	ts := clientCertServer(t, true, clientCA)
	for _, tt := range []struct {
		name   string
		client *tlstest.Cert
		ok     bool
	}{
		{"no certificate", nil, false},
		{"another CA's", otherCA.Client("mallory"), false},
		{"expired", clientCA.Expired(alice), false},
		{"the client CA's", alice, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ts.dialCert(t, tt.client)
			if (err == nil) != tt.ok {
				t.Fatalf("echo: %v; want ok %v", err, tt.ok)
			}
		})
	}
}

// TestAdminCaller: an admin command of Config.Commands learns the client
// certificate its connection presented only when the server verified it:
// not on the plain port, not over TLS that asks for none.
func TestAdminCaller(t *testing.T) {
	clientCA := tlstest.CA("client CA")
	alice := clientCA.Client("alice")
	for _, tt := range []struct {
		name   string
		verify bool
		plain  bool
		want   string
	}{
		{"plain", true, true, `OK cert=""` + "\r\n"},
		{"TLS, no certificate asked", false, false, `OK cert=""` + "\r\n"},
		{"TLS with a verified certificate", true, false, `OK cert="alice"` + "\r\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ts := clientCertServer(t, tt.verify, clientCA)
			var p *peer
			if tt.plain {
				p = dial(t, ts.plain)
			} else {
				var err error
				if p, err = ts.dialCert(t, alice); err != nil {
					t.Fatal(err)
				}
			}
			p.send([]byte("whoami\r\n"))
			if got := p.line(); got != tt.want {
				t.Fatalf("whoami: %q, want %q", got, tt.want)
			}
		})
	}
}
