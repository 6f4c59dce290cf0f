// Package sqlite is the scheduler's store for gearmand's own SQLite queue
// (-q libsqlite3): the same file, the same table and columns, so an
// operator can stop gearmand and start switchyard on its database, and go
// back again.
//
// gearmand's table keeps a job's function, unique, priority, payload and
// due time, keyed by (unique_key, function_name), and no job handle. So a
// job's row is found by its key: the store remembers which key it gave each
// job id. A job with no unique of its own (or gearmand's "-", which
// coalesces on the payload and whose key would collide) is written under a
// generated UUID-shaped key; after a restart that key is its unique, as if
// the client had made one up, which is what libgearman does. What the table
// has no column for (a reducer, Periodic's timeout, counter and retry mode)
// does not survive a restart: the durable store keeps all of it.
//
// Writes go as in the durable store: one goroutine, and everything queued
// while it writes is one transaction, one sync (group commit). With
// StoreOnShutdown the table is written only when the store closes, as
// gearmand's --store-queue-on-shutdown does: a crash loses what was queued
// since the start.
package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	_ "modernc.org/sqlite" // pure Go: the server is built without cgo

	"switchyard/sched"
	"switchyard/sched/internal/writeq"
)

// DefaultTable is gearmand's default --libsqlite3-table.
const DefaultTable = "gearman_queue"

// Config says which database and how to write it.
type Config struct {
	Path  string // --libsqlite3-db
	Table string // --libsqlite3-table; DefaultTable if empty
	// StoreOnShutdown writes the queue only at Close
	// (--store-queue-on-shutdown): fast, and a crash loses every job
	// submitted since the start.
	StoreOnShutdown bool
	// EachRecord commits every write on its own (--fsync always); NoSync
	// leaves the file to the kernel (--fsync never). Neither: one
	// transaction and one sync per batch.
	EachRecord, NoSync bool
}

// ErrClosed is what writes queued after Close get.
var ErrClosed = errors.New("sqlite: store closed")

// Store keeps jobs in gearmand's queue table.
type Store struct {
	cfg  Config
	db   *sql.DB
	conn *sql.Conn // one connection: its pragmas hold, its writes are ordered
	salt [8]byte   // makes this run's generated keys unlike any earlier run's

	insert, remove *sql.Stmt

	queue   *writeq.Queue[op] // waiting for the writer
	stopped chan struct{}

	statsMu     sync.Mutex
	commits     sched.Histogram // how long each transaction took to commit, see Stats
	writeErrors uint64          // transactions that failed
	failure     error           // the last transaction's error, until one commits
	changed     chan struct{}   // closed when failure is set or cleared, then replaced

	// The writer's own (Load fills them before any write is queued).
	keys map[uint64]rowKey // the row each stored job is under
	held map[uint64][]byte // StoreOnShutdown: what Close writes
}

type rowKey struct{ fn, unique string }

type op struct {
	kind opKind
	id   uint64
	rec  []byte
	done func(error)
}

type opKind uint8

const (
	opPut opKind = iota
	opDelete
	opFlush
)

// Open opens (or creates) the database and its table, as gearmand does: an
// older table without when_to_run gets the column. A file that is not a
// database, or a table that cannot be read, is an error naming the file.
func Open(cfg Config) (*Store, error) {
	if cfg.Path == "" {
		return nil, errors.New("missing required --libsqlite3-db=<dbfile> argument") // gearmand's words
	}
	if cfg.Table == "" {
		cfg.Table = DefaultTable
	}
	s := &Store{cfg: cfg, queue: writeq.New[op](), stopped: make(chan struct{}), keys: make(map[uint64]rowKey),
		changed: make(chan struct{})}
	if cfg.StoreOnShutdown {
		s.held = make(map[uint64][]byte)
	}
	if _, err := rand.Read(s.salt[:]); err != nil {
		return nil, err
	}
	if err := s.open(); err != nil {
		if s.db != nil {
			s.db.Close()
		}
		return nil, fmt.Errorf("sqlite: %s: %w", cfg.Path, err)
	}
	go s.write()
	return s, nil
}

