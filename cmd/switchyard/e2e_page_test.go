package main

// The status page (/ on --metrics-listen) in a real headless Chromium:
// the numbers it shows, once its script has fetched and drawn them, are
// the admin protocol's; its search and pages are the server's.

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"switchyard/engine/ops/opstest"
)

// chromium loads url in a headless Chromium and returns the page's DOM
// once its script has run (virtual time lets its fetches finish first),
// saving a screenshot to shot when that is not "".
func chromium(t *testing.T, bin, url, shot string) string {
	t.Helper()
	args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
		"--user-data-dir=" + t.TempDir(), "--window-size=1400,1000",
		// Virtual time stands still while a fetch is under way: the budget
		// runs the script until it has drawn what it fetched.
		"--virtual-time-budget=3000", "--dump-dom"}
	if shot != "" {
		args = append(args, "--screenshot="+shot)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(args, url)...)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium %s: %v\n%s", url, err, tail(stderr.String(), 4<<10))
	}
	dom := string(out)
	if !strings.Contains(dom, `data-loaded="1"`) {
		t.Fatalf("the page at %s did not finish loading:\n%s", url, tail(dom, 8<<10))
	}
	return dom
}

// pageRow is one function as the page shows it: its cells' values by
// column.
type pageRow map[string]int

var (
	rowRE  = regexp.MustCompile(`(?s)<tr data-function="([^"]*)"[^>]*>(.*?)</tr>`)
	cellRE = regexp.MustCompile(`data-col="([a-z_]+)" data-value="(\d+)"`)
)

// pageRows reads the functions table out of a DOM, in the order shown.
func pageRows(t *testing.T, dom string) ([]string, map[string]pageRow) {
	t.Helper()
	var names []string
	rows := map[string]pageRow{}
	for _, m := range rowRE.FindAllStringSubmatch(dom, -1) {
		r := pageRow{}
		for _, c := range cellRE.FindAllStringSubmatch(m[2], -1) {
			r[c[1]], _ = strconv.Atoi(c[2])
		}
		names = append(names, m[1])
		rows[m[1]] = r
	}
	return names, rows
}

// domValue is the data-value of the element with id in a DOM.
func domValue(t *testing.T, dom, id string) int {
	t.Helper()
	m := regexp.MustCompile(`id="` + id + `"[^>]*data-value="(\d+)"|data-value="(\d+)"[^>]*id="` + id + `"`).FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("no #%s with a value in the page", id)
	}
	v, _ := strconv.Atoi(m[1] + m[2])
	return v
}

