package durable

import (
	"encoding/binary"
	"errors"
	"sync"
	"time"

	"switchyard/sched"
)

// A job's key is keyJob and its id, big-endian, so that a scan returns
// jobs in id order: each function's jobs in the order they were submitted.
// Other kinds of record (dwork's edges, later) get keys of their own.
const (
	keyJob  = 'j'
	keySize = 9
)

func putKey(k *[keySize]byte, id uint64) {
	k[0] = keyJob
	binary.BigEndian.PutUint64(k[1:], id)
}

// keyID is the job id in a job's key.
func keyID(k *[keySize]byte) uint64 { return binary.BigEndian.Uint64(k[1:]) }

// The value of a job record:
//
//	version (1 or 2), priority, flags (bit 0: RetryForever, bit 1:
//	CoalesceOnPayload, bit 2: Remember; a reader that knows fewer bits
//	ignores the others),
//	uvarint-prefixed func, unique, reducer,
//	varint when (unix s), timeout (ns), counter,
//	version 2 only: uvarint count of predecessors, then each one's
//	uvarint-prefixed func and unique,
//	then the payload, to the end.
//
// Version 2 is written only for a job with predecessors, so a store
// without dependencies stays readable by a switchyard that has none.
const (
	recordVersion     = 1
	recordVersionDeps = 2
)

// encode returns r's value in a buffer of its own.
func encode(r *sched.Record) []byte {
	return appendRecord(make([]byte, 0, recordSize(r)), r)
}

// lend returns r's value in a buffer lent by recBufs when it fits one, for
// the writer to give back (recycle).
func lend(r *sched.Record) []byte {
	n := recordSize(r)
	if n > recBufSize {
		return appendRecord(make([]byte, 0, n), r)
	}
	return appendRecord(recBufs.Get().(*recBuf)[:0], r)
}

// recordSize bounds the length of r's value.
func recordSize(r *sched.Record) int {
	n := 3 + 3*binary.MaxVarintLen64 + len(r.Func) + len(r.Unique) + len(r.Reducer) +
		3*binary.MaxVarintLen64 + len(r.Payload)
	if len(r.After) > 0 {
		n += binary.MaxVarintLen64
		for _, k := range r.After {
			n += 2*binary.MaxVarintLen64 + len(k.Func) + len(k.Unique)
		}
	}
	return n
}

// appendRecord appends r's value to b, which has room for it (recordSize).
func appendRecord(b []byte, r *sched.Record) []byte {
	version := byte(recordVersion)
	if len(r.After) > 0 {
		version = recordVersionDeps
	}
	var flags byte
	if r.RetryForever {
		flags |= 1
	}
	if r.CoalesceOnPayload {
		flags |= 2
	}
	if r.Remember {
		flags |= 4
	}
	b = append(b, version, byte(r.Priority), flags)
	for _, s := range []string{r.Func, r.Unique, r.Reducer} {
		b = appendString(b, s)
	}
	b = binary.AppendVarint(b, r.When)
	b = binary.AppendVarint(b, int64(r.Timeout))
	b = binary.AppendVarint(b, r.Counter)
	if version == recordVersionDeps {
		b = binary.AppendUvarint(b, uint64(len(r.After)))
		for _, k := range r.After {
			b = appendString(appendString(b, k.Func), k.Unique)
		}
	}
	return append(b, r.Payload...)
}

// Records of up to recBufSize bytes (the bound recordSize reckons, a
// little above the length) are encoded into buffers lent by recBufs, and the
// writer gives each back once Pebble has copied it into a batch
// (recycle). A record lives for a few milliseconds, between a submit and
// its batch, but one allocated per submit was most of the garbage a
// durable queue made: filling it with a million 64-byte jobs allocated
// 144 bytes of record per 192-byte job, and the heap the collector let
// grow for that garbage was tens of megabytes of the server's RSS.
const recBufSize = 256

type recBuf [recBufSize]byte

var recBufs = sync.Pool{New: func() any { return new(recBuf) }}

// recycle gives back the buffer of a record lend lent, once nothing reads
// it any more. Every record put is the store's, so one of the same
// capacity made elsewhere (encode's, for Save) is as good to reuse.
func recycle(rec []byte) {
	if cap(rec) == recBufSize {
		recBufs.Put((*recBuf)(rec[:recBufSize]))
	}
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

var errRecord = errors.New("record does not decode")

// readString takes a uvarint-prefixed string off b.
func readString(b []byte) (string, []byte, bool) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return "", b, false
	}
	return string(b[k : k+int(n)]), b[k+int(n):], true
}

// decode fills r from b; r's strings and payload are copies.
func decode(b []byte, r *sched.Record) error {
	if len(b) < 3 || (b[0] != recordVersion && b[0] != recordVersionDeps) {
		return errRecord
	}
	version := b[0]
	*r = sched.Record{Priority: sched.Priority(b[1]), RetryForever: b[2]&1 != 0, CoalesceOnPayload: b[2]&2 != 0,
		Remember: b[2]&4 != 0}
	b = b[3:]
	var ok bool
	for _, dst := range []*string{&r.Func, &r.Unique, &r.Reducer} {
		if *dst, b, ok = readString(b); !ok {
			return errRecord
		}
	}
	var vals [3]int64
	for i := range vals {
		v, k := binary.Varint(b)
		if k <= 0 {
			return errRecord
		}
		vals[i], b = v, b[k:]
	}
	r.When, r.Timeout, r.Counter = vals[0], time.Duration(vals[1]), vals[2]
	if version == recordVersionDeps {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)) { // each key takes two bytes at least
			return errRecord
		}
		b = b[k:]
		r.After = make([]sched.Key, n)
		for i := range r.After {
			if r.After[i].Func, b, ok = readString(b); !ok {
				return errRecord
			}
			if r.After[i].Unique, b, ok = readString(b); !ok {
				return errRecord
			}
		}
	}
	r.Payload = append([]byte(nil), b...)
	return nil
}
