package main

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	_ "modernc.org/sqlite"

	"switchyard/engine/ops/opstest"
)

const (
	pSubmitJobHighBg = 32
	pSubmitJobEpoch  = 36
)

// sqliteRows reads gearmand's queue table from the file: "unique|function|
// priority|data|when", sorted by function, then unique.
func sqliteRows(t *testing.T, path string) []string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	q, err := db.Query("SELECT unique_key, function_name, priority, data, when_to_run FROM gearman_queue ORDER BY function_name, unique_key")
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	out := []string{}
	for q.Next() {
		var u, f string
		var p, w int64
		var d []byte
		if err := q.Scan(&u, &f, &p, &d, &w); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s|%s|%d|%s|%d", u, f, p, d, w))
	}
	if err := q.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// grabAll runs fn's jobs that are due, in the order the server hands them
// out: "unique=payload" each.
func grabAll(t *testing.T, addr, fn string) []string {
	t.Helper()
	w := dialGear(t, addr, "worker")
	defer w.c.Close()
	w.send(pCanDo, fn)
	var got []string
	for {
		w.send(pGrabJobUniq)
		p := w.recv(10 * time.Second)
		if p.typ == pNoJob {
			return got
		}
		if p.typ != pJobAssignUniq {
			t.Fatalf("GRAB_JOB_UNIQ answered %v", p)
		}
		a := strings.SplitN(string(p.body), "\x00", 4)
		got = append(got, a[2]+"="+a[3])
		w.send(pWorkComplete, a[0], "done")
	}
}

// An operator stops gearmand (-q libsqlite3) and starts switchyard on the
// same file: gearmand's queued jobs run, by priority and in submit order,
// and are deleted from its table; a job not yet due stays. Then back: what
// switchyard queued, gearmand runs.
func TestE2ESqliteFromGearmand(t *testing.T) {
	t.Parallel()
	gearmand := requireTool(t, "gearmand")
	db := filepath.Join(t.TempDir(), "gearman.sql")
	q := []string{"-q", "libsqlite3", "--libsqlite3-db", db}
	later := fmt.Sprint(time.Now().Add(time.Hour).Unix())

	g, _ := startBinaryPorts(t, gearmand, 1, q...)
	c := dialGear(t, g.addr, "client")
	c.submit(pSubmitJobBg, "f", "n1", "normal 1")
	c.submit(pSubmitJobLowBg, "f", "l1", "low 1")
	c.submit(pSubmitJobHighBg, "f", "h1", "high 1")
	c.submit(pSubmitJobBg, "f", "n2", "normal 2")
	c.submit(pSubmitJobBg, "f", "", "no unique")
	c.send(pSubmitJobEpoch, "f", "e1", later, "an hour from now")
	if p := c.recv(10 * time.Second); p.typ != pJobCreated {
		t.Fatalf("SUBMIT_JOB_EPOCH answered %v", p)
	}
	c.submit(pSubmitJobBg, "other", "o1", "other function")
	g.stop()
	if got := len(sqliteRows(t, db)); got != 7 {
		t.Fatalf("gearmand left %d rows, want 7: %q", got, sqliteRows(t, db))
	}

	s := startServerProc(t, q...)
	if got, want := fmt.Sprint(grabAll(t, s.addr, "f")), "[h1=high 1 n1=normal 1 n2=normal 2 =no unique l1=low 1]"; got != want {
		t.Fatalf("switchyard ran %s, want %s", got, want)
	}
	if got := grabAll(t, s.addr, "other"); fmt.Sprint(got) != "[o1=other function]" {
		t.Fatalf("other: %q", got)
	}
	c = dialGear(t, s.addr, "client")
	c.submit(pSubmitJobLowBg, "back", "b1", "to gearmand")
	c.submit(pSubmitJobBg, "back", "", "no unique")
	s.stop()
	rows := sqliteRows(t, db)
	// The job without a unique is under a key switchyard made up.
	made := slices.IndexFunc(rows, func(r string) bool { return strings.HasSuffix(r, "|back|1|no unique|0") })
	if len(rows) != 3 || made < 0 || !slices.Contains(rows, "b1|back|2|to gearmand|0") ||
		!slices.Contains(rows, "e1|f|1|an hour from now|"+later) {
		t.Fatalf("rows after switchyard: %q", rows)
	}

	g, _ = startBinaryPorts(t, gearmand, 1, q...)
	got := grabAll(t, g.addr, "back")
	if len(got) != 2 || !strings.HasSuffix(got[0], "=no unique") || got[1] != "b1=to gearmand" {
		t.Fatalf("gearmand ran %q", got)
	}
}

