package durable

import (
	"encoding/binary"
	"errors"
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

// The value of a job record, version 1:
//
//	version (1), priority, flags (bit 0: RetryForever, bit 1:
//	CoalesceOnPayload),
//	uvarint-prefixed func, unique, reducer,
//	varint when (unix s), timeout (ns), counter,
//	then the payload, to the end.
const recordVersion = 1

func encode(r *sched.Record) []byte {
	n := 3 + 3*binary.MaxVarintLen64 + len(r.Func) + len(r.Unique) + len(r.Reducer) +
		3*binary.MaxVarintLen64 + len(r.Payload)
	b := make([]byte, 0, n)
	var flags byte
	if r.RetryForever {
		flags |= 1
	}
	if r.CoalesceOnPayload {
		flags |= 2
	}
	b = append(b, recordVersion, byte(r.Priority), flags)
	for _, s := range []string{r.Func, r.Unique, r.Reducer} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = binary.AppendVarint(b, r.When)
	b = binary.AppendVarint(b, int64(r.Timeout))
	b = binary.AppendVarint(b, r.Counter)
	return append(b, r.Payload...)
}

var errRecord = errors.New("record does not decode")

// decode fills r from b; r's strings and payload are copies.
func decode(b []byte, r *sched.Record) error {
	if len(b) < 3 || b[0] != recordVersion {
		return errRecord
	}
	*r = sched.Record{Priority: sched.Priority(b[1]), RetryForever: b[2]&1 != 0, CoalesceOnPayload: b[2]&2 != 0}
	b = b[3:]
	for _, dst := range []*string{&r.Func, &r.Unique, &r.Reducer} {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return errRecord
		}
		*dst = string(b[k : k+int(n)])
		b = b[k+int(n):]
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
	r.Payload = append([]byte(nil), b...)
	return nil
}
