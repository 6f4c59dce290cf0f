package ops

import (
	"cmp"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"switchyard/engine/workerline"
	"switchyard/sched"
)

// /api/connections: every protocol's connections and workers (Conns.List),
// searched, sorted and paged on the server as /api/functions is. The
// records are gathered with no event loop stopped: each protocol copies
// its list under its own short lock, and a worker's jobs are read under
// their shard's lock, one at a time, for the rows of the page only
// (unless the order needs them all).

// connJSON is one connection on a page of /api/connections.
type connJSON struct {
	Protocol string `json:"protocol"`
	FD       int    `json:"fd"` // -1: a worker with no connection of its own
	Peer     string `json:"peer"`
	ID       string `json:"id"`
	// Worker: it registered as a worker; else a client.
	Worker    bool      `json:"worker"`
	Functions []string  `json:"functions"`
	Jobs      []heldJob `json:"jobs"` // the jobs it holds
	// HeldFor is how long its longest-held job has run, seconds; null
	// when it holds none (or it is not timed).
	HeldFor num `json:"held_for"`
	// Idle is how long it has held no job, seconds; null while it holds
	// one, for a client, or when not timed.
	Idle num `json:"idle"`
	// SilentFor is how long since it last sent anything, seconds, for a
	// worker known by a name rather than a connection (a dwork host,
	// which --dwork-host-timeout takes as exited once silent that long);
	// null for the others.
	SilentFor num   `json:"silent_for"`
	Bytes     int64 `json:"bytes"` // what its connection makes the server hold
}

type heldJob struct {
	ID       uint64 `json:"id"`
	Function string `json:"function"`
	Unique   string `json:"unique"`
	For      num    `json:"for"` // seconds; null if unknown
}

type connPage struct {
	Total       int        `json:"total"` // connections that match
	Workers     int        `json:"workers"`
	Offset      int        `json:"offset"`
	Limit       int        `json:"limit"`
	Connections []connJSON `json:"connections"`
}

// connRow is a record and what the page's order needs of it.
type connRow struct {
	workerline.Worker
	order   int // in the listing: each protocol's newest first
	held    []sched.HeldJob
	heldFor time.Duration // the longest of held; -1: none
	idle    time.Duration // -1: holds a job, a client, or not timed
	read    bool          // held, heldFor read
}

func (r *connRow) readHeld() {
	if r.read {
		return
	}
	r.read, r.heldFor = true, -1
	if r.Sched == nil {
		return
	}
	r.held = r.Sched.Held(nil)
	for _, h := range r.held {
		if h.For > r.heldFor {
			r.heldFor = h.For
		}
	}
}

// connSortKeys are /api/connections's orders but the listing's.
var connSortKeys = map[string]func(a, b *connRow) int{
	"protocol":  func(a, b *connRow) int { return strings.Compare(a.Protocol, b.Protocol) },
	"peer":      func(a, b *connRow) int { return strings.Compare(a.Peer, b.Peer) },
	"id":        func(a, b *connRow) int { return strings.Compare(a.ID, b.ID) },
	"fd":        func(a, b *connRow) int { return cmp.Compare(a.FD, b.FD) },
	"functions": func(a, b *connRow) int { return cmp.Compare(len(a.Funcs), len(b.Funcs)) },
	"held_for":  func(a, b *connRow) int { return cmp.Compare(a.heldFor, b.heldFor) },
	"idle":      func(a, b *connRow) int { return cmp.Compare(a.idle, b.idle) },
	"bytes":     func(a, b *connRow) int { return cmp.Compare(a.Bytes, b.Bytes) },
}

// listConns gathers every protocol's list.
func (s *Server) listConns() []connRow {
	var rows []connRow
	for _, c := range s.conns() {
		if c.List == nil {
			continue
		}
		list := c.List()
		rows = slices.Grow(rows, len(list))
		for _, w := range list {
			if w.Protocol == "" {
				w.Protocol = c.Protocol
			}
			rows = append(rows, connRow{Worker: w, order: len(rows)})
		}
	}
	return rows
}

