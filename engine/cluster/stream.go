package cluster

// The Raft transport's stream layer: plain TCP for a loopback cluster,
// and with Config.TLS mutual TLS 1.3 between the nodes, every byte of
// every RPC (the log, snapshots, votes) inside it.
//
// Both ends verify the other's certificate against the cluster's CA file
// (--cluster-tls-ca), and a certificate must name a node: a DNS name
// (subject alternative name) equal to the node's id. hashicorp/raft's
// RPCs do not say at the stream layer who the other end claims to be, so
// the two directions bind the id differently:
//
//   - Dialling, a node knows whom it dials: transport.go hands the stream
//     layer the configuration's server id with the address
//     ("ID@HOST:PORT", dialAddr), and the server's certificate must name
//     that id. A node added with a certificate from another CA, or with
//     one naming another node, is never sent a byte of an RPC: the
//     handshake fails first.
//   - Accepting, the client's certificate must name a member of this
//     node's latest configuration (while it has none, any name: a node
//     waiting to be added is dialled by a leader it cannot know yet). A
//     removed node is refused from then on. Within the configuration a
//     member's connection is not bound to the id its RPCs carry: the
//     members trust each other alike, and the certificates keep out
//     whoever is not one.
//
// A peer that fails a check gets the TLS alert and nothing else (a peer
// that does not speak TLS, not even that); the refusal is counted by
// reason and logged once per peer address and reason. Handshakes run off
// raft's accept loop, each within a deadline, at most maxHandshakes at a
// time, so a peer that stalls holds a goroutine for that long only.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"switchyard/engine/certs"
)

// DefaultHandshakeTimeout bounds a TLS handshake between nodes.
const DefaultHandshakeTimeout = 5 * time.Second

// maxHandshakes bounds the handshakes an acceptor runs at a time; more
// connections wait in the kernel's accept queue.
const maxHandshakes = 64

// reason is why a peer was refused, a label of
// switchyard_cluster_refused_total.
type reason int

const (
	reasonNotTLS    reason = iota // it did not speak TLS (plain TCP, garbage)
	reasonNoCert                  // no certificate
	reasonUnknownCA               // a certificate the cluster's CA did not issue
	reasonExpired                 // expired, or not valid yet
	reasonBadCert                 // another fault of the certificate (its usage, its form)
	reasonWrongNode               // a valid certificate that names another node, or none of the members
	reasonTimeout                 // the handshake did not finish in time
	reasonHandshake               // any other handshake failure (an old TLS version, an alert from the peer)
	numReasons
)

var reasonNames = [numReasons]string{"not_tls", "no_certificate", "unknown_authority", "expired", "bad_certificate",
	"wrong_node", "timeout", "handshake"}

func (r reason) String() string { return reasonNames[r] }

// refusal is a verification's error, with its reason.
type refusal struct {
	why reason
	err error
}

func (r *refusal) Error() string { return r.err.Error() }
func (r *refusal) Unwrap() error { return r.err }

// classify names the reason of a failed handshake.
func classify(err error) reason {
	var rf *refusal
	var rh tls.RecordHeaderError
	var ne net.Error
	switch {
	case errors.As(err, &rf):
		return rf.why
	case errors.As(err, &rh):
		return reasonNotTLS
	case errors.As(err, &ne) && ne.Timeout(), errors.Is(err, context.DeadlineExceeded):
		return reasonTimeout
	}
	return reasonHandshake
}

// refusals counts the refused peers and logs each peer address's first
// refusal of each reason.
type refusals struct {
	log    *zap.Logger
	counts [numReasons]atomic.Uint64

	mu     sync.Mutex
	logged map[string]bool // peer address and reason
}

// maxLogged bounds the addresses remembered as logged; past it, the set
// starts again (a peer that keeps trying is logged again, now and then).
const maxLogged = 4096

func (r *refusals) refuse(dir, peer string, err error) {
	why := classify(err)
	r.counts[why].Add(1)
	key := peer + " " + why.String()
	r.mu.Lock()
	first := !r.logged[key]
	if first {
		if len(r.logged) >= maxLogged {
			clear(r.logged)
		}
		r.logged[key] = true
	}
	r.mu.Unlock()
	if first {
		r.log.Warn("cluster: a peer refused (logged once per address and reason)", zap.String("direction", dir),
			zap.String("peer", peer), zap.String("reason", why.String()), zap.Error(err))
	}
}

