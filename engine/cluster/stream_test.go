package cluster

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"switchyard/engine/certs"
	"switchyard/engine/tlstest"
	"switchyard/sched/replicated"
)

// nodeCerts is a node's certificate source: cert, and ca as the
// cluster's CA.
func nodeCerts(tb testing.TB, ca, cert *tlstest.Cert) *certs.Source {
	tb.Helper()
	src, err := certs.New(func() (*certs.Bundle, error) {
		return &certs.Bundle{Cert: cert.TLS(), CAs: []*x509.Certificate{ca.Cert}}, nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return src
}

// TestTLSClusterCommits: three nodes with mutual TLS commit, and every
// follower applies what the leader committed.
func TestTLSClusterCommits(t *testing.T) {
	ca := tlstest.CA("cluster CA")
	nodes := startThreeWith(t, func(_ int, cfg *Config) { cfg.TLS = nodeCerts(t, ca, ca.Node(cfg.ID)) })
	l, _ := leaderOf(t, nodes)
	s := replicated.New(context.Background(), l.Raft(), l.FSM(), replicated.Options{Term: l.Raft().CurrentTerm()})
	defer s.Close()
	for i := range 50 {
		done := make(chan error, 1)
		s.Put(uint64(i+1), []byte(fmt.Sprint("job", i)), func(err error) { done <- err })
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range nodes {
		waitFor(t, n.ID()+" applying 50 jobs", func() bool { return n.FSM().Len() == 50 })
	}
	for _, n := range nodes {
		for r := range numReasons {
			if got := n.ref.counts[r].Load(); got != 0 {
				t.Errorf("%s refused %d peers for %s", n.ID(), got, r)
			}
		}
	}
}

// TestOpenRefusesPlainOffLoopback: a node that would listen beyond
// loopback without certificates does not start, and says what to give;
// --cluster-insecure lets it (here, to fail binding an address this host
// does not have).
func TestOpenRefusesPlainOffLoopback(t *testing.T) {
	_, err := Open(Config{ID: "n1", Listen: "192.0.2.1:7000", Dir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "--cluster-tls-cert") || !strings.Contains(err.Error(), "--cluster-insecure") {
		t.Fatalf("error %v: want one naming the certificates' flags and --cluster-insecure", err)
	}
	_, err = Open(Config{ID: "n1", Listen: "192.0.2.1:7000", Dir: t.TempDir(), Insecure: true})
	if err == nil || strings.Contains(err.Error(), "--cluster-insecure") {
		t.Fatalf("error %v: want binding 192.0.2.1 to fail, nothing about TLS", err)
	}
	n, err := Open(Config{ID: "n1", Listen: "127.0.0.1:0", Dir: t.TempDir()})
	if err != nil {
		t.Fatalf("loopback without certificates: %v", err)
	}
	n.Close()
}

// TestOpenRefusesOwnBadCert: a node whose own certificate its peers would
// refuse does not start, and says why.
func TestOpenRefusesOwnBadCert(t *testing.T) {
	ca, other := tlstest.CA("cluster CA"), tlstest.CA("another CA")
	for _, tt := range []struct {
		name string
		cert *tlstest.Cert
		want string
	}{
		{"another node's", ca.Node("n2"), "not this node"},
		{"another CA's", other.Node("n1"), "does not verify against --cluster-tls-ca"},
		{"expired", ca.Expired(ca.Node("n1")), "does not verify against --cluster-tls-ca"},
		{"a server's only", ca.IssueWith("n1", tlstest.Options{DNS: []string{"n1"}, Server: true}), "for TLS servers and clients"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Open(Config{ID: "n1", Listen: "127.0.0.1:0", Dir: t.TempDir(), TLS: nodeCerts(t, ca, tt.cert)})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one saying %q", err, tt.want)
			}
		})
	}
}

// refusedCounts reads a node's refusal counters.
func refusedCounts(n *Node) [numReasons]uint64 {
	var out [numReasons]uint64
	for r := range numReasons {
		out[r] = n.ref.counts[r].Load()
	}
	return out
}

// TestAcceptRefuses dials a TLS node's Raft port as every kind of
// stranger: each is refused with its reason, counted, and reads nothing
// but the end of its connection (a TLS client, the alert); a member's
// certificate gets in.
func TestAcceptRefuses(t *testing.T) {
	ca, otherCA := tlstest.CA("cluster CA"), tlstest.CA("another CA")
	n1, err := Open(Config{ID: "n1", Listen: "127.0.0.1:0", Peers: []Peer{{ID: "n1", Addr: "127.0.0.1:0"}}, Dir: t.TempDir(),
		TLS: nodeCerts(t, ca, ca.Node("n1"))})
	if err != nil {
		t.Fatal(err)
	}
	defer n1.Close()
	waitLeader(t, n1)
	addr := n1.RaftAddr()
	rawClient := func(send []byte) func(t *testing.T) (int64, error) {
		return func(t *testing.T) (int64, error) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.Write(send)
			c.SetReadDeadline(time.Now().Add(30 * time.Second))
			return io.Copy(io.Discard, c)
		}
	}
	tlsClient := func(cert *tlstest.Cert) func(t *testing.T) (int64, error) {
		return func(t *testing.T) (int64, error) {
			cfg := &tls.Config{RootCAs: ca.Pool(), ServerName: "n1", MinVersion: tls.VersionTLS13}
			if cert != nil {
				cfg.Certificates = []tls.Certificate{cert.TLS()}
			}
			c, err := tls.Dial("tcp", addr, cfg)
			if err != nil {
				return 0, err
			}
			defer c.Close()
			// A TLS 1.3 client finishes before the server has checked
			// its certificate: the refusal comes as an alert on the read.
			c.SetReadDeadline(time.Now().Add(30 * time.Second))
			return io.Copy(io.Discard, c)
		}
	}
	// A raft AppendEntries request as the plain TCP transport would
	// send it begins with its type, 0.
	for _, tt := range []struct {
		name   string
		client func(t *testing.T) (int64, error)
		want   reason
	}{
		{"no TLS", rawClient([]byte{0, 0x85, 0xa9, 'R', 'P', 'C', 'H', 'e', 'a', 'd', 'e', 'r'}), reasonNotTLS},
		{"garbage", rawClient([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")), reasonNotTLS},
		{"TLS without a certificate", tlsClient(nil), reasonNoCert},
		{"a certificate from another CA", tlsClient(otherCA.Node("n1")), reasonUnknownCA},
		{"an expired certificate", tlsClient(ca.Expired(ca.Node("n1"))), reasonExpired},
		{"a valid certificate naming no member", tlsClient(ca.Node("evil")), reasonWrongNode},
		{"a certificate not for clients", tlsClient(ca.IssueWith("n1", tlstest.Options{DNS: []string{"n1"}, Server: true})), reasonBadCert},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := refusedCounts(n1)
			got, _ := tt.client(t)
			if got != 0 {
				t.Errorf("the stranger read %d bytes", got)
			}
			waitFor(t, tt.want.String()+" counted", func() bool { return refusedCounts(n1)[tt.want] == before[tt.want]+1 })
			after := refusedCounts(n1)
			for r := range numReasons {
				if r != tt.want && after[r] != before[r] {
					t.Errorf("%s counted too", r)
				}
			}
		})
	}
	t.Run("a member's certificate", func(t *testing.T) {
		before := refusedCounts(n1)
		c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool(), ServerName: "n1", MinVersion: tls.VersionTLS13,
			Certificates: []tls.Certificate{ca.Node("n1").TLS()}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// Accepted, raft waits for an RPC: the read times out, the
		// connection open.
		c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		var ne net.Error
		if _, err := c.Read(make([]byte, 1)); !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("read %v: want the connection open", err)
		}
		if after := refusedCounts(n1); after != before {
			t.Fatalf("refusals %v, before %v", after, before)
		}
	})
}

// TestStalledHandshake: a client that sends half a ClientHello and waits
// is cut at the handshake deadline, counted, and leaves no goroutine.
func TestStalledHandshake(t *testing.T) {
	ca := tlstest.CA("cluster CA")
	n1, err := Open(Config{ID: "n1", Listen: "127.0.0.1:0", Peers: []Peer{{ID: "n1", Addr: "127.0.0.1:0"}}, Dir: t.TempDir(),
		TLS: nodeCerts(t, ca, ca.Node("n1")), HandshakeTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer n1.Close()
	before := refusedCounts(n1)
	hello := clientHello(t)
	c, err := net.Dial("tcp", n1.RaftAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(hello[:len(hello)/2]); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the handshake to begin", func() bool { return n1.sl.Handshaking() == 1 })
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	n, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the server did not cut the stalled handshake")
	}
	if n != 0 {
		t.Errorf("the stalled client read %d bytes", n)
	}
	waitFor(t, "the timeout counted", func() bool { return refusedCounts(n1)[reasonTimeout] == before[reasonTimeout]+1 })
	if h := n1.sl.Handshaking(); h != 0 {
		t.Errorf("%d handshakes in flight", h)
	}
	waitFor(t, "no handshake goroutine", func() bool { return !goroutineIn("(*streamLayer).handshake") })
}

// goroutineIn tells whether a goroutine runs fn.
func goroutineIn(fn string) bool {
	buf := make([]byte, 1<<20)
	return bytes.Contains(buf[:runtime.Stack(buf, true)], []byte(fn))
}

// clientHello is a real TLS 1.3 ClientHello record, as a node sends it.
func clientHello(tb testing.TB) []byte {
	tb.Helper()
	a, b := net.Pipe()
	defer a.Close()
	go func() {
		tls.Client(b, &tls.Config{ServerName: "n1", MinVersion: tls.VersionTLS13}).Handshake()
		b.Close()
	}()
	hdr := make([]byte, 5)
	if _, err := io.ReadFull(a, hdr); err != nil {
		tb.Fatal(err)
	}
	body := make([]byte, int(hdr[3])<<8|int(hdr[4]))
	if _, err := io.ReadFull(a, body); err != nil {
		tb.Fatal(err)
	}
	return append(hdr, body...)
}

// fakeNode is a listener posing as a node: with a certificate, it does the
// server's half of TLS and reads what comes after; without, it reads what
// comes and answers garbage.
type fakeNode struct {
	ln   net.Listener
	mu   sync.Mutex
	conn int    // connections accepted
	app  int    // bytes read after a handshake that succeeded
	raw  []byte // without TLS: every byte read
	wg   sync.WaitGroup
}

func startFake(t *testing.T, cert *tlstest.Cert) *fakeNode {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeNode{ln: ln}
	t.Cleanup(func() {
		ln.Close()
		f.wg.Wait()
	})
	f.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f.mu.Lock()
			f.conn++
			f.mu.Unlock()
			f.wg.Go(func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				if cert == nil {
					buf := make([]byte, 4096)
					n, _ := c.Read(buf)
					f.mu.Lock()
					f.raw = append(f.raw, buf[:n]...)
					f.mu.Unlock()
					c.Write([]byte("not TLS at all\n"))
					return
				}
				tc := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{cert.TLS()},
					ClientAuth: tls.RequestClientCert})
				if tc.Handshake() != nil {
					return
				}
				n, _ := io.Copy(io.Discard, tc)
				f.mu.Lock()
				f.app += int(n)
				f.mu.Unlock()
			})
		}
	})
	return f
}

