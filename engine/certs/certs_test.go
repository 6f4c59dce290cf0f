package certs

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"switchyard/engine/tlstest"
)

// files writes a CA file, and a certificate and key, into a directory of
// the test's, and returns the loader of the three.
func files(t *testing.T, ca *tlstest.Cert, cert *tlstest.Cert) (dir string, load Loader) {
	t.Helper()
	dir = t.TempDir()
	write(t, dir, ca, cert)
	return dir, func() (*Bundle, error) {
		return Load(filepath.Join(dir, "cert.pem"), filepath.Join(dir, "cert.key"), filepath.Join(dir, "ca.pem"))
	}
}

func write(t *testing.T, dir string, ca, cert *tlstest.Cert) {
	t.Helper()
	if _, _, err := cert.WriteFiles(dir, "cert"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.pem"), ca.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	root := tlstest.CA("root")
	inter := root.Issue("intermediate", true)
	leaf := inter.Issue("leaf", false)
	other := tlstest.Server("other")
	file := func(name string, data ...[]byte) string {
		p := filepath.Join(dir, name)
		var b []byte
		for _, d := range data {
			b = append(b, d...)
		}
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cas, leafPEM, leafKey := file("cas.pem", root.CertPEM, inter.CertPEM), file("leaf.pem", leaf.CertPEM), file("leaf.key", leaf.KeyPEM)
	otherKey, garbage := file("other.key", other.KeyPEM), file("garbage", []byte("not PEM"))
	absent := filepath.Join(dir, "absent")
	for _, tt := range []struct {
		name          string
		cert, key, ca string
		chain         int // certificates sent
		err           string
	}{
		{"chain completed from the CA file", leafPEM, leafKey, cas, 3, ""},
		{"no CA file", leafPEM, leafKey, absent, 0, "CA file " + absent},
		{"CA file not PEM", leafPEM, leafKey, garbage, 0, "no PEM certificate in it"},
		{"no certificate", absent, leafKey, cas, 0, "certificate file " + absent},
		{"no key", leafPEM, absent, cas, 0, "key file " + absent},
		{"certificate as key", leafPEM, leafPEM, cas, 0, "no PEM private key in it"},
		{"key of another certificate", leafPEM, otherKey, cas, 0, "private key does not match"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b, err := Load(tt.cert, tt.key, tt.ca)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one saying %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(b.Cert.Certificate) != tt.chain || len(b.CAs) != 2 {
				t.Fatalf("%d certificates sent, %d CAs", len(b.Cert.Certificate), len(b.CAs))
			}
		})
	}
}

// TestReload: a reload takes the new files; one that fails keeps what
// was held.
func TestReload(t *testing.T) {
	ca := tlstest.CA("ca")
	first, second := ca.Node("a"), ca.Node("a")
	dir, load := files(t, ca, first)
	src, err := New(load)
	if err != nil {
		t.Fatal(err)
	}
	serial := func() string { return src.Get().Cert.Leaf.SerialNumber.String() }
	if serial() != first.Cert.SerialNumber.String() {
		t.Fatal("not the first certificate")
	}
	write(t, dir, ca, second)
	if err := src.Reload(); err != nil {
		t.Fatal(err)
	}
	if serial() != second.Cert.SerialNumber.String() {
		t.Fatal("the reload did not take the new certificate")
	}
	if err := os.WriteFile(filepath.Join(dir, "cert.key"), []byte("damaged"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := src.Reload(); err == nil {
		t.Fatal("a damaged key reloaded")
	}
	if serial() != second.Cert.SerialNumber.String() {
		t.Fatal("a failed reload changed the certificate")
	}
	if _, err := New(load); err == nil {
		t.Fatal("New with a damaged key")
	}
}

// handshake runs a real handshake over TCP on loopback between a server
// of cfg and a client presenting client (nil: none) that trusts ca, and
// returns the server's and the client's errors, and what the server saw.
func handshake(t *testing.T, cfg *tls.Config, ca *tlstest.Cert, client *tlstest.Cert) (serverErr, clientErr error, st tls.ConnectionState) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			serverErr = err
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		tc := tls.Server(c, cfg)
		serverErr = tc.Handshake()
		st = tc.ConnectionState()
		if serverErr == nil {
			tc.Write([]byte("ok"))
		}
	}()
	ccfg := &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"}
	if client != nil {
		ccfg.Certificates = []tls.Certificate{client.TLS()}
	}
	c, err := tls.Dial("tcp", ln.Addr().String(), ccfg)
	if err == nil {
		c.SetDeadline(time.Now().Add(10 * time.Second))
		// TLS 1.3: a refused certificate shows on the client's read.
		_, err = c.Read(make([]byte, 2))
		c.Close()
	}
	<-done
	return serverErr, err, st
}

// TestServerConfig: with verifyClient, a client without a certificate,
// with one of another CA, or an expired one fails the handshake; one the
// CA issued gets in and is named. Without, no certificate is asked for.
func TestServerConfig(t *testing.T) {
	ca, clientCA, otherCA := tlstest.CA("server CA"), tlstest.CA("client CA"), tlstest.CA("other CA")
	server := ca.Issue("server", false)
	src, err := New(func() (*Bundle, error) {
		return &Bundle{Cert: server.TLS(), CAs: []*x509.Certificate{clientCA.Cert}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	good := clientCA.Client("alice")
	for _, tt := range []struct {
		name   string
		verify bool
		client *tlstest.Cert
		ok     bool
	}{
		{"no certificate asked", false, nil, true},
		{"a certificate not asked for", false, good, true},
		{"verify: no certificate", true, nil, false},
		{"verify: another CA", true, otherCA.Client("mallory"), false},
		{"verify: expired", true, clientCA.Expired(good), false},
		{"verify: the client CA's", true, good, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			serr, cerr, st := handshake(t, ServerConfig(src, tt.verify), ca, tt.client)
			if tt.ok != (serr == nil) || tt.ok != (cerr == nil) {
				t.Fatalf("server %v, client %v; want ok %v", serr, cerr, tt.ok)
			}
			name, verified := VerifiedClient(st)
			if want := tt.ok && tt.verify; verified != want || (want && name != "alice") {
				t.Errorf("VerifiedClient %q, %v", name, verified)
			}
		})
	}
}
