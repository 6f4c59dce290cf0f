package gearman

import (
	"bytes"
	"cmp"
	"os"
	"slices"
	"strconv"

	codec "switchyard/codec/gearman"
	"switchyard/engine/certs"
	"switchyard/engine/workerline"
	"switchyard/sched"
)

// gearmand's admin error lines.
const (
	errUnknownCommand = "ERR UNKNOWN_COMMAND Unknown+server+command"
	errInvalidArgs    = "ERR INVALID_ARGUMENTS An+incomplete+set+of+arguments+was+sent+to+this+command+"
	errShowArgs       = "ERR UNKNOWN_SHOW_ARGUMENTS\r\n"
	errUnknownJob     = "ERR UNKNOWN_JOB\r\n"
	errUnknownError   = "ERR UNKNOWN_ERROR\r\n"
	errFuncBusy       = "ERR there are still connected workers or executing clients\r\n"
	errFuncNotFound   = "ERR function not found\r\n"
	replyOK           = "OK\r\n"
)

// admin answers one text command, byte for byte as gearmand 1.1.20 does:
// listings and "OK <value>" lines end in "\n", OK/ERR lines in "\r\n".
func (cn *conn) admin(p *codec.Packet) {
	w := p.Words[:p.NWords]
	word := func(i int) []byte {
		if i < len(w) {
			return w[i]
		}
		return nil
	}
	is := func(b []byte, s string) bool { return len(b) == len(s) && bytes.EqualFold(b, []byte(s)) }
	cmd := word(0)
	switch {
	case is(cmd, "workers"):
		cn.list(listWorkers)
	case is(cmd, "status"):
		cn.list(listStatus)
	case is(cmd, "prioritystatus"):
		cn.list(listPriority)
	case is(cmd, "show") && len(w) > 1:
		switch {
		case len(w) == 2 && is(w[1], "jobs"):
			cn.list(listJobs)
		case len(w) == 3 && is(w[1], "unique") && is(w[2], "jobs"):
			cn.list(listUnique)
		default:
			cn.Out = append(cn.Out, errShowArgs...)
		}
	case is(cmd, "cancel") && len(w) >= 3:
		if len(w) != 3 || !is(w[1], "job") {
			cn.Out = append(cn.Out, errUnknownError...)
			break
		}
		id, ok := cn.srv.handles.Parse(w[2])
		if !ok || cn.srv.sched.Cancel(id) != nil {
			cn.Out = append(cn.Out, errUnknownJob...)
			break
		}
		cn.Out = append(cn.Out, replyOK...)
	case is(cmd, "create"):
		if len(w) != 3 || !is(w[1], "function") {
			cn.Out = appendInvalidArgs(cn.Out, "create")
			break
		}
		cn.srv.sched.CreateFunc(w[2])
		cn.Out = append(cn.Out, replyOK...)
	case is(cmd, "drop"):
		if len(w) != 3 || !is(w[1], "function") {
			cn.Out = appendInvalidArgs(cn.Out, "drop")
			break
		}
		switch cn.srv.sched.DropFunc(w[2]) {
		case nil:
			cn.Out = append(cn.Out, replyOK...)
		case sched.ErrNoFunction:
			cn.Out = append(cn.Out, errFuncNotFound...)
		default:
			cn.Out = append(cn.Out, errFuncBusy...)
		}
	case is(cmd, "maxqueue"):
		if len(w) < 2 || len(w) > 5 {
			cn.Out = appendInvalidArgs(cn.Out, "maxqueue")
			break
		}
		// One number sets all three priorities; several set high, normal,
		// low in turn. Like gearmand's atoi, junk and negatives mean 0 = unlimited.
		var max [3]int
		if len(w) == 3 {
			n := atoi(w[2])
			max = [3]int{n, n, n}
		} else {
			for i := 2; i < len(w); i++ {
				max[i-2] = atoi(w[i])
			}
		}
		cn.srv.sched.SetMaxQueue(w[1], max)
		cn.Out = append(cn.Out, replyOK...)
	case is(cmd, "getpid"):
		cn.Out = append(cn.Out, "OK "...)
		cn.Out = strconv.AppendInt(cn.Out, int64(os.Getpid()), 10)
		cn.Out = append(cn.Out, '\n')
	case is(cmd, "verbose"):
		cn.Out = append(cn.Out, "OK "...)
		cn.Out = append(cn.Out, cn.srv.cfg.Verbose...)
		cn.Out = append(cn.Out, '\n')
	case is(cmd, "version"):
		cn.Out = append(cn.Out, "OK "...)
		cn.Out = append(cn.Out, cn.srv.cfg.Version...)
		cn.Out = append(cn.Out, '\n')
	case cn.srv.cfg.Commands[string(bytes.ToLower(cmd))] != nil:
		f := cn.srv.cfg.Commands[string(bytes.ToLower(cmd))]
		args := make([]string, len(w)-1)
		for i := range args {
			args[i] = string(w[i+1])
		}
		caller := cn.caller()
		cn.offLoop(func() []byte { return []byte(f(caller, args)) })
	case is(cmd, "shutdown") && len(w) <= 2 && cn.srv.cfg.Shutdown != nil:
		// gearmand 1.1.20 dropped this command (so, unless enabled, it is
		// unknown here too: anyone who reaches the port could stop the
		// server); older gearmand and the protocol document have it.
		graceful := len(w) == 2 && is(w[1], "graceful")
		if len(w) == 2 && !graceful {
			cn.Out = append(cn.Out, errUnknownError...)
			break
		}
		cn.Out = append(cn.Out, replyOK...)
		cn.srv.shutdown(graceful)
	default:
		cn.Out = append(cn.Out, errUnknownCommand...)
		cn.Out = append(cn.Out, cmd...)
		cn.Out = append(cn.Out, "\r\n"...)
	}
}

