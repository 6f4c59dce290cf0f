package main

// gearadmin(1) with every option it has, and the text admin protocol
// underneath it.
//
// Debian's gearadmin 1.1.20 has no --shutdown (it answers "unrecognised
// option '--shutdown'"); the "shutdown" admin command is tested over a raw
// connection instead.

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	memocodec "switchyard/codec/memodb"
)

func runGearadmin(t *testing.T, port int, args ...string) cmdResult {
	t.Helper()
	bin := requireTool(t, "gearadmin")
	return runCmd(t, e2eCmdTimeout, "", bin, append([]string{"-h", "127.0.0.1", "-p", strconv.Itoa(port)}, args...)...)
}

// fdRE is the file descriptor that starts a line of "workers".
var fdRE = regexp.MustCompile(`(?m)^\d+ `)

// normWorkers turns a "workers" listing into its distinct lines, sorted, with
// "FD" for the file descriptors, which differ between servers. (A connection
// gearadmin or a client has just closed may still be listed.)
func normWorkers(s string) []string {
	var out []string
	for _, l := range sortedLines(fdRE.ReplaceAllString(s, "FD ")) {
		if len(out) == 0 || out[len(out)-1] != l {
			out = append(out, l)
		}
	}
	return out
}

func TestE2EGearadmin(t *testing.T) {
	t.Parallel()
	requireTool(t, "gearadmin")
	requireTool(t, "gearman")
	srv := startServerProc(t)
	addr, port := srv.addr, srv.port

	admin := func(args ...string) cmdResult {
		t.Helper()
		r := runGearadmin(t, port, args...)
		if r.code != 0 || r.timedOut {
			t.Fatalf("gearadmin %s: %s", strings.Join(args, " "), r)
		}
		return r
	}
	// expect runs gearadmin and compares stdout and stderr exactly.
	expect := func(args []string, stdout, stderr string) {
		t.Helper()
		r := admin(args...)
		if r.stdout != stdout || r.stderr != stderr {
			t.Errorf("gearadmin %s:\n got stdout %q stderr %q\nwant stdout %q stderr %q",
				strings.Join(args, " "), r.stdout, r.stderr, stdout, stderr)
		}
	}

	// An empty server: gearadmin's own connection is its only worker line.
	expect([]string{"--status"}, ".\n", "")
	expect([]string{"--priority-status"}, ".\n", "")
	expect([]string{"--show-jobs"}, ".\n", "")
	expect([]string{"--show-unique-jobs"}, ".\n", "")
	if got, want := normWorkers(admin("--workers").stdout), []string{"FD 127.0.0.1 - :"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("--workers on an empty server: %q, want %q", got, want)
	}

	// Informational.
	expect([]string{"--getpid"}, strconv.Itoa(srv.cmd.Process.Pid)+"\n", "")
	expect([]string{"--server-verbose"}, "INFO\n", "")
	version := admin("--server-version").stdout
	if isGearmand(t) {
		if version != "1.1.20+ds\n" {
			t.Errorf("--server-version = %q, want %q", version, "1.1.20+ds\n")
		}
	} else if !regexp.MustCompile(`^\S+\n$`).MatchString(version) {
		t.Errorf("--server-version = %q, want one word and a newline", version)
	}

	// State: a function made by hand, a worker, and background jobs for a
	// function nobody serves. Built one step at a time, so the listings'
	// order (gearmand's hash-table order) is the same on every run.
	expect([]string{"--create-function", "made"}, "OK\n", "")
	startGearman(t, port, "-w", "-f", "adm", "--", "rev")
	waitUntil(t, e2eWaitTimeout, "the worker in gearadmin --workers", func() (bool, string) {
		out := admin("--workers").stdout
		return strings.Contains(out, " : adm\n"), out
	})
	type bgJob struct{ prio, unique, data, handle string }
	jobs := []*bgJob{
		{prio: "", unique: "u-normal", data: "n"},
		{prio: "-I", unique: "u-high", data: "h"},
		{prio: "-L", unique: "u-low", data: "l"},
		{prio: "-I", unique: "u-high2", data: "h2"},
	}
	for _, j := range jobs {
		args := []string{"-v", "-b", "-u", j.unique, "-f", "queue", j.data}
		if j.prio != "" {
			args = append([]string{j.prio}, args...)
		}
		r := runGearman(t, port, "", args...)
		h, ok := strings.CutPrefix(r.stdout, "Task created: ")
		if r.code != 0 || !ok {
			t.Fatalf("gearman %s: %s", strings.Join(args, " "), r)
		}
		j.handle = strings.TrimSuffix(h, "\n")
	}

	// gearmand lists functions in its hash table's order, which for these
	// three names is:
	statusAll := "queue\t4\t0\t0\nadm\t0\t0\t1\nmade\t0\t0\t0\n.\n"
	expect([]string{"--status"}, statusAll, "")
	expect([]string{"--priority-status"}, "queue\t2\t1\t1\t0\nadm\t0\t0\t0\t1\nmade\t0\t0\t0\t0\n.\n", "")

	var wantJobs []string
	for _, j := range jobs {
		wantJobs = append(wantJobs, j.handle+"\t0\t0\t1")
	}
	slices.Sort(wantJobs) // as sortedLines sorts: by text, not by handle number
	if got := sortedLines(admin("--show-jobs").stdout); !slices.Equal(got, wantJobs) {
		t.Errorf("--show-jobs = %q, want (any order) %q", got, wantJobs)
	}
	if got, want := sortedLines(admin("--show-unique-jobs").stdout), []string{"u-high", "u-high2", "u-low", "u-normal"}; !slices.Equal(got, want) {
		t.Errorf("--show-unique-jobs = %q, want (any order) %q", got, want)
	}
	if got, want := normWorkers(admin("--workers").stdout), []string{"FD 127.0.0.1 - :", "FD 127.0.0.1 - : adm"}; !slices.Equal(got, want) {
		t.Errorf("--workers = %q, want (any order) %q", got, want)
	}

	// Several options in one call: gearadmin runs them in its own fixed
	// order over one connection.
	expect([]string{"--server-verbose", "--getpid", "--status"},
		strconv.Itoa(srv.cmd.Process.Pid)+"\nINFO\n"+statusAll, "")

	// Functions by hand: create, see, drop; errors go to stderr with the
	// server's CR LF, and gearadmin still exits 0.
	expect([]string{"--create-function", "extra"}, "OK\n", "")
	if m, raw := adminStatus(t, addr); m["extra"] != (funcStatus{0, 0, 0}) {
		t.Errorf("after --create-function extra, status:\n%s", raw)
	}
	expect([]string{"--drop-function", "extra"}, "OK\n", "")
	if m, raw := adminStatus(t, addr); len(m) != 3 {
		t.Errorf("after --drop-function extra, status:\n%s", raw)
	}
	expect([]string{"--drop-function", "nothere"}, "", "Error: function not found\r\n")
	expect([]string{"--cancel-job", "H:nothere:1"}, "", "Error: UNKNOWN_JOB\r\n")

	// Cancel the first job in line (the first high one): it never runs.
	expect([]string{"--cancel-job", jobs[1].handle}, "OK\n", "")
	out := t.TempDir() + "/ran"
	args := append([]string{"-w", "-c", "3", "-f", "queue", "--"}, appendWorker(out)...)
	if r := runGearman(t, port, "", args...); r.code != 0 {
		t.Fatalf("worker: %s", r)
	}
	if got, want := readFile(t, out), "h2\nn\nl\n"; got != want {
		t.Errorf("after cancelling %s the worker ran %q, want %q", jobs[1].handle, got, want)
	}
	expect([]string{"--show-jobs"}, ".\n", "")
	expect([]string{"--show-unique-jobs"}, ".\n", "")
	if m, raw := adminStatus(t, addr); m["queue"] != (funcStatus{0, 0, 0}) {
		t.Errorf("status after the queue drained:\n%s", raw)
	}
}

