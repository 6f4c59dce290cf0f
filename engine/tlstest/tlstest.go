// Package tlstest makes throwaway certificates for tests: a CA, and
// certificates it issues for 127.0.0.1 and localhost. ECDSA P-256 keys, so
// that making them costs microseconds.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"time"
)

// Cert is a certificate and its key.
type Cert struct {
	Cert    *x509.Certificate
	Key     *ecdsa.PrivateKey
	CertPEM []byte // the certificate alone
	KeyPEM  []byte // PKCS#8
}

// CA returns a self-signed CA certificate.
func CA(name string) *Cert {
	return newCert(name, nil, true)
}

// Issue returns a certificate signed by ca: a CA itself when isCA, else a
// server certificate for 127.0.0.1, ::1 and localhost.
func (ca *Cert) Issue(name string, isCA bool) *Cert {
	return newCert(name, ca, isCA)
}

// Server returns a self-signed server certificate for 127.0.0.1, ::1 and
// localhost.
func Server(name string) *Cert {
	return newCert(name, nil, false)
}

// TLS is the certificate for a tls.Config, with chain appended after it.
func (c *Cert) TLS(chain ...*Cert) tls.Certificate {
	tc := tls.Certificate{Certificate: [][]byte{c.Cert.Raw}, PrivateKey: c.Key, Leaf: c.Cert}
	for _, x := range chain {
		tc.Certificate = append(tc.Certificate, x.Cert.Raw)
	}
	return tc
}

// Pool is a pool trusting c.
func (c *Cert) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c.Cert)
	return p
}

func newCert(name string, parent *Cert, isCA bool) *Cert {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		panic(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	if isCA {
		tmpl.IsCA = true
		tmpl.BasicConstraintsValid = true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.DNSNames = []string{"localhost"}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	}
	signer, signerKey := tmpl, key
	if parent != nil {
		signer, signerKey = parent.Cert, parent.Key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		panic(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		panic(err)
	}
	pk, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		panic(err)
	}
	return &Cert{
		Cert:    cert,
		Key:     key,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pk}),
	}
}
