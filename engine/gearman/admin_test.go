package gearman

import (
	"fmt"
	"net"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	codec "switchyard/codec/gearman"
	"switchyard/sched"
)

// The buckets gearmand 1.1.20 was observed to use for these names.
func TestBucketMatchesGearmand(t *testing.T) {
	for name, want := range map[string]uint32{"fa": 799, "fb": 345, "fc": 84, "new": 749, "f": 751, "": 1, "H:vm:1": 71, "H:vm:2": 374, "H:vm:4": 434, "H:vm:3": 722} {
		if got := bucket(name); got != want {
			t.Errorf("bucket(%q) = %d, want %d", name, got, want)
		}
	}
}

// TestAdminReplies checks every text command against gearmand 1.1.20's
// bytes, including its line endings, with listings built on the event loop
// and off it.
func TestAdminReplies(t *testing.T) {
	for _, tt := range []struct {
		name  string
		hooks *testHooks
	}{
		{"inline", nil},
		{"off the loop", &testHooks{inline: -1}},
	} {
		t.Run(tt.name, func(t *testing.T) { testAdminReplies(t, tt.hooks) })
	}
}

func testAdminReplies(t *testing.T, hooks *testHooks) {
	addr, srv := startServer(t, Config{Verbose: "INFO"}, sched.Config{})
	srv.hooks.Store(hooks)
	w := dial(t, addr)
	w.send(req(codec.SetClientID, "wid1"), req(codec.CanDo, "fa"), req(codec.CanDo, "fb"), req(codec.EchoReq, "s"))
	w.expect(res(codec.EchoRes, "s"))
	c := dial(t, addr)
	c.send(req(codec.SubmitJobBg, "fc", "u1", "x"), req(codec.SubmitJobHighBg, "fc", "", "x"), req(codec.SubmitJobLowBg, "fc", "u2", "x"), req(codec.SubmitJob, "fa", "", "x"))
	hc := c.handle()
	c.handle()
	c.handle()
	c.handle()

	a := dial(t, addr)
	tests := []struct {
		cmd, want string
		list      bool
	}{
		{"status\r\n", "fc\t3\t0\t0\nfb\t0\t0\t1\nfa\t1\t0\t1\n.\n", true},
		{"STATUS extra words\n", "fc\t3\t0\t0\nfb\t0\t0\t1\nfa\t1\t0\t1\n.\n", true},
		{"prioritystatus\r\n", "fc\t1\t1\t1\t0\nfb\t0\t0\t0\t1\nfa\t0\t1\t0\t1\n.\n", true},
		{"version\r\n", "OK 0.0.0-test\n", false},
		{"verbose\r\n", "OK INFO\n", false},
		{"foo bar\r\n", "ERR UNKNOWN_COMMAND Unknown+server+commandfoo\r\n", false},
		{"\r\n", "ERR UNKNOWN_COMMAND Unknown+server+command\r\n", false},
		{"show\r\n", "ERR UNKNOWN_COMMAND Unknown+server+commandshow\r\n", false},
		{"show foo\r\n", "ERR UNKNOWN_SHOW_ARGUMENTS\r\n", false},
		{"show jobs x\r\n", "ERR UNKNOWN_SHOW_ARGUMENTS\r\n", false},
		{"cancel job H:lap:999999\r\n", "ERR UNKNOWN_JOB\r\n", false},
		{"cancel foo bar\r\n", "ERR UNKNOWN_ERROR\r\n", false},
		{"cancel job\r\n", "ERR UNKNOWN_COMMAND Unknown+server+commandcancel\r\n", false},
		{"create function\r\n", "ERR INVALID_ARGUMENTS An+incomplete+set+of+arguments+was+sent+to+this+command+create\r\n", false},
		{"create function newf\r\n", "OK\r\n", false},
		{"drop function newf\r\n", "OK\r\n", false},
		{"drop function newf\r\n", "ERR function not found\r\n", false},
		{"drop function fa\r\n", "ERR there are still connected workers or executing clients\r\n", false},
		{"drop\r\n", "ERR INVALID_ARGUMENTS An+incomplete+set+of+arguments+was+sent+to+this+command+drop\r\n", false},
		{"maxqueue\r\n", "ERR INVALID_ARGUMENTS An+incomplete+set+of+arguments+was+sent+to+this+command+maxqueue\r\n", false},
		{"maxqueue fc\r\n", "OK\r\n", false},
		{"maxqueue fc 10\r\n", "OK\r\n", false},
		{"maxqueue fc 1 2 3\r\n", "OK\r\n", false},
		{"maxqueue fc abc\r\n", "OK\r\n", false},
		{"show unique jobs\r\n", "\n\nu1\nu2\n.\n", true}, // as gearmand orders them
	}
	for _, tt := range tests {
		a.send([]byte(tt.cmd))
		var got string
		if tt.list {
			got = a.listing()
		} else {
			got = a.line()
		}
		if got != tt.want {
			t.Errorf("%q:\n got %q\nwant %q", tt.cmd, got, tt.want)
		}
	}
	a.send([]byte("getpid\n"))
	if got := a.line(); got != fmt.Sprintf("OK %d\n", os.Getpid()) {
		t.Errorf("getpid %q", got)
	}
	a.send([]byte("workers\n"))
	ws := a.listing()
	lines := strings.Split(strings.TrimSuffix(ws, ".\n"), "\n")
	if len(lines) != 4 || !regexp.MustCompile(`^\d+ 127\.0\.0\.1 wid1 : fb fa$`).MatchString(lines[2]) ||
		!regexp.MustCompile(`^\d+ 127\.0\.0\.1 - :$`).MatchString(lines[0]) {
		t.Errorf("workers %q", ws)
	}
	a.send([]byte("show jobs\r\n"))
	jobs := a.listing()
	if !strings.Contains(jobs, hc+"\t0\t0\t1\n") || strings.Count(jobs, "\n") != 5 {
		t.Errorf("show jobs %q", jobs)
	}
	a.send([]byte("cancel job " + hc + "\r\n"))
	if got := a.line(); got != "OK\r\n" {
		t.Errorf("cancel %q", got)
	}
	a.send([]byte("status\n"))
	if got := a.listing(); !strings.HasPrefix(got, "fc\t2\t0\t0\n") {
		t.Errorf("after cancel %q", got)
	}
}

