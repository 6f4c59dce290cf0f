package memodb

import (
	"cmp"
	"maps"
	"slices"

	"switchyard/engine/workerline"
)

// ListWorkers lists every MemoDB worker known, newest first (workerline):
// the scheduler's worker counts take in every protocol's workers, and so
// do the listings. A MemoDB worker has no connection of its own (its
// requests may come on any of a socket's pipes): FD -1, peer "memodb",
// and worker-ID, ID the number its 4-byte id holds.
func (s *Server) ListWorkers() []workerline.Worker {
	s.mu.Lock()
	ws := slices.Collect(maps.Values(s.workers))
	s.mu.Unlock()
	slices.SortFunc(ws, func(a, b *worker) int { return cmp.Compare(b.key, a.key) })
	out := make([]workerline.Worker, 0, len(ws))
	for _, w := range ws {
		out = append(out, workerline.Worker{FD: -1, Peer: "memodb", ID: workerline.Numbered(uint64(w.key)), Funcs: w.sw.Abilities(nil), Sched: w.sw})
	}
	return out
}
