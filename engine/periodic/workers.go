package periodic

import (
	"cmp"
	"net"
	"slices"

	"switchyard/engine/workerline"
	"switchyard/sched"
)

// AppendWorkers appends a line for every Periodic worker connection to
// dst, in the form of Gearman's "workers" admin listing (FD IP CLIENT-ID :
// FUNC ...), highest fd first as Gearman's own lines: the scheduler's worker counts take
// in every protocol's workers, and so does that listing. Periodic has no
// client id ("-"); a unix socket's peer is "unix:PATH" of the socket.
func (s *Server) AppendWorkers(dst []byte) []byte {
	s.mu.Lock()
	ws := make([]*conn, 0, len(s.conns))
	for cn := range s.conns {
		ws = append(ws, cn)
	}
	s.mu.Unlock()
	slices.SortFunc(ws, func(a, b *conn) int { return cmp.Compare(b.fd, a.fd) })
	var fns []string
	for _, cn := range ws {
		w := cn.workerRef()
		if w == nil {
			continue // a client, or a connection before its handshake
		}
		fns = w.Abilities(fns[:0])
		dst = workerline.Append(dst, cn.fd, cn.peer, "", fns)
	}
	return dst
}

// workerRef returns the connection's worker, nil before a worker's
// handshake, for another goroutine's listing.
func (cn *conn) workerRef() *sched.Worker {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return cn.worker
}

// peerName is how a listing names a connection's peer: its IP, or the
// unix socket it came in on.
func peerName(remote, local net.Addr) string {
	switch a := remote.(type) {
	case *net.TCPAddr:
		return a.IP.String()
	case *net.UnixAddr:
		if l, ok := local.(*net.UnixAddr); ok && (a.Name == "" || a.Name == "@") { // an unbound peer
			return "unix:" + l.Name
		}
		return "unix:" + a.Name
	case nil:
		return "-"
	}
	return remote.String()
}
