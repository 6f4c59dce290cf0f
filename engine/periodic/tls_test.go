package periodic

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"strings"
	"testing"
	"time"

	codec "switchyard/codec/periodic"
	"switchyard/engine/certs"
	"switchyard/engine/internal/servertest"
	"switchyard/engine/tlstest"
	"switchyard/sched"
)

// TestTLSListener: a tls:// address is served with TLS beside a plain
// one, in the order given; a job goes from a TLS client to a plain worker;
// with client certificates required, a client without one, or with one of
// another CA, gets nothing.
func TestTLSListener(t *testing.T) {
	serverCert, clientCA, otherCA := tlstest.Server("switchyard"), tlstest.CA("client CA"), tlstest.CA("other CA")
	src, err := certs.New(func() (*certs.Bundle, error) {
		return &certs.Bundle{Cert: serverCert.TLS(), CAs: []*x509.Certificate{clientCA.Cert}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s := sched.New(sched.Config{Tick: -1})
	t.Cleanup(s.Close)
	srv := New(Config{Addrs: []string{"tls://127.0.0.1:0", "tcp://127.0.0.1:0"}, TLS: certs.ServerConfig(src, true), Loops: 1}, s, nil)
	servertest.Run(t, srv)
	bound := srv.Bound()
	if len(bound) != 2 || !strings.HasPrefix(bound[0], "tls://127.0.0.1:") || strings.Contains(bound[1], "://") {
		t.Fatalf("Bound() = %q: want the tls:// one first, then the plain one", bound)
	}
	tlsAddr, plainAddr := strings.TrimPrefix(bound[0], "tls://"), bound[1]
	dialTLS := func(client *tlstest.Cert, kind byte) (*peer, error) {
		cfg := &tls.Config{RootCAs: serverCert.Pool()}
		if client != nil {
			cfg.Certificates = []tls.Certificate{client.TLS()}
		}
		c, err := tls.Dial("tcp", tlsAddr, cfg)
		if err != nil {
			return nil, err
		}
		t.Cleanup(func() { c.Close() })
		p := &peer{t: t, c: c, r: bufio.NewReader(c)}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write(append(codec.AppendHandshake(nil, kind), codec.AppendRequest(nil, []byte("p"), codec.Ping)...)); err != nil {
			return nil, err
		}
		if _, err := p.r.Peek(1); err != nil { // a refused certificate shows here
			return nil, err
		}
		p.expect("p", codec.Pong)
		c.SetDeadline(time.Time{})
		return p, nil
	}
	for name, bad := range map[string]*tlstest.Cert{"no certificate": nil, "another CA's": otherCA.Client("mallory"),
		"an expired one": clientCA.Expired(clientCA.Client("old"))} {
		if _, err := dialTLS(bad, codec.TypeClient); err == nil {
			t.Fatalf("a client with %s got in", name)
		}
	}
	w := dialKind(t, "tcp", plainAddr, codec.TypeWorker)
	w.send("", codec.CanDo, "f")
	w.send("g", codec.GrabJob)
	c, err := dialTLS(clientCA.Client("alice"), codec.TypeClient)
	if err != nil {
		t.Fatal(err)
	}
	c.send("1", codec.SubmitJob, jobJSON("f", "a", "over TLS", 0))
	c.expect("1", codec.Success)
	_, job := w.assign("g")
	if job["workload"] != "over TLS" {
		t.Fatalf("job %v", job)
	}
}
