package gearhttp

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"strings"
	"testing"

	"switchyard/engine/certs"
	"switchyard/engine/tlstest"
	"switchyard/sched"
)

// TestTLS: with Config.TLS the port speaks HTTPS and asks, when told to,
// for a client certificate: a background job through it is created for
// a client the client CA issued, and refused at the handshake for one
// without a certificate, one of another CA and an expired one. Plain HTTP
// gets no answer.
func TestTLS(t *testing.T) {
	serverCert, clientCA, otherCA := tlstest.Server("switchyard"), tlstest.CA("client CA"), tlstest.CA("other CA")
	src, err := certs.New(func() (*certs.Bundle, error) {
		return &certs.Bundle{Cert: serverCert.TLS(), CAs: []*x509.Certificate{clientCA.Cert}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	e := start(t, Config{TLS: certs.ServerConfig(src, true)}, sched.Config{})
	post := func(client *tlstest.Cert) (*http.Response, error) {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: serverCert.Pool()}}
		if client != nil {
			tr.TLSClientConfig.Certificates = []tls.Certificate{client.TLS()}
		}
		defer tr.CloseIdleConnections()
		req, _ := http.NewRequest("POST", "https://"+e.http+"/f", strings.NewReader("payload"))
		req.Header.Set("X-Gearman-Background", "true")
		return (&http.Client{Transport: tr}).Do(req)
	}
	for name, bad := range map[string]*tlstest.Cert{"no certificate": nil, "another CA's": otherCA.Client("mallory"),
		"an expired one": clientCA.Expired(clientCA.Client("old"))} {
		if resp, err := post(bad); err == nil {
			resp.Body.Close()
			t.Errorf("%s: answered %s", name, resp.Status)
		}
	}
	resp, err := post(clientCA.Client("alice"))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("X-Gearman-Command") != "JOB_CREATED" {
		t.Fatalf("with a certificate: %s %v", resp.Status, resp.Header)
	}
	if got := e.sched.Len(); got != 1 {
		t.Fatalf("%d jobs queued, want 1", got)
	}
	if r := tryExchange(e.http, "GET /f HTTP/1.0\r\n\r\n"); r.err == nil && r.resp != nil {
		t.Fatalf("plain HTTP answered %s", r.resp.Status)
	}
}