func (f *fakeNode) seen() (conns, app int, raw []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.conn, f.app, append([]byte(nil), f.raw...)
}

// TestDialRefuses: a leader told of a node whose certificate is not the
// cluster's, or names another node, or which speaks no TLS, refuses it
// at the handshake: the impostor is sent no byte of an RPC (of the log),
// only the handshake's own records.
func TestDialRefuses(t *testing.T) {
	ca, otherCA := tlstest.CA("cluster CA"), tlstest.CA("another CA")
	for _, tt := range []struct {
		name string
		cert *tlstest.Cert
		want reason
	}{
		{"a certificate from another CA", otherCA.Node("n2"), reasonUnknownCA},
		{"a certificate naming another node", ca.Node("n3"), reasonWrongNode},
		{"an expired certificate", ca.Expired(ca.Node("n2")), reasonExpired},
		{"no TLS", nil, reasonNotTLS},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n1, err := Open(Config{ID: "n1", Listen: "127.0.0.1:0", Peers: []Peer{{ID: "n1", Addr: "127.0.0.1:0"}}, Dir: t.TempDir(),
				TLS: nodeCerts(t, ca, ca.Node("n1"))})
			if err != nil {
				t.Fatal(err)
			}
			defer n1.Close()
			waitLeader(t, n1)
			s := replicated.New(context.Background(), n1.Raft(), n1.FSM(), replicated.Options{Term: n1.Raft().CurrentTerm()})
			defer s.Close()
			done := make(chan error, 1)
			s.Put(1, []byte("payroll"), func(err error) { done <- err })
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			fake := startFake(t, tt.cert)
			// A non-voter: the leader replicates its log to it, and needs
			// it for no majority.
			if err := n1.Raft().AddNonvoter("n2", raftAddr(fake.ln.Addr().String()), 0, 10*time.Second).Error(); err != nil {
				t.Fatal(err)
			}
			waitFor(t, tt.want.String()+" counted", func() bool { return refusedCounts(n1)[tt.want] > 0 })
			conns, app, raw := fake.seen()
			if conns == 0 || app != 0 {
				t.Fatalf("the impostor had %d connections and read %d bytes after a handshake", conns, app)
			}
			if tt.cert == nil {
				checkOnlyHandshake(t, raw)
			}
			if bytes.Contains(raw, []byte("payroll")) {
				t.Fatal("the impostor read the log's payload")
			}
		})
	}
}

