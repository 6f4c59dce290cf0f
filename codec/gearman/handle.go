package gearman

import (
	"os"
	"strconv"
)

// Handles turns job ids into gearmand-style job handles ("H:host:N") and
// back. Every frontend that shows a job's handle (the Gearman port,
// gearmand's HTTP protocol) formats it here, so a handle from one is good
// on the other.
type Handles struct {
	prefix []byte // "H:host:" — the job handle prefix plus the colon
}

// NewHandles makes handles "<prefix>:<id>"; an empty prefix is gearmand's
// default, "H:<hostname>" (see DefaultHandlePrefix).
func NewHandles(prefix string) Handles {
	if prefix == "" {
		prefix = DefaultHandlePrefix()
	}
	return Handles{prefix: []byte(prefix + ":")}
}

// DefaultHandlePrefix is gearmand's job handle prefix, "H:<hostname>"
// ("H:localhost" if the host has no name).
func DefaultHandlePrefix() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return "H:" + host
}

// Prefix is what every handle starts with: the prefix and its colon. The
// caller must not modify it.
func (h Handles) Prefix() []byte { return h.prefix }

// Append appends the handle of job id to dst.
func (h Handles) Append(dst []byte, id uint64) []byte {
	dst = append(dst, h.prefix...)
	return strconv.AppendUint(dst, id, 10)
}

// Parse returns the id in a handle of ours; ok is false for anything else.
func (h Handles) Parse(b []byte) (id uint64, ok bool) {
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
