package durable

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/record"
)

// DamageError is a store that lost acknowledged writes, or cannot tell
// whether it did: Open refuses it, naming the files at fault, unless told
// to recover what it can (Options.Recover).
type DamageError struct {
	Dir string
	// What is wrong, each naming its file where one is to blame.
	Problems []string
	// Files names the files at fault.
	Files []string
	// Recorded is how many jobs the store held as far as it recorded
	// (-1: unknown); Readable how many it holds now (-1: unknown).
	Recorded, Readable int
	// Unreadable: Pebble cannot open the store at all, and Recover cannot
	// help.
	Unreadable bool
}

func (e *DamageError) Error() string {
	recorded := "an unknown number of"
	if e.Recorded >= 0 {
		recorded = fmt.Sprint(e.Recorded)
	}
	if e.Unreadable {
		return fmt.Sprintf("durable: %s is damaged: %s; it recorded %s jobs, and cannot be opened: restore the files named, or move the directory away to start with an empty queue",
			e.Dir, strings.Join(e.Problems, "; "), recorded)
	}
	return fmt.Sprintf("durable: %s is damaged: %s; it recorded %s jobs, %d can be read. "+
		"Start switchyard with --recover to run with the jobs that can be read",
		e.Dir, strings.Join(e.Problems, "; "), recorded, e.Readable)
}

// Lost is how many jobs could not be read: the jobs recorded less those
// read, or -1 if unknown. (More may be read than recorded: jobs deleted
// in writes that were lost come back.)
func (e *DamageError) Lost() int {
	if e.Recorded < 0 || e.Readable < 0 {
		return -1
	}
	return max(0, e.Recorded-e.Readable)
}

func (e *DamageError) problem(file, format string, args ...any) {
	e.Problems = append(e.Problems, fmt.Sprintf(format, args...))
	if file != "" && !slices.Contains(e.Files, file) {
		e.Files = append(e.Files, file)
	}
}

// start opens the database of a new Store. A store already there is
// checked against its mark first (check), and opened read-only: a damaged
// one is refused before anything is written to it, or, with recover,
// opened with what it holds, after which the mark starts again from
// there.
func (s *Store) start(recover bool) error {
	found := storeFiles(s.fs, s.dir)
	s.fs.Remove(s.fs.PathJoin(s.dir, probeName)) // a crash may leave it
	mk, hasMark, markErr := readMark(s.fs, s.dir)
	if markErr != nil && !errors.Is(markErr, errMarkDamaged) {
		return fmt.Errorf("durable: %s: read %s: %w", s.dir, markName, markErr)
	}
	var st scanned
	if len(found) > 0 {
		// Pebble takes a directory without CURRENT (which names the live
		// MANIFEST) for a new database, and writes a new CURRENT and
		// MANIFEST over what is there: a store that lost its CURRENT would
		// fail one start and come back empty at the next. A directory that
		// holds a store's files opens as that store or not at all.
		ro, err := s.openDB(true, true)
		if errors.Is(err, pebble.ErrDBDoesNotExist) {
			return fmt.Errorf("durable: open %s: no CURRENT file, yet the directory holds a store's files (%s): restore CURRENT, or move them away to start with an empty queue",
				s.dir, strings.Join(found, " "))
		}
		if err != nil {
			// Pebble refuses what it cannot make sense of: a MANIFEST cut
			// short may name sstables compacted away since. Name the file.
			st.unreadable = err
			if d := s.check(nil, st, mk, hasMark, markErr); d != nil && len(d.Files) > 0 {
				return d
			}
			return fmt.Errorf("durable: open %s: %w", s.dir, err)
		}
		st, err = scan(ro.db)
		var d *DamageError
		if err == nil {
			d = s.check(ro.db, st, mk, hasMark, markErr)
		}
		s.guard(ro, ro.db.Close)
		if err != nil {
			return fmt.Errorf("durable: read %s: %w", s.dir, err)
		}
		if d != nil {
			if !recover {
				return d
			}
			s.damage = d
		}
	}
	in, err := s.openDB(false, len(found) > 0)
	if err != nil {
		return fmt.Errorf("durable: open %s: %w", s.dir, err)
	}
	s.cur.Store(in)
	s.keys = st.keys
	if s.keys == nil {
		s.keys = newIDSet(0)
	}
	good := hasMark && markErr == nil
	if good {
		s.seq = mk.seq
	}
	if good && st.marked && s.damage == nil {
		s.mark, err = openMark(s.fs, s.dir, mk)
	} else {
		// A new store, one written before the mark, or one opened with
		// what could be read: the mark first, then the key that says
		// there is one, so that a crash between the two leaves no store
		// that seems to have lost its mark.
		if s.mark, err = createMark(s.fs, s.dir, mark{seq: s.seq, jobs: uint64(s.keys.Len())}); err == nil {
			err = s.writeMarked(in)
		}
	}
	if err != nil {
		if in.Failure() == nil {
			s.guard(in, in.db.Close)
		} else {
			in.fs.fence()
		}
		if s.mark != nil {
			s.mark.close()
		}
		return fmt.Errorf("durable: %s: %w", s.dir, err)
	}
	s.markRef.Store(s.mark)
	return nil
}

