// Package periodic is the wire format of the Periodic job protocol as its
// real server, Lupino/periodic v0.1.7, and client, Lupino/go-periodic, speak
// it: bytes to frames, messages and jobs and back, with no sockets and no
// scheduler.
//
// # Frames
//
// Every frame is an 8-byte header and a payload:
//
//	4 bytes  magic    "\x00REQ" (to the server) or "\x00RES" (from it)
//	4 bytes  size     big-endian length of the payload
//	size     payload
//
// The first frame of a connection is the handshake: a one-byte payload, the
// client type (TypeClient or TypeWorker). Every later payload is a message:
//
//	msgID Sep cmd [Sep data]
//
// where Sep is the two bytes "\x00\x01" (the spec's "NULL byte"), msgID is
// opaque bytes the server echoes, cmd is one byte (see Command) and data
// holds the arguments, also separated by Sep. A job travels as JSON.
//
// # Use
//
// ParseFrame reads one frame from the front of a buffer; consumed == 0 with a
// nil error means more bytes are needed, and it says how many. ParseMessage
// splits a payload; NextArg and SplitArgs split data. DecodeJob and
// DecodeJobList decode job JSON. What they return are views into the input:
// parsing copies nothing, and the common input allocates nothing. Encoders
// append to the caller's buffer: AppendReply, AppendData, AppendJobAssign,
// AppendJob, the AppendJobList functions, and BeginFrame ... EndFrame to write
// a payload in place.
//
// # The real server's quirks, reproduced
//
//   - The size's top bit is ignored (protocol.ParseHeader masks it).
//   - A message is split as protocol.ParseCommand splits it: no Sep at all, or
//     an empty command between two Seps, makes the real server panic and
//     drop the connection (ErrNoSeparator, ErrNoCommand); a second part that
//     is not one byte long and no third part is command UNKNOWN with that
//     part as data; with three parts, bytes after the command byte are
//     dropped; an empty third part is no data.
//   - Replies to STATUS and DUMP, and DUMP's closing "EOF", carry no command
//     byte (AppendData): a client finds UNKNOWN and the text.
//   - Job JSON is encoding/json's, the real server's json.Marshal of its
//     driver.Job: field order, HTML-safe escaping (<, >, & as \u003c...),
//     U+2028/U+2029 escaped, invalid UTF-8 as \ufffd.
//   - Job JSON is decoded with encoding/json's json.Unmarshal rules exactly:
//     keys matched exactly or else case-insensitively (also by the Unicode
//     folds encoding/json applies: "ſtatus" is "status"), unknown keys
//     ignored, null leaving a field as it was, the last duplicate key winning,
//     numbers for int64 fields integers in range, a wrong type an error that
//     leaves the other fields decoded. Errors are encoding/json's own,
//     naming driver.Job as the real server's do, since the real server sends
//     their text to the client.
//   - A LOAD payload is decoded as json.Unmarshal into map[string][]driver.Job:
//     the "jobs" key matched exactly, but every key's value must be a job list;
//     any error loads nothing.
//
// The codec bounds what the real server does not: a frame's payload is at
// most DefaultMaxFrame unless the caller chooses otherwise (ErrTooLarge).
package periodic
