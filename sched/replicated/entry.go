package replicated

import (
	"encoding/binary"
	"errors"
)

// An entry is what one Raft log entry carries: the writes of one writer
// batch, in the order they were queued.
//
//	version (1)
//	then ops to the end, each:
//	  kind (1 byte)
//	  put:    id (8 bytes, big-endian), uvarint length, record
//	  delete: id (8 bytes, big-endian)
//	  meta:   uvarint length, key, uvarint length, value (empty: removed)
//
// A record is durable.EncodeRecord's bytes, the same as the single-node
// store keeps.
const entryVersion = 1

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

// MetaEntry is an entry that sets a metadata key (an empty val removes
// it), for Raft's Apply.
func MetaEntry(key string, val []byte) []byte {
	return appendMeta([]byte{entryVersion}, key, val)
}

func appendMeta(b []byte, key string, val []byte) []byte {
	b = append(b, byte(opMeta))
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	b = binary.AppendUvarint(b, uint64(len(val)))
	return append(b, val...)
}

// decodeEntry calls put, del and meta for each op of an entry, in order.
// The slices it hands over point into b.
func decodeEntry(b []byte, put func(id uint64, rec []byte), del func(id uint64), meta func(key string, val []byte)) error {
	if len(b) == 0 || b[0] != entryVersion {
		return errEntry
	}
	b = b[1:]
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
