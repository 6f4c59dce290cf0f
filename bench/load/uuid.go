package load

import (
	"encoding/binary"
	"math/rand/v2"
)

// UUIDLen is the length of the unique libgearman sends with every job it
// submits: a UUID in text (uuid_unparse), 8-4-4-4-12 hex digits.
const UUIDLen = 36

// uuidText makes one connection's uniques: UUIDs in text, a different one
// for every job, written over the same array each time so that a submit
// allocates nothing for it. The first half is random, drawn once per
// connection; the second counts the connection's jobs. The version and
// variant bits are a random (version 4) UUID's. Two connections share a
// first half with odds of one in 2^60, so every job of a run has a unique
// of its own, as every job a real client submits has.
type uuidText struct {
	text [UUIDLen]byte
	n    uint64
}

const hexDigits = "0123456789abcdef"

// newUUIDText returns a generator whose first half is random.
func newUUIDText() *uuidText {
	u := &uuidText{}
	var hi [8]byte
	binary.BigEndian.PutUint64(hi[:], rand.Uint64())
	hi[6] = hi[6]&0x0f | 0x40 // version 4
	putHex(u.text[0:8], hi[0:4])
	u.text[8] = '-'
	putHex(u.text[9:13], hi[4:6])
	u.text[13] = '-'
	putHex(u.text[14:18], hi[6:8])
	u.text[18], u.text[23] = '-', '-'
	return u
}

// next returns the next unique, valid until the call after.
func (u *uuidText) next() []byte {
	u.n++
	var lo [8]byte
	binary.BigEndian.PutUint64(lo[:], u.n)
	lo[0] = lo[0]&0x3f | 0x80 // variant 10: costs the count its top two bits, which it never reaches
	putHex(u.text[19:23], lo[0:2])
	putHex(u.text[24:36], lo[2:8])
	return u.text[:]
}

// putHex writes b in lower-case hex into dst, which is twice as long.
func putHex(dst, b []byte) {
	for i, c := range b {
		dst[2*i], dst[2*i+1] = hexDigits[c>>4], hexDigits[c&0x0f]
	}
}