// --store-queue-on-shutdown, as gearmand's tests use it (lp_1087654): the
// table stays empty while the server runs, holds the queued jobs once it
// stops, and is empty again after a restart ran them.
func TestE2ESqliteStoreOnShutdown(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "gearman.sql")
	args := []string{"-q", "libsqlite3", "--libsqlite3-db", db, "--store-queue-on-shutdown"}
	s := startServerProc(t, args...)
	c := dialGear(t, s.addr, "client")
	types := []uint32{pSubmitJobBg, pSubmitJobLowBg, pSubmitJobHighBg}
	for i := 0; i < 8; i++ {
		c.submit(types[i%3], "f", fmt.Sprint("u", i), "x")
	}
	if rows := sqliteRows(t, db); len(rows) != 0 {
		t.Fatalf("rows while running: %q", rows)
	}
	s.stop()
	if rows := sqliteRows(t, db); len(rows) != 8 {
		t.Fatalf("rows after shutdown: %q", rows)
	}
	s = startServerProc(t, args...)
	if got := grabAll(t, s.addr, "f"); len(got) != 8 {
		t.Fatalf("ran %q after the restart", got)
	}
	s.stop()
	if rows := sqliteRows(t, db); len(rows) != 0 {
		t.Fatalf("rows after the jobs ran: %q", rows)
	}
}

// --check-args touches no database (gearmand's basic option tests); a
// file that is not a database stops the server with its name.
func TestE2ESqliteStartup(t *testing.T) {
	t.Parallel()
	bin := serverBinary(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "never.sql")
	for _, extra := range [][]string{nil, {"--libsqlite3-table=custom_table"}, {"--store-queue-on-shutdown"}} {
		args := append([]string{"--check-args", "--queue-type=libsqlite3", "--libsqlite3-db=" + db}, extra...)
		if r := runCmd(t, 10*time.Second, "", bin, args...); r.code != 0 {
			t.Fatalf("%v: %v", args, r)
		}
		if _, err := os.Stat(db); err == nil {
			t.Fatalf("%v made the database", args)
		}
	}
	bad := filepath.Join(dir, "garbage.sql")
	if err := os.WriteFile(bad, []byte(strings.Repeat("garbage ", 1000)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"-q", "libsqlite3", "--libsqlite3-db", bad},
		{"-q", "libsqlite3"},
	} {
		r := runCmd(t, 10*time.Second, "", bin, append([]string{"-L", "127.0.0.1", "-p", "0", "-l", "stderr", "--periodic-listen", "off", "--controller-socket", "off", "--dwork-listen", "off", "--memodb-listen", "off", "--metrics-listen", "off"}, args...)...)
		if r.code != 1 || !strings.Contains(r.String(), "Error while initializing the queue : libsqlite3") ||
			(len(args) == 4 && !strings.Contains(r.String(), bad)) {
			t.Fatalf("%v: %v", args, r)
		}
	}
}

// A full disk under -q libsqlite3 (the server's RLIMIT_FSIZE at 0): the
// submits it refuses get ERROR QUEUE_ERROR, /healthz answers 503 with the
// reason and the metrics count the write errors; once the disk has room,
// the next submit commits and the server is healthy again.
func TestE2ESqliteFullDisk(t *testing.T) {
	t.Parallel()
	if isGearmand(t) {
		t.Skip("gearmand has no /healthz")
	}
	db := filepath.Join(t.TempDir(), "q.db")
	srv, maddr := startMetrics(t, "-q", "libsqlite3", "--libsqlite3-db", db)
	c := dialGear(t, srv.addr, "client")
	c.submit(pSubmitJobBg, "f", "before", "x")
	setFileSizeLimit(t, srv, 0)
	var refused packet
	for i := 0; ; i++ {
		if i == 1000 {
			t.Fatal("1000 submits of 8 KiB acknowledged with RLIMIT_FSIZE 0")
		}
		c.send(pSubmitJobBg, "f", fmt.Sprint("full-", i), strings.Repeat("p", 8<<10))
		if p := c.recv(10 * time.Second); p.typ != pJobCreated {
			refused = p
			break
		}
	}
	if a := refused.args(); refused.typ != pError || a[0] != "QUEUE_ERROR" || !strings.Contains(a[1], db) {
		t.Fatalf("the submit on a full disk answered %v", refused)
	}
	if code, body := opstest.Get(t, "http://"+maddr+"/healthz"); code != 503 || !strings.HasPrefix(body, "store failed: ") || !strings.Contains(body, db) {
		t.Errorf("/healthz on a full disk: %d %q", code, body)
	}
	m := scrape(t, maddr)
	for name, want := range map[string]float64{"switchyard_store_up": 0, "switchyard_store_write_errors_total": 1} {
		if v, ok := m.Value(name); !ok || v < want || (want == 0 && v != 0) {
			t.Errorf("%s = %v (there: %v), want %v", name, v, ok, want)
		}
	}
	if v, ok := m.Value("switchyard_submits_refused_total", "reason=store"); !ok || v != 1 {
		t.Errorf("switchyard_submits_refused_total{reason=store} = %v (there: %v), want 1", v, ok)
	}
	setFileSizeLimit(t, srv, unix.RLIM_INFINITY)
	c.submit(pSubmitJobBg, "f", "after", "x")
	if code, body := opstest.Get(t, "http://"+maddr+"/healthz"); code != 200 {
		t.Errorf("/healthz once a write committed again: %d %q", code, body)
	}
	if v, ok := scrape(t, maddr).Value("switchyard_store_up"); !ok || v != 1 {
		t.Errorf("switchyard_store_up once a write committed again: %v", v)
	}
}
