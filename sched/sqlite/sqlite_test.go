package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"switchyard/sched"
)

func open(t *testing.T, cfg Config) *Store {
	t.Helper()
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func save(t *testing.T, s *Store, r *sched.Record) {
	t.Helper()
	ch := make(chan error, 1)
	s.Put(r.ID, s.Encode(r), func(err error) { ch <- err })
	if err := <-ch; err != nil {
		t.Fatal(err)
	}
}

func flush(t *testing.T, s *Store) {
	t.Helper()
	ch := make(chan error, 1)
	s.Flush(func(err error) { ch <- err })
	if err := <-ch; err != nil {
		t.Fatal(err)
	}
}

// rows reads the table as gearmand's tests do, with a connection of its
// own: "unique|function|priority|data|when", in rowid order.
func rows(t *testing.T, path, table string) []string {
	t.Helper()
	db, err := sql.Open("sqlite", dsn(path))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	q, err := db.Query("SELECT unique_key, function_name, priority, data, when_to_run FROM " + quote(table) + " ORDER BY rowid")
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	var out []string
	for q.Next() {
		var u, f string
		var p, w int64
		var d []byte
		if err := q.Scan(&u, &f, &p, &d, &w); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s|%s|%d|%s|%d", u, f, p, d, w))
	}
	return out
}

func exec(t *testing.T, path string, stmts ...string) {
	t.Helper()
	db, err := sql.Open("sqlite", dsn(path))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// Rows are gearmand's: its columns, its key, its priority numbers. A
// delete removes the row; a job saved again keeps one row.
func TestRowsAreGearmands(t *testing.T) {
	for _, table := range []string{"", "custom_table"} {
		t.Run(table, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "odd?name#%41.sql")
			s := open(t, Config{Path: path, Table: table})
			save(t, s, &sched.Record{ID: 1, Func: "f", Unique: "u1", Payload: []byte("one"), Priority: sched.High})
			save(t, s, &sched.Record{ID: 2, Func: "f", Unique: "u2", Payload: []byte("two"), Priority: sched.Low, When: 1900000000})
			save(t, s, &sched.Record{ID: 3, Func: "g", Unique: "u3", Payload: []byte("three")})
			save(t, s, &sched.Record{ID: 2, Func: "f", Unique: "u2", Payload: []byte("two again"), Priority: sched.Low, When: 1900000060})
			s.Delete(1)
			s.Delete(99) // never stored: nothing happens
			flush(t, s)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(path); err != nil {
				t.Fatal(err)
			}
			if table == "" {
				table = DefaultTable
			}
			got := strings.Join(rows(t, path, table), "\n")
			want := "u3|g|0|three|0\nu2|f|2|two again|1900000060"
			if got != want {
				t.Fatalf("rows:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

// A job without a unique of its own, and a job coalescing on its payload
// ("-", whose rows would collide), each get a UUID-shaped key of their own,
// the same each time the job is written.
func TestMadeKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	s := open(t, Config{Path: path})
	save(t, s, &sched.Record{ID: 10, Func: "f", Payload: []byte("a")})
	save(t, s, &sched.Record{ID: 11, Func: "f", Payload: []byte("b")})
	save(t, s, &sched.Record{ID: 12, Func: "f", Unique: "-", Payload: []byte("c"), CoalesceOnPayload: true})
	save(t, s, &sched.Record{ID: 13, Func: "f", Unique: "-", Payload: []byte("d"), CoalesceOnPayload: true})
	save(t, s, &sched.Record{ID: 10, Func: "f", Payload: []byte("a2")})
	s.Close()
	got := rows(t, path, DefaultTable)
	if len(got) != 4 {
		t.Fatalf("rows %q", got)
	}
	keys := map[string]bool{}
	for _, r := range got {
		k := r[:strings.IndexByte(r, '|')]
		if len(k) != 36 || strings.Count(k, "-") != 4 || keys[k] {
			t.Fatalf("key %q in %q", k, got)
		}
		keys[k] = true
	}
	if !strings.HasSuffix(got[3], "|f|0|a2|0") {
		t.Fatalf("rewritten job: %q", got)
	}
}

// The rows replay through a real scheduler in the order they were written,
// under new ids the store then deletes by; a "-" row coalesces on its
// payload again; due times come back.
func TestReplayIntoScheduler(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	exec(t, path,
		"CREATE TABLE gearman_queue ( unique_key TEXT, function_name TEXT, priority INTEGER, data BLOB, when_to_run INTEGER, PRIMARY KEY (unique_key, function_name))",
		"INSERT INTO gearman_queue VALUES ('b', 'f', 1, x'6232', 0)",
		"INSERT INTO gearman_queue VALUES ('-', 'f', 1, 'payload', 0)",
		"INSERT INTO gearman_queue VALUES ('a', 'f', 0, 'a1', 0)",
		"INSERT INTO gearman_queue VALUES ('later', 'f', 1, 'l', 4000000000)",
		"INSERT INTO gearman_queue VALUES ('c', 'f', 2, '', 0)",
	)
	s := open(t, Config{Path: path})
	sc := sched.New(sched.Config{Store: s})
	if n, err := sc.Replay(); err != nil || n != 5 {
		t.Fatalf("replay: %d, %v", n, err)
	}
	c := sc.NewClient(nopClient{})
	id, err := c.Submit(&sched.SubmitReq{Func: []byte("f"), Unique: []byte("-"), Payload: []byte("payload"), Background: true, CoalesceOnPayload: true})
	if err != nil {
		t.Fatal(err)
	}
	w := sc.NewWorker(nopWaker{})
	w.CanDo([]byte("f"), 0)
	var order []string
	for j := w.Grab(); j != nil; j = w.Grab() {
		if j.Unique() == "-" && j.ID() != id {
			t.Fatalf("a '-' submit with the same payload made job %d, not joined %d", id, j.ID())
		}
		order = append(order, j.Unique()+"="+string(j.Payload()))
		w.Update(j.ID(), &sched.Update{Kind: sched.Complete})
	}
	if got := fmt.Sprint(order); got != "[a=a1 b=b2 -=payload c=]" {
		t.Fatalf("order %s", got)
	}
	sc.Close()
	flush(t, s)
	s.Close()
	if got := rows(t, path, DefaultTable); len(got) != 1 || got[0] != "later|f|1|l|4000000000" {
		t.Fatalf("rows left %q, want only the job not yet due", got)
	}
}

type nopClient struct{}

func (nopClient) Notify(uint64, *sched.Update) {}

type nopWaker struct{}

func (nopWaker) Wake(any) {}

// gearmand's tables from before epoch jobs get the when_to_run column, as
// gearmand gives it; its rows replay due now.
func TestOldTable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	exec(t, path,
		"CREATE TABLE gearman_queue ( unique_key TEXT, function_name TEXT, priority INTEGER, data BLOB, PRIMARY KEY (unique_key, function_name))",
		"INSERT INTO gearman_queue VALUES ('u', 'f', 1, 'p')",
	)
	s := open(t, Config{Path: path})
	defer s.Close()
	var got []string
	if err := s.Load(func(r *sched.Record) error {
		r.ID = 7
		got = append(got, fmt.Sprintf("%s %s %d %s %d", r.Func, r.Unique, r.Priority, r.Payload, r.When))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[f u 1 p 0]" {
		t.Fatalf("loaded %q", got)
	}
}

// What cannot be read is an error naming the file (and the row), never an
// empty queue.
func TestUnreadable(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.db")
	if err := os.WriteFile(garbage, []byte(strings.Repeat("not a database\n", 100)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Config{Path: garbage}); err == nil || !strings.Contains(err.Error(), garbage) {
		t.Fatalf("garbage file: %v", err)
	}
	if _, err := Open(Config{Path: filepath.Join(dir, "no", "such", "dir", "q.db")}); err == nil {
		t.Fatal("opened a database in a directory that does not exist")
	}
	if _, err := Open(Config{}); err == nil || !strings.Contains(err.Error(), "--libsqlite3-db") {
		t.Fatalf("no path: %v", err)
	}
	for name, row := range map[string]string{
		"priority": "INSERT INTO gearman_queue VALUES ('u', 'f', 7, 'p', 0)",
		"function": "INSERT INTO gearman_queue VALUES ('u', NULL, 1, 'p', 0)",
		"when":     "INSERT INTO gearman_queue VALUES ('u', 'f', 1, 'p', 'soon')",
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name+".db")
			exec(t, path, "CREATE TABLE gearman_queue ( unique_key TEXT, function_name TEXT, priority INTEGER, data BLOB, when_to_run INTEGER, PRIMARY KEY (unique_key, function_name))", row)
			s := open(t, Config{Path: path})
			defer s.Close()
			err := s.Load(func(r *sched.Record) error { r.ID = 1; return nil })
			if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "row 1") {
				t.Fatalf("bad row: %v", err)
			}
		})
	}
}

// A write that fails reaches done with an error naming the file, and
// changes nothing; the store goes on.
func TestWriteError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	s := open(t, Config{Path: path})
	defer s.Close()
	save(t, s, &sched.Record{ID: 1, Func: "f", Unique: "u"})
	exec(t, path, "DROP TABLE gearman_queue")
	ch := make(chan error, 1)
	s.Put(2, s.Encode(&sched.Record{ID: 2, Func: "f", Unique: "v"}), func(err error) { ch <- err })
	if err := <-ch; err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("write to a dropped table: %v", err)
	}
	exec(t, path, "CREATE TABLE gearman_queue ( unique_key TEXT, function_name TEXT, priority INTEGER, data BLOB, when_to_run INTEGER, PRIMARY KEY (unique_key, function_name))")
	save(t, s, &sched.Record{ID: 3, Func: "f", Unique: "w"})
}

