package main

import (
	"encoding/binary"
	"errors"
)

// What an entry carries is what sched/replicated's store hands Raft: one
// writer batch of job records (sched/replicated/entry.go), each record
// laid out as sched/durable keeps it (sched/durable/record.go). They are
// written again here, not imported: dragonboat v3.3.8 does not build with
// the Pebble that switchyard's module requires, and this module keeps all
// three engines in one binary.
//
// An entry here is a header, who proposed it and its number there, so
// that the proposing node can answer its submitters once it has applied
// it, then sched/replicated's entry:
//
//	proposer (1 byte), sequence (8 bytes, big-endian)
//	version (1), then per job: opPut (1), id (8, big-endian),
//	uvarint length, record
//
// and a record: version 1, priority, flags, uvarint-prefixed function,
// unique and reducer, varint when, timeout and counter, then the payload.
const (
	entryVersion = 1
	opPut        = 1
	entryHeader  = 1 + 8 + 1
	// maxEntry bounds an entry's bytes, as sched/replicated's does.
	maxEntry = 1 << 20
)

var errEntry = errors.New("entry does not decode")

// startEntry begins an entry in b (reset) for proposer's seq.
func startEntry(b []byte, proposer byte, seq uint64) []byte {
	b = append(b[:0], proposer)
	b = binary.BigEndian.AppendUint64(b, seq)
	return append(b, entryVersion)
}

// appendJob appends a put of job id, a background submit of fn with
// payload, as the scheduler encodes it (normal priority, no unique).
func appendJob(b []byte, id uint64, fn string, payload []byte) []byte {
	b = append(b, opPut)
	b = binary.BigEndian.AppendUint64(b, id)
	n := 3 + 1 + len(fn) + 1 + 1 + 3 + len(payload)
	b = binary.AppendUvarint(b, uint64(n))
	b = append(b, 1, 1, 0) // record version, normal priority, no flags
	b = binary.AppendUvarint(b, uint64(len(fn)))
	b = append(b, fn...)
	b = append(b, 0, 0)    // unique, reducer: empty
	b = append(b, 0, 0, 0) // when, timeout, counter: 0 (varints)
	return append(b, payload...)
}

// entryOwner is who proposed an entry and its number there.
func entryOwner(b []byte) (byte, uint64, bool) {
	if len(b) < entryHeader || b[entryHeader-1] != entryVersion {
		return 0, 0, false
	}
	return b[0], binary.BigEndian.Uint64(b[1:9]), true
}

// eachJob calls put for each job of an entry; rec points into b.
func eachJob(b []byte, put func(id uint64, rec []byte)) error {
	if len(b) < entryHeader || b[entryHeader-1] != entryVersion {
		return errEntry
	}
	b = b[entryHeader:]
	for len(b) > 0 {
		if b[0] != opPut || len(b) < 9 {
			return errEntry
		}
		id := binary.BigEndian.Uint64(b[1:9])
		n, k := binary.Uvarint(b[9:])
		if k <= 0 || n > uint64(len(b)-9-k) {
			return errEntry
		}
		start := 9 + k
		put(id, b[start:start+int(n)])
		b = b[start+int(n):]
	}
	return nil
}
