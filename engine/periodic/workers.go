package periodic

import (
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
	ss := s.loop.Sessions()
	var fns []string
	for i := len(ss) - 1; i >= 0; i-- {
		cn := ss[i].(*conn)
		w := cn.workerRef()
		if w == nil {
			continue // a client, or a connection before its handshake
		}
		fns = w.Abilities(fns[:0])
		dst = workerline.Append(dst, cn.Fd(), cn.peer, "", fns)
	}
	return dst
}

// workerRef returns the connection's worker, nil before a worker's
// handshake, for another goroutine's listing.
func (cn *conn) workerRef() *sched.Worker {
	cn.Lock()
	defer cn.Unlock()
	return cn.worker
}
