package main

// TLS, as gearmand 1.1.20 does it when built with it (--enable-ssl):
// --ssl makes the -p port speak TLS only, with the certificate and key
// files of --ssl-certificate and --ssl-key and the CA file of
// --ssl-ca-file, each defaulting to an environment variable and then to a
// file under /etc/ssl/certs. Client certificates are not asked for
// (gearmand never calls SSL_CTX_set_verify).
//
// Debian's gearmand is built without TLS: it accepts --ssl and the three
// files, logs "Initializing Gear on port ... with SSL: true", and serves
// plain text. switchyard does TLS, as --ssl asks; --plain-port (ours) adds
// a plain-text port for the clients that do not speak TLS, which include
// Debian's libgearman and gearman tool (their -S is a no-op there too).
//
// Departures: a certificate, key or CA file that cannot be loaded stops
// switchyard at start-up with gearmand's message and status 1 (gearmand
// logs it as FATAL and runs on, failing every handshake); the files are
// read before -u switches user, so the key may be readable by root only
// (gearmand reads them after); the certificate file may hold the chain
// after the certificate (gearmand uses its first certificate only).

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"

	"go.uber.org/zap"

	"switchyard/engine/gearman"
)

// gearmand's defaults, from its configure's sysconfdir, /etc on Debian.
const (
	defaultSSLCAFile      = "/etc/ssl/certs/gearmand-ca.pem"
	defaultSSLCertificate = "/etc/ssl/certs/gearmand.pem"
	defaultSSLKey         = "/etc/ssl/certs/gearmand.key"
)

// sslDefaults completes the TLS options once both sources are parsed:
// with --ssl, each file not given comes from its environment variable,
// else gearmand's default path (gearmand looks at the variables only with
// --ssl too). Without --ssl the files are unused, and said to be.
func (s *parseState) sslDefaults(getenv func(string) string) error {
	o := s.o
	files := []struct {
		opt, env, dflt string
		v              *string
	}{
		{"ssl-ca-file", "GEARMAND_CA_CERTIFICATE", defaultSSLCAFile, &o.SSLCAFile},
		{"ssl-certificate", "GEARMAND_SERVER_PEM", defaultSSLCertificate, &o.SSLCertificate},
		{"ssl-key", "GEARMAND_SERVER_KEY", defaultSSLKey, &o.SSLKey},
	}
	for _, f := range files {
		switch {
		case !o.SSL:
			if *f.v != "" {
				s.warnf("ignoring --%s: --ssl is not given", f.opt)
			}
		case *f.v != "":
		case getenv(f.env) != "":
			*f.v = getenv(f.env)
		default:
			*f.v = f.dflt
		}
	}
	// Two plain listeners on port 0 would be the same gnet address; a TLS
	// and a plain one may both let the kernel pick.
	if o.PlainPort != "" && o.PlainPort == o.Port && !(o.SSL && o.Port == "0") {
		return usagef("--plain-port %s is also the --port", o.PlainPort)
	}
	return nil
}

// gearmanAddrs returns the plain (gnet) and TLS listen addresses.
func gearmanAddrs(o *options) (plain, secure []string) {
	hostPort := net.JoinHostPort(o.Listen, o.Port)
	if o.SSL {
		secure = []string{hostPort}
	} else {
		plain = []string{"tcp://" + hostPort}
	}
	if o.PlainPort != "" {
		plain = append(plain, "tcp://"+net.JoinHostPort(o.Listen, o.PlainPort))
	}
	return plain, secure
}

// listenFields are the "listening" line's: every bound address, the -p
// port first, and which of them speak TLS.
func listenFields(srv *gearman.Server) []zap.Field {
	var all, secure []string
	for _, a := range srv.TLSAddrs() {
		secure = append(secure, a.String())
	}
	all = append(all, secure...)
	for _, a := range srv.Addrs() {
		all = append(all, a.String())
	}
	fields := []zap.Field{zap.Strings("addrs", all)}
	if len(secure) > 0 {
		fields = append(fields, zap.Strings("tls", secure))
	}
	return fields
}

// loadTLS reads the three files as gearmand does, in its order and with
// its messages (the cause follows). The certificates of the CA file
// complete the chain sent after the certificate, as OpenSSL completes it
// from the trust store gearmand loads the CA file into.
func loadTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	cas, err := readCerts(caFile)
	if err != nil {
		return nil, fmt.Errorf("SSL_CTX_load_verify_locations() cannot local the ca certificate %s: %w", caFile, err)
	}
	chain, err := readCerts(certFile)
	if err != nil {
		return nil, fmt.Errorf("SSL_CTX_use_certificate_file() cannot obtain certificate %s: %w", certFile, err)
	}
	keyPEM, err := readKey(keyFile)
	if err != nil {
		return nil, fmt.Errorf("SSL_CTX_use_PrivateKey_file() cannot obtain certificate %s: %w", keyFile, err)
	}
	var certPEM []byte
	for _, c := range chain {
		certPEM = append(certPEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("SSL_CTX_check_private_key() cannot check certificate %s: %w", keyFile, err)
	}
	if len(chain) == 1 {
		cert.Certificate = append(cert.Certificate, issuers(chain[0], cas)...)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.NoClientCert}, nil
}

// readCerts returns the PEM certificates of a file; there must be one.
func readCerts(path string) ([]*x509.Certificate, error) {
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

// readKey returns the first PEM private key of a file, checked to parse.
func readKey(path string) ([]byte, error) {
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

// issuers follows leaf's issuers through pool up to a self-signed root,
// included, as far as pool goes: the chain OpenSSL sends when the
// certificate file holds no chain.
func issuers(leaf *x509.Certificate, pool []*x509.Certificate) [][]byte {
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