// TestAdminShutdown: "shutdown" is gearmand 1.1.20's unknown command unless
// Config.Shutdown enables it, and then it is handed to Config.Shutdown.
func TestAdminShutdown(t *testing.T) {
	const unknown = "ERR UNKNOWN_COMMAND Unknown+server+commandshutdown\r\n"
	tests := []struct {
		cmd     string
		enabled bool
		want    string
		call    string // what Shutdown hears: "", "now" or "graceful"
	}{
		{"shutdown\r\n", false, unknown, ""},
		{"shutdown graceful\r\n", false, unknown, ""},
		{"SHUTDOWN GRACEFUL\n", false, "ERR UNKNOWN_COMMAND Unknown+server+commandSHUTDOWN\r\n", ""},
		{"shutdown\r\n", true, "OK\r\n", "now"},
		{"shutdown graceful\r\n", true, "OK\r\n", "graceful"},
		{"Shutdown Graceful\n", true, "OK\r\n", "graceful"},
		{"shutdown later\r\n", true, "ERR UNKNOWN_ERROR\r\n", ""},
		{"shutdown graceful now\r\n", true, unknown, ""},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q enabled=%v", tt.cmd, tt.enabled), func(t *testing.T) {
			got := make(chan string, 2)
			var cfg Config
			if tt.enabled {
				cfg.Shutdown = func(graceful bool) {
					if graceful {
						got <- "graceful"
					} else {
						got <- "now"
					}
				}
			}
			addr, _ := startServer(t, cfg, sched.Config{})
			a := dial(t, addr)
			a.send([]byte(tt.cmd))
			if l := a.line(); l != tt.want {
				t.Fatalf("reply %q, want %q", l, tt.want)
			}
			// The server keeps serving this connection and new ones.
			a.send([]byte("version\r\n"))
			b := dial(t, addr)
			b.send([]byte("version\r\n"))
			for _, p := range []*peer{a, b} {
				if l := p.line(); l != "OK 0.0.0-test\n" {
					t.Fatalf("version after %q: %q", tt.cmd, l)
				}
			}
			if tt.call == "" { // Shutdown runs on its own goroutine: this catches calls made by now
				select {
				case c := <-got:
					t.Fatalf("Shutdown called (%s)", c)
				default:
				}
				return
			}
			if c := <-got; c != tt.call {
				t.Fatalf("Shutdown heard %s, want %s", c, tt.call)
			}
		})
	}
}