func (s *Store) open() error {
	var err error
	if s.db, err = sql.Open("sqlite", dsn(s.cfg.Path)); err != nil {
		return err
	}
	ctx := context.Background()
	if s.conn, err = s.db.Conn(ctx); err != nil {
		return err
	}
	sync := "FULL"
	if s.cfg.NoSync {
		sync = "OFF"
	}
	// busy_timeout as gearmand's: someone reading the file (sqlite3, a
	// test) holds a lock for a moment.
	for _, q := range []string{"PRAGMA busy_timeout = 6000", "PRAGMA synchronous = " + sync} {
		if _, err := s.conn.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	t := quote(s.cfg.Table)
	var n int
	if err := s.conn.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master WHERE type='table' AND name=?", s.cfg.Table).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		if _, err := s.conn.ExecContext(ctx, "CREATE TABLE "+t+
			" ( unique_key TEXT, function_name TEXT, priority INTEGER, data BLOB, when_to_run INTEGER, PRIMARY KEY (unique_key, function_name))"); err != nil {
			return err
		}
	} else if rows, err := s.conn.QueryContext(ctx, "SELECT when_to_run FROM "+t+" LIMIT 0"); err != nil {
		// gearmand's tables from before epoch jobs.
		if _, err := s.conn.ExecContext(ctx, "ALTER TABLE "+t+" ADD COLUMN when_to_run INTEGER"); err != nil {
			return err
		}
	} else {
		rows.Close()
	}
	if s.insert, err = s.conn.PrepareContext(ctx, "INSERT OR REPLACE INTO "+t+
		" (priority, unique_key, function_name, data, when_to_run) VALUES (?,?,?,?,?)"); err != nil {
		return err
	}
	if s.remove, err = s.conn.PrepareContext(ctx, "DELETE FROM "+t+" WHERE unique_key=? and function_name=?"); err != nil {
		return err
	}
	return nil
}

// dsn names the file at path, whatever it holds, as gearmand passes it to
// sqlite3_open: said as a URI, the driver's only way to take a name with '?'
// in it.
func dsn(path string) string {
	return "file:" + strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
}

// quote makes name an SQL identifier, whatever it holds.
func quote(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }

// Path is the database file.
func (s *Store) Path() string { return s.cfg.Path }

// Encode is the row Put writes for r (sched.Store). A job without a key of
// its own gets one made from this run's salt and its id, so every rewrite of
// it lands on the same row.
//
//	uvarint-prefixed func, unique; priority; varint when; payload to the end.
func (s *Store) Encode(r *sched.Record) []byte {
	unique := r.Unique
	if unique == "" || r.CoalesceOnPayload {
		unique = s.madeKey(r.ID)
	}
	b := make([]byte, 0, 2*binary.MaxVarintLen64+len(r.Func)+len(unique)+1+binary.MaxVarintLen64+len(r.Payload))
	b = binary.AppendUvarint(b, uint64(len(r.Func)))
	b = append(b, r.Func...)
	b = binary.AppendUvarint(b, uint64(len(unique)))
	b = append(b, unique...)
	b = append(b, byte(r.Priority))
	b = binary.AppendVarint(b, r.When)
	return append(b, r.Payload...)
}

// madeKey is a UUID-shaped key for job id: 8 bytes of salt, 8 of id.
func (s *Store) madeKey(id uint64) string {
	var raw [16]byte
	copy(raw[:8], s.salt[:])
	binary.BigEndian.PutUint64(raw[8:], id)
	var h [36]byte
	hex.Encode(h[0:8], raw[0:4])
	hex.Encode(h[9:13], raw[4:6])
	hex.Encode(h[14:18], raw[6:8])
	hex.Encode(h[19:23], raw[8:10])
	hex.Encode(h[24:36], raw[10:16])
	h[8], h[13], h[18], h[23] = '-', '-', '-', '-'
	return string(h[:])
}

type row struct {
	fn, unique string
	prio       sched.Priority
	when       int64
	payload    []byte
}

func parseRow(b []byte) (row, bool) {
	var r row
	for _, dst := range []*string{&r.fn, &r.unique} {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return r, false
		}
		*dst, b = string(b[k:k+int(n)]), b[k+int(n):]
	}
	if len(b) < 1 {
		return r, false
	}
	r.prio, b = sched.Priority(b[0]), b[1:]
	w, k := binary.Varint(b)
	if k <= 0 {
		return r, false
	}
	r.when, r.payload = w, b[k:]
	return r, true
}

// Put queues rec, from Encode, as job id's row (sched.Store).
func (s *Store) Put(id uint64, rec []byte, done func(error)) {
	s.enqueue(op{kind: opPut, id: id, rec: rec, done: done})
}

// Delete queues the removal of job id's row (sched.Store).
func (s *Store) Delete(id uint64) { s.enqueue(op{kind: opDelete, id: id}) }

// Flush calls done once every write queued before it is on disk
// (sched.Store).
func (s *Store) Flush(done func(error)) { s.enqueue(op{kind: opFlush, done: done}) }

func (s *Store) enqueue(o op) {
	if !s.queue.Push(o) && o.done != nil {
		go o.done(ErrClosed) // never from within the call that queued it
	}
}

