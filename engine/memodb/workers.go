package memodb

import (
	"cmp"
	"maps"
	"slices"

	"switchyard/engine/workerline"
)

// AppendWorkers appends a line for every MemoDB worker known to dst, in
// the form of Gearman's "workers" admin listing, newest first: the
// scheduler's worker counts take in every protocol's workers, and so does
// that listing. A MemoDB worker has no connection of its own (its requests
// may come on any of a socket's pipes), so its line is "-1 memodb
// worker-ID : SERVICE ...", ID the number its 4-byte id holds.
func (s *Server) AppendWorkers(dst []byte) []byte {
	s.mu.Lock()
	ws := slices.Collect(maps.Values(s.workers))
	s.mu.Unlock()
	slices.SortFunc(ws, func(a, b *worker) int { return cmp.Compare(b.key, a.key) })
	var fns []string
	for _, w := range ws {
		fns = w.sw.Abilities(fns[:0])
		dst = workerline.AppendNumbered(dst, "memodb", uint64(w.key), fns)
	}
	return dst
}
