package main

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"switchyard/engine/tlstest"
)

func TestLoadTLS(t *testing.T) {
	dir := t.TempDir()
	root := tlstest.CA("root")
	inter := root.Issue("intermediate", true)
	leaf := inter.Issue("leaf", false)
	self := tlstest.Server("self")
	other := tlstest.Server("other")
	ecKey, err := x509.MarshalECPrivateKey(self.Key)
	if err != nil {
		t.Fatal(err)
	}
	file := func(name string, parts ...[]byte) string {
		return writeFile(t, dir, name, string(bytes.Join(parts, nil)))
	}
	var (
		selfPEM    = file("self.pem", self.CertPEM)
		selfKey    = file("self.key", self.KeyPEM)
		selfECKey  = file("self-ec.key", pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: ecKey}))
		selfBoth   = file("self-both.pem", self.CertPEM, self.KeyPEM)
		cas        = file("cas.pem", root.CertPEM, inter.CertPEM)
		leafPEM    = file("leaf.pem", leaf.CertPEM)
		leafChain  = file("leaf-chain.pem", leaf.CertPEM, inter.CertPEM)
		leafKey    = file("leaf.key", leaf.KeyPEM)
		otherKey   = file("other.key", other.KeyPEM)
		garbage    = file("garbage.pem", []byte("not PEM\n"))
		encrypted  = file("encrypted.key", pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: []byte{1, 2, 3}}))
		absent     = filepath.Join(dir, "absent.pem")
		raw        = func(cs ...*tlstest.Cert) [][]byte { return certsRaw(cs...) }
		caMsg      = "SSL_CTX_load_verify_locations() cannot local the ca certificate "
		certMsg    = "SSL_CTX_use_certificate_file() cannot obtain certificate "
		keyMsg     = "SSL_CTX_use_PrivateKey_file() cannot obtain certificate "
		mismatch   = "SSL_CTX_check_private_key() cannot check certificate "
		selfChain  = raw(self)
		leafTarget = raw(leaf, inter, root)
	)
	tests := []struct {
		name          string
		ca, cert, key string
		chain         [][]byte // the certificates sent, leaf first
		wantErrPrefix string
	}{
		{"self-signed", selfPEM, selfPEM, selfKey, selfChain, ""},
		{"EC key", selfPEM, selfPEM, selfECKey, selfChain, ""},
		{"certificate and key in one file", selfPEM, selfBoth, selfBoth, selfChain, ""},
		// OpenSSL completes the chain from the CA file, root included.
		{"chain from the CA file", cas, leafPEM, leafKey, leafTarget, ""},
		{"chain in the certificate file", cas, leafChain, leafKey, raw(leaf, inter), ""},
		{"CA file unrelated", selfPEM, leafPEM, leafKey, raw(leaf), ""},

		{"no CA file", absent, selfPEM, selfKey, nil, caMsg + absent + ": open "},
		{"CA file not PEM", garbage, selfPEM, selfKey, nil, caMsg + garbage + ": no PEM certificate in it"},
		{"no certificate", selfPEM, absent, selfKey, nil, certMsg + absent + ": open "},
		{"key as certificate", selfPEM, selfKey, selfKey, nil, certMsg + selfKey + ": no PEM certificate in it"},
		{"no key", selfPEM, selfPEM, absent, nil, keyMsg + absent + ": open "},
		{"certificate as key", selfPEM, selfPEM, selfPEM, nil, keyMsg + selfPEM + ": no PEM private key in it"},
		{"encrypted key", selfPEM, selfPEM, encrypted, nil, keyMsg + encrypted + ": cannot parse its ENCRYPTED PRIVATE KEY"},
		{"key of another certificate", selfPEM, selfPEM, otherKey, nil, mismatch + otherKey + ": "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := loadTLS(tt.ca, tt.cert, tt.key)
			if tt.wantErrPrefix != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.wantErrPrefix) {
					t.Fatalf("error %v, want it to start %q", err, tt.wantErrPrefix)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := b.Cert.Certificate; !reflect.DeepEqual(got, tt.chain) {
				t.Errorf("chain of %d certificates, want %d (or another order)", len(got), len(tt.chain))
			}
		})
	}
}

func certsRaw(cs ...*tlstest.Cert) [][]byte {
	out := make([][]byte, len(cs))
	for i, c := range cs {
		out[i] = c.Cert.Raw
	}
	return out
}

func TestGearmanAddrs(t *testing.T) {
	tests := []struct {
		name          string
		o             options
		plain, secure []string
	}{
		{"plain", options{Port: "4730"}, []string{"tcp://:4730"}, nil},
		{"plain and plain", options{Listen: "127.0.0.1", Port: "4730", PlainPort: "4731"},
			[]string{"tcp://127.0.0.1:4730", "tcp://127.0.0.1:4731"}, nil},
		{"TLS", options{Port: "4730", SSL: true}, nil, []string{":4730"}},
		{"TLS and plain", options{Listen: "::1", Port: "0", PlainPort: "0", SSL: true}, []string{"tcp://[::1]:0"}, []string{"[::1]:0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plain, secure := gearmanAddrs(&tt.o)
			if !reflect.DeepEqual(plain, tt.plain) || !reflect.DeepEqual(secure, tt.secure) {
				t.Errorf("gearmanAddrs = %q, %q; want %q, %q", plain, secure, tt.plain, tt.secure)
			}
		})
	}
}