// A full database (SQLite's max_page_count, as a full disk would) fails
// the writes: Stats says so and counts them, Watch tells of it, and the
// first transaction that commits once there is room clears it.
func TestFullDiskShows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	s := open(t, Config{Path: path})
	defer s.Close()
	save(t, s, &sched.Record{ID: 1, Func: "f", Unique: "u"})
	if st := s.Stats(); st.Failure != nil || st.WriteErrors != 0 {
		t.Fatalf("stats before: %+v", st)
	}
	ctx := context.Background()
	var pages int64
	if err := s.conn.QueryRowContext(ctx, "PRAGMA page_count").Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if _, err := s.conn.ExecContext(ctx, fmt.Sprintf("PRAGMA max_page_count = %d", pages)); err != nil {
		t.Fatal(err)
	}
	changed := s.Watch()
	big := strings.Repeat("x", 64<<10)
	ch := make(chan error, 1)
	s.Put(2, s.Encode(&sched.Record{ID: 2, Func: "f", Unique: "v", Payload: []byte(big)}), func(err error) { ch <- err })
	if err := <-ch; err == nil || !strings.Contains(err.Error(), "full") {
		t.Fatalf("a write to a full database: %v", err)
	}
	select {
	case <-changed:
	default:
		t.Fatal("Watch did not tell of the failure")
	}
	if st := s.Stats(); st.Failure == nil || st.WriteErrors != 1 {
		t.Fatalf("stats once full: %+v", st)
	}
	// A delete commits on a full disk, and proves nothing.
	s.Delete(1)
	flush(t, s)
	if st := s.Stats(); st.Failure == nil {
		t.Fatalf("stats after a delete committed on a full disk: %+v", st)
	}
	changed = s.Watch()
	if _, err := s.conn.ExecContext(ctx, "PRAGMA max_page_count = 1073741823"); err != nil {
		t.Fatal(err)
	}
	save(t, s, &sched.Record{ID: 3, Func: "f", Unique: "w", Payload: []byte(big)})
	select {
	case <-changed:
	default:
		t.Fatal("Watch did not tell of the recovery")
	}
	if st := s.Stats(); st.Failure != nil || st.WriteErrors != 1 {
		t.Fatalf("stats once there is room: %+v", st)
	}
}

