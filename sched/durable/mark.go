package durable

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"sync"

	"github.com/cockroachdb/pebble/vfs"
	"golang.org/x/sys/unix"
)

// Pebble cannot tell a log that ends early because a crash cut its last,
// unacknowledged writes (a torn tail) from one that lost acknowledged
// writes to damage: it stops at the first record it cannot read, and so
// does a MANIFEST it reads, and it opens with what came before.
//
// The mark, a small file beside the database (markName), says how far
// each was synced: after each batch is on disk as the Sync mode says, it
// gets the number of the write-ahead log and the bytes of it synced, and
// after each sync of the MANIFEST, its number and synced length; and the
// number of jobs stored, for the count of those lost. At open (check), the
// log must read as far as it was synced, and the MANIFEST too: damage to
// either (a byte flipped, the file cut short, zeroed or missing) is found
// before Pebble opens with less. A log torn after its last synced write
// passes. Nothing is added to the database's own batches: a key written in
// each would be in every sstable, and overlapping sstables cost Pebble
// compactions where it now moves them.
//
// The mark is written after the sync, into a shared mapping of its file
// (a pwrite where the file system has no descriptor to map: tests'), not
// synced itself: a write to a mapping is a copy, where a system call per
// sync cost a tenth of the store's CPU on a virtual machine. A process
// that dies leaves it in the page cache; a machine that crashes may lose
// its last writes, which leaves it behind the files (a weaker check,
// never a false one), since what it records was synced before it was
// written. Two slots, in sectors of their own, written in turn, each with
// its checksum: a write cut short (the process killed in the middle of
// the copy, the machine in the middle of writing the page) spoils one,
// and the other is the previous mark. With --fsync never nothing is synced, and a machine
// crash may leave the mark ahead of the log it describes: see docs/durability.md.
//
// The database holds one key of ours beside the jobs' (markedKey),
// written once, when the mark is made: a store that has it and no mark
// lost its mark.
const (
	markName  = "switchyard.mark"
	markSlot  = 512 // each slot in a sector of its own
	markBody  = 64  // the bytes a slot's checksum covers
	markMagic = "SYMK"
	markV1    = 1
)

// markedKey is the key that says the store keeps a mark: outside the job
// keys' range, so that Load never sees it.
var markedKey = []byte{'m'}

// mark is what the mark file records: the last batch made durable (seq,
// the writer's count, which orders the mark's writes), the jobs stored
// once it applied, and where the write-ahead log and the MANIFEST stood
// (their file numbers and synced lengths).
type mark struct {
	seq, jobs         uint64
	walNum, walSynced uint64
	manNum, manSynced uint64
}

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// encode writes m to a slot, as the gen'th write of the mark: the slot
// read back is the valid one written last (a MANIFEST's sync rewrites the
// mark with the same seq).
func (m mark) encode(b *[markSlot]byte, gen uint64) {
	clear(b[:])
	copy(b[:4], markMagic)
	b[4] = markV1
	for i, v := range []uint64{gen, m.seq, m.jobs, m.walNum, m.walSynced, m.manNum, m.manSynced} {
		binary.BigEndian.PutUint64(b[8+8*i:], v)
	}
	binary.BigEndian.PutUint32(b[markBody:], crc32.Checksum(b[:markBody], crc32c))
}

func decodeMark(b []byte) (m mark, gen uint64, ok bool) {
	if len(b) < markBody+4 || string(b[:4]) != markMagic || b[4] != markV1 ||
		binary.BigEndian.Uint32(b[markBody:]) != crc32.Checksum(b[:markBody], crc32c) {
		return mark{}, 0, false
	}
	var v [7]uint64
	for i := range v {
		v[i] = binary.BigEndian.Uint64(b[8+8*i:])
	}
	return mark{seq: v[1], jobs: v[2], walNum: v[3], walSynced: v[4], manNum: v[5], manSynced: v[6]}, v[0], true
}

// errMarkDamaged: the mark file is there, and neither slot reads.
var errMarkDamaged = errors.New("neither of its records reads")

// readMark reads the mark file in dir: found is false if there is none.
func readMark(fsys vfs.FS, dir string) (m mark, found bool, err error) {
	f, err := fsys.Open(fsys.PathJoin(dir, markName))
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, os.ErrNotExist) {
		return mark{}, false, nil
	}
	if err != nil {
		return mark{}, true, err
	}
	defer f.Close()
	var buf [2 * markSlot]byte
	n, err := f.ReadAt(buf[:], 0)
	if err != nil && err != io.EOF {
		return mark{}, true, err
	}
	m, _, ok := readSlots(buf[:n])
	if !ok {
		return mark{}, true, errMarkDamaged
	}
	return m, true, nil
}

// readSlots is the valid slot written last in b, and its write's number.
func readSlots(b []byte) (m mark, gen uint64, ok bool) {
	for slot := 0; slot < 2 && (slot+1)*markSlot <= len(b); slot++ {
		if v, g, good := decodeMark(b[slot*markSlot : (slot+1)*markSlot]); good && (!ok || g > gen) {
			m, gen, ok = v, g, true
		}
	}
	return m, gen, ok
}

