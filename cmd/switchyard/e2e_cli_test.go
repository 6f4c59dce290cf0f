package main

// Debian's gearman(1) tool against the server, in client and worker mode.
// A client's exit is the synchronisation point; a worker's -c count makes it
// exit once it has done exactly that many jobs, so its exit status proves
// where the jobs went.

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// gearmanArgs prefixes the connection options.
func gearmanArgs(port int, args ...string) []string {
	return append([]string{"-h", "127.0.0.1", "-p", strconv.Itoa(port)}, args...)
}

// runGearman runs `gearman` to completion.
func runGearman(t *testing.T, port int, stdin string, args ...string) cmdResult {
	t.Helper()
	return runCmd(t, e2eCmdTimeout, stdin, requireTool(t, "gearman"), gearmanArgs(port, args...)...)
}

// startGearman starts `gearman` in the background (a worker, or a client
// that waits for its result).
func startGearman(t *testing.T, port int, args ...string) *bgProc {
	t.Helper()
	return startProc(t, "", requireTool(t, "gearman"), gearmanArgs(port, args...)...)
}

// appendWorker is a job command that appends the workload and a newline to
// file, so the order in which a worker ran its jobs can be read back.
func appendWorker(file string) []string {
	return []string{"sh", "-c", `cat >> "$0"; echo >> "$0"`, file}
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestE2ECLIForeground(t *testing.T) {
	t.Parallel()
	requireTool(t, "gearman")
	addr, port, _ := startServer(t)

	cases := []struct {
		name  string
		stdin string
		args  []string
		want  string // exact stdout
		rev   int    // jobs this case gives the rev worker
		upper int    // and the upper worker
	}{
		{name: "argument", args: []string{"-f", "rev", "hello"}, want: "olleh", rev: 1},
		{name: "spaces", args: []string{"-f", "rev", "a b c"}, want: "c b a", rev: 1},
		{name: "stdin", stdin: "xyz", args: []string{"-f", "rev"}, want: "zyx", rev: 1},
		{name: "other function", args: []string{"-f", "upper", "Hello, World"}, want: "HELLO, WORLD", upper: 1},
		{name: "two arguments are two jobs", args: []string{"-f", "rev", "ab", "cd"}, want: "badc", rev: 2},
		{name: "prefix", args: []string{"-P", "-f", "rev", "hello"}, want: "rev: olleh", rev: 1},
		{name: "one job per line", stdin: "ab\ncd\n", args: []string{"-n", "-f", "rev"}, want: "ba\ndc\n", rev: 2},
		{name: "one job per line stripped", stdin: "ab\ncd\n", args: []string{"-N", "-f", "rev"}, want: "badc", rev: 2},
		{name: "high", args: []string{"-I", "-f", "rev", "high"}, want: "hgih", rev: 1},
		{name: "low", args: []string{"-L", "-f", "rev", "low"}, want: "wol", rev: 1},
		{name: "unique", args: []string{"-u", "my-unique", "-f", "upper", "uniq"}, want: "UNIQ", upper: 1},
		{name: "binary-ish", args: []string{"-f", "upper", "tab\there"}, want: "TAB\tHERE", upper: 1},
	}
	revJobs, upperJobs := 0, 0
	for _, c := range cases {
		revJobs += c.rev
		upperJobs += c.upper
	}
	rev := startGearman(t, port, "-w", "-c", strconv.Itoa(revJobs), "-f", "rev", "--", "rev")
	upper := startGearman(t, port, "-w", "-c", strconv.Itoa(upperJobs), "-f", "upper", "--", "tr", "a-z", "A-Z")
	waitWorkers(t, addr, "rev", 1)
	waitWorkers(t, addr, "upper", 1)

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := runGearman(t, port, c.stdin, c.args...)
			if r.code != 0 || r.stdout != c.want || r.stderr != "" {
				t.Fatalf("gearman %s: %s\nwant stdout %q", strings.Join(c.args, " "), r, c.want)
			}
		})
	}

	// Each worker exits by itself once it has done exactly its share.
	if code := rev.wait(t, e2eWaitTimeout); code != 0 {
		t.Errorf("rev worker exited %d", code)
	}
	if code := upper.wait(t, e2eWaitTimeout); code != 0 {
		t.Errorf("upper worker exited %d", code)
	}
	st, raw := adminStatus(t, addr)
	if st["rev"] != (funcStatus{0, 0, 0}) || st["upper"] != (funcStatus{0, 0, 0}) {
		t.Errorf("status after the workers left:\n%s", raw)
	}
}