// The text admin protocol as it is on the wire: exact bytes, line endings
// included (OK and ERR lines end in CR LF, listings and "OK value" in LF).
func TestE2EAdminTextProtocol(t *testing.T) {
	t.Parallel()
	srv := startServerProc(t)
	addr := srv.addr
	pid := strconv.Itoa(srv.cmd.Process.Pid)

	cases := []struct {
		cmd  string
		want string // exact; "" = check re
		re   string
	}{
		{cmd: "status", want: ".\n"},
		{cmd: "prioritystatus", want: ".\n"},
		{cmd: "show jobs", want: ".\n"},
		{cmd: "show unique jobs", want: ".\n"},
		// This connection, and maybe the previous ones, not yet reaped.
		{cmd: "workers", re: `^(\d+ 127\.0\.0\.1 - :\n)+\.\n$`},
		{cmd: "getpid", want: "OK " + pid + "\n"},
		{cmd: "verbose", want: "OK INFO\n"},
		{cmd: "version", re: `^OK \S+\n$`},
		{cmd: "create function fa", want: "OK\r\n"},
		{cmd: "status", want: "fa\t0\t0\t0\n.\n"},
		{cmd: "prioritystatus", want: "fa\t0\t0\t0\t0\n.\n"},
		{cmd: "drop function fa", want: "OK\r\n"},
		{cmd: "status", want: ".\n"},
		{cmd: "drop function fa", want: "ERR function not found\r\n"},
		{cmd: "cancel job H:nothere:1", want: "ERR UNKNOWN_JOB\r\n"},
		{cmd: "cancel job", want: "ERR UNKNOWN_COMMAND Unknown+server+commandcancel\r\n"},
		{cmd: "create function", want: "ERR INVALID_ARGUMENTS An+incomplete+set+of+arguments+was+sent+to+this+command+create\r\n"},
		{cmd: "bogus", want: "ERR UNKNOWN_COMMAND Unknown+server+commandbogus\r\n"},
	}
	for _, c := range cases {
		got := adminCmd(t, addr, c.cmd)
		if c.re != "" {
			if !regexp.MustCompile(c.re).MatchString(got) {
				t.Errorf("%q -> %q, want %s", c.cmd, got, c.re)
			}
		} else if got != c.want {
			t.Errorf("%q -> %q, want %q", c.cmd, got, c.want)
		}
	}
}