// Every sync mode keeps what it acknowledged across a reopen; writes from
// many goroutines all land, each answered once.
func TestModes(t *testing.T) {
	for name, cfg := range map[string]Config{"batch": {}, "always": {EachRecord: true}, "never": {NoSync: true}} {
		t.Run(name, func(t *testing.T) {
			cfg.Path = filepath.Join(t.TempDir(), "q.db")
			s := open(t, cfg)
			var wg sync.WaitGroup
			for g := 0; g < 4; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 1; i <= 50; i++ {
						id := uint64(g*100 + i)
						save(t, s, &sched.Record{ID: id, Func: "f", Unique: fmt.Sprint(id)})
						if i%2 == 0 {
							s.Delete(id)
						}
					}
				}()
			}
			wg.Wait()
			flush(t, s)
			s.Close()
			if got := len(rows(t, cfg.Path, DefaultTable)); got != 100 {
				t.Fatalf("%d rows, want 100", got)
			}
		})
	}
}

// With StoreOnShutdown nothing reaches the table while the server runs;
// Close writes the jobs still kept in submit order, in place of what was
// there; a replayed job that is done by then is gone.
func TestStoreOnShutdown(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	cfg := Config{Path: path, StoreOnShutdown: true}
	s := open(t, cfg)
	for id := uint64(1); id <= 4; id++ {
		save(t, s, &sched.Record{ID: id, Func: "f", Unique: fmt.Sprint("u", id), Payload: []byte("p")})
	}
	s.Delete(2)
	flush(t, s)
	if got := rows(t, path, DefaultTable); len(got) != 0 {
		t.Fatalf("rows while running: %q", got)
	}
	s.Close()
	if got := fmt.Sprint(rows(t, path, DefaultTable)); got != "[u1|f|0|p|0 u3|f|0|p|0 u4|f|0|p|0]" {
		t.Fatalf("rows after close: %s", got)
	}

	s = open(t, cfg)
	next := uint64(100)
	if err := s.Load(func(r *sched.Record) error { r.ID = next; next++; return nil }); err != nil {
		t.Fatal(err)
	}
	s.Delete(101) // u3 ran
	flush(t, s)
	if got := len(rows(t, path, DefaultTable)); got != 3 {
		t.Fatalf("%d rows while running, want the 3 replayed until close", got)
	}
	s.Close()
	if got := fmt.Sprint(rows(t, path, DefaultTable)); got != "[u1|f|0|p|0 u4|f|0|p|0]" {
		t.Fatalf("rows after second close: %s", got)
	}
}

// A crash of the process (kill -9) loses nothing acknowledged in any sync
// mode, NoSync included: SQLite writes a transaction to the file before
// it reports it committed, so the kernel has it. The crash is a copy of
// the database's files, made while the store is open and idle.
func TestAcknowledgedSurviveProcessCrash(t *testing.T) {
	for name, cfg := range map[string]Config{"batch": {}, "always": {EachRecord: true}, "never": {NoSync: true}} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			cfg.Path = filepath.Join(dir, "q.db")
			s := open(t, cfg)
			defer s.Close()
			const n = 20
			for id := uint64(1); id <= n; id++ {
				save(t, s, &sched.Record{ID: id, Func: "f", Unique: fmt.Sprint(id)})
			}
			crashed := filepath.Join(t.TempDir(), "q.db")
			for _, suffix := range []string{"", "-wal", "-journal"} {
				b, err := os.ReadFile(cfg.Path + suffix)
				if os.IsNotExist(err) && suffix != "" {
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(crashed+suffix, b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if got := len(rows(t, crashed, DefaultTable)); got != n {
				t.Fatalf("after the crash: %d rows, want %d", got, n)
			}
		})
	}
}