// write is the writer goroutine: everything queued is one transaction.
func (s *Store) write() {
	defer close(s.stopped)
	for {
		ops, ok := s.queue.Take()
		if !ok {
			return
		}
		if s.cfg.EachRecord {
			for i := range ops {
				s.commit(ops[i : i+1])
			}
		} else {
			s.commit(ops)
		}
		s.queue.Recycle(ops)
	}
}

// commit applies ops in one transaction and answers them. A failed
// transaction changes nothing on disk; the keys it would have recorded stay
// as they were, so later deletes still find the rows that are there.
func (s *Store) commit(ops []op) {
	var err error
	if s.held != nil {
		s.keep(ops)
	} else {
		err = s.apply(ops)
	}
	if err != nil {
		err = fmt.Errorf("sqlite: write to %s: %w", s.cfg.Path, err)
	}
	s.noteWrite(err, slices.ContainsFunc(ops, func(o op) bool { return o.kind == opPut }))
	for i := range ops {
		if ops[i].done != nil {
			ops[i].done(err)
		}
	}
}

// noteWrite counts a transaction that failed, and keeps its error as the
// store's failure until one that inserted (puts) commits: for /healthz and
// the metrics. (One that only deletes proves nothing: a full disk takes
// it.) Each transaction stands alone (a failed one changes nothing), so
// the store takes writes again as soon as the disk does.
func (s *Store) noteWrite(err error, puts bool) {
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	if err != nil {
		s.writeErrors++
	} else if !puts {
		return
	}
	if (err == nil) != (s.failure == nil) {
		s.failure = err
		close(s.changed)
		s.changed = make(chan struct{})
	}
}

// Watch is closed once the store's Failure is set or cleared after the
// call: read Stats then, and Watch again.
func (s *Store) Watch() <-chan struct{} {
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	return s.changed
}

// keep is commit for StoreOnShutdown: the rows wait in memory for Close.
func (s *Store) keep(ops []op) {
	for _, o := range ops {
		switch o.kind {
		case opPut:
			s.held[o.id] = o.rec
		case opDelete:
			delete(s.held, o.id)
		}
	}
}

func (s *Store) apply(ops []op) error {
	ctx := context.Background()
	tx, err := s.conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	ins, del := tx.Stmt(s.insert), tx.Stmt(s.remove)
	changed := make(map[uint64]rowKey) // keys as of this transaction
	key := func(id uint64) (rowKey, bool) {
		if k, ok := changed[id]; ok {
			return k, k != rowKey{}
		}
		k, ok := s.keys[id]
		return k, ok
	}
	for _, o := range ops {
		switch o.kind {
		case opPut:
			r, ok := parseRow(o.rec)
			if !ok {
				err = errors.New("record does not decode")
				break
			}
			k := rowKey{r.fn, r.unique}
			if old, ok := key(o.id); ok && old != k {
				_, err = del.ExecContext(ctx, old.unique, old.fn)
			}
			if err == nil {
				_, err = ins.ExecContext(ctx, int64(r.prio), r.unique, r.fn, r.payload, r.when)
			}
			changed[o.id] = k
		case opDelete:
			if k, ok := key(o.id); ok {
				_, err = del.ExecContext(ctx, k.unique, k.fn)
				changed[o.id] = rowKey{}
			}
		}
		if err != nil {
			break
		}
	}
	if err == nil {
		start := time.Now()
		err = tx.Commit()
		took := time.Since(start)
		s.statsMu.Lock()
		s.commits.Observe(took)
		s.statsMu.Unlock()
	} else {
		tx.Rollback()
	}
	if err != nil {
		return err
	}
	for id, k := range changed {
		if k == (rowKey{}) {
			delete(s.keys, id)
		} else {
			s.keys[id] = k
		}
	}
	return nil
}

