package replicated

import (
	"encoding/binary"
	"errors"
)

// An entry is what one Raft log entry carries: the writes of one writer
// batch, in the order they were queued, and the term of the leader whose
// store proposed them.
//
//	version (1 byte): 2 (1: no term, as earlier versions wrote)
//	term (uvarint), version 2 only
//	then ops to the end, each:
//	  kind (1 byte)
//	  put:    id (8 bytes, big-endian), uvarint length, record
//	  delete: id (8 bytes, big-endian)
//	  meta:   uvarint length, key, uvarint length, value (empty: removed)
//
// A record is durable.EncodeRecord's bytes, the same as the single-node
// store keeps.
//
// The term fences a store that outlived its term of leadership: Raft
// gives an entry the term of the leader that appends it, and a leader's
// store proposes only in the term it was made for, so an entry whose two
// terms differ was proposed by a store of an earlier term (its node lost
// the lead and won it back before the store was closed). The FSM refuses
// it on every node alike (see FSM.apply).
const (
	entryVersion       = 2
	entryVersionNoTerm = 1
)

type opKind uint8

const (
	opPut opKind = iota + 1
	opDelete
	opMeta
	// opFlush and opCancelled never reach an entry: a flush writes
	// nothing, and a cancelled put is a job that ended in the queue.
	opFlush
	opCancelled
)

var errEntry = errors.New("replicated: entry does not decode")

func appendPut(b []byte, id uint64, rec []byte) []byte {
	b = append(b, byte(opPut))
	b = binary.BigEndian.AppendUint64(b, id)
	b = binary.AppendUvarint(b, uint64(len(rec)))
	return append(b, rec...)
}

func appendDelete(b []byte, id uint64) []byte {
	b = append(b, byte(opDelete))
	return binary.BigEndian.AppendUint64(b, id)
}

// appendHeader begins an entry proposed in term.
func appendHeader(b []byte, term uint64) []byte {
	return binary.AppendUvarint(append(b, entryVersion), term)
}

// MetaEntry is an entry that sets a metadata key (an empty val removes
// it), for Raft's Apply by the leader of term.
func MetaEntry(term uint64, key string, val []byte) []byte {
	return appendMeta(appendHeader(nil, term), key, val)
}

func appendMeta(b []byte, key string, val []byte) []byte {
	b = append(b, byte(opMeta))
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	b = binary.AppendUvarint(b, uint64(len(val)))
	return append(b, val...)
}

// entryTerm reads an entry's header: the term it was proposed in (0 for
// an entry of version 1, which has none) and its ops.
func entryTerm(b []byte) (term uint64, ops []byte, err error) {
	switch {
	case len(b) > 0 && b[0] == entryVersionNoTerm:
		return 0, b[1:], nil
	case len(b) > 0 && b[0] == entryVersion:
		term, k := binary.Uvarint(b[1:])
		if k <= 0 {
			return 0, nil, errEntry
		}
		return term, b[1+k:], nil
	}
	return 0, nil, errEntry
}

// decodeEntry calls put, del and meta for each op of an entry, in order,
// and returns its term. The slices it hands over point into b.
func decodeEntry(b []byte, put func(id uint64, rec []byte), del func(id uint64), meta func(key string, val []byte)) (uint64, error) {
	term, ops, err := entryTerm(b)
	if err != nil {
		return 0, err
	}
	return term, decodeOps(ops, put, del, meta)
}

// decodeOps calls put, del and meta for each op of an entry's body.
func decodeOps(b []byte, put func(id uint64, rec []byte), del func(id uint64), meta func(key string, val []byte)) error {
	for len(b) > 0 {
		kind := opKind(b[0])
		b = b[1:]
		switch kind {
		case opPut, opDelete:
			if len(b) < 8 {
				return errEntry
			}
			id := binary.BigEndian.Uint64(b)
			b = b[8:]
			if kind == opDelete {
				del(id)
				continue
			}
			rec, rest, ok := readBytes(b)
			if !ok {
				return errEntry
			}
			put(id, rec)
			b = rest
		case opMeta:
			key, rest, ok := readBytes(b)
			if !ok {
				return errEntry
			}
			val, rest, ok := readBytes(rest)
			if !ok {
				return errEntry
			}
			meta(string(key), val)
			b = rest
		default:
			return errEntry
		}
	}
	return nil
}

// readBytes takes a uvarint-prefixed byte string off b.
func readBytes(b []byte) ([]byte, []byte, bool) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return nil, b, false
	}
	end := k + int(n)
	return b[k:end:end], b[end:], true
}
