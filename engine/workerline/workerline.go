// Package workerline writes the lines of Gearman's "workers" admin
// listing, which every protocol's workers appear in: gearmand's format,
// "FD IP CLIENT-ID : FUNC ...", that gearadmin and monitoring tools parse.
package workerline

import "strconv"

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