// streamLayer is raft.StreamLayer over TCP, with TLS when certs is set.
type streamLayer struct {
	ln      net.Listener
	certs   *certs.Source // nil: plain TCP
	timeout time.Duration
	ref     *refusals
	raft    atomic.Pointer[raft.Raft] // the configuration's members, once raft runs
	server  *tls.Config

	conns chan net.Conn // accepted and verified
	sem   chan struct{} // one token per handshake in flight
	quit  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup

	mu          sync.Mutex
	handshaking map[net.Conn]bool // closed by Close
}

func newStreamLayer(ln net.Listener, src *certs.Source, timeout time.Duration, ref *refusals) *streamLayer {
	s := &streamLayer{ln: ln, certs: src, timeout: timeout, ref: ref, conns: make(chan net.Conn),
		sem: make(chan struct{}, maxHandshakes), quit: make(chan struct{}), handshaking: make(map[net.Conn]bool)}
	if src == nil {
		return s
	}
	s.server = &tls.Config{
		MinVersion: tls.VersionTLS13,
		// Asked for, and checked in verifyClient, so that each fault has
		// its reason.
		ClientAuth: tls.RequestClientCert,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return &src.Get().Cert, nil
		},
		VerifyConnection:       s.verifyClient,
		SessionTicketsDisabled: true,
	}
	s.wg.Add(1)
	go s.acceptLoop()
	return s
}

// Accept returns the next connection whose peer passed every check.
func (s *streamLayer) Accept() (net.Conn, error) {
	if s.certs == nil {
		return s.ln.Accept()
	}
	select {
	case c := <-s.conns:
		return c, nil
	case <-s.quit:
		return nil, net.ErrClosed
	}
}

// Addr is the listener's address, the one the other nodes dial.
func (s *streamLayer) Addr() net.Addr { return s.ln.Addr() }

// Close stops accepting, cuts the handshakes in flight, and waits for
// their goroutines.
func (s *streamLayer) Close() error {
	var err error
	s.once.Do(func() {
		close(s.quit)
		err = s.ln.Close()
		s.mu.Lock()
		for c := range s.handshaking {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return err
}

// Handshaking is the number of handshakes in flight.
func (s *streamLayer) Handshaking() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.handshaking)
}

func (s *streamLayer) acceptLoop() {
	defer s.wg.Done()
	var backoff time.Duration
	for {
		select {
		case s.sem <- struct{}{}:
		case <-s.quit:
			return
		}
		c, err := s.ln.Accept()
		if err != nil {
			<-s.sem
			select {
			case <-s.quit:
				return
			default:
			}
			// Out of descriptors and the like: wait, then try again.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-s.quit:
				t.Stop()
				return
			}
			continue
		}
		backoff = 0
		s.mu.Lock()
		select {
		case <-s.quit:
			s.mu.Unlock()
			c.Close()
			<-s.sem
			return
		default:
		}
		s.handshaking[c] = true
		s.wg.Add(1)
		s.mu.Unlock()
		go s.handshake(c)
	}
}

// handshake verifies one accepted connection and hands it to Accept.
func (s *streamLayer) handshake(c net.Conn) {
	defer s.wg.Done()
	tc := tls.Server(c, s.server)
	c.SetDeadline(time.Now().Add(s.timeout))
	err := tc.Handshake()
	c.SetDeadline(time.Time{})
	s.mu.Lock()
	delete(s.handshaking, c)
	s.mu.Unlock()
	<-s.sem
	if err != nil {
		select {
		case <-s.quit: // cut by Close: not the peer's fault
		default:
			s.ref.refuse("in", hostOf(c.RemoteAddr()), err)
		}
		c.Close()
		return
	}
	select {
	case s.conns <- tc:
	case <-s.quit:
		c.Close()
	}
}

// hostOf is an address without its port: a peer dials from a new port
// each time.
func hostOf(a net.Addr) string {
	if host, _, err := net.SplitHostPort(a.String()); err == nil {
		return host
	}
	return a.String()
}

// verifyClient is the acceptor's check of a dialling node.
func (s *streamLayer) verifyClient(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return &refusal{reasonNoCert, errors.New("the peer sent no certificate")}
	}
	leaf, err := verifyChain(cs.PeerCertificates, s.certs.Get().Pool, x509.ExtKeyUsageClientAuth)
	if err != nil {
		return err
	}
	members := s.members()
	if len(members) == 0 {
		if len(leaf.DNSNames) == 0 {
			return &refusal{reasonWrongNode, errors.New("its certificate names no node (no DNS name)")}
		}
		return nil // no configuration yet: a node waiting to be added
	}
	for _, m := range members {
		if names(leaf, m) {
			return nil
		}
	}
	return &refusal{reasonWrongNode, fmt.Errorf("its certificate names %q, not a member of the cluster (%s)",
		leaf.DNSNames, strings.Join(members, ", "))}
}

