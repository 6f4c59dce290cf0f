package memodb

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/fxamacker/cbor/v2"
)

// FuzzDecode decodes any bytes in each direction: nothing panics; every
// error wraps one of the four sentinels, and ErrMalformed whenever
// fxamacker's own check of well-formedness (with the same limits) fails
// (a well-formed header can be malformed too: a map in it, say); a message one direction accepts, Any accepts as the same
// message; and an accepted message is exactly what Append makes of it,
// header and payload, byte for byte (the deterministic encoding, and
// nothing dropped).
func FuzzDecode(f *testing.F) {
	for _, g := range golden {
		f.Add(g.wire)
	}
	// memodb-broker's own replies and a real client's request as bcdb's
	// smout sent it (a CBOR map as the JOB's payload).
	f.Add(h("83" + memo01 + "03 40"))
	f.Add(h("85" + memo01 + "02 40 68616c6976652e7476 197d64 | a2 63737263 01 63746774 02"))
	f.Add(h("84" + memo01 + "01 40 83 6161 626263 63646566"))
	f.Add(h("84" + memo01 + "03 44 deadbeef f5 | 00"))
	f.Add(h("9f" + memo01 + "04 44 01020304 ff"))
	f.Add(h("83" + memo01 + "1804 44 01020304"))

	wellformed, err := cbor.DecOptions{
		MaxNestedLevels:  4,
		MaxArrayElements: MaxServices,
		IndefLength:      cbor.IndefLengthForbidden,
		TagsMd:           cbor.TagsForbidden,
	}.DecMode()
	if err != nil {
		f.Fatal(err)
	}
	var m, any Message
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, dir := range []Direction{Any, Request, Reply} {
			err := Decode(data, dir, &m)
			if err != nil {
				if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrNotDeterministic) &&
					!errors.Is(err, ErrVersion) && !errors.Is(err, ErrInvalid) {
					t.Fatalf("Decode(% x, %d): %v wraps no sentinel", data, dir, err)
				}
				var raw cbor.RawMessage
				if _, werr := wellformed.UnmarshalFirst(data, &raw); !errors.Is(err, ErrMalformed) && werr != nil {
					t.Fatalf("Decode(% x, %d): %v, but it is not well-formed: %v", data, dir, err, werr)
				}
				continue
			}
			if got := Append(nil, &m); !bytes.Equal(got, data) {
				t.Fatalf("Decode(% x, %d) = %+v, which encodes as % x", data, dir, m, got)
			}
			if dir != Any {
				if err := Decode(data, Any, &any); err != nil || !reflect.DeepEqual(any, m) {
					t.Fatalf("Decode(% x): %+v in direction %d, %+v (%v) in any", data, m, dir, any, err)
				}
			}
		}
	})
}
