package periodic

import (
	"switchyard/engine/workerline"
	"switchyard/sched"
)

// ListWorkers lists every Periodic worker connection, highest descriptor
// first
// (workerline): the scheduler's worker counts take in every protocol's
// workers, and so do the listings. Periodic has no client id; a unix
// socket's peer is "unix:PATH" of the socket (workerline.Peer).
func (s *Server) ListWorkers() []workerline.Worker {
	var out []workerline.Worker
	ss := s.loop.Sessions()
	for i := len(ss) - 1; i >= 0; i-- {
		cn := ss[i].(*conn)
		w := cn.workerRef()
		if w == nil {
			continue // a client, or a connection before its handshake
		}
		out = append(out, workerline.Worker{FD: cn.Fd(), Peer: cn.peer, Funcs: w.Abilities(nil), Sched: w, Bytes: cn.Hold().Held()})
	}
	return out
}

// workerRef returns the connection's worker, nil before a worker's
// handshake, for another goroutine's listing.
func (cn *conn) workerRef() *sched.Worker {
	cn.Lock()
	defer cn.Unlock()
	return cn.worker
}