// members are the ids of the latest configuration's servers; none before
// raft runs, or while this node has no configuration.
func (s *streamLayer) members() []string {
	r := s.raft.Load()
	if r == nil {
		return nil
	}
	f := r.GetConfiguration()
	if f.Error() != nil {
		return nil
	}
	var out []string
	for _, srv := range f.Configuration().Servers {
		out = append(out, string(srv.ID))
	}
	return out
}

// Dial connects to a node, addressed as "ID@HOST:PORT" (dialAddr): with
// TLS, its certificate must name ID.
func (s *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	id, addr, ok := splitDialAddr(string(address))
	if !ok {
		if s.certs != nil {
			return nil, fmt.Errorf("cluster: dial %s: no node id to check its certificate against", address)
		}
		addr = string(address)
	}
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil || s.certs == nil {
		return c, err
	}
	tc := tls.Client(c, s.client(id))
	c.SetDeadline(time.Now().Add(min(timeout, s.timeout)))
	if err := tc.Handshake(); err != nil {
		c.Close()
		s.ref.refuse("out", id+"@"+addr, err)
		return nil, fmt.Errorf("cluster: TLS with %s at %s: %w", id, addr, err)
	}
	c.SetDeadline(time.Time{})
	return tc, nil
}

// client is the dialler's configuration for node id.
func (s *streamLayer) client(id string) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		ServerName: id,
		// The chain and the name are checked in VerifyConnection, against
		// the CA file held now and the id dialled, not a host name.
		InsecureSkipVerify: true,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return &s.certs.Get().Cert, nil
		},
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return &refusal{reasonNoCert, errors.New("the peer sent no certificate")}
			}
			leaf, err := verifyChain(cs.PeerCertificates, s.certs.Get().Pool, x509.ExtKeyUsageServerAuth)
			if err != nil {
				return err
			}
			if !names(leaf, id) {
				return &refusal{reasonWrongNode, fmt.Errorf("its certificate names %q, not %q", leaf.DNSNames, id)}
			}
			return nil
		},
	}
}

// names tells whether a certificate names node id: a DNS name equal to
// it, without regard to case, as DNS names compare.
func names(c *x509.Certificate, id string) bool {
	return slices.ContainsFunc(c.DNSNames, func(n string) bool { return strings.EqualFold(n, id) })
}

// verifyChain verifies a peer's chain (leaf first) against roots, for
// usage, and returns the leaf.
func verifyChain(chain []*x509.Certificate, roots *x509.CertPool, usage x509.ExtKeyUsage) (*x509.Certificate, error) {
	opts := x509.VerifyOptions{Roots: roots, Intermediates: x509.NewCertPool(), KeyUsages: []x509.ExtKeyUsage{usage}}
	for _, c := range chain[1:] {
		opts.Intermediates.AddCert(c)
	}
	if _, err := chain[0].Verify(opts); err != nil {
		var ua x509.UnknownAuthorityError
		var ci x509.CertificateInvalidError
		switch {
		case errors.As(err, &ua):
			return nil, &refusal{reasonUnknownCA, err}
		case errors.As(err, &ci) && ci.Reason == x509.Expired:
			return nil, &refusal{reasonExpired, err}
		}
		return nil, &refusal{reasonBadCert, err}
	}
	return chain[0], nil
}

// dialAddr is the address transport hands the stream layer: the node's id
// and its Raft address.
func dialAddr(id raft.ServerID, target raft.ServerAddress) raft.ServerAddress {
	return raft.ServerAddress(string(id) + "@" + string(target))
}

// splitDialAddr takes dialAddr's address apart. A node id holds no '@'
// (ValidID), so the first one ends it.
func splitDialAddr(s string) (id, addr string, ok bool) {
	id, addr, ok = strings.Cut(s, "@")
	if !ok || id == "" || addr == "" {
		return "", "", false
	}
	return id, addr, true
}

// ValidID checks a node id: it names the node in dialled addresses
// (dialAddr) and in certificates, so it is not empty and holds no '@',
// ',' or white space.
func ValidID(id string) error {
	if id == "" || strings.ContainsAny(id, "@, \t\r\n") {
		return fmt.Errorf("cluster: node id %q: want a name without '@', ',' or spaces", id)
	}
	return nil
}