func TestE2ECLITwoFunctionsOneCall(t *testing.T) {
	t.Parallel()
	requireTool(t, "gearman")
	addr, port, _ := startServer(t)
	// One worker for both functions, so the jobs run one after the other.
	w := startGearman(t, port, "-w", "-c", "2", "-f", "rev", "-f", "upper", "--", "rev")
	waitWorkers(t, addr, "rev", 1)
	waitWorkers(t, addr, "upper", 1)
	r := runGearman(t, port, "", "-f", "rev", "-f", "upper", "hello")
	if r.code != 0 || r.stdout != "olleholleh" {
		t.Fatalf("gearman -f rev -f upper hello: %s\nwant stdout %q", r, "olleholleh")
	}
	if code := w.wait(t, e2eWaitTimeout); code != 0 {
		t.Errorf("worker exited %d", code)
	}
}

func TestE2ECLIBackgroundPriorities(t *testing.T) {
	t.Parallel()
	requireTool(t, "gearman")
	addr, port, _ := startServer(t)
	handleRE := hostHandleRE(t)

	// Queued with no worker around, low first, high last.
	submissions := [][]string{
		{"-L", "low1"}, {"normal1"}, {"-I", "high1"},
		{"-L", "low2"}, {"normal2"}, {"-I", "high2"},
	}
	for _, s := range submissions {
		args := append([]string{"-b", "-f", "pri"}, s...)
		r := runGearman(t, port, "", args...)
		if r.code != 0 || r.stdout != "" || r.stderr != "" {
			t.Fatalf("gearman %s: %s", strings.Join(args, " "), r)
		}
	}
	// -v prints the job handle.
	r := runGearman(t, port, "", "-v", "-b", "-f", "pri", "normal3")
	m := regexp.MustCompile(`^Task created: (.*)\n$`).FindStringSubmatch(r.stdout)
	if r.code != 0 || m == nil || !handleRE.MatchString(m[1]) {
		t.Fatalf("gearman -v -b: %s\nwant \"Task created: %s\\n\"", r, handleRE)
	}

	if got, want := adminCmd(t, addr, "status"), "pri\t7\t0\t0\n.\n"; got != want {
		t.Errorf("status = %q, want %q", got, want)
	}
	if got, want := adminCmd(t, addr, "prioritystatus"), "pri\t2\t3\t2\t0\n.\n"; got != want {
		t.Errorf("prioritystatus = %q, want %q", got, want)
	}

	// One worker takes them all, one at a time: high, then normal, then
	// low, first come first served within a priority.
	out := filepath.Join(t.TempDir(), "order")
	args := append([]string{"-w", "-c", "7", "-f", "pri", "--"}, appendWorker(out)...)
	if r := runGearman(t, port, "", args...); r.code != 0 {
		t.Fatalf("worker: %s", r)
	}
	want := "high1\nhigh2\nnormal1\nnormal2\nnormal3\nlow1\nlow2\n"
	if got := readFile(t, out); got != want {
		t.Errorf("jobs ran in the order\n%s\nwant\n%s", got, want)
	}
	if got, want := adminCmd(t, addr, "status"), "pri\t0\t0\t0\n.\n"; got != want {
		t.Errorf("status after = %q, want %q", got, want)
	}
}