// scanned is what a database holds: its job keys, and whether it says it
// keeps a mark; or, unreadable, why Pebble cannot open it.
type scanned struct {
	keys       *idSet
	marked     bool
	unreadable error
}

// scan reads a database's job keys and markedKey.
func scan(db *pebble.DB) (scanned, error) {
	var st scanned
	_, closer, err := db.Get(markedKey)
	switch {
	case err == nil:
		st.marked = true
		closer.Close()
	case !errors.Is(err, pebble.ErrNotFound):
		return st, err
	}
	st.keys = newIDSet(0)
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{keyJob}, UpperBound: []byte{keyJob + 1}})
	if err != nil {
		return st, err
	}
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		if len(k) != keySize {
			it.Close()
			return st, fmt.Errorf("key %x is not a job's", k)
		}
		st.keys.add(binary.BigEndian.Uint64(k[1:]))
	}
	return st, it.Close()
}

// check compares the store's files with its mark (see mark.go): the
// write-ahead log the mark names must read as far as it was synced,
// unless a newer log took over (the old one is removed once flushed); the
// MANIFEST that CURRENT names must read as far as it was synced, and be
// no older than the mark's, unless the mark's is there (a crash before
// CURRENT moved to it). db, if Pebble could open the store, names the
// sstables the MANIFEST does not list. It returns nil if nothing
// acknowledged can have been lost.
func (s *Store) check(db *pebble.DB, st scanned, mk mark, hasMark bool, markErr error) *DamageError {
	d := &DamageError{Dir: s.dir, Recorded: -1, Readable: -1}
	if st.unreadable != nil {
		d.problem("", "%v", st.unreadable)
		d.Unreadable = true
	}
	if st.keys != nil {
		d.Readable = st.keys.Len()
	}
	switch {
	case markErr != nil:
		d.problem(markName, "%s cannot be read (%v): whether acknowledged writes were lost is unknown", markName, markErr)
	case !hasMark && st.marked:
		d.problem(markName, "%s is missing: whether acknowledged writes were lost is unknown", markName)
	case hasMark:
		d.Recorded = int(mk.jobs)
	}
	good := hasMark && markErr == nil
	fs := s.fs
	names, _ := fs.List(s.dir)
	if good && mk.walNum > 0 {
		wal := fmt.Sprintf("%06d.log", mk.walNum)
		newer := false
		for _, n := range names {
			if num, ok := fileNum(n, "", ".log"); ok && num > mk.walNum {
				newer = true
			}
		}
		path := fs.PathJoin(s.dir, wal)
		if fi, err := fs.Stat(path); err != nil {
			if !newer { // a log is removed, or reused, once a newer one took over and it was flushed
				d.problem(wal, "%s is missing, yet writes to offset %d of it were acknowledged", wal, mk.walSynced)
			}
		} else if uint64(fi.Size()) < mk.walSynced {
			d.problem(wal, "%s is %d bytes long, yet writes to offset %d of it were acknowledged", wal, fi.Size(), mk.walSynced)
		} else if end, why := readRecords(s, path, mk.walNum); uint64(end) < mk.walSynced {
			d.problem(wal, "%s cannot be read past offset %d (%s), yet writes to offset %d of it were acknowledged", wal, end, why, mk.walSynced)
		}
	}
	var manifest string
	if cur, err := readAll(s, fs.PathJoin(s.dir, "CURRENT")); err == nil {
		manifest = strings.TrimSpace(string(cur))
		num, _ := fileNum(manifest, "MANIFEST-", "")
		path := fs.PathJoin(s.dir, manifest)
		fi, err := fs.Stat(path)
		switch {
		case err != nil:
		case good && num == mk.manNum && uint64(fi.Size()) < mk.manSynced:
			d.problem(manifest, "%s is %d bytes long, %d were written to it", manifest, fi.Size(), mk.manSynced)
		case good && num == mk.manNum:
			if end, why := readRecords(s, path, 0); uint64(end) < mk.manSynced {
				d.problem(manifest, "%s cannot be read past offset %d (%s), %d were written to it", manifest, end, why, mk.manSynced)
			}
		case good && num < mk.manNum:
			newer := fmt.Sprintf("MANIFEST-%06d", mk.manNum)
			if _, err := fs.Stat(fs.PathJoin(s.dir, newer)); err != nil {
				d.problem("CURRENT", "CURRENT names %s, yet the store had moved on to %s, which is missing", manifest, newer)
			}
		case st.unreadable != nil:
			if end, why := readRecords(s, path, 0); end < fi.Size() {
				d.problem(manifest, "%s cannot be read past offset %d of %d (%s)", manifest, end, fi.Size(), why)
			}
		}
	}
	if len(d.Problems) == 0 || (st.unreadable != nil && len(d.Problems) == 1) {
		return nil
	}
	if db != nil && slices.Contains(d.Files, manifest) {
		d.orphans(db, names, manifest)
	}
	return d
}