// TestBigListingsOrder checks the listings of many jobs and functions, over
// every shard and several chunks, against the plainest statement of
// gearmand's order: sort by the bucket of the printed key, then newest first.
func TestBigListingsOrder(t *testing.T) {
	s := sched.New(sched.Config{Tick: -1, Shards: 4})
	t.Cleanup(s.Close)
	srv := New(Config{HandlePrefix: "H:big"}, s, nil)
	c := s.NewClient(nopListener{})
	for i := 0; i < 20_000; i++ {
		unique := ""
		if i%3 != 0 {
			unique = fmt.Sprint("u", i)
		}
		r := sched.SubmitReq{Func: fmt.Appendf(nil, "f%d", i%5), Unique: []byte(unique), Payload: []byte("x"), Background: i%2 == 0}
		if _, err := c.Submit(&r); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 10_000; i++ {
		s.CreateFunc(fmt.Appendf(nil, "fn%d", i))
	}

	jobs := s.Jobs()
	refJobs := func(unique bool) string {
		key := func(j sched.JobInfo) string {
			if unique {
				return j.Unique
			}
			return string(srv.handles.Append(nil, j.ID))
		}
		sort.SliceStable(jobs, func(a, b int) bool {
			ba, bb := bucket(key(jobs[a])), bucket(key(jobs[b]))
			if ba != bb {
				return ba < bb
			}
			return jobs[a].ID > jobs[b].ID
		})
		var b strings.Builder
		for _, j := range jobs {
			if unique {
				fmt.Fprintf(&b, "%s\n", j.Unique)
			} else {
				fmt.Fprintf(&b, "%s\t%d\t0\t%c\n", key(j), j.Retries, boolDigit(j.Background))
			}
		}
		return b.String() + ".\n"
	}
	fs := s.Funcs()
	sort.SliceStable(fs, func(a, b int) bool {
		ba, bb := bucket(fs[a].Name), bucket(fs[b].Name)
		if ba != bb {
			return ba < bb
		}
		return fs[a].Seq > fs[b].Seq
	})
	refStatus := func(byPriority bool) string {
		var b strings.Builder
		for _, f := range fs {
			if byPriority {
				fmt.Fprintf(&b, "%s\t%d\t%d\t%d\t%d\n", f.Name, f.Queued[0], f.Queued[1], f.Queued[2], f.Workers)
			} else {
				fmt.Fprintf(&b, "%s\t%d\t%d\t%d\n", f.Name, f.Total(), f.Running, f.Workers)
			}
		}
		return b.String() + ".\n"
	}

	tests := []struct {
		name      string
		got, want string
	}{
		{"show jobs", string(srv.appendJobs(nil, false)), refJobs(false)},
		{"show unique jobs", string(srv.appendJobs(nil, true)), refJobs(true)},
		{"status", string(srv.appendStatus(nil, false)), refStatus(false)},
		{"prioritystatus", string(srv.appendStatus(nil, true)), refStatus(true)},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: %d bytes differ from the reference's %d", tt.name, len(tt.got), len(tt.want))
		}
	}
}

