package periodic

import (
	"cmp"
	"maps"
	"slices"

	"switchyard/engine/workerline"
	"switchyard/sched"
)

// AppendWorkers appends a line for every Periodic worker connection to
// dst, in the form of Gearman's "workers" admin listing (FD IP CLIENT-ID :
// FUNC ...), highest fd first as Gearman's own lines: the scheduler's
// worker counts take in every protocol's workers, and so does that
// listing. Periodic has no client id ("-"); a unix socket's peer is
// "unix:PATH" of the socket (workerline.Peer).
func (s *Server) AppendWorkers(dst []byte) []byte {
	s.mu.Lock()
	ws := slices.Collect(maps.Keys(s.conns))
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