func raftAddr(s string) raft.ServerAddress { return raft.ServerAddress(s) }

// checkOnlyHandshake checks that b is TLS handshake records and nothing
// else (no application data, no plain RPC).
func checkOnlyHandshake(t *testing.T, b []byte) {
	t.Helper()
	if len(b) == 0 {
		t.Fatal("the impostor read nothing: the leader did not dial it")
	}
	for len(b) >= 5 {
		if b[0] != 0x16 { // handshake
			t.Fatalf("a record of type %#x: %q", b[0], b)
		}
		n := int(b[3])<<8 | int(b[4])
		b = b[min(len(b), 5+n):]
	}
}

// TestRefusalLoggedOnce: a peer address's refusals of one reason are all
// counted and logged once.
func TestRefusalLoggedOnce(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	r := &refusals{log: zap.New(core), logged: make(map[string]bool)}
	for range 5 {
		r.refuse("in", "192.0.2.7", &refusal{reasonUnknownCA, errors.New("x509: unknown authority")})
	}
	r.refuse("in", "192.0.2.7", tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"})
	r.refuse("in", "192.0.2.8", &refusal{reasonUnknownCA, errors.New("x509: unknown authority")})
	if got := r.counts[reasonUnknownCA].Load(); got != 6 {
		t.Errorf("unknown_authority counted %d times, want 6", got)
	}
	if got := r.counts[reasonNotTLS].Load(); got != 1 {
		t.Errorf("not_tls counted %d times, want 1", got)
	}
	if got := logs.Len(); got != 3 {
		t.Errorf("%d lines logged, want 3 (one per address and reason)", got)
	}
}

// TestRotation: a stream layer's files replaced and reloaded, the next
// handshake shows the new certificate while a connection made before
// goes on; a damaged file is refused and the held certificate stays; a
// new CA takes effect alike.
func TestRotation(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.CA("cluster CA")
	write := func(cert *tlstest.Cert, caCerts ...*tlstest.Cert) {
		t.Helper()
		if _, _, err := cert.WriteFiles(dir, "node"); err != nil {
			t.Fatal(err)
		}
		var pem []byte
		for _, c := range caCerts {
			pem = append(pem, c.CertPEM...)
		}
		if err := os.WriteFile(filepath.Join(dir, "ca.pem"), pem, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	first := ca.Node("n1")
	write(first, ca)
	src, err := certs.New(func() (*certs.Bundle, error) {
		return certs.Load(filepath.Join(dir, "node.pem"), filepath.Join(dir, "node.key"), filepath.Join(dir, "ca.pem"))
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ref := &refusals{log: zap.NewNop(), logged: make(map[string]bool)}
	server := newStreamLayer(ln, src, 5*time.Second, ref)
	defer server.Close()
	go func() { // an echo behind the stream layer
		for {
			c, err := server.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	// The dialler: its own stream layer, with a listener it never uses.
	dialLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	clientCerts := func(ca, cert *tlstest.Cert) *streamLayer {
		return newStreamLayer(dialLn, nodeCerts(t, ca, cert), 5*time.Second, ref)
	}
	dialer := clientCerts(ca, ca.Node("n2"))
	defer dialer.Close()
	dial := func(d *streamLayer) (*tls.Conn, error) {
		c, err := d.Dial(dialAddr("n1", raftAddr(ln.Addr().String())), 5*time.Second)
		if err != nil {
			return nil, err
		}
		return c.(*tls.Conn), nil
	}
	echo := func(c net.Conn, msg string) {
		t.Helper()
		if _, err := io.WriteString(c, msg); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(msg))
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(c, got); err != nil || string(got) != msg {
			t.Fatalf("echo %q, %v", got, err)
		}
	}
	served := func(c *tls.Conn) string { return c.ConnectionState().PeerCertificates[0].SerialNumber.String() }

	old, err := dial(dialer)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	echo(old, "before")
	if served(old) != first.Cert.SerialNumber.String() {
		t.Fatal("not the first certificate")
	}

	second := ca.Node("n1")
	write(second, ca)
	if err := src.Reload(); err != nil {
		t.Fatal(err)
	}
	c2, err := dial(dialer)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if served(c2) != second.Cert.SerialNumber.String() {
		t.Fatal("a new handshake after the reload does not show the new certificate")
	}
	echo(c2, "new")
	echo(old, "old goes on")

	if err := os.WriteFile(filepath.Join(dir, "node.pem"), []byte("-----BEGIN CERTIFICATE-----\ndamaged\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := src.Reload(); err == nil {
		t.Fatal("a damaged certificate file reloaded")
	}
	c3, err := dial(dialer)
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	if served(c3) != second.Cert.SerialNumber.String() {
		t.Fatal("the damaged reload changed the certificate served")
	}

	// A new CA: its nodes get in, the old CA's are refused.
	newCA := tlstest.CA("cluster CA, renewed")
	write(newCA.Node("n1"), newCA)
	if err := src.Reload(); err != nil {
		t.Fatal(err)
	}
	renewed := clientCerts(newCA, newCA.Node("n2"))
	defer renewed.Close()
	c4, err := dial(renewed)
	if err != nil {
		t.Fatal(err)
	}
	defer c4.Close()
	echo(c4, "renewed CA")
	before := ref.counts[reasonUnknownCA].Load()
	if c5, err := dial(dialer); err == nil { // the dialler does not trust the new CA
		c5.Close()
		t.Fatal("a node of the old CA took the new CA's certificate")
	}
	if ref.counts[reasonUnknownCA].Load() == before {
		t.Error("the refusal is not counted")
	}
	echo(old, "old still goes on")
}

// TestSplitDialAddr: the address the transport hands the stream layer.
func TestSplitDialAddr(t *testing.T) {
	for _, tt := range []struct {
		in       string
		id, addr string
		ok       bool
	}{
		{"n1@127.0.0.1:7000", "n1", "127.0.0.1:7000", true},
		{"n1@[::1]:7000", "n1", "[::1]:7000", true},
		{"n1@host@x:1", "n1", "host@x:1", true},
		{"127.0.0.1:7000", "", "", false},
		{"@127.0.0.1:7000", "", "", false},
		{"n1@", "", "", false},
	} {
		id, addr, ok := splitDialAddr(tt.in)
		if id != tt.id || addr != tt.addr || ok != tt.ok {
			t.Errorf("splitDialAddr(%q) = %q, %q, %v; want %q, %q, %v", tt.in, id, addr, ok, tt.id, tt.addr, tt.ok)
		}
	}
}

// TestNames: a certificate names a node by a DNS name equal to its id,
// whatever the case, and by nothing else (not its common name).
func TestNames(t *testing.T) {
	ca := tlstest.CA("cluster CA")
	for _, tt := range []struct {
		dns  []string
		id   string
		want bool
	}{
		{[]string{"n1"}, "n1", true},
		{[]string{"N1.example", "n1"}, "n1", true},
		{[]string{"N1"}, "n1", true},
		{[]string{"n1.example"}, "n1", false},
		{nil, "n1", false},
	} {
		c := ca.IssueWith("n1", tlstest.Options{DNS: tt.dns, Client: true, Server: true})
		if got := names(c.Cert, tt.id); got != tt.want {
			t.Errorf("names(%q, %q) = %v, want %v", tt.dns, tt.id, got, tt.want)
		}
	}
}
