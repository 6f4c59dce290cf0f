package replicated

import (
	"bytes"
	"slices"
	"testing"
)

type decoded struct {
	kind opKind
	id   uint64
	key  string
	val  []byte
}

func decodeAll(t testing.TB, b []byte) ([]decoded, error) {
	_, out, err := decodeTerm(t, b)
	return out, err
}

// decodeTerm is decodeAll with the entry's term.
func decodeTerm(t testing.TB, b []byte) (uint64, []decoded, error) {
	var out []decoded
	term, err := decodeEntry(b,
		func(id uint64, rec []byte) { out = append(out, decoded{kind: opPut, id: id, val: slices.Clone(rec)}) },
		func(id uint64) { out = append(out, decoded{kind: opDelete, id: id}) },
		func(key string, val []byte) {
			out = append(out, decoded{kind: opMeta, key: key, val: slices.Clone(val)})
		})
	return term, out, err
}

func TestEntryRoundTrip(t *testing.T) {
	ops := []op{
		{kind: opPut, id: 1, val: []byte("record one")},
		{kind: opFlush},
		{kind: opDelete, id: 1 << 60},
		{kind: opPut, id: 7, val: nil},
		{kind: opCancelled, id: 8},
		{kind: opMeta, val: []byte("leader\x00{\"gearman\":\"127.0.0.1:4730\"}")},
		{kind: opMeta, val: []byte("gone\x00")},
	}
	n, entry := build(7, ops)
	if n != len(ops) {
		t.Fatalf("build took %d of %d ops", n, len(ops))
	}
	term, got, err := decodeTerm(t, entry)
	if err != nil {
		t.Fatal(err)
	}
	if term != 7 {
		t.Errorf("term %d, want 7", term)
	}
	want := []decoded{
		{kind: opPut, id: 1, val: []byte("record one")},
		{kind: opDelete, id: 1 << 60},
		{kind: opPut, id: 7, val: []byte{}},
		{kind: opMeta, key: "leader", val: []byte(`{"gearman":"127.0.0.1:4730"}`)},
		{kind: opMeta, key: "gone", val: []byte{}},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].kind != want[i].kind || got[i].id != want[i].id || got[i].key != want[i].key || !bytes.Equal(got[i].val, want[i].val) {
			t.Errorf("op %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

// Flushes and cancelled puts write nothing: no entry.
func TestBuildNothing(t *testing.T) {
	n, entry := build(1, []op{{kind: opFlush}, {kind: opCancelled, id: 3}})
	if n != 2 || entry != nil {
		t.Errorf("build = %d, %q; want 2, nil", n, entry)
	}
}

// A batch over maxEntry is split, each entry holding at least one op.
func TestBuildSplits(t *testing.T) {
	big := make([]byte, maxEntry/3)
	ops := []op{{kind: opPut, id: 1, val: big}, {kind: opPut, id: 2, val: big}, {kind: opPut, id: 3, val: big},
		{kind: opPut, id: 4, val: make([]byte, 2*maxEntry)}, {kind: opDelete, id: 5}}
	var ids []uint64
	for rest := ops; len(rest) > 0; {
		n, entry := build(1, rest)
		if n == 0 {
			t.Fatal("an entry of no op")
		}
		if n > 1 && len(entry) > maxEntry {
			t.Errorf("an entry of %d ops takes %d bytes", n, len(entry))
		}
		got, err := decodeAll(t, entry)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range got {
			ids = append(ids, d.id)
		}
		rest = rest[n:]
	}
	if !slices.Equal(ids, []uint64{1, 2, 3, 4, 5}) {
		t.Errorf("ops across entries: %v", ids)
	}
}

func TestDecodeEntryRefuses(t *testing.T) {
	for _, b := range [][]byte{
		nil,
		{},
		{3},                       // unknown version
		{2},                       // no term
		{2, 0x80},                 // a term cut short
		{1, 9},                    // unknown kind
		{1, byte(opPut), 0, 0, 0}, // short id
		{1, byte(opPut), 0, 0, 0, 0, 0, 0, 0, 1, 5, 'a'}, // record shorter than its length
		{1, byte(opDelete), 0, 0},                        // short id
		{1, byte(opMeta), 3, 'a'},                        // short key
		{1, byte(opMeta), 1, 'a', 4},                     // short value
	} {
		if _, err := decodeAll(t, b); err == nil {
			t.Errorf("decodeEntry(%q) = nil", b)
		}
	}
}

// FuzzDecodeEntry: any bytes are refused or decoded, and what decodes
// encodes to bytes that decode to the same ops (a length may be written
// with more bytes than it needs, so the bytes themselves may differ).
func FuzzDecodeEntry(f *testing.F) {
	_, e := build(3, []op{{kind: opPut, id: 1, val: []byte("x")}, {kind: opDelete, id: 2},
		{kind: opMeta, val: []byte("k\x00v")}})
	f.Add(e)
	f.Add(MetaEntry(1<<40, "leader", []byte(`{"id":"n1","term":1}`)))
	f.Add([]byte{1})
	f.Add([]byte{2, 5})
	f.Add([]byte{1, byte(opPut), 0, 0, 0, 0, 0, 0, 0, 1, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		term, got, err := decodeTerm(t, b)
		if err != nil {
			return
		}
		again := appendHeader(nil, term)
		for _, d := range got {
			switch d.kind {
			case opPut:
				again = appendPut(again, d.id, d.val)
			case opDelete:
				again = appendDelete(again, d.id)
			case opMeta:
				again = appendMeta(again, d.key, d.val)
			}
		}
		backTerm, back, err := decodeTerm(t, again)
		if err != nil || len(back) != len(got) || backTerm != term {
			t.Fatalf("%q decodes to %+v, which encodes to %q: %+v, %v", b, got, again, back, err)
		}
		for i := range got {
			if back[i].kind != got[i].kind || back[i].id != got[i].id || back[i].key != got[i].key || !bytes.Equal(back[i].val, got[i].val) {
				t.Errorf("op %d: %+v, then %+v", i, got[i], back[i])
			}
		}
	})
}
