package gearman

import "strconv"

// handles turns job ids into gearmand-style handles ("H:host:N") and back.
type handles struct {
	prefix []byte // "H:host:" — the job handle prefix plus the colon
}

func newHandles(prefix string) handles {
	return handles{prefix: []byte(prefix + ":")}
}

func (h handles) append(dst []byte, id uint64) []byte {
	dst = append(dst, h.prefix...)
	return strconv.AppendUint(dst, id, 10)
}

// parse returns the id in a handle of ours; ok is false for anything else.
func (h handles) parse(b []byte) (id uint64, ok bool) {
	if len(b) <= len(h.prefix) || string(b[:len(h.prefix)]) != string(h.prefix) {
		return 0, false
	}
	b = b[len(h.prefix):]
	if len(b) > 20 || (len(b) > 1 && b[0] == '0') {
		return 0, false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if id > (^uint64(0)-d)/10 {
			return 0, false
		}
		id = id*10 + d
	}
	return id, true
}