// "shutdown": gearmand 1.1.20 does not know it, and neither does switchyard
// without --admin-shutdown: the same ERR line, and the server keeps running.
func TestE2EAdminShutdown(t *testing.T) {
	t.Parallel()
	srv := startServerProc(t)
	pid := "OK " + strconv.Itoa(srv.cmd.Process.Pid) + "\n"
	for _, cmd := range []string{"shutdown", "shutdown graceful"} {
		if got, want := adminCmd(t, srv.addr, cmd), "ERR UNKNOWN_COMMAND Unknown+server+commandshutdown\r\n"; got != want {
			t.Errorf("%q -> %q, want %q", cmd, got, want)
		}
		if got := adminCmd(t, srv.addr, "getpid"); got != pid {
			t.Errorf("after %q the server answers getpid with %q, want %q", cmd, got, pid)
		}
	}
}

// Every protocol's workers are in gearadmin --workers, as "status" counts
// them: a Periodic worker on TCP and on the unix socket, by its fd and
// peer; a MemoDB worker (nngcat waiting on its READY) as worker-ID.
func TestE2EGearadminWorkersOfEveryProtocol(t *testing.T) {
	t.Parallel()
	requireTool(t, "gearadmin")
	t.Run("periodic", func(t *testing.T) {
		t.Parallel()
		ps := startPeriodic(t)
		for _, n := range []perNet{ps.tcp, ps.unix} {
			w := dialPer(t, n, "worker "+n.network, perTypeWorker)
			w.canDo("listed-" + n.network)
			w.send("p", perPing) // its CAN_DO is in once its PING is answered
			w.expectCmd("p", perPong)
		}
		r := runGearadmin(t, ps.port, "--workers")
		got := normWorkers(r.stdout)
		for _, want := range []string{"FD 127.0.0.1 - : listed-tcp", "FD unix:" + ps.unix.addr + " - : listed-unix"} {
			if !slices.Contains(got, want) {
				t.Errorf("gearadmin --workers has no %q: %q", want, got)
			}
		}
	})
	t.Run("memodb", func(t *testing.T) {
		t.Parallel()
		bin := requireNngcat(t)
		srv, url := startMemodb(t, "--memodb-heartbeat", "1s")
		wait := nngcatReq(t, bin, url, memocodec.AppendReady(nil, []string{"listed-memodb"}))
		waitUntil(t, e2eWaitTimeout, "the MemoDB worker in gearadmin --workers", func() (bool, string) {
			out := runGearadmin(t, srv.port, "--workers").stdout
			return regexp.MustCompile(`(?m)^-1 memodb worker-\d+ : listed-memodb$`).MatchString(out), out
		})
		decodeReply(t, wait(), memocodec.Heartbeat) // its READY answered once idle for the heartbeat time
	})
}
