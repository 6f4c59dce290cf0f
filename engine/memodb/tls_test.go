package memodb

import (
	"crypto/tls"
	"crypto/x509"
	"strings"
	"testing"
	"time"

	"go.nanomsg.org/mangos/v3"
	reqsock "go.nanomsg.org/mangos/v3/protocol/req"
	_ "go.nanomsg.org/mangos/v3/transport/tlstcp" // tls+tcp:// dialers

	"switchyard/engine/certs"
	"switchyard/engine/tlstest"
)

// TestTLS: a tls+tcp:// address speaks NNG over TLS, as mangos's and
// nng's dialers do; with client certificates required, a job goes
// through for a client the client CA issued, and a client without one,
// with one of another CA or an expired one is never served.
func TestTLS(t *testing.T) {
	serverCert, clientCA, otherCA := tlstest.Server("switchyard"), tlstest.CA("client CA"), tlstest.CA("other CA")
	src, err := certs.New(func() (*certs.Bundle, error) {
		return &certs.Bundle{Cert: serverCert.TLS(), CAs: []*x509.Certificate{clientCA.Cert}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	f := start(t, Config{Addrs: []string{"tls+tcp://127.0.0.1:0", "tcp://127.0.0.1:0"}, TLS: certs.ServerConfig(src, true)})
	addrs := f.srv.Addrs()
	if !strings.HasPrefix(addrs[0], "tls+tcp://127.0.0.1:") || !strings.HasPrefix(addrs[1], "tcp://127.0.0.1:") {
		t.Fatalf("Addrs = %v", addrs)
	}
	dialTLS := func(client *tlstest.Cert) (*peer, error) {
		s, err := reqsock.NewSocket()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		s.SetOption(mangos.OptionRetryTime, time.Duration(0))
		cfg := &tls.Config{RootCAs: serverCert.Pool(), ServerName: "localhost"}
		if client != nil {
			cfg.Certificates = []tls.Certificate{client.TLS()}
		}
		if err := s.DialOptions(addrs[0], map[string]any{mangos.OptionTLSConfig: cfg}); err != nil {
			return nil, err
		}
		return f.peer(s), nil
	}
	// The worker waits first: a job that got through from a refused
	// client would be the one it is handed.
	w := f.peer(f.dialURL(addrs[1]))
	w.send(ready("tls"))
	for name, bad := range map[string]*tlstest.Cert{"no certificate": nil, "another CA's": otherCA.Client("mallory"),
		"an expired one": clientCA.Expired(clientCA.Client("old"))} {
		p, err := dialTLS(bad)
		if err != nil {
			continue // refused as it connected
		}
		p.ctx.SetOption(mangos.OptionRecvDeadline, 200*time.Millisecond)
		p.ctx.SetOption(mangos.OptionSendDeadline, 200*time.Millisecond)
		if _, err := p.try(job("tls", 1000, name)); err == nil {
			t.Fatalf("%s: answered", name)
		}
	}
	c, err := dialTLS(clientCA.Client("alice"))
	if err != nil {
		t.Fatal(err)
	}
	c.send(job("tls", 1000, "over TLS"))
	got := w.wantJob(w.recv(), "tls", 1000)
	if got != "over TLS" {
		t.Fatalf("the worker was handed %q", got)
	}
	w.send(result(w.id, got+"!"))
	c.wantResult(c.recv(), "over TLS!")
}