// markFile writes the mark. Its writes come from the goroutine that
// answers synced batches, from the writer's own syncs and from Pebble's
// MANIFEST syncs: advance keeps the one that goes further.
type markFile struct {
	mu   sync.Mutex
	f    vfs.File
	mem  []byte // the file, mapped shared; nil: written with WriteAt
	last mark
	gen  uint64 // writes made: the number of the last
	slot int    // the slot written last
	buf  [markSlot]byte
}

// write writes m to the slot not written last.
func (mf *markFile) write(m mark) error {
	mf.gen++
	mf.slot ^= 1
	m.encode(&mf.buf, mf.gen)
	if err := mf.put(mf.slot); err != nil {
		return fmt.Errorf("write %s: %w", markName, err)
	}
	mf.last = m
	return nil
}

// mapMark maps the mark file, both slots, if its file system gives a
// descriptor; else the mark is written with WriteAt.
func (mf *markFile) mapMark() {
	fd := mf.f.Fd()
	if fi, err := mf.f.Stat(); fd == vfs.InvalidFd || err != nil || fi.Size() < 2*markSlot {
		return // a page past the end of the file would fault
	}
	if mem, err := unix.Mmap(int(fd), 0, 2*markSlot, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err == nil {
		mf.mem = mem
	}
}

// put writes buf to slot.
func (mf *markFile) put(slot int) error {
	if mf.mem != nil {
		copy(mf.mem[slot*markSlot:(slot+1)*markSlot], mf.buf[:])
		return nil
	}
	_, err := mf.f.WriteAt(mf.buf[:], int64(slot*markSlot))
	return err
}

// createMark writes m to both slots of a new (or replaced) mark file in
// dir, syncs it and the directory: the baseline of a new store, of one
// written before marks, or of one opened with what could be read.
func createMark(fsys vfs.FS, dir string, m mark) (*markFile, error) {
	name := fsys.PathJoin(dir, markName)
	f, err := fsys.Create(name)
	if err != nil {
		return nil, err
	}
	mf := &markFile{f: f, last: m, gen: 1}
	m.encode(&mf.buf, mf.gen)
	for slot := range 2 {
		if _, err := f.WriteAt(mf.buf[:], int64(slot*markSlot)); err != nil {
			f.Close()
			return nil, err
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, err
	}
	if d, err := fsys.OpenDir(dir); err == nil {
		err = d.Sync()
		d.Close()
		if err != nil {
			f.Close()
			return nil, err
		}
	}
	mf.mapMark()
	return mf, nil
}

// openMark opens the mark file in dir to advance it from m, what it holds.
func openMark(fsys vfs.FS, dir string, m mark) (*markFile, error) {
	f, err := fsys.OpenReadWrite(fsys.PathJoin(dir, markName))
	if err != nil {
		return nil, err
	}
	var buf [2 * markSlot]byte
	n, _ := f.ReadAt(buf[:], 0)
	mf := &markFile{f: f, last: m}
	var ok bool
	if _, mf.gen, ok = readSlots(buf[:n]); ok { // the next write goes to the other slot
		for slot := range 2 {
			if _, g, good := decodeMark(buf[slot*markSlot : min(n, (slot+1)*markSlot)]); good && g == mf.gen {
				mf.slot = slot
			}
		}
	}
	mf.mapMark()
	return mf, nil
}

// advance records m if it goes further than the mark does. Where m
// says the log or the MANIFEST stood, read before the lock, is kept only
// if it is no older than what the mark says.
func (mf *markFile) advance(m mark) error {
	mf.mu.Lock()
	defer mf.mu.Unlock()
	if m.seq <= mf.last.seq {
		return nil
	}
	if l := mf.last; m.walNum < l.walNum || m.walNum == l.walNum && m.walSynced < l.walSynced {
		m.walNum, m.walSynced = l.walNum, l.walSynced
	}
	if l := mf.last; m.manNum < l.manNum || m.manNum == l.manNum && m.manSynced < l.manSynced {
		m.manNum, m.manSynced = l.manNum, l.manSynced
	}
	return mf.write(m)
}

// refresh rewrites the mark with where the log and the MANIFEST stand
// now: a MANIFEST grows between batches, as Pebble flushes and compacts.
func (mf *markFile) refresh(man syncedTo) error {
	mf.mu.Lock()
	defer mf.mu.Unlock()
	m := mf.last
	if man.num < m.manNum || man.num == m.manNum && man.synced <= m.manSynced {
		return nil
	}
	m.manNum, m.manSynced = man.num, man.synced
	return mf.write(m)
}

// get is the mark as last written.
func (mf *markFile) get() mark {
	mf.mu.Lock()
	defer mf.mu.Unlock()
	return mf.last
}

func (mf *markFile) close() error {
	mf.mu.Lock()
	defer mf.mu.Unlock()
	if mf.mem != nil {
		unix.Munmap(mf.mem)
		mf.mem = nil
	}
	return mf.f.Close()
}