func TestE2EStatusPage(t *testing.T) {
	t.Parallel()
	bin := requireTool(t, "chromium")
	srv, maddr := startMetrics(t, "-q", "builtin")
	addr := srv.addr

	// page-alpha: queued at every priority, no worker; page-beta: a worker
	// holding one job, one more queued; page-gamma: a worker, no job;
	// and 120 more functions to page through.
	c := dialGear(t, addr, "client")
	for _, s := range []struct {
		typ uint32
		fn  string
		n   int
	}{{pSubmitJobHighBg, "page-alpha", 2}, {pSubmitJobBg, "page-alpha", 3}, {pSubmitJobLowBg, "page-alpha", 1},
		{pSubmitJobBg, "page-beta", 2}} {
		for range s.n {
			c.submit(s.typ, s.fn, "", "x")
		}
	}
	w := dialGear(t, addr, "beta worker")
	w.send(pCanDo, "page-beta")
	w.grabJob(10 * time.Second)
	g := dialGear(t, addr, "gamma worker")
	g.send(pCanDo, "page-gamma")
	g.echo()
	admin, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	var cmds strings.Builder
	for i := range 120 {
		fmt.Fprintf(&cmds, "create function bulk-%04d\n", i)
	}
	cmds.WriteString("version\n") // answered after every create
	if _, err := admin.Write([]byte(cmds.String())); err != nil {
		t.Fatal(err)
	}
	admin.SetReadDeadline(time.Now().Add(10 * time.Second))
	reply := make([]byte, 0, 1024)
	for !strings.Contains(string(reply), "OK "+version) {
		buf := make([]byte, 1024)
		n, err := admin.Read(buf)
		if err != nil {
			t.Fatalf("create function: %v after %q", err, reply)
		}
		reply = append(reply, buf[:n]...)
	}
	admin.Close()

	status, raw := adminStatus(t, addr)
	prio := map[string][3]int{}
	for _, line := range strings.Split(strings.TrimSuffix(adminCmd(t, addr, "prioritystatus"), ".\n"), "\n") {
		f := strings.Split(line, "\t")
		if len(f) == 5 {
			var q [3]int
			for i := range q {
				q[i], _ = strconv.Atoi(f[i+1])
			}
			prio[f[0]] = q
		}
	}

	// The three functions found by a search, screenshot kept.
	shot := filepath.Join(t.ArtifactDir(), "status-page.png")
	dom := chromium(t, bin, "http://"+maddr+"/?q=PAGE-", shot)
	if fi, err := os.Stat(shot); err != nil || fi.Size() == 0 {
		t.Errorf("no screenshot: %v", err)
	} else {
		t.Logf("screenshot: %s", shot)
	}
	names, rows := pageRows(t, dom)
	if want := []string{"page-alpha", "page-beta", "page-gamma"}; !slices.Equal(names, want) {
		t.Fatalf("searching \"PAGE-\" shows %q, want %q\nstatus:\n%s", names, want, raw)
	}
	for _, fn := range names {
		st, r := status[fn], rows[fn]
		want := pageRow{"total": st.queued, "running": st.running, "workers": st.workers,
			"high": prio[fn][0], "normal": prio[fn][1], "low": prio[fn][2], "later": 0, "completed": 0, "failed": 0}
		for col, v := range want {
			if r[col] != v {
				t.Errorf("%s: the page shows %s %d, the admin protocol %d (status %+v, prioritystatus %v)", fn, col, r[col], v, st, prio[fn])
			}
		}
	}
	if rows["page-alpha"]["high"] != 2 || rows["page-beta"]["running"] != 1 || rows["page-gamma"]["workers"] != 1 {
		t.Errorf("not the traffic made: %v", rows)
	}
	// The totals: every function's TOTAL and RUNNING added up.
	var jobs, running int
	for _, st := range status {
		jobs += st.queued
		running += st.running
	}
	if got := domValue(t, dom, "jobs"); got != jobs {
		t.Errorf("the page shows %d jobs, status adds up to %d", got, jobs)
	}
	if got := domValue(t, dom, "running"); got != running {
		t.Errorf("the page shows %d running, status adds up to %d", got, running)
	}
	if m := regexp.MustCompile(`<tr data-protocol="gearman">.*?data-col="submitted" data-value="(\d+)"`).FindStringSubmatch(dom); m == nil || m[1] != "8" {
		t.Errorf("gearman's submitted on the page: %v, want 8", m)
	}

	// The second page of all the functions, by name: the server's paging.
	dom = chromium(t, bin, "http://"+maddr+"/?offset=50", "")
	all := make([]string, 0, len(status))
	for fn := range status {
		all = append(all, fn)
	}
	slices.Sort(all)
	names, _ = pageRows(t, dom)
	if len(all) != 123 || !slices.Equal(names, all[50:100]) {
		t.Errorf("page 2 shows %d functions %q..., want %q... of %d", len(names), names[:min(3, len(names))], all[50:53], len(all))
	}
	if !strings.Contains(dom, `data-total="123"`) || !strings.Contains(dom, "51–100 of 123") {
		t.Errorf("the page's range does not say 51–100 of 123:\n%s", regexp.MustCompile(`<span id="page-range"[^<]*</span>`).FindString(dom))
	}
}

// The status page shows the job store's state beside the server's: in red,
// with the reason and the submits refused, while a full disk (the server's
// RLIMIT_FSIZE at 0) keeps it from writing, and "store ok" once it writes
// again.
func TestE2EStatusPageStoreFailure(t *testing.T) {
	t.Parallel()
	if isGearmand(t) {
		t.Skip("gearmand has no status page")
	}
	bin := requireTool(t, "chromium")
	srv, maddr := startMetrics(t)
	c := dialGear(t, srv.addr, "client")
	setFileSizeLimit(t, srv, 0)
	for i := 0; ; i++ {
		if i == 1000 {
			t.Fatal("1000 submits of 8 KiB acknowledged with RLIMIT_FSIZE 0")
		}
		c.send(pSubmitJobBg, "full", fmt.Sprint("u", i), strings.Repeat("p", 8<<10))
		if p := c.recv(10 * time.Second); p.typ != pJobCreated {
			break
		}
	}
	dom := chromium(t, bin, "http://"+maddr+"/", filepath.Join(t.ArtifactDir(), "store-failed.png"))
	store := regexp.MustCompile(`<span id="store" class="state down"[^>]*>store failed</span>`)
	alert := regexp.MustCompile(`<p id="store-failure" class="alert" role="alert">The job store takes no writes: [^<]*file too large[^<]*\(1 so far\)`)
	if !store.MatchString(dom) || !alert.MatchString(dom) {
		t.Fatalf("the page with the store down shows neither its state nor why:\n%s", tail(dom, 8<<10))
	}
	setFileSizeLimit(t, srv, unix.RLIM_INFINITY)
	waitUntil(t, 90*time.Second, "/healthz 200 once the store writes again", func() (bool, string) {
		code, body := opstest.Get(t, "http://"+maddr+"/healthz")
		return code == 200, fmt.Sprint(code, " ", body)
	})
	dom = chromium(t, bin, "http://"+maddr+"/", "")
	if !regexp.MustCompile(`<span id="store" class="state ok"[^>]*>store ok</span>`).MatchString(dom) ||
		!regexp.MustCompile(`<p id="store-failure" class="alert" role="alert" hidden=""></p>`).MatchString(dom) {
		t.Fatalf("the page with the store back:\n%s", tail(dom, 8<<10))
	}
}