// orphans names the sstables in the directory (names) that db's MANIFEST
// does not list: what a MANIFEST cut short, or damaged, lost.
func (d *DamageError) orphans(db *pebble.DB, names []string, manifest string) {
	tables, err := db.SSTables()
	if err != nil || manifest == "" {
		return
	}
	listed := map[uint64]bool{}
	for _, level := range tables {
		for _, t := range level {
			listed[uint64(t.FileNum)] = true
		}
	}
	var orphans []string
	for _, n := range names {
		if num, ok := fileNum(n, "", ".sst"); ok && !listed[num] {
			orphans = append(orphans, n)
		}
	}
	if len(orphans) > 0 {
		slices.Sort(orphans)
		d.problem("", "%s does not list %s, which the directory holds", manifest, strings.Join(orphans, " "))
	}
}

// readRecords reads the records of a log (logNum: its number) or a
// MANIFEST (0) at path, and returns the offset where they stop, and why if
// not at the end.
func readRecords(s *Store, path string, logNum uint64) (end int64, why string) {
	f, err := s.fs.Open(path)
	if err != nil {
		return 0, err.Error()
	}
	defer f.Close()
	r := record.NewReader(f, pebble.FileNum(logNum))
	for {
		end = r.Offset()
		rec, err := r.Next()
		if err == nil {
			_, err = io.Copy(io.Discard, rec)
		}
		switch {
		case err == nil:
		case err == io.EOF:
			return end + eofTrailer(f, end, logNum), ""
		case errors.Is(err, record.ErrZeroedChunk):
			return end, "zeros"
		case errors.Is(err, record.ErrInvalidChunk):
			return end, "a record with a bad checksum or header"
		case errors.Is(err, io.ErrUnexpectedEOF):
			return end, "a record cut short"
		default:
			return end, err.Error()
		}
	}
}

// eofTrailer is the length of the EOF trailer at off in a log (logNum;
// 0: a MANIFEST, which has none), or 0: Pebble ends a log it closes (at a
// rotation, at Close) with an empty chunk's header naming the next log,
// which its reader takes for the end, and which the log's synced length
// counts.
func eofTrailer(f io.ReaderAt, off int64, logNum uint64) int64 {
	const size = 11 // a recyclable chunk's header
	var h [size]byte
	if logNum == 0 {
		return 0
	}
	if n, _ := f.ReadAt(h[:], off); n < size {
		return 0
	}
	if binary.LittleEndian.Uint32(h[0:4]) != 0 || binary.LittleEndian.Uint16(h[4:6]) != 0 || h[6] != 5 ||
		binary.LittleEndian.Uint32(h[7:11]) != uint32(logNum+1) {
		return 0
	}
	return size
}

func readAll(s *Store, path string) ([]byte, error) {
	f, err := s.fs.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}
