// Package certs holds the certificate a process presents and the CAs it
// trusts, read from PEM files, and reads them again when asked (SIGHUP):
// renewed certificates take effect without a restart, as cert-manager and
// ACME renewals expect. Every new handshake takes what a Source holds at
// that moment; established connections keep what they were made with. A
// reload that fails keeps what was held.
package certs

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
)

// Bundle is one reading of the files: the certificate with its chain and
// key, and the CA certificates.
type Bundle struct {
	Cert tls.Certificate
	CAs  []*x509.Certificate
	Pool *x509.CertPool // CAs, as a pool

	// The server configurations, made once per reading.
	plain, verify *tls.Config
}

// Loader reads the files into a Bundle.
type Loader func() (*Bundle, error)

// Source is a Bundle that Reload replaces.
type Source struct {
	load Loader
	cur  atomic.Pointer[Bundle]
}

// New reads the files once with load; the error is load's.
func New(load Loader) (*Source, error) {
	b, err := load()
	if err != nil {
		return nil, err
	}
	s := &Source{load: load}
	s.cur.Store(b.complete())
	return s, nil
}

// Get is the Bundle held now.
func (s *Source) Get() *Bundle { return s.cur.Load() }

// Reload reads the files again. On an error the Bundle held stays.
func (s *Source) Reload() error {
	b, err := s.load()
	if err != nil {
		return err
	}
	s.cur.Store(b.complete())
	return nil
}

// Roots is the pool of the CAs: Pool, or one made of CAs.
func (b *Bundle) Roots() *x509.CertPool {
	if b.Pool != nil {
		return b.Pool
	}
	p := x509.NewCertPool()
	for _, c := range b.CAs {
		p.AddCert(c)
	}
	return p
}

// complete fills what a Bundle derives from its certificates.
func (b *Bundle) complete() *Bundle {
	b.Pool = b.Roots()
	b.plain = &tls.Config{Certificates: []tls.Certificate{b.Cert}}
	// Session tickets off where client certificates count: a resumed
	// session would carry the verification of its first handshake past a
	// change of CA.
	b.verify = &tls.Config{Certificates: []tls.Certificate{b.Cert}, ClientAuth: tls.RequireAndVerifyClientCert,
		ClientCAs: b.Pool, SessionTicketsDisabled: true}
	return b
}

// ServerConfig is a TLS server configuration that serves s's certificate
// as held at each handshake. With verifyClient, a client must present a
// certificate that s's CAs issued, or the handshake fails.
func ServerConfig(s *Source, verifyClient bool) *tls.Config {
	return &tls.Config{GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
		b := s.Get()
		if verifyClient {
			return b.verify, nil
		}
		return b.plain, nil
	}}
}

// VerifiedClient says whether a server connection's client presented a
// certificate that verified, and names it (its subject's common name, or
// its whole subject).
func VerifiedClient(st tls.ConnectionState) (string, bool) {
	if len(st.VerifiedChains) == 0 || len(st.VerifiedChains[0]) == 0 {
		return "", false
	}
	leaf := st.VerifiedChains[0][0]
	if leaf.Subject.CommonName != "" {
		return leaf.Subject.CommonName, true
	}
	return leaf.Subject.String(), true
}

// Load reads a certificate file (PEM; the chain may follow the
// certificate), its key file and a CA file (PEM, one CA or more). The CA
// certificates complete the chain sent after a certificate that comes
// alone, as OpenSSL completes it from its trust store.
func Load(certFile, keyFile, caFile string) (*Bundle, error) {
	cas, err := ReadCerts(caFile)
	if err != nil {
		return nil, fmt.Errorf("CA file %s: %w", caFile, err)
	}
	chain, err := ReadCerts(certFile)
	if err != nil {
		return nil, fmt.Errorf("certificate file %s: %w", certFile, err)
	}
	keyPEM, err := ReadKey(keyFile)
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", keyFile, err)
	}
	cert, err := KeyPair(chain, keyPEM, cas)
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", keyFile, err)
	}
	return &Bundle{Cert: cert, CAs: cas}, nil
}

// KeyPair joins a chain (leaf first) and its PEM key; a leaf that comes
// alone is followed by its issuers from cas.
func KeyPair(chain []*x509.Certificate, keyPEM []byte, cas []*x509.Certificate) (tls.Certificate, error) {
	var certPEM []byte
	for _, c := range chain {
		certPEM = append(certPEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, err
	}
	if len(chain) == 1 {
		cert.Certificate = append(cert.Certificate, Issuers(chain[0], cas)...)
	}
	return cert, nil
}

// ReadCerts returns the PEM certificates of a file; there must be one.
func ReadCerts(path string) ([]*x509.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []*x509.Certificate
	for {
		var b *pem.Block
		if b, data = pem.Decode(data); b == nil {
			break
		}
		if b.Type != "CERTIFICATE" && b.Type != "X509 CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM certificate in it")
	}
	return out, nil
}

// ReadKey returns the first PEM private key of a file, checked to parse.
func ReadKey(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	for rest := data; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			return nil, errors.New("no PEM private key in it")
		}
		if !bytes.HasSuffix([]byte(b.Type), []byte("PRIVATE KEY")) {
			continue
		}
		if _, err := x509.ParsePKCS8PrivateKey(b.Bytes); err == nil {
			return pem.EncodeToMemory(b), nil
		}
		if _, err := x509.ParsePKCS1PrivateKey(b.Bytes); err == nil {
			return pem.EncodeToMemory(b), nil
		}
		if _, err := x509.ParseECPrivateKey(b.Bytes); err == nil {
			return pem.EncodeToMemory(b), nil
		}
		return nil, fmt.Errorf("cannot parse its %s (an encrypted key is not supported)", b.Type)
	}
}

// Issuers follows leaf's issuers through pool up to a self-signed root,
// included, as far as pool goes: the chain OpenSSL sends when the
// certificate file holds no chain.
func Issuers(leaf *x509.Certificate, pool []*x509.Certificate) [][]byte {
	var out [][]byte
	for cur := leaf; len(out) < 10 && !selfSigned(cur); {
		var next *x509.Certificate
		for _, c := range pool {
			if bytes.Equal(c.RawSubject, cur.RawIssuer) && cur.CheckSignatureFrom(c) == nil {
				next = c
				break
			}
		}
		if next == nil {
			break
		}
		out = append(out, next.Raw)
		cur = next
	}
	return out
}

func selfSigned(c *x509.Certificate) bool {
	return bytes.Equal(c.RawSubject, c.RawIssuer) && c.CheckSignatureFrom(c) == nil
}
