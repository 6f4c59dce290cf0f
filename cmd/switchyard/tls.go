package main

// TLS, as gearmand 1.1.20 does it when built with it (--enable-ssl):
// --ssl makes the -p port speak TLS only, with the certificate and key
// files of --ssl-certificate and --ssl-key and the CA file of
// --ssl-ca-file, each defaulting to an environment variable and then to a
// file under /etc/ssl/certs. Client certificates are not asked for
// (gearmand never calls SSL_CTX_set_verify; see --ssl-verify-client below).
//
// Debian's gearmand is built without TLS: it accepts --ssl and the three
// files, logs "Initializing Gear on port ... with SSL: true", and serves
// plain text. switchyard does TLS, as --ssl asks; --plain-port (ours) adds
// a plain-text port for the clients that do not speak TLS, which include
// Debian's libgearman and gearman tool (their -S is a no-op there too).
//
// Ours: the same files serve the other TLS listeners (the HTTP port with
// --http-ssl, Periodic's tls:// and MemoDB's tls+tcp:// addresses), and
// --ssl-verify-client makes every one of them ask for a client
// certificate that a CA of the CA file issued. SIGHUP reads the files
// again (certs.Source): new handshakes use them, a file that fails keeps
// the ones loaded.
//
// Departures: a certificate, key or CA file that cannot be loaded stops
// switchyard at start-up with gearmand's message and status 1 (gearmand
// logs it as FATAL and runs on, failing every handshake); the files are
// read before -u switches user, so the key may be readable by root only
// (gearmand reads them after); the certificate file may hold the chain
// after the certificate (gearmand uses its first certificate only).

import (
	"fmt"
	"net"
	"slices"
	"strings"

	"go.uber.org/zap"

	"switchyard/engine/certs"
	"switchyard/engine/gearman"
)

// gearmand's defaults, from its configure's sysconfdir, /etc on Debian.
const (
	defaultSSLCAFile      = "/etc/ssl/certs/gearmand-ca.pem"
	defaultSSLCertificate = "/etc/ssl/certs/gearmand.pem"
	defaultSSLKey         = "/etc/ssl/certs/gearmand.key"
)

// sslDefaults completes the TLS options once both sources are parsed:
// with --ssl (or another TLS listener), each file not given comes from its
// environment variable, else gearmand's default path (gearmand looks at
// the variables only with --ssl too). Without a TLS listener the files
// are unused, and said to be.
func (s *parseState) sslDefaults(getenv func(string) string) error {
	o := s.o
	if o.HTTPSSL && s.protocol != "http" {
		s.warnf("ignoring --http-ssl: -r http is not given")
		o.HTTPSSL = false
	}
	uses := tlsListeners(o)
	if o.SSLVerifyClient && !uses {
		return usagef("--ssl-verify-client needs a listener that speaks TLS: --ssl, --http-ssl, or a tls:// Periodic or tls+tcp:// MemoDB address")
	}
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
		case !uses:
			if *f.v != "" {
				s.warnf("ignoring --%s: --ssl is not given (nor another TLS listener)", f.opt)
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

// tlsListeners says whether a listener speaks TLS with the --ssl-* files:
// -p with --ssl, the HTTP port with --http-ssl, a tls:// Periodic or
// tls+tcp:// MemoDB address.
func tlsListeners(o *options) bool {
	has := func(addrs []string, scheme string) bool {
		return slices.ContainsFunc(addrs, func(a string) bool { return strings.HasPrefix(a, scheme) })
	}
	return o.SSL || o.HTTPSSL || has(o.PeriodicListen, "tls://") || has(o.MemodbListen, "tls+tcp://")
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
// from the trust store gearmand loads the CA file into; they are also the
// CAs a client certificate must come from (--ssl-verify-client).
func loadTLS(caFile, certFile, keyFile string) (*certs.Bundle, error) {
	cas, err := certs.ReadCerts(caFile)
	if err != nil {
		return nil, fmt.Errorf("SSL_CTX_load_verify_locations() cannot local the ca certificate %s: %w", caFile, err)
	}
	chain, err := certs.ReadCerts(certFile)
	if err != nil {
		return nil, fmt.Errorf("SSL_CTX_use_certificate_file() cannot obtain certificate %s: %w", certFile, err)
	}
	keyPEM, err := certs.ReadKey(keyFile)
	if err != nil {
		return nil, fmt.Errorf("SSL_CTX_use_PrivateKey_file() cannot obtain certificate %s: %w", keyFile, err)
	}
	cert, err := certs.KeyPair(chain, keyPEM, cas)
	if err != nil {
		return nil, fmt.Errorf("SSL_CTX_check_private_key() cannot check certificate %s: %w", keyFile, err)
	}
	return &certs.Bundle{Cert: cert, CAs: cas}, nil
}