func TestE2ECLIBackgroundUnique(t *testing.T) {
	t.Parallel()
	requireTool(t, "gearman")
	addr, port, _ := startServer(t)

	// Three submissions with the same unique key are one job: the first
	// payload and priority win, and every submitter gets the same handle.
	var handles []string
	for _, args := range [][]string{
		{"-v", "-b", "-u", "K", "-f", "uq", "first"},
		{"-v", "-b", "-u", "K", "-f", "uq", "second"},
		{"-v", "-b", "-u", "K", "-I", "-f", "uq", "third"},
	} {
		r := runGearman(t, port, "", args...)
		h, ok := strings.CutPrefix(r.stdout, "Task created: ")
		if r.code != 0 || !ok {
			t.Fatalf("gearman %s: %s", strings.Join(args, " "), r)
		}
		handles = append(handles, strings.TrimSuffix(h, "\n"))
	}
	if handles[0] != handles[1] || handles[0] != handles[2] {
		t.Errorf("handles %q: want one job", handles)
	}
	// A different key is another job.
	if r := runGearman(t, port, "", "-b", "-u", "L", "-f", "uq", "other"); r.code != 0 {
		t.Fatalf("gearman -b -u L: %s", r)
	}
	if got, want := adminCmd(t, addr, "prioritystatus"), "uq\t0\t2\t0\t0\n.\n"; got != want {
		t.Errorf("prioritystatus = %q, want %q", got, want)
	}
	if got, want := sortedLines(adminCmd(t, addr, "show unique jobs")), []string{"K", "L"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("show unique jobs = %q, want %q", got, want)
	}

	out := filepath.Join(t.TempDir(), "ran")
	args := append([]string{"-w", "-c", "2", "-f", "uq", "--"}, appendWorker(out)...)
	if r := runGearman(t, port, "", args...); r.code != 0 {
		t.Fatalf("worker: %s", r)
	}
	if got, want := readFile(t, out), "first\nother\n"; got != want {
		t.Errorf("ran %q, want %q", got, want)
	}
}

// Two foreground clients with the same unique key share one job: both get
// the same handle and the one result. Raw clients make "both submitted" an
// observable fact (JOB_CREATED); the worker is gearman's.
func TestE2ECLIForegroundUniqueCoalesces(t *testing.T) {
	t.Parallel()
	requireTool(t, "gearman")
	addr, port, _ := startServer(t)

	type sub struct{ unique, data, want string }
	subs := []sub{
		{"same", "abc", "cba"},
		{"same", "ignored: the first payload wins", "cba"},
		{"-", "by-payload", "daolyap-yb"}, // "-": the payload is the key
		{"-", "by-payload", "daolyap-yb"},
		{"-", "other", "rehto"},
		{"", "abc", "cba"}, // no unique: never coalesced
	}
	clients := make([]*gearConn, len(subs))
	handles := make([]string, len(subs))
	for i, s := range subs {
		clients[i] = dialGear(t, addr, "client "+strconv.Itoa(i))
		handles[i] = clients[i].submit(pSubmitJob, "co", s.unique, s.data)
	}
	if handles[0] != handles[1] || handles[2] != handles[3] {
		t.Errorf("coalesced submissions got handles %q", handles)
	}
	distinct := map[string]bool{}
	for _, h := range handles {
		distinct[h] = true
	}
	if len(distinct) != 4 {
		t.Errorf("handles %q: want 4 jobs", handles)
	}
	if got, want := adminCmd(t, addr, "status"), "co\t4\t0\t0\n.\n"; got != want {
		t.Errorf("status = %q, want %q", got, want)
	}

	w := startGearman(t, port, "-w", "-c", "4", "-f", "co", "--", "rev")
	for i, s := range subs {
		clients[i].expect(pWorkComplete, handles[i]+"\x00"+s.want)
	}
	if code := w.wait(t, e2eWaitTimeout); code != 0 {
		t.Errorf("worker exited %d", code)
	}
}

