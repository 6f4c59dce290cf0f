// Package tlstest makes throwaway certificates for tests and benchmarks: a
// CA, and certificates it issues for 127.0.0.1 and localhost, for a
// cluster node's name, for a client, expired ones. ECDSA P-256 keys, so
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
	"os"
	"path/filepath"
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

// Options shape a certificate IssueWith makes (not a CA).
type Options struct {
	// DNS are its DNS names (subject alternative names); none: no name
	// at all, not even an address.
	DNS []string
	// Client and Server are its extended key usages: TLS client and
	// server authentication.
	Client, Server bool
	// NotBefore and NotAfter bound its validity; zero: from an hour ago
	// to a day from now.
	NotBefore, NotAfter time.Time
}

// IssueWith returns a certificate signed by ca, as o says.
func (ca *Cert) IssueWith(name string, o Options) *Cert {
	tmpl := template(name)
	tmpl.DNSNames = o.DNS
	if o.Server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if o.Client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	if !o.NotBefore.IsZero() {
		tmpl.NotBefore = o.NotBefore
	}
	if !o.NotAfter.IsZero() {
		tmpl.NotAfter = o.NotAfter
	}
	return sign(tmpl, ca)
}

// Node returns the certificate of a cluster node named id, as a cluster's
// CA issues it: the name as its one DNS name, good for TLS servers and
// clients alike (a node dials and is dialled).
func (ca *Cert) Node(id string) *Cert {
	return ca.IssueWith(id, Options{DNS: []string{id}, Client: true, Server: true})
}

// Client returns a client certificate.
func (ca *Cert) Client(name string) *Cert {
	return ca.IssueWith(name, Options{Client: true})
}

// Expired returns c's kind of certificate as expired: the same names and
// usages, signed by ca, valid from two days ago to yesterday.
func (ca *Cert) Expired(c *Cert) *Cert {
	return ca.IssueWith(c.Cert.Subject.CommonName, Options{DNS: c.Cert.DNSNames,
		Client: hasUsage(c.Cert, x509.ExtKeyUsageClientAuth), Server: hasUsage(c.Cert, x509.ExtKeyUsageServerAuth),
		NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour)})
}

func hasUsage(c *x509.Certificate, u x509.ExtKeyUsage) bool {
	for _, x := range c.ExtKeyUsage {
		if x == u {
			return true
		}
	}
	return false
}

// WriteFiles writes c's certificate and key as PEM files base.pem and
// base.key in dir (the key readable by its owner only) and returns their
// paths.
func (c *Cert) WriteFiles(dir, base string) (certFile, keyFile string, err error) {
	certFile, keyFile = filepath.Join(dir, base+".pem"), filepath.Join(dir, base+".key")
	if err = os.WriteFile(certFile, c.CertPEM, 0o644); err != nil {
		return "", "", err
	}
	if err = os.WriteFile(keyFile, c.KeyPEM, 0o600); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
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

func template(name string) *x509.Certificate {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		panic(err)
	}
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
}

func newCert(name string, parent *Cert, isCA bool) *Cert {
	tmpl := template(name)
	if isCA {
		tmpl.IsCA = true
		tmpl.BasicConstraintsValid = true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.DNSNames = []string{"localhost"}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	}
	return sign(tmpl, parent)
}

// sign makes tmpl's certificate with a new key, signed by parent (nil:
// self-signed).
func sign(tmpl *x509.Certificate, parent *Cert) *Cert {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
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