// Load calls fn for every row, in the order they were written (sched.Store).
// The rows carry no job id: fn gives each one (sched.Replay does), and the
// store remembers which row it is. A row that is not what gearmand writes
// stops it with an error naming the file.
func (s *Store) Load(fn func(*sched.Record) error) error {
	ctx := context.Background()
	rows, err := s.conn.QueryContext(ctx, "SELECT unique_key, function_name, priority, data, when_to_run FROM "+
		quote(s.cfg.Table)+" ORDER BY rowid")
	if err != nil {
		return fmt.Errorf("sqlite: read %s: %w", s.cfg.Path, err)
	}
	defer rows.Close()
	var r sched.Record
	n := 0
	for rows.Next() {
		n++
		var unique, name, data, prio, when any
		if err := rows.Scan(&unique, &name, &prio, &data, &when); err != nil {
			return fmt.Errorf("sqlite: read %s: %w", s.cfg.Path, err)
		}
		if err := fill(&r, unique, name, prio, data, when); err != nil {
			return fmt.Errorf("sqlite: %s: table %s, row %d: %w", s.cfg.Path, s.cfg.Table, n, err)
		}
		if err := fn(&r); err != nil {
			return err
		}
		if r.ID == 0 {
			return fmt.Errorf("sqlite: %s: row %d was given no job id", s.cfg.Path, n)
		}
		k := rowKey{r.Func, r.Unique}
		s.keys[r.ID] = k
		if s.held != nil {
			// Written again at Close unless it is done by then; the key it
			// is under stays its own.
			s.held[r.ID] = s.Encode(&sched.Record{ID: r.ID, Func: r.Func, Unique: k.unique, Payload: r.Payload, Priority: r.Priority, When: r.When})
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("sqlite: read %s: %w", s.cfg.Path, err)
	}
	return nil
}

// fill makes r the job a row describes. The column types are the ones
// gearmand writes; a when_to_run still NULL (a column gearmand added to an
// old table) is "now".
func fill(r *sched.Record, unique, name, prio, data, when any) error {
	*r = sched.Record{}
	var ok bool
	if r.Unique, ok = text(unique); !ok {
		return fmt.Errorf("unique_key is %T, not text", unique)
	}
	if r.Func, ok = text(name); !ok || r.Func == "" {
		return fmt.Errorf("function_name is %T %q, not a name", name, r.Func)
	}
	p, ok := prio.(int64)
	if !ok || p < int64(sched.High) || p > int64(sched.Low) {
		return fmt.Errorf("priority %v is not 0, 1 or 2", prio)
	}
	r.Priority = sched.Priority(p)
	switch d := data.(type) {
	case []byte:
		r.Payload = d
	case string:
		r.Payload = []byte(d)
	case nil:
	default:
		return fmt.Errorf("data is %T, not a blob", data)
	}
	switch w := when.(type) {
	case int64:
		r.When = w
	case nil:
	default:
		return fmt.Errorf("when_to_run is %T, not an integer", when)
	}
	// gearmand's "-": coalesce on the payload, as its clients asked.
	r.CoalesceOnPayload = r.Unique == "-"
	return nil
}

func text(v any) (string, bool) {
	switch t := v.(type) {
	case string:
		return t, true
	case []byte:
		return string(t), true
	}
	return "", false
}

// Close writes what is queued (with StoreOnShutdown: every job still
// kept, in place of what the table held), then closes the database.
func (s *Store) Close() error {
	s.queue.Close()
	<-s.stopped
	var err error
	if s.held != nil {
		err = s.storeAll()
	}
	for _, c := range []interface{ Close() error }{s.insert, s.remove, s.conn, s.db} {
		if cerr := c.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// storeAll replaces the table's rows with the jobs kept, in id order: the
// order they were submitted in, each function's queue order.
func (s *Store) storeAll() error {
	ids := make([]uint64, 0, len(s.held))
	for id := range s.held {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	ctx := context.Background()
	tx, err := s.conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	ins := tx.Stmt(s.insert)
	if _, err = tx.ExecContext(ctx, "DELETE FROM "+quote(s.cfg.Table)); err == nil {
		for _, id := range ids {
			r, _ := parseRow(s.held[id])
			if _, err = ins.ExecContext(ctx, int64(r.prio), r.unique, r.fn, r.payload, r.when); err != nil {
				break
			}
		}
	}
	if err != nil {
		tx.Rollback()
		return fmt.Errorf("sqlite: store the queue in %s: %w", s.cfg.Path, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlite: store the queue in %s: %w", s.cfg.Path, err)
	}
	return nil
}

// Stats is what the store reports for monitoring.
type Stats struct {
	// DiskBytes is the size of the database file and of its journal.
	DiskBytes uint64
	// Commits times each transaction's commit, which is where SQLite syncs
	// the file (unless Config.NoSync).
	Commits sched.Histogram
	// WriteErrors counts the transactions that failed; Failure is the last
	// one's error, until a transaction commits.
	WriteErrors uint64
	Failure     error
}

// Stats reads the store's figures.
func (s *Store) Stats() Stats {
	var st Stats
	for _, suffix := range []string{"", "-wal", "-journal"} {
		if fi, err := os.Stat(s.cfg.Path + suffix); err == nil {
			st.DiskBytes += uint64(fi.Size())
		}
	}
	s.statsMu.Lock()
	st.Commits, st.WriteErrors, st.Failure = s.commits, s.writeErrors, s.failure
	s.statsMu.Unlock()
	return st
}