// Two workers with -c 3 and six concurrent clients: each worker must do
// exactly three jobs (else one of them would never exit) and each client
// gets its own result.
func TestE2ECLISeveralWorkers(t *testing.T) {
	t.Parallel()
	requireTool(t, "gearman")
	addr, port, _ := startServer(t)
	w1 := startGearman(t, port, "-w", "-c", "3", "-f", "rev", "--", "rev")
	w2 := startGearman(t, port, "-w", "-c", "3", "-f", "rev", "--", "rev")
	waitWorkers(t, addr, "rev", 2)

	var clients []*bgProc
	for i := 0; i < 6; i++ {
		clients = append(clients, startGearman(t, port, "-f", "rev", "job-"+strconv.Itoa(i)))
	}
	for i, c := range clients {
		if code := c.wait(t, e2eWaitTimeout); code != 0 {
			t.Errorf("client %d exited %d: %q", i, code, c.stderr.String())
		}
		if got, want := c.stdout.String(), strconv.Itoa(i)+"-boj"; got != want {
			t.Errorf("client %d got %q, want %q", i, got, want)
		}
	}
	for i, w := range []*bgProc{w1, w2} {
		if code := w.wait(t, e2eWaitTimeout); code != 0 {
			t.Errorf("worker %d exited %d", i+1, code)
		}
	}
}

// A job command that fails: the worker sends what it printed as WORK_DATA,
// then WORK_FAIL; the client prints the data and "Job failed" and exits 1.
func TestE2ECLIJobFails(t *testing.T) {
	t.Parallel()
	requireTool(t, "gearman")
	addr, port, _ := startServer(t)
	w := startGearman(t, port, "-w", "-c", "1", "-f", "fails", "--", "sh", "-c", "echo partial; exit 3")
	waitWorkers(t, addr, "fails", 1)
	r := runGearman(t, port, "", "-f", "fails", "x")
	if r.code != 1 || r.stdout != "partial\n" || r.stderr != "Job failed\n" {
		t.Errorf("client: %s\nwant exit 1, stdout \"partial\\n\", stderr \"Job failed\\n\"", r)
	}
	if code := w.wait(t, e2eWaitTimeout); code != 0 {
		t.Errorf("worker exited %d", code)
	}
	if got, want := adminCmd(t, addr, "status"), "fails\t0\t0\t0\n.\n"; got != want {
		t.Errorf("status = %q, want %q", got, want)
	}
}

// A worker in -n mode sends a WORK_DATA packet per line of output (gearman
// sends its whole buffer each time, hence "one" twice), then WORK_COMPLETE
// with nothing: the client prints every packet's data in order.
func TestE2ECLIWorkData(t *testing.T) {
	t.Parallel()
	requireTool(t, "gearman")
	addr, port, _ := startServer(t)
	w := startGearman(t, port, "-w", "-c", "1", "-n", "-f", "lines", "--", "sh", "-c", "echo one; echo two")
	waitWorkers(t, addr, "lines", 1)
	r := runGearman(t, port, "", "-f", "lines", "x")
	if r.code != 0 || r.stdout != "one\none\ntwo\n" {
		t.Errorf("client: %s\nwant stdout %q", r, "one\none\ntwo\n")
	}
	if code := w.wait(t, e2eWaitTimeout); code != 0 {
		t.Errorf("worker exited %d", code)
	}
}

