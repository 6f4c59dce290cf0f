// Package workerline writes the lines of Gearman's "workers" admin
// listing, which every protocol's workers appear in: gearmand's format,
// "FD IP CLIENT-ID : FUNC ...", that gearadmin and monitoring tools parse.
package workerline

import (
	"net"
	"strconv"
)

// Append appends one line: fd (-1 for a worker with no connection of its
// own), the peer, the client id ("-" if empty) and the functions.
func Append[ID ~string | ~[]byte](dst []byte, fd int, peer string, id ID, funcs []string) []byte {
	dst = strconv.AppendInt(dst, int64(fd), 10)
	dst = append(dst, ' ')
	dst = append(dst, peer...)
	dst = append(dst, ' ')
	if len(id) == 0 {
		dst = append(dst, '-')
	} else {
		dst = append(dst, id...)
	}
	dst = append(dst, " :"...)
	for _, f := range funcs {
		dst = append(dst, ' ')
		dst = append(dst, f...)
	}
	return append(dst, '\n')
}

// AppendNumbered appends the line of a worker with no connection of its
// own to the server (a controller's, a MemoDB one): fd -1, and worker-N
// for its client id.
func AppendNumbered(dst []byte, peer string, n uint64, funcs []string) []byte {
	var b [32]byte
	return Append(dst, -1, peer, strconv.AppendUint(append(b[:0], "worker-"...), n, 10), funcs)
}

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
