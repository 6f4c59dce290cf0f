// Package gearman is the Gearman wire format as gearmand 1.1.20 speaks it:
// bytes to packets and packets to bytes, with no sockets and no scheduler.
//
// # Binary packets
//
// Every binary packet is a 12-byte header followed by a body:
//
//	4 bytes  magic  "\x00REQ" (to the server) or "\x00RES" (from the server)
//	4 bytes  type   big-endian; 1..42 (see [Type])
//	4 bytes  size   big-endian length of the body
//	size     body   the arguments, separated by single NUL bytes
//
// Each type carries a fixed number of arguments ([Type.Argc]). The first
// Argc()-1 are terminated by a NUL; the last runs to the end of the body and
// may itself contain NULs (it is the opaque payload of SUBMIT_JOB,
// WORK_COMPLETE, ...). Types that carry no arguments ignore their body.
//
// # Text (administrative) lines
//
// A connection whose next byte is not NUL is speaking the line protocol used
// by gearadmin and telnet: a line ending in "\n" or "\r\n" whose words are
// separated by spaces ("status", "workers", "maxqueue f 10", ...). Text and
// binary may be mixed on one connection; each frame is told apart by its
// first byte.
//
// # Use
//
// [Parse] reads one frame from the front of a buffer and reports how many
// bytes it used; 0 with a nil error means the frame is not complete yet. The
// arguments it returns are slices into that buffer, so parsing never copies
// or allocates; a caller copies only what it keeps. A connection, whose
// frames arrive in pieces, uses a [Parser]: it parses the same way but
// resumes a frame cut short where it stopped, so no byte is scanned again
// at each arrival. Encoders append to a
// caller's buffer ([AppendPacket], [AppendError], or [Begin] ... [End] to
// write arguments in place, e.g. with strconv.AppendUint).
package gearman