func TestE2ECLIJobHandles(t *testing.T) {
	t.Parallel()
	requireTool(t, "gearman")
	cases := []struct {
		name string
		args []string
		re   *regexp.Regexp
	}{
		{"default", nil, hostHandleRE(t)},
		{"prefix", []string{"--job-handle-prefix", "myprefix"}, regexp.MustCompile(`^myprefix:\d+$`)},
		{"prefix with colon", []string{"--job-handle-prefix", "my:pre"}, regexp.MustCompile(`^my:pre:\d+$`)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			addr, port, _ := startServer(t, c.args...)
			r := runGearman(t, port, "", "-v", "-b", "-f", "x", "data")
			h, ok := strings.CutPrefix(r.stdout, "Task created: ")
			h = strings.TrimSuffix(h, "\n")
			if r.code != 0 || !ok || !c.re.MatchString(h) {
				t.Fatalf("gearman -v -b: %s\nwant Task created: %s", r, c.re)
			}
			jobs := adminCmd(t, addr, "show jobs")
			if want := h + "\t0\t0\t1\n.\n"; jobs != want {
				t.Errorf("show jobs = %q, want %q", jobs, want)
			}
		})
	}
}

// The order in which one worker gets the jobs of its functions. gearman -w
// registers its -f functions last to first (CAN_DO c, b, a); the server tries
// the most recently registered function first, so a, then b, then c. With -R
// it rotates a worker's functions after each job.
func TestE2ECLIFunctionOrder(t *testing.T) {
	t.Parallel()
	requireTool(t, "gearman")
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"registration order", nil, "a1 a2 a3 b1 b2 c1 c2"},
		{"round robin", []string{"-R"}, "a1 b1 c1 a2 b2 c2 a3"},
		{"round robin long", []string{"--round-robin"}, "a1 b1 c1 a2 b2 c2 a3"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, port, _ := startServer(t, c.args...)
			for _, x := range []string{"a1", "a2", "a3", "b1", "b2", "c1", "c2"} {
				if r := runGearman(t, port, "", "-b", "-f", x[:1], x); r.code != 0 {
					t.Fatalf("submit %s: %s", x, r)
				}
			}
			out := filepath.Join(t.TempDir(), "order")
			args := append([]string{"-w", "-c", "7", "-f", "a", "-f", "b", "-f", "c", "--"}, appendWorker(out)...)
			if r := runGearman(t, port, "", args...); r.code != 0 {
				t.Fatalf("worker: %s", r)
			}
			if got := strings.Join(strings.Fields(readFile(t, out)), " "); got != c.want {
				t.Errorf("order %q, want %q", got, c.want)
			}
		})
	}
}

// Each of gearmand's scheduling flags is accepted and the server still does
// its job.
func TestE2EFlagsAccepted(t *testing.T) {
	t.Parallel()
	requireTool(t, "gearman")
	cases := [][]string{
		{"-j", "3"},
		{"--job-retries", "2"},
		{"-w", "1"},
		{"--worker-wakeup", "2"},
		{"--exceptions"},
		{"-R"},
		{"--job-handle-prefix", "P"},
		{"-t", "2"},
		{"-j", "2", "-w", "1", "--exceptions", "-R", "--job-handle-prefix", "Q", "-t", "1"},
	}
	for _, args := range cases {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			addr, port, _ := startServer(t, args...)
			w1 := startGearman(t, port, "-w", "-c", "1", "-f", "rev", "--", "rev")
			w2 := startGearman(t, port, "-w", "-c", "1", "-f", "rev", "--", "rev")
			waitWorkers(t, addr, "rev", 2)
			c1 := startGearman(t, port, "-f", "rev", "one")
			c2 := startGearman(t, port, "-f", "rev", "two")
			for _, c := range []struct {
				p    *bgProc
				want string
			}{{c1, "eno"}, {c2, "owt"}} {
				if code := c.p.wait(t, e2eWaitTimeout); code != 0 || c.p.stdout.String() != c.want {
					t.Errorf("client exited %d with %q, want %q", code, c.p.stdout.String(), c.want)
				}
			}
			for _, w := range []*bgProc{w1, w2} {
				if code := w.wait(t, e2eWaitTimeout); code != 0 {
					t.Errorf("worker exited %d", code)
				}
			}
		})
	}
}