// matches reports whether needle (ASCII case folded) is in the record's
// protocol, peer, id or one of its functions.
func (r *connRow) matches(needle string) bool {
	if containsFold(r.Protocol, needle) || containsFold(r.Peer, needle) || containsFold(r.ID, needle) {
		return true
	}
	for _, f := range r.Funcs {
		if containsFold(f, needle) {
			return true
		}
	}
	return false
}

// serveConns is /api/connections?q=&offset=&limit=&sort=&desc=&workers=1:
// the connections whose protocol, peer, id or functions hold q, only the
// workers with workers=1, sorted by sort (protocol, peer, id, fd,
// functions, held_for, idle, bytes; none: the listing's order, each
// protocol's newest first), one page of them.
func (s *Server) serveConns(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	offset, limit := pageOf(q.Get("offset"), q.Get("limit"))
	needle, onlyWorkers := q.Get("q"), q.Get("workers") == "1"
	sortBy := q.Get("sort")
	key := connSortKeys[sortBy]
	desc := q.Get("desc") == "1"

	all := s.listConns()
	rows := all[:0]
	for i := range all {
		r := &all[i]
		if onlyWorkers && r.Sched == nil || needle != "" && !r.matches(needle) {
			continue
		}
		r.idle = -1
		if r.Sched != nil {
			r.idle = r.Sched.Idle()
		}
		rows = append(rows, *r)
	}
	if sortBy == "held_for" {
		for i := range rows {
			rows[i].readHeld()
		}
	}
	// Ties go by the listing's order, so that pages are stable; with no
	// order given, desc does nothing.
	order := func(i, j int32) int {
		a, b := &rows[i], &rows[j]
		if key != nil {
			if c := key(a, b); c != 0 {
				if desc {
					return -c
				}
				return c
			}
		}
		return cmp.Compare(a.order, b.order)
	}
	page := connPage{Total: len(rows), Offset: offset, Limit: limit, Connections: []connJSON{}}
	for i := range rows {
		if rows[i].Sched != nil {
			page.Workers++
		}
	}
	if offset < len(rows) {
		for _, i := range firstK(len(rows), offset+limit, order)[offset:] {
			r := &rows[i]
			r.readHeld()
			c := connJSON{Protocol: r.Protocol, FD: r.FD, Peer: r.Peer, ID: r.ID, Worker: r.Sched != nil,
				Functions: make([]string, 0, len(r.Funcs)), Jobs: []heldJob{}, HeldFor: unknown(r.heldFor),
				Idle: unknown(r.idle), SilentFor: num(nan), Bytes: r.Bytes}
			if !r.Heard.IsZero() {
				c.SilentFor = num(max(time.Since(r.Heard), 0).Seconds())
			}
			for _, f := range r.Funcs {
				c.Functions = append(c.Functions, labelValue(f))
			}
			for _, h := range r.held {
				for_ := unknown(h.For)
				if h.For == 0 {
					for_ = num(nan)
				}
				c.Jobs = append(c.Jobs, heldJob{ID: h.ID, Function: labelValue(h.Func), Unique: labelValue(h.Unique), For: for_})
			}
			slices.SortFunc(c.Jobs, func(a, b heldJob) int { return cmp.Compare(a.ID, b.ID) })
			page.Connections = append(page.Connections, c)
		}
	}
	writeJSON(w, &page)
}

var nan = math.NaN()

// unknown is d in seconds, null (NaN) when negative.
func unknown(d time.Duration) num {
	if d < 0 {
		return num(nan)
	}
	return num(d.Seconds())
}

// pageOf reads offset and limit: 0 and defaultLimit unless given, limit
// at most maxLimit.
func pageOf(offsetArg, limitArg string) (offset, limit int) {
	offset, _ = strconv.Atoi(offsetArg)
	offset = max(offset, 0)
	limit, err := strconv.Atoi(limitArg)
	if err != nil || limit <= 0 {
		limit = defaultLimit
	}
	return offset, min(limit, maxLimit)
}