// TestListingOffLoop: while a listing is being built, the other
// connections of its loop are served, and the commands pipelined after it
// on its own connection wait for it and are then answered in order. The
// listing's goroutine is held in its hook, so nothing depends on timing;
// built on the loop, as before, b's ECHO would never come back.
func TestListingOffLoop(t *testing.T) {
	addr, srv := startServer(t, Config{Loops: 1}, sched.Config{})
	started, release := make(chan struct{}, 1), make(chan struct{})
	srv.hooks.Store(&testHooks{inline: -1, building: func() { started <- struct{}{}; <-release }})
	a, b := dial(t, addr), dial(t, addr)
	// Both on the one loop, and a's replies before the listing come first.
	a.send(req(codec.SubmitJobBg, "f", "", "x"), []byte("show jobs\r\nstatus\r\nversion\r\n"), req(codec.EchoReq, "after"))
	h := a.handle()
	for _, want := range []string{h + "\t0\t0\t1\n.\n", "f\t1\t0\t0\n.\n"} {
		<-started
		b.send(req(codec.EchoReq, "loop is free"))
		b.expect(res(codec.EchoRes, "loop is free"))
		release <- struct{}{}
		if got := a.listing(); got != want {
			t.Fatalf("listing %q, want %q", got, want)
		}
	}
	if got := a.line(); got != "OK 0.0.0-test\n" {
		t.Fatalf("after the listings: %q", got)
	}
	a.expect(res(codec.EchoRes, "after"))
	// Nothing was left waiting in the buffer, and a is still served.
	a.send([]byte("version\r\n"))
	if got := a.line(); got != "OK 0.0.0-test\n" {
		t.Fatalf("version %q", got)
	}
}

// TestListingConnGone: a listing whose connection closed while it was
// being built is dropped, and the loop goes on.
func TestListingConnGone(t *testing.T) {
	addr, srv := startServer(t, Config{Loops: 1}, sched.Config{})
	started, release := make(chan struct{}, 1), make(chan struct{})
	srv.hooks.Store(&testHooks{inline: -1, building: func() { started <- struct{}{}; <-release }})
	b := dial(t, addr)
	a := dial(t, addr)
	a.send([]byte("workers\r\nversion\r\n"))
	<-started
	a.c.Close()
	waitConns(t, srv, 1, b)
	close(release) // the goroutine finds a closed, and drops the listing
	srv.hooks.Store(nil)
	b.send([]byte("workers\r\n"))
	if got := b.listing(); !regexp.MustCompile(`^\d+ 127\.0\.0\.1 - :\n\.\n$`).MatchString(got) {
		t.Fatalf("workers %q", got)
	}
}

// TestListingHalfClose: a client that sends its commands and half-closes,
// as ncat and nc -N do, still gets small listings: gnet closes the
// connection at EOF, so they must be answered in the same event.
func TestListingHalfClose(t *testing.T) {
	for _, off := range []bool{false, true} {
		t.Run(fmt.Sprintf("offloop=%v", off), func(t *testing.T) { testListingHalfClose(t, off) })
	}
}

// testListingHalfClose: a client that sends its command and half-closes
// (nc -N) gets the listing, as from gearmand. Off the loop, the listing's
// goroutine is held until gnet has closed the connection at EOF; only the
// listing's own reply is owed then (commands after it are not read).
func testListingHalfClose(t *testing.T, offLoop bool) {
	addr, srv := startServer(t, Config{}, sched.Config{})
	release := make(chan struct{})
	if offLoop {
		srv.hooks.Store(&testHooks{inline: -1, building: func() { <-release }})
	}
	c := dial(t, addr)
	c.send(req(codec.SubmitJobBg, "f", "u", "x"))
	c.handle()
	a := dial(t, addr)
	cmds, want := "status\nshow unique jobs\n", []string{"f\t1\t0\t0\n.\n", "u\n.\n"}
	if offLoop {
		cmds, want = "show unique jobs\n", want[1:]
	}
	a.send([]byte(cmds))
	a.c.(*net.TCPConn).CloseWrite()
	if offLoop {
		waitConns(t, srv, 1, c)
		close(release)
	}
	for _, w := range want {
		if got := a.listing(); got != w {
			t.Fatalf("listing %q, want %q", got, w)
		}
	}
	a.closed()
}
