// Package workerline is how every protocol's workers are listed: one
// record per worker, whatever its protocol (Worker), and how a listing
// names a connection's peer. Gearman's "workers" admin command writes
// them in gearmand's format; the operator endpoints show them too.
package workerline

import (
	"net"
	"strconv"
	"time"

	"switchyard/sched"
)

// Worker is one worker as a listing shows it.
type Worker struct {
	// FD is its connection's descriptor, -1 for a worker with no
	// connection of its own to the server (a controller's, a MemoDB one).
	FD int
	// Peer names where it is (see Peer): its IP, unix:PATH, or the
	// protocol for a worker with no connection of its own.
	Peer string
	// ID is its client id ("" for none): SET_CLIENT_ID, or worker-N for a
	// numbered worker.
	ID    string
	Funcs []string
	// Protocol names the protocol, for the operator endpoints' list
	// (the caller that gathers every protocol's fills it in).
	Protocol string
	// Sched is its scheduler worker, for the jobs it holds and its idle
	// time; nil for a connection that is no worker (a client).
	Sched *sched.Worker
	// Bytes is what its connection makes the server hold now: replies
	// not yet read, a partial request (its share of the memory budget);
	// 0 without a budget or a connection of its own.
	Bytes int64
	// Heard is when it last sent anything, for a worker known by a name
	// rather than a connection (a dwork host), whose silence is what can
	// end it; zero: not tracked.
	Heard time.Time
}

// Numbered is the ID of a worker known by a number (worker-N).
func Numbered(n uint64) string { return "worker-" + strconv.FormatUint(n, 10) }

// Peer is how a listing names a connection's peer: its IP, or for a unix
// socket the peer's name, or the socket it came in on (local) if the peer
// has none; "-" if unknown.
func Peer(remote, local net.Addr) string {
	switch a := remote.(type) {
	case *net.TCPAddr:
		return a.IP.String()
	case *net.UnixAddr:
		if l, ok := local.(*net.UnixAddr); ok && (a.Name == "" || a.Name == "@") { // an unbound peer
			return "unix:" + l.Name
		}
		return "unix:" + a.Name
	case nil:
		return "-"
	}
	return remote.String()
}
