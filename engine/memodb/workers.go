package memodb

import (
	"cmp"
	"slices"
	"strconv"

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
	ws := make([]*worker, 0, len(s.workers))
	for _, w := range s.workers {
		ws = append(ws, w)
	}
	s.mu.Unlock()
	slices.SortFunc(ws, func(a, b *worker) int { return cmp.Compare(b.key, a.key) })
	var fns []string
	var id []byte
	for _, w := range ws {
		fns = w.sw.Abilities(fns[:0])
		id = strconv.AppendUint(append(id[:0], "worker-"...), uint64(w.key), 10)
		dst = workerline.Append(dst, -1, "memodb", id, fns)
	}
	return dst
}