// caller is who the connection is, for Config.Commands.
func (cn *conn) caller() Caller {
	c := Caller{Remote: cn.ip}
	if cn.tls != nil {
		c.Cert, _ = certs.VerifiedClient(cn.tls.ConnectionState())
	}
	return c
}

func appendInvalidArgs(dst []byte, cmd string) []byte {
	dst = append(dst, errInvalidArgs...)
	dst = append(dst, cmd...)
	return append(dst, "\r\n"...)
}

func atoi(b []byte) int {
	n, err := strconv.Atoi(string(b))
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// listing is an admin command that lists something the size of the server.
type listing uint8

const (
	listWorkers listing = iota
	listStatus
	listPriority
	listJobs
	listUnique
)

// inlineLines is the largest listing answered on the event loop, in under
// a millisecond; larger ones are built on a goroutine of their own so that
// the loop's other connections do not wait.
const inlineLines = 2048

// list answers a listing command: at once if it is small, else from a
// goroutine. Meanwhile the connection reads no further commands (see
// parse), so pipelined commands are answered after the listing, in order;
// the replies before it were written at the end of this event, and
// traffic writes the listing once it is delivered.
func (cn *conn) list(l listing) {
	s := cn.srv
	inline := inlineLines
	h := s.hooks.Load()
	if h != nil {
		inline = h.inline
	}
	if s.lines(l) <= inline {
		cn.Out = s.appendListing(cn.Out, l)
		return
	}
	cn.offLoop(func() []byte {
		if h != nil && h.building != nil {
			h.building()
		}
		return s.appendListing(nil, l)
	})
}

// offLoop builds a reply on a goroutine of its own, for what would hold
// the event loop too long (a big listing, a cluster change), and writes it
// once built (gnetloop.Conn.OffLoop: the connection reads nothing more
// meanwhile, so replies stay in order).
func (cn *conn) offLoop(build func() []byte) {
	cn.OffLoop(func(send func([]byte) bool) bool {
		send(build())
		return true
	})
}

// testHooks let tests steer what is answered off the loop (Server.hooks;
// nil in production): the package's one style of test hook.
type testHooks struct {
	inline   int    // replaces inlineLines
	building func() // runs on a listing's goroutine before it builds
}

// lines is about how many lines l's reply has: what it costs to build.
func (s *Server) lines(l listing) int {
	switch l {
	case listWorkers:
		return s.Conns()
	case listStatus, listPriority:
		return s.sched.NumFuncs()
	default:
		return s.sched.Len()
	}
}

func (s *Server) appendListing(dst []byte, l listing) []byte {
	switch l {
	case listWorkers:
		return s.appendWorkers(dst)
	case listStatus, listPriority:
		return s.appendStatus(dst, l == listPriority)
	default:
		return s.appendJobs(dst, l == listUnique)
	}
}

// appendWorkers lists every connection, newest first as gearmand does with
// one thread, then the other protocols' workers (Config.MoreWorkers, each
// protocol's newest first): "FD IP CLIENT-ID : FUNC ...", then ".".
func (s *Server) appendWorkers(dst []byte) []byte {
	dst = s.appendWorkersOf(dst, s.snapshot())
	if s.cfg.MoreWorkers != nil {
		more := s.cfg.MoreWorkers()
		for i := range more {
			dst = appendWorkerLine(dst, &more[i])
		}
	}
	return append(dst, ".\n"...)
}

// appendWorkersOf appends the lines of conns (ordered by descriptor),
// newest first.
func (s *Server) appendWorkersOf(dst []byte, conns []*conn) []byte {
	var w workerline.Worker
	for i := len(conns) - 1; i >= 0; i-- {
		c := conns[i]
		w = workerline.Worker{FD: c.Fd(), Peer: c.ip, ID: string(c.id()), Funcs: w.Funcs[:0]}
		if wr := c.workerRef(); wr != nil {
			w.Funcs = wr.Abilities(w.Funcs)
		}
		dst = appendWorkerLine(dst, &w)
	}
	return dst
}

// ListConns lists every connection, workers and clients, newest first,
// as "workers" does, for the operator endpoints: with its scheduler
// worker (nil for a client) and what it makes the server hold.
func (s *Server) ListConns() []workerline.Worker {
	conns := s.snapshot()
	out := make([]workerline.Worker, 0, len(conns))
	for i := len(conns) - 1; i >= 0; i-- {
		c := conns[i]
		w := workerline.Worker{FD: c.Fd(), Peer: c.ip, ID: string(c.id()), Protocol: "gearman", Bytes: c.Hold().Held()}
		if wr := c.workerRef(); wr != nil {
			w.Sched, w.Funcs = wr, wr.Abilities(nil)
		}
		out = append(out, w)
	}
	return out
}

// appendWorkerLine is one line of "workers", gearmand's: the descriptor
// (-1 for a worker with no connection of its own), the peer, the client id
// ("-" if none), then the functions.
func appendWorkerLine(dst []byte, w *workerline.Worker) []byte {
	dst = strconv.AppendInt(dst, int64(w.FD), 10)
	dst = append(dst, ' ')
	dst = append(dst, w.Peer...)
	dst = append(dst, ' ')
	if w.ID == "" {
		dst = append(dst, '-')
	} else {
		dst = append(dst, w.ID...)
	}
	dst = append(dst, " :"...)
	for _, f := range w.Funcs {
		dst = append(dst, ' ')
		dst = append(dst, f...)
	}
	return append(dst, '\n')
}

// funcLine is one line of "status": the function and its bucket.
type funcLine struct {
	sched.FuncStat
	bucket uint32
}

// appendStatus writes "status" (FUNC TOTAL RUNNING WORKERS) or
// "prioritystatus" (FUNC HIGH NORMAL LOW WORKERS) in gearmand's order.
func (s *Server) appendStatus(dst []byte, byPriority bool) []byte {
	fs := make([]funcLine, 0, s.sched.NumFuncs())
	s.sched.FuncsChunked(func(c []sched.FuncStat) {
		for _, f := range c {
			fs = append(fs, funcLine{FuncStat: f, bucket: bucket(f.Name)})
		}
	})
	slices.SortFunc(fs, func(a, b funcLine) int {
		if a.bucket != b.bucket {
			return cmp.Compare(a.bucket, b.bucket)
		}
		return cmp.Compare(b.Seq, a.Seq) // newest first within a bucket
	})
	for _, f := range fs {
		dst = append(dst, f.Name...)
		if byPriority {
			for _, n := range f.Queued {
				dst = append(dst, '\t')
				dst = strconv.AppendInt(dst, int64(n), 10)
			}
		} else {
			dst = append(dst, '\t')
			dst = strconv.AppendInt(dst, int64(f.Total()), 10)
			dst = append(dst, '\t')
			dst = strconv.AppendInt(dst, int64(f.Running), 10)
		}
		dst = append(dst, '\t')
		dst = strconv.AppendInt(dst, int64(f.Workers), 10)
		dst = append(dst, '\n')
	}
	return append(dst, ".\n"...)
}

// jobLine is one line of a job listing and what it sorts by.
type jobLine struct {
	id      uint64
	unique  string // "show unique jobs" only
	bucket  uint32
	retries uint32
	bg      bool
}

// appendJobs writes "show jobs" (HANDLE RETRIES IGNORED PERSISTED) or
// "show unique jobs" (one unique per line).
func (s *Server) appendJobs(dst []byte, unique bool) []byte {
	js := make([]jobLine, 0, s.sched.Len())
	// Every handle starts with the same prefix: hash it once, and per job
	// only the digits that follow.
	prefix := hashString(0, s.handles.Prefix())
	var digits [20]byte
	s.sched.JobsChunked(func(c []sched.JobInfo) {
		for _, j := range c {
			l := jobLine{id: j.ID, retries: j.Retries, bg: j.Background}
			if unique {
				l.unique = j.Unique
				l.bucket = bucket(j.Unique)
			} else {
				l.bucket = hashBucket(hashString(prefix, strconv.AppendUint(digits[:0], j.ID, 10)))
			}
			js = append(js, l)
		}
	})
	slices.SortFunc(js, func(a, b jobLine) int {
		if a.bucket != b.bucket {
			return cmp.Compare(a.bucket, b.bucket)
		}
		return cmp.Compare(b.id, a.id) // newest first within a bucket
	})
	if !unique {
		dst = slices.Grow(dst, len(js)*(len(s.handles.Prefix())+16))
	}
	for _, j := range js {
		if unique {
			dst = append(dst, j.unique...)
			dst = append(dst, '\n')
			continue
		}
		dst = s.handles.Append(dst, j.id)
		dst = append(dst, '\t')
		dst = strconv.AppendUint(dst, uint64(j.retries), 10)
		dst = append(dst, "\t0\t"...)
		dst = append(dst, boolDigit(j.bg))
		dst = append(dst, '\n')
	}
	return append(dst, ".\n"...)
}

// bucket is where gearmand's 991-bucket hash table puts a name (Jenkins'
// one-at-a-time hash over signed chars); its listings follow bucket order,
// and scripts that diff admin output expect the same order from us.
func bucket(name string) uint32 { return hashBucket(hashString(0, name)) }

// hashString goes on with the one-at-a-time hash v over b.
func hashString[T string | []byte](v int32, b T) int32 {
	for i := 0; i < len(b); i++ {
		v += int32(int8(b[i]))
		v += v << 10
		v ^= v >> 6
	}
	return v
}

// hashBucket finishes the hash v and picks its bucket.
func hashBucket(v int32) uint32 {
	v += v << 3
	v ^= v >> 11
	v += v << 15
	u := uint32(v)
	if u == 0 {
		u = 1
	}
	return u % 991
}
