package main

// The Periodic frontend (--periodic-listen) end to end: a real switchyard
// process, real sockets (TCP on 127.0.0.1 and a unix socket), and the
// independent client and worker of periodic_client_test.go. The behaviour
// is the real Periodic server's (Lupino/periodic v0.1.7, commit dc57737),
// error replies included, but for the differences docs/periodic.md lists.
//
// Synchronisation is on replies: a PING answered on a connection means
// everything sent before it there has been handled; what another connection
// changed is polled for with STATUS. A job that must not be handed out is
// shown not to be by an outstanding GRAB_JOB getting a later job first.
// Timing tests use whole-second delays (sched_at is whole seconds) and bound
// arrival times on both sides.
//
// gearmand has no Periodic frontend: run against it, these tests skip.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"switchyard/bench/harness"
)

// perSlack bounds how late a timed event may come after its due time, on
// a machine that runs nothing else; on a shared two-core machine under
// heavy load, every server process has been seen to run seconds behind at
// once, so checkTime stretches it by what others had of the machine
// meanwhile (harness.Within). Reads of timed replies wait perHang, as
// stretched, so that a late job is reported as late (by how much) rather
// than as a read timeout.
const (
	perSlack = 4 * time.Second
	perHang  = 20 * time.Second
)

// perServer is switchyard serving Periodic on a TCP port and a unix socket.
type perServer struct {
	*serverProc
	tcp, unix perNet
}

// skipPeriodic skips a test run against gearmand.
func skipPeriodic(t *testing.T) {
	t.Helper()
	if isGearmand(t) {
		t.Skip("gearmand has no Periodic frontend")
	}
}

// startPeriodic starts switchyard with a Periodic listener on a TCP port the
// kernel picks and one on a unix socket in a temporary directory, and
// returns once both answer PING.
func startPeriodic(t *testing.T, extraArgs ...string) *perServer {
	t.Helper()
	skipPeriodic(t)
	sock := filepath.Join(t.TempDir(), "periodic.sock")
	args := append([]string{"--periodic-listen", "tcp://127.0.0.1:0", "--periodic-listen", "unix://" + sock}, extraArgs...)
	srv, others := startServerPorts(t, 2, args...)
	ps := &perServer{serverProc: srv, tcp: perNet{"tcp", others[0]}, unix: perNet{"unix", sock}}
	waitPeriodicUp(t, srv, ps.tcp)
	waitPeriodicUp(t, srv, ps.unix)
	return ps
}

// waitPeriodicUp waits until a Periodic listener answers PING: a unix
// socket may open after the TCP ports, or replace a stale file.
func waitPeriodicUp(t *testing.T, srv *serverProc, n perNet) {
	t.Helper()
	deadline := time.Now().Add(e2eWaitTimeout)
	for {
		c, err := net.DialTimeout(n.network, n.addr, time.Second)
		if err == nil {
			p := &perConn{t: t, c: c, r: bufio.NewReader(c), name: "probe " + n.String()}
			p.sendPayload([]byte{perTypeClient})
			p.send("up", perPing)
			r, err := p.tryRecv(perReplyTimeout)
			c.Close()
			if err != nil || r.msgID != "up" || string(r.body) != string([]byte{perPong}) {
				t.Fatalf("%s: PING answered %v, %v", n, r, err)
			}
			return
		}
		select {
		case <-srv.done:
			t.Fatalf("server exited (%v) before %s answered:\n%s", srv.waitErr, n, tail(srv.stderr.String(), 8<<10))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not answering after %v: %v", n, e2eWaitTimeout, err)
		}
		time.Sleep(20 * time.Millisecond) // polling for the socket, not synchronising
	}
}

// eachNet runs f as a parallel subtest over TCP and over the unix socket.
// The subtests share the server: they use function names of their own.
func (ps *perServer) eachNet(t *testing.T, f func(t *testing.T, n perNet)) {
	t.Helper()
	for _, n := range []perNet{ps.tcp, ps.unix} {
		t.Run(n.network, func(t *testing.T) {
			t.Parallel()
			f(t, n)
		})
	}
}

// checkTime fails the test unless at lies in [from, to], where to is
// the time an event is due plus slack, how late it may come on a machine
// that runs nothing else: w, begun before the wait, stretches the slack
// by the share of the machine others had meanwhile. Early is never the
// machine's doing: from is not stretched.
func checkTime(t *testing.T, what string, at, from, to time.Time, slack time.Duration, w *harness.Within) {
	t.Helper()
	if at.After(to) {
		to = to.Add(w.Stretch(slack) - slack)
	}
	if at.Before(from) || at.After(to) {
		t.Errorf("%s at %s, want between %s and %s (%v late at most, on an idle machine; others had %.0f%% of it)",
			what, at.Format("15:04:05.000"), from.Format("15:04:05.000"), to.Format("15:04:05.000"), slack, 100*w.Share())
	}
}

// lateness begins the measure of how late a Periodic event may come: ps's
// server is ours.
func (ps *perServer) lateness() *harness.Within { return harness.NewWithin(0, ps.cmd.Process.Pid) }

// timedRead is how long p may wait for a timed reply due in due: until
// then and perHang more, stretched by what others have of the machine
// meanwhile, which a guard on p's connection watches until stop (or the
// test's end).
func (ps *perServer) timedRead(p *perConn, due time.Duration) (timeout time.Duration, stop func() bool) {
	w := harness.NewWithinAfter(due, perHang, ps.cmd.Process.Pid)
	stop = w.Guard(p.c)
	p.t.Cleanup(func() { stop() })
	return due + harness.Stretch(perHang, harness.MaxShare), stop
}

// unixSec is the start of the whole second s.
func unixSec(s int64) time.Time { return time.Unix(s, 0) }

// 1. PING, SLEEP, unknown commands, commands of the other side, and message
// ids of every shape, echoed verbatim; requests are pipelined.
func TestE2EPeriodicCommands(t *testing.T) {
	t.Parallel()
	ps := startPeriodic(t)
	ps.eachNet(t, func(t *testing.T, n perNet) {
		ids := []string{"", "1", "msg-42", "\x00", "a\x00", "\x01\x02", "\xff\xfe\xfd", "id with spaces\t\r\n", strings.Repeat("L", 1000)}
		for _, typ := range []byte{perTypeClient, perTypeWorker} {
			p := dialPer(t, n, fmt.Sprintf("type %d", typ), typ)
			for _, id := range ids {
				p.send(id, perPing)
			}
			for _, id := range ids {
				p.expectCmd(id, perPong)
			}
		}

		c := dialPerClient(t, n)
		w := dialPer(t, n, "worker", perTypeWorker)
		type exchange struct {
			payload string // the request payload
			reply   byte
		}
		unknowns := func(cmds ...byte) []exchange {
			var e []exchange
			for _, cmd := range cmds {
				e = append(e, exchange{"u" + strconv.Itoa(int(cmd)) + perSep + string([]byte{cmd}), perUnknown})
			}
			return e
		}
		clientEx := append(unknowns(perNoop, perGrabJob, perSchedLater, perWorkDone, perWorkFail, perJobAssign,
			perNoJob, perCanDo, perCantDo, perPong, perSleep, perUnknown, perSuccess, 20, 99, 255),
			exchange{"p" + perSep + "\x09" + perSep + "ignored data", perPong},
			exchange{"two" + perSep, perUnknown},           // 2 parts, the second empty
			exchange{"long" + perSep + "PING", perUnknown}, // 2 parts, the second not one byte
		)
		workerEx := append(unknowns(perNoop, perJobAssign, perNoJob, perPong, perUnknown, perSubmitJob, perStatus,
			perDropFunc, perSuccess, perRemoveJob, perDump, perLoad, 20, 99, 255),
			exchange{"s" + perSep + string([]byte{perSleep}), perNoop},
			exchange{"p" + perSep + "\x09" + perSep + "ignored data", perPong},
			exchange{"two" + perSep, perUnknown},
			exchange{"long" + perSep + "PING", perUnknown},
		)
		for _, side := range []struct {
			p  *perConn
			ex []exchange
		}{{c, clientEx}, {w, workerEx}} {
			for _, e := range side.ex {
				side.p.sendPayload([]byte(e.payload))
			}
			for _, e := range side.ex {
				id, _, _ := strings.Cut(e.payload, perSep)
				side.p.expectCmd(id, e.reply)
			}
		}

		// The worker's SUBMIT_JOB, answered UNKNOWN, submitted nothing;
		// its LOAD loaded nothing.
		fn := "cmd-" + n.network
		w.send("sub", perSubmitJob, perMarshalJob(perJob{Name: "n", Func: fn}))
		w.expectCmd("sub", perUnknown)
		w.send("load", perLoad, `{"jobs":[{"name":"n","func":"`+fn+`"}]}`)
		w.expectCmd("load", perUnknown)
		if m, raw := c.status(); m[fn] != (perStat{}) {
			t.Errorf("a worker's SUBMIT_JOB or LOAD made a job: STATUS %q", raw)
		}
	})
}

// 2. A job goes from SUBMIT_JOB to a worker's JOB_ASSIGN, with the job's
// JSON exactly as the real server writes it, and WORK_DONE deletes it.
// GRAB_JOBs outstanding on one connection are answered oldest first, each
// once; JSON decoding follows encoding/json.
func TestE2EPeriodicSubmitRun(t *testing.T) {
	t.Parallel()
	ps := startPeriodic(t)
	ps.eachNet(t, func(t *testing.T, n perNet) {
		fn := "run-" + n.network
		w := dialPerWorker(t, n, "worker", fn)
		w.grab("g1")
		w.ping() // answered while the grab waits
		c := dialPerClient(t, n)
		schedAt := time.Now().Unix()
		c.submit(perJob{Name: "job1", Func: fn, Workload: "payload 1", SchedAt: schedAt})
		a := w.expectAssign(perReplyTimeout)
		want := perJob{ID: a.job.ID, Name: "job1", Func: fn, Workload: "payload 1", SchedAt: schedAt, Status: "ready"}
		if a.msgID != "g1" || a.job != want {
			t.Fatalf("JOB_ASSIGN %q %s, want g1 %+v", a.msgID, a.raw, want)
		}
		if got, exp := string(a.raw), perMarshalJob(want); got != exp {
			t.Errorf("job JSON\n%s, want exactly\n%s", got, exp)
		}
		c.waitStatus(fn, perStat{1, 1, 1}, false)
		w.workDone(a.handle)
		w.ping()
		c.waitStatus(fn, perStat{1, 0, 0}, false)

		// Three grabs outstanding, three jobs with awkward workloads.
		workloads := map[string]string{
			"j2": "quote\" backslash\\ newline\n tab\t nul\x00 \x01\x7f",
			"j3": "unicode é 日本 \u2028 <html>&amp;",
			"j4": strings.Repeat("0123456789abcdef", 8<<10),
		}
		for _, id := range []string{"g2", "g3", "g4"} {
			w.grab(id)
		}
		w.ping()
		for _, name := range []string{"j2", "j3", "j4"} {
			c.submit(perJob{Name: name, Func: fn, Workload: workloads[name]})
		}
		seen := map[string]bool{}
		for _, id := range []string{"g2", "g3", "g4"} {
			a := w.expectAssign(perReplyTimeout)
			j := a.job
			if a.msgID != id {
				t.Errorf("JOB_ASSIGN for %q, want the oldest grab %q", a.msgID, id)
			}
			if seen[j.Name] || workloads[j.Name] != j.Workload || j.Func != fn || j.SchedAt != 0 || j.Counter != 0 || j.Status != "ready" {
				t.Errorf("JOB_ASSIGN %.300s", a.raw)
			}
			seen[j.Name] = true
			w.workDone(a.handle)
		}

		// Keys match case-insensitively, unknown keys are ignored, and
		// what go-periodic leaves out (a bare {"func","name"}) is zero.
		c.submitJSON(`{"FUNC":"` + fn + `","Name":"ci","WORKLOAD":"x","extra":[1,{"a":2}],"counter":3,"Timeout":60}`)
		c.submitJSON(`{"func":"` + fn + `","name":"min"}`)
		got := map[string]perJob{}
		for range 2 {
			a := w.grabOne(perReplyTimeout)
			a.job.ID = 0
			got[a.job.Name] = a.job
			w.workDone(a.handle)
		}
		if g, e := got["ci"], (perJob{Name: "ci", Func: fn, Workload: "x", Counter: 3, Timeout: 60, Status: "ready"}); g != e {
			t.Errorf("job ci: %+v, want %+v", g, e)
		}
		if g, e := got["min"], (perJob{Name: "min", Func: fn, Status: "ready"}); g != e {
			t.Errorf("job min: %+v, want %+v", g, e)
		}
		w.ping()
		c.waitStatus(fn, perStat{1, 0, 0}, false)
	})
}

// 3. Resubmitting (func, name) replaces the waiting job: one job, with the
// new workload, timeout, counter and sched_at.
func TestE2EPeriodicReplace(t *testing.T) {
	t.Parallel()
	ps := startPeriodic(t)
	ps.eachNet(t, func(t *testing.T, n perNet) {
		fn := "replace-" + n.network
		c := dialPerClient(t, n)
		c.submit(perJob{Name: "same", Func: fn, Workload: "old", Timeout: 100, Counter: 1})
		c.submit(perJob{Name: "same", Func: fn, Workload: "new", Timeout: 200, Counter: 5})
		if m, raw := c.status(); m[fn] != (perStat{0, 1, 0}) {
			t.Fatalf("STATUS after two submits of one job: %q", raw)
		}
		// A far-future job moved to now by a resubmit.
		c.submit(perJob{Name: "moved", Func: fn, Workload: "later", SchedAt: time.Now().Unix() + 3600})
		c.submit(perJob{Name: "moved", Func: fn, Workload: "now", SchedAt: time.Now().Unix()})

		w := dialPerWorker(t, n, "worker", fn)
		for _, id := range []string{"g1", "g2", "g3"} {
			w.grab(id)
		}
		got := map[string]perJob{}
		for range 2 {
			a := w.expectAssign(perReplyTimeout)
			got[a.job.Name] = a.job
			w.workDone(a.handle)
		}
		if j := got["same"]; j.Workload != "new" || j.Timeout != 200 || j.Counter != 5 {
			t.Errorf("job same: %+v, want workload new, timeout 200, counter 5", j)
		}
		if j := got["moved"]; j.Workload != "now" {
			t.Errorf("job moved: %+v, want workload now", j)
		}
		w.ping()
		c.waitStatus(fn, perStat{1, 0, 0}, false)
		// No stale copy is left to take the third grab before this one.
		c.submit(perJob{Name: "marker", Func: fn})
		if a := w.expectAssign(perReplyTimeout); a.msgID != "g3" || a.job.Name != "marker" {
			t.Errorf("third grab got %q %s, want the marker", a.msgID, a.raw)
		} else {
			w.workDone(a.handle)
		}

		// Resubmitted while it runs: the new version waits and runs,
		// and the old run's WORK_DONE does not delete it (the real
		// server's would: it deletes by job id).
		c.submit(perJob{Name: "busy", Func: fn, Workload: "v1"})
		old := w.grabOne(perReplyTimeout)
		c.submit(perJob{Name: "busy", Func: fn, Workload: "v2"})
		w.workDone(old.handle)
		w.ping()
		if a := w.grabOne(perReplyTimeout); a.job.Name != "busy" || a.job.Workload != "v2" {
			t.Errorf("after a resubmit while running, the worker got %s, want busy with v2", a.raw)
		} else {
			w.workDone(a.handle)
		}
		w.ping()
		c.waitStatus(fn, perStat{1, 0, 0}, false)
	})
}

// 4. A job due in the future is not handed out before its sched_at, while
// a job due now, submitted after it, goes at once; it arrives on time.
func TestE2EPeriodicSchedAt(t *testing.T) {
	t.Parallel()
	ps := startPeriodic(t)
	ps.eachNet(t, func(t *testing.T, n perNet) {
		fn := "schedat-" + n.network
		w := dialPerWorker(t, n, "worker", fn)
		w.grab("g1")
		w.grab("g2")
		w.ping()
		c := dialPerClient(t, n)
		late := ps.lateness()
		start := time.Now()
		// Two whole seconds after the next one starts: at least 2s away.
		due := start.Unix() + 3
		c.submit(perJob{Name: "future", Func: fn, Workload: "f", SchedAt: due})
		c.submit(perJob{Name: "now", Func: fn, Workload: "n"})
		c.waitStatus(fn, perStat{1, 2, 1}, false)

		a := w.expectAssign(perReplyTimeout)
		if a.msgID != "g1" || a.job.Name != "now" {
			t.Fatalf("first JOB_ASSIGN %q %s, want the job due now", a.msgID, a.raw)
		}
		checkTime(t, "the job due now", a.at, start, unixSec(due-1), unixSec(due-1).Sub(start), late)
		timeout, stop := ps.timedRead(w, time.Until(unixSec(due)))
		b := w.expectAssign(timeout)
		stop()
		if b.msgID != "g2" || b.job.Name != "future" || b.job.SchedAt != due {
			t.Fatalf("second JOB_ASSIGN %q %s, want the future job", b.msgID, b.raw)
		}
		// sched_at is whole seconds: allow a second early, no more.
		checkTime(t, "the job due at "+unixSec(due).Format("15:04:05"), b.at, unixSec(due).Add(-time.Second), unixSec(due).Add(perSlack), perSlack, late)
	})
}

// 5. SCHED_LATER handle, 1, 2: the job comes back a second later with its
// counter 2 up; without a step the counter stays; with too few arguments
// the command is ignored.
func TestE2EPeriodicSchedLater(t *testing.T) {
	t.Parallel()
	ps := startPeriodic(t)
	ps.eachNet(t, func(t *testing.T, n perNet) {
		fn := "later-" + n.network
		w := dialPerWorker(t, n, "worker", fn)
		c := dialPerClient(t, n)
		c.submit(perJob{Name: "later", Func: fn, Workload: "w"})
		before := time.Now()
		a := w.grabOne(perReplyTimeout)
		if a.job.Counter != 0 || a.job.RunAt != 0 || a.job.Status != "ready" {
			t.Errorf("first run: %s, want counter 0, run_at 0, ready", a.raw)
		}
		runAt := [2]int64{before.Unix(), a.at.Unix()} // bounds of the first run's run_at

		prev := a
		for i, wantCounter := range []int64{2, 4} {
			late := ps.lateness()
			sent := time.Now()
			w.schedLater(prev.handle, 1, 2)
			timeout, stop := ps.timedRead(w, time.Second)
			b := w.grabOne(timeout)
			stop()
			j := b.job
			if j.ID != a.job.ID || j.Counter != wantCounter || j.Status != "ready" || j.Workload != "w" {
				t.Errorf("run %d: %s, want job %d, counter %d", i+2, b.raw, a.job.ID, wantCounter)
			}
			if j.SchedAt < sent.Unix()+1 || j.SchedAt > b.at.Unix()+1 {
				t.Errorf("run %d: sched_at %d, want now+1 (sent at %d)", i+2, j.SchedAt, sent.Unix())
			}
			checkTime(t, fmt.Sprintf("run %d", i+2), b.at, unixSec(j.SchedAt).Add(-time.Second), sent.Add(time.Second+perSlack), perSlack, late)
			if j.RunAt < runAt[0] || j.RunAt > runAt[1] {
				t.Errorf("run %d: run_at %d, want the previous run's, %d..%d", i+2, j.RunAt, runAt[0], runAt[1])
			}
			runAt = [2]int64{sent.Unix(), b.at.Unix()}
			prev = b
		}

		// Delay 0, no step: back at once, counter unchanged.
		late := ps.lateness()
		sent := time.Now()
		w.send(w.newID(), perSchedLater, prev.handle, "0")
		b := w.grabOne(perReplyTimeout)
		if b.job.Counter != 4 {
			t.Errorf("SCHED_LATER without a step: counter %d, want 4", b.job.Counter)
		}
		checkTime(t, "the job sched later by 0s", b.at, sent, sent.Add(time.Second), time.Second, late)

		// One argument only: ignored, the job is still running.
		w.send(w.newID(), perSchedLater, b.handle)
		w.ping()
		c.waitStatus(fn, perStat{1, 1, 1}, false)
		w.workDone(b.handle)
		w.ping()
		c.waitStatus(fn, perStat{1, 0, 0}, false)
	})
}

// 6, 7, 8. A running job comes back to a waiting GRAB_JOB at once after
// WORK_FAIL, after its timeout when its worker says nothing, and when its
// worker's connection closes.
func TestE2EPeriodicRetry(t *testing.T) {
	t.Parallel()
	ps := startPeriodic(t)
	ps.eachNet(t, func(t *testing.T, n perNet) {
		for _, tc := range []struct {
			name    string
			timeout int64
			end     func(w *perConn, a perAssignment)
			from    func(before time.Time) time.Time // earliest return, given a time before the first run
			within  time.Duration                    // after the end
			slack   time.Duration                    // of within, how late the return may come
		}{
			{name: "work fail", end: func(w *perConn, a perAssignment) { w.workFail(a.handle) }, within: time.Second, slack: time.Second},
			{name: "timeout", timeout: 1, end: func(*perConn, perAssignment) {},
				// run_at + timeout, run_at being whole seconds.
				from:   func(before time.Time) time.Time { return unixSec(before.Unix() + 1) },
				within: time.Second + perSlack, slack: perSlack},
			{name: "worker closes", end: func(w *perConn, _ perAssignment) { w.c.Close() }, within: perSlack, slack: perSlack},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				fn := fmt.Sprintf("retry-%s-%s", strings.ReplaceAll(tc.name, " ", "-"), n.network)
				c := dialPerClient(t, n)
				w1 := dialPerWorker(t, n, "worker 1", fn)
				c.submit(perJob{Name: "j", Func: fn, Workload: "w", Timeout: tc.timeout, Counter: 7})
				before := time.Now()
				a := w1.grabOne(perReplyTimeout)
				w2 := dialPerWorker(t, n, "worker 2", fn)
				w2.grab("g")
				w2.ping()
				c.waitStatus(fn, perStat{2, 1, 1}, false)

				late := ps.lateness()
				end := time.Now()
				tc.end(w1, a)
				timeout, stop := ps.timedRead(w2, tc.within-tc.slack)
				b := w2.expectAssign(timeout)
				stop()
				j := b.job
				if j.ID != a.job.ID || j.Name != "j" || j.Workload != "w" || j.Counter != 7 || j.Timeout != tc.timeout || j.Status != "ready" {
					t.Errorf("second run %s, want the job again as it was", b.raw)
				}
				if j.RunAt < before.Unix() || j.RunAt > a.at.Unix() {
					t.Errorf("second run: run_at %d, want the first run's (%d..%d)", j.RunAt, before.Unix(), a.at.Unix())
				}
				from := end
				if tc.from != nil {
					from = tc.from(before)
				}
				checkTime(t, "the job's return", b.at, from, end.Add(tc.within), tc.slack, late)
				w2.workDone(b.handle)
				w2.ping()
				c.waitJobs(fn, 0, 0)
			})
		}
	})
}

// Numbers at the edge of int64 never wrap: a sched_at thousands of years
// away (MaxInt64 included) is not due and is dumped as given, the counter
// is kept as given, and a timeout or SCHED_LATER delay of 2^55+1 s (whose
// nanoseconds would wrap to exactly 1 s in an int64) is forever in
// practice. switchyard measures waits in nanoseconds up to 2^62 (about 146
// years), so such a timeout is reported as 2^62 ns in seconds and such a
// delay puts sched_at that far ahead (docs/periodic.md says so); the real server
// keeps both numbers as given.
func TestE2EPeriodicBigNumbers(t *testing.T) {
	t.Parallel()
	ps := startPeriodic(t)
	c := dialPerClient(t, ps.tcp)
	const huge = 1<<55 + 1
	far := []int64{99999999999999, 1 << 62, 1<<63 - 1}
	for i, at := range far {
		c.submit(perJob{Func: "big-far", Name: strconv.Itoa(i), SchedAt: at})
	}
	c.submit(perJob{Func: "big", Name: "long", Timeout: huge, Counter: 1<<63 - 1})
	c.submit(perJob{Func: "big", Name: "later"})
	w := dialPerWorker(t, ps.tcp, "worker", "big")
	got := map[string]perAssignment{}
	for range 2 {
		a := w.grabOne(perReplyTimeout)
		got[a.job.Name] = a
	}
	const longest = int64(1<<62) / int64(time.Second) // switchyard's longest wait, in seconds
	if j := got["long"].job; j.Timeout != longest || j.Counter != 1<<63-1 {
		t.Errorf("JOB_ASSIGN %s, want timeout %d (2^62 ns) and counter %d as submitted", got["long"].raw, longest, int64(1<<63-1))
	}
	if _, ok := got["later"]; !ok {
		t.Fatalf("the worker got %s and %s, want the jobs long and later", got["long"].raw, got["later"].raw)
	}
	w.send(w.newID(), perSchedLater, got["later"].handle, strconv.Itoa(huge))
	w.ping()
	// A second worker waits: the next thing it gets is a marker due in
	// 3 s, not the running job back after a wrapped timeout, nor the job
	// sched later, nor a far one.
	w2 := dialPerWorker(t, ps.tcp, "worker 2", "big", "big-far")
	w2.grab("g")
	due := time.Now().Unix() + 3
	c.submit(perJob{Func: "big", Name: "marker", SchedAt: due})
	timeout, stop := ps.timedRead(w2, time.Until(unixSec(due)))
	if b := w2.expectAssign(timeout); b.job.Name != "marker" {
		t.Errorf("the second worker got %s, want the marker", b.raw)
	}
	stop()
	_, jobs := c.dump()
	at := map[string]int64{}
	for _, j := range jobs {
		at[j.Func+"/"+j.Name] = j.SchedAt
	}
	for i, want := range far {
		if got := at["big-far/"+strconv.Itoa(i)]; got != want {
			t.Errorf("DUMP: job %d sched_at %d, want %d", i, got, want)
		}
	}
	if got, min := at["big/later"], time.Now().Unix()+longest-10; got < min {
		t.Errorf("DUMP: the job sched later by %d s has sched_at %d, want about now + %d (2^62 ns)", int64(huge), got, longest)
	}
}

// 9. REMOVE_JOB deletes a waiting job (it never runs) or a running one (it
// does not come back, even after its timeout); an unknown job gets our
// error text.
func TestE2EPeriodicRemoveJob(t *testing.T) {
	t.Parallel()
	ps := startPeriodic(t)
	ps.eachNet(t, func(t *testing.T, n perNet) {
		fn := "remove-" + n.network
		c := dialPerClient(t, n)
		remove := func(name string) perReply {
			return c.call(perRemoveJob, perMarshalJob(perJob{Func: fn, Name: name}))
		}
		c.submit(perJob{Name: "waiting", Func: fn})
		if r := remove("waiting"); string(r.body) != string([]byte{perSuccess}) {
			t.Fatalf("REMOVE_JOB of a waiting job: %v, want SUCCESS", r)
		}
		if m, raw := c.status(); m[fn].jobs != 0 {
			t.Errorf("STATUS after REMOVE_JOB: %q", raw)
		}
		if r := remove("nope"); string(r.body) != "Job "+fn+":nope not exists." {
			t.Errorf("REMOVE_JOB of an unknown job: %v, want %q", r, "Job "+fn+":nope not exists.")
		}
		c.ping() // the connection is still usable

		// A running job with a 1 s timeout, removed.
		w := dialPerWorker(t, n, "worker", fn)
		c.submit(perJob{Name: "running", Func: fn, Timeout: 1})
		a := w.grabOne(perReplyTimeout)
		if a.job.Name != "running" {
			t.Fatalf("worker got %s, want the running job (the removed one ran?)", a.raw)
		}
		if r := remove("running"); string(r.body) != string([]byte{perSuccess}) {
			t.Fatalf("REMOVE_JOB of a running job: %v, want SUCCESS", r)
		}
		c.waitStatus(fn, perStat{1, 0, 0}, false)
		// The worker's late WORK_DONE is harmless.
		w.workDone(a.handle)
		w.ping()
		// A marker due after the timeout would have brought the job
		// back is the next thing the worker gets.
		due := time.Now().Unix() + 3
		w.grab("g")
		c.submit(perJob{Name: "marker", Func: fn, SchedAt: due})
		timeout, stop := ps.timedRead(w, time.Until(unixSec(due)))
		b := w.expectAssign(timeout)
		stop()
		if b.job.Name != "marker" {
			t.Errorf("worker got %s, want the marker", b.raw)
		}
		w.workDone(b.handle)
		w.ping()
		c.waitStatus(fn, perStat{1, 0, 0}, false)
	})
}

// 10. DROP_FUNC forgets a function and its jobs when no worker has it, and
// does nothing (but still answers SUCCESS) when one has.
func TestE2EPeriodicDropFunc(t *testing.T) {
	t.Parallel()
	ps := startPeriodic(t)
	ps.eachNet(t, func(t *testing.T, n perNet) {
		c := dialPerClient(t, n)
		drop := func(fn string) {
			t.Helper()
			if r := c.call(perDropFunc, fn); string(r.body) != string([]byte{perSuccess}) {
				t.Fatalf("DROP_FUNC %s: %v, want SUCCESS", fn, r)
			}
		}

		idle := "drop-idle-" + n.network
		for i := range 3 {
			c.submit(perJob{Name: strconv.Itoa(i), Func: idle})
		}
		if m, raw := c.status(); m[idle] != (perStat{0, 3, 0}) {
			t.Fatalf("STATUS %q", raw)
		}
		drop(idle)
		c.waitStatus(idle, perStat{}, true)
		// The jobs are gone: a new worker gets the marker first.
		w := dialPerWorker(t, n, "worker", idle)
		w.grab("g")
		c.submit(perJob{Name: "marker", Func: idle})
		if a := w.expectAssign(perReplyTimeout); a.job.Name != "marker" {
			t.Errorf("after DROP_FUNC the worker got %s, want the marker", a.raw)
		}

		busy := "drop-busy-" + n.network
		wb := dialPerWorker(t, n, "busy worker", busy)
		wb.ping()
		c.submit(perJob{Name: "a", Func: busy})
		c.submit(perJob{Name: "b", Func: busy})
		c.waitStatus(busy, perStat{1, 2, 0}, false)
		drop(busy)
		if m, raw := c.status(); m[busy] != (perStat{1, 2, 0}) {
			t.Errorf("DROP_FUNC with a worker changed STATUS: %q", raw)
		}
		for range 2 {
			wb.workDone(wb.grabOne(perReplyTimeout).handle)
		}

		// A function whose worker left, and one never seen.
		left := "drop-left-" + n.network
		wl := dialPerWorker(t, n, "leaving worker", left)
		wl.ping()
		wl.c.Close()
		waitUntil(t, e2eWaitTimeout, left+" without workers", func() (bool, string) {
			m, raw := c.status()
			return m[left].workers == 0, raw
		})
		drop(left)
		c.waitStatus(left, perStat{}, true)
		drop("drop-never-" + n.network)
	})
}

// 11. STATUS's func,workers,jobs,processing through a job's life with two
// workers; a fresh server lists nothing.
func TestE2EPeriodicStatus(t *testing.T) {
	t.Parallel()
	ps := startPeriodic(t)
	if r := dialPerClient(t, ps.tcp).call(perStatus); len(r.body) != 0 {
		t.Errorf("STATUS of a fresh server: %q, want nothing", r.body)
	}
	ps.eachNet(t, func(t *testing.T, n perNet) {
		fn := "status-" + n.network
		c := dialPerClient(t, n)
		c.submit(perJob{Name: "a", Func: fn})
		c.submit(perJob{Name: "b", Func: fn})
		c.submit(perJob{Name: "later", Func: fn, SchedAt: time.Now().Unix() + 3600})
		c.waitStatus(fn, perStat{0, 3, 0}, false)
		w1 := dialPerWorker(t, n, "worker 1", fn)
		w2 := dialPerWorker(t, n, "worker 2", fn, "status-other-"+n.network)
		w1.ping()
		w2.ping()
		c.waitStatus(fn, perStat{2, 3, 0}, false)
		c.waitStatus("status-other-"+n.network, perStat{1, 0, 0}, false)
		a1 := w1.grabOne(perReplyTimeout)
		c.waitStatus(fn, perStat{2, 3, 1}, false)
		w2.grabOne(perReplyTimeout)
		c.waitStatus(fn, perStat{2, 3, 2}, false)
		w1.workDone(a1.handle)
		c.waitStatus(fn, perStat{2, 2, 1}, false)
		w1.send(w1.newID(), perCantDo, fn)
		w1.ping()
		c.waitStatus(fn, perStat{1, 2, 1}, false)
		w2.c.Close() // its job is ready again
		c.waitStatus(fn, perStat{0, 2, 0}, false)
	})
}

// 12. DUMP lists every background job in chunks of at most 100, a running
// one as "processing"; LOADing the chunks into a fresh server recreates
// the jobs, which run there as they were.
func TestE2EPeriodicDumpLoad(t *testing.T) {
	t.Parallel()
	src := startPeriodic(t)
	dst := startPeriodic(t)
	c := dialPerClient(t, src.tcp)

	now := time.Now().Unix()
	funcs := []string{"dump-a", "dump-b", "dump-c"}
	var submitted []perJob
	for i := range 250 {
		submitted = append(submitted, perJob{
			Name:     fmt.Sprintf("job-%03d", i),
			Func:     funcs[i%3],
			Workload: fmt.Sprintf("w%d \"q\" é<&>\n", i),
			Timeout:  int64(i%4) * 60,
			SchedAt:  now - int64(i%50),
			Counter:  int64(i % 5),
		})
	}
	// Pipelined: all the submits, then all the replies.
	for i, j := range submitted {
		c.send("s"+strconv.Itoa(i), perSubmitJob, perMarshalJob(j))
	}
	for i := range submitted {
		c.expectCmd("s"+strconv.Itoa(i), perSuccess)
	}
	// A Gearman background job is dumped (name = its unique); a
	// foreground one, which dies with its client, is not.
	g := dialGear(t, src.addr, "gearman client")
	g.submit(pSubmitJobBg, "dump-g", "gbg", "gearman payload")
	fg := dialGear(t, src.addr, "gearman foreground client")
	fg.submit(pSubmitJob, "dump-fg", "gfg", "foreground")
	// One job running.
	w := dialPerWorker(t, src.tcp, "worker", "dump-b")
	before := time.Now().Unix()
	running := w.grabOne(perReplyTimeout)
	after := time.Now().Unix()
	c.waitStatus("dump-b", perStat{1, 83, 1}, false)

	type key struct {
		name, fn, workload string
		timeout, sched     int64
		counter            int64
	}
	keyOf := func(j perJob) key { return key{j.Name, j.Func, j.Workload, j.Timeout, j.SchedAt, j.Counter} }
	want := map[string]key{}
	for _, j := range submitted {
		want[j.Name] = keyOf(j)
	}

	chunks, dumped := c.dump()
	if len(chunks) < 3 || len(dumped) != 251 {
		t.Fatalf("DUMP: %d jobs in %d chunks, want 251 in at least 3", len(dumped), len(chunks))
	}
	ids := map[int64]bool{}
	var gbg perJob
	for _, j := range dumped {
		if ids[j.ID] || j.ID <= 0 {
			t.Errorf("DUMP: job_id %d twice or not positive", j.ID)
		}
		ids[j.ID] = true
		if j.Name == "gbg" {
			gbg = j
			continue
		}
		k, ok := want[j.Name]
		if !ok {
			t.Errorf("DUMP: unexpected job %+v", j)
			continue
		}
		delete(want, j.Name)
		if keyOf(j) != k {
			t.Errorf("DUMP: %+v, want %+v", j, k)
		}
		if j.Name == running.job.Name {
			if j.Status != "processing" || j.RunAt < before || j.RunAt > after {
				t.Errorf("DUMP: the running job %+v, want processing with run_at %d..%d", j, before, after)
			}
		} else if j.Status != "ready" || j.RunAt != 0 {
			t.Errorf("DUMP: %+v, want ready, run_at 0", j)
		}
	}
	if len(want) != 0 {
		t.Errorf("DUMP misses %d jobs", len(want))
	}
	if gbg.Func != "dump-g" || gbg.Workload != "gearman payload" || gbg.Status != "ready" {
		t.Errorf("DUMP: the Gearman job %+v", gbg)
	}

	// LOAD into the fresh server, over its unix socket.
	d := dialPerClient(t, dst.unix)
	if chunks, _ := d.dump(); len(chunks) != 0 {
		t.Fatalf("DUMP of a fresh server: %d chunks", len(chunks))
	}
	for i, chunk := range chunks {
		d.send("load"+strconv.Itoa(i), perLoad, string(chunk))
	}
	d.ping() // LOAD has no reply: PONG comes first
	for fn, n := range map[string]int{"dump-a": 84, "dump-b": 83, "dump-c": 83, "dump-g": 1} {
		d.waitStatus(fn, perStat{0, n, 0}, false)
	}
	_, reloaded := d.dump()
	byName := map[string]perJob{}
	for _, j := range dumped {
		byName[j.Name] = j
	}
	for _, j := range reloaded {
		o, ok := byName[j.Name]
		if !ok || keyOf(j) != keyOf(o) || j.Status != "ready" {
			t.Errorf("reloaded %+v, dumped %+v (want it ready)", j, o)
		}
		delete(byName, j.Name)
	}
	if len(byName) != 0 {
		t.Errorf("%d jobs not reloaded", len(byName))
	}

	// They run there, as they were.
	wd := dialPerWorker(t, dst.tcp, "worker", "dump-a", "dump-b", "dump-c", "dump-g")
	for i := range dumped {
		wd.grab("g" + strconv.Itoa(i))
	}
	byName = map[string]perJob{}
	for _, j := range dumped {
		byName[j.Name] = j
	}
	for range dumped {
		a := wd.expectAssign(perReplyTimeout)
		o, ok := byName[a.job.Name]
		if !ok || keyOf(a.job) != keyOf(o) || a.job.Status != "ready" {
			t.Errorf("ran %s, dumped %+v", a.raw, o)
		}
		delete(byName, a.job.Name)
		wd.workDone(a.handle)
	}
	wd.ping()
	for _, fn := range []string{"dump-a", "dump-b", "dump-c", "dump-g"} {
		d.waitStatus(fn, perStat{1, 0, 0}, false)
	}
}

// grabJobUniq grabs with GRAB_JOB_UNIQ until a job comes, and returns
// JOB_ASSIGN_UNIQ's arguments: handle, function, unique, workload.
func (g *gearConn) grabJobUniq(timeout time.Duration) []string {
	g.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		g.send(pGrabJobUniq)
		p := g.recv(time.Until(deadline))
		switch p.typ {
		case pJobAssignUniq:
			a := strings.SplitN(string(p.body), "\x00", 4)
			if len(a) != 4 {
				g.t.Fatalf("%s: JOB_ASSIGN_UNIQ %q", g.name, p.body)
			}
			return a
		case pNoJob:
			g.send(pPreSleep)
			if p := g.recv(time.Until(deadline)); p.typ != pNoop {
				g.t.Fatalf("%s: asleep, got %v", g.name, p)
			}
		default:
			g.t.Fatalf("%s: GRAB_JOB_UNIQ answered %v", g.name, p)
		}
	}
}

// dumpFunc returns the jobs of fn that DUMP lists.
func dumpFunc(c *perConn, fn string) []perJob {
	c.t.Helper()
	_, all := c.dump()
	var jobs []perJob
	for _, j := range all {
		if j.Func == fn {
			jobs = append(jobs, j)
		}
	}
	return jobs
}

// handleNumber returns N of a job handle H:host:N.
func handleNumber(t *testing.T, handle string) string {
	t.Helper()
	m := regexp.MustCompile(`^` + hostHandlePattern(t) + `$`).FindString(handle)
	if m == "" {
		t.Fatalf("job handle %q", handle)
	}
	return handle[strings.LastIndexByte(handle, ':')+1:]
}

// 13. One scheduler, two protocols: a Periodic job runs on a Gearman worker
// (unique = name, payload = workload; WORK_FAIL and WORK_EXCEPTION make it
// ready again, WORK_COMPLETE deletes it), and a Gearman background job runs
// on a Periodic worker (name = unique; WORK_DONE completes it, WORK_FAIL
// fails it as Gearman does).
func TestE2EPeriodicGearman(t *testing.T) {
	t.Parallel()
	ps := startPeriodic(t)

	t.Run("periodic job, gearman worker", func(t *testing.T) {
		t.Parallel()
		gw := dialGear(t, ps.addr, "gearman worker")
		gw.send(pCanDo, "xp")
		// Asleep, it is woken by the Periodic submit.
		gw.send(pGrabJobUniq)
		gw.expect(pNoJob, "")
		gw.send(pPreSleep)
		c := dialPerClient(t, ps.tcp)
		c.submit(perJob{Name: "pjob", Func: "xp", Workload: "periodic payload"})
		gw.expect(pNoop, "")
		waitStatus(t, ps.addr, "xp", "1 queued", func(s funcStatus) bool { return s.queued == 1 })

		var handle string
		for _, fail := range []uint32{pWorkFail, pWorkException} {
			a := gw.grabJobUniq(perReplyTimeout)
			if a[1] != "xp" || a[2] != "pjob" || a[3] != "periodic payload" {
				t.Fatalf("JOB_ASSIGN_UNIQ %q, want xp, unique pjob, the workload", a)
			}
			if handle != "" && a[0] != handle {
				t.Errorf("the job came back as %s, was %s", a[0], handle)
			}
			handle = a[0]
			// Its Periodic job_id is the handle's number.
			jobs := dumpFunc(c, "xp")
			if len(jobs) != 1 || strconv.FormatInt(jobs[0].ID, 10) != handleNumber(t, handle) || jobs[0].Status != "processing" {
				t.Errorf("DUMP while a Gearman worker runs %s: %+v", handle, jobs)
			}
			c.waitJobs("xp", 1, 1)
			if fail == pWorkFail {
				gw.send(fail, handle)
			} else {
				gw.send(fail, handle, "exception")
			}
		}
		a := gw.grabJobUniq(perReplyTimeout)
		if a[0] != handle || a[2] != "pjob" {
			t.Errorf("after WORK_EXCEPTION: %q, want %s again", a, handle)
		}
		gw.send(pWorkComplete, handle, "result")
		waitStatus(t, ps.addr, "xp", "nothing queued or running", func(s funcStatus) bool { return s.queued == 0 && s.running == 0 })
		c.waitJobs("xp", 0, 0)
		if jobs := dumpFunc(c, "xp"); len(jobs) != 0 {
			t.Errorf("DUMP after WORK_COMPLETE: %+v", jobs)
		}
	})

	t.Run("gearman job, periodic worker", func(t *testing.T) {
		t.Parallel()
		gc := dialGear(t, ps.addr, "gearman client")
		h := gc.submit(pSubmitJobBg, "xg", "guniq", "gearman payload")
		c := dialPerClient(t, ps.unix)
		c.waitStatus("xg", perStat{0, 1, 0}, false)
		w := dialPerWorker(t, ps.unix, "periodic worker", "xg")
		a := w.grabOne(perReplyTimeout)
		if j := a.job; a.handle != handleNumber(t, h) || j.Name != "guniq" || j.Func != "xg" || j.Workload != "gearman payload" || j.Status != "ready" || j.Counter != 0 || j.RunAt != 0 {
			t.Errorf("JOB_ASSIGN %q %s, want job %s: guniq, xg, the payload", a.handle, a.raw, h)
		}
		waitStatus(t, ps.addr, "xg", "1 running", func(s funcStatus) bool { return s.running == 1 })
		w.workDone(a.handle)
		w.ping()
		waitStatus(t, ps.addr, "xg", "nothing queued or running", func(s funcStatus) bool { return s.queued == 0 && s.running == 0 })

		// WORK_FAIL fails a Gearman job for good: the next grab gets
		// the marker.
		gc.submit(pSubmitJobBg, "xg", "guniq2", "p2")
		a = w.grabOne(perReplyTimeout)
		if a.job.Name != "guniq2" {
			t.Fatalf("JOB_ASSIGN %s, want guniq2", a.raw)
		}
		w.workFail(a.handle)
		w.grab("after-fail")
		w.ping()
		waitStatus(t, ps.addr, "xg", "nothing queued or running", func(s funcStatus) bool { return s.queued == 0 && s.running == 0 })
		gc.submit(pSubmitJobBg, "xg", "marker", "m")
		if b := w.expectAssign(perReplyTimeout); b.job.Name != "marker" {
			t.Errorf("after WORK_FAIL the worker got %s, want the marker", b.raw)
		} else {
			w.workDone(b.handle)
		}
		w.ping()
		c.waitStatus("xg", perStat{1, 0, 0}, false)
	})
}

// 14. Bad input: error replies where the connection can go on, a closed
// connection where the stream cannot be trusted; the server stays healthy.
func TestE2EPeriodicBadInput(t *testing.T) {
	t.Parallel()
	ps := startPeriodic(t)
	ps.eachNet(t, func(t *testing.T, n perNet) {
		healthy := func(t *testing.T) {
			t.Helper()
			dialPerClient(t, n).ping()
		}
		fn := "bad-" + n.network

		t.Run("submit errors", func(t *testing.T) {
			c := dialPerClient(t, n)
			jsonErr := func(raw string) string {
				var j perJob
				err := json.Unmarshal([]byte(raw), &j)
				if err == nil {
					t.Fatalf("%s decodes", raw)
				}
				return err.Error()
			}
			for _, tc := range []struct{ raw, want string }{
				{`{"name":`, jsonErr(`{"name":`)},
				{`{"name":"n","func":"` + fn + `",}`, jsonErr(`{"name":"n","func":"f",}`)},
				{`not json`, jsonErr(`not json`)},
				{``, jsonErr(``)},
				{`{}`, "job func and name are required"},
				{`null`, "job func and name are required"},
				{`{"func":"` + fn + `","name":""}`, "job func and name are required"},
				{`{"func":"","name":"n"}`, "job func and name are required"},
				{`{"name":"n"}`, "job func and name are required"},
			} {
				r := c.call(perSubmitJob, tc.raw)
				if string(r.body) != tc.want {
					t.Errorf("SUBMIT_JOB %q: %q, want %q", tc.raw, r.body, tc.want)
				}
			}
			// Wrong types: an error (which text is the server's), no job.
			for _, raw := range []string{
				`{"name":"n","func":"` + fn + `","timeout":"soon"}`,
				`{"name":"n","func":"` + fn + `","sched_at":1.5}`,
				`{"name":7,"func":"` + fn + `"}`,
				`["` + fn + `","n"]`,
			} {
				r := c.call(perSubmitJob, raw)
				if _, _, ok := r.command(); ok || len(r.body) == 0 {
					t.Errorf("SUBMIT_JOB %s: %v, want an error text", raw, r)
				}
			}
			c.ping()
			if m, raw := c.status(); m[fn].jobs != 0 {
				t.Errorf("STATUS after bad submits: %q", raw)
			}
		})

		closes := []struct {
			name string
			raw  []byte // after the handshake, unless handshake is false
			open bool   // send no handshake first
		}{
			{name: "wrong magic", raw: perFrame("\x00REX", perRequest("m", perPing))},
			{name: "response magic", raw: perFrame(perResMagic, perRequest("m", perPing))},
			{name: "text", raw: []byte("GET / HTTP/1.0\r\n\r\n")},
			{name: "size over 64 MiB", raw: []byte("\x00REQ\x04\x00\x00\x01")},
			{name: "size 0xffffffff", raw: []byte("\x00REQ\xff\xff\xff\xff")},
			{name: "no separator", raw: perFrame(perReqMagic, []byte("hello"))},
			{name: "empty payload", raw: perFrame(perReqMagic, nil)},
			{name: "empty command with data", raw: perFrame(perReqMagic, []byte("m"+perSep+perSep+"data"))},
			{name: "wrong magic first", open: true, raw: perFrame("\x00REX", []byte{perTypeClient})},
			{name: "empty handshake", open: true, raw: perFrame(perReqMagic, nil)},
			{name: "handshake type 0", open: true, raw: perFrame(perReqMagic, []byte{0})},
			{name: "handshake type 3", open: true, raw: perFrame(perReqMagic, []byte{3})},
			{name: "handshake type 255", open: true, raw: perFrame(perReqMagic, []byte{255})},
		}
		for _, tc := range closes {
			t.Run(tc.name, func(t *testing.T) {
				var p *perConn
				if tc.open {
					p = dialPerRaw(t, n, "raw")
				} else {
					p = dialPerClient(t, n)
					p.ping()
				}
				p.write(tc.raw)
				if err := p.waitClosed(perReplyTimeout); err != nil {
					t.Errorf("after %q: %v, want the connection closed", tc.raw, err)
				}
				healthy(t)
			})
		}

		t.Run("size top bit", func(t *testing.T) {
			// The real server ignores the size's top bit.
			p := dialPerClient(t, n)
			f := perFrame(perReqMagic, perRequest("top", perPing))
			f[4] |= 0x80
			p.write(f)
			p.expectCmd("top", perPong)
		})

		t.Run("early EOF", func(t *testing.T) {
			for _, raw := range [][]byte{
				nil,                                 // connect, close
				[]byte("\x00RE"),                    // half a magic
				[]byte("\x00REQ\x00\x00\x00\x05ab"), // half a handshake payload
			} {
				p := dialPerRaw(t, n, "raw")
				if raw != nil {
					p.write(raw)
				}
				p.c.Close()
			}
			w := dialPer(t, n, "worker", perTypeWorker)
			w.ping()
			w.write(perFrame(perReqMagic, perRequest("half", perPing))[:10])
			w.c.Close()
			healthy(t)
		})

		t.Run("load", func(t *testing.T) {
			lf := "bad-load-" + n.network
			for _, raw := range []string{
				`{"jobs":[{"func":"` + lf + `","name":"a"},`,
				`{"jobs":[{"func":"` + lf + `","name":"a"},{"func":"` + lf + `","name":"b","timeout":"x"}]}`,
				`[]`,
				// LOAD decodes into map[string][]Job: every value a list.
				`{"jobs":[{"func":"` + lf + `","name":"a"}],"extra":1}`,
			} {
				c := dialPerClient(t, n)
				c.send("load", perLoad, raw)
				if err := c.waitClosed(perReplyTimeout); err != nil {
					t.Errorf("LOAD %s: %v, want the connection closed", raw, err)
				}
			}
			// Jobs without a func or a name are skipped.
			c := dialPerClient(t, n)
			c.send("load", perLoad, `{"jobs":[{"func":"`+lf+`","name":""},{"func":"","name":"x"},{"func":"`+lf+`","name":"ok","workload":"w"}]}`)
			// A map key is matched exactly: "JOBS" is another list,
			// valid and ignored.
			c.send("load2", perLoad, `{"JOBS":[{"func":"`+lf+`","name":"upper"}],"more":[]}`)
			c.ping()
			if m, raw := c.status(); m[lf] != (perStat{0, 1, 0}) {
				t.Errorf("after the LOADs, STATUS %q, want %s,0,1,0", raw, lf)
			}
			healthy(t)
		})
	})
	t.Cleanup(func() {
		if out := ps.stderr.String(); strings.Contains(out, "panic") {
			t.Errorf("the server's log mentions a panic:\n%s", tail(out, 8<<10))
		}
	})
}

// 14, continued. A LOAD of a million tiny jobs in one frame is done in
// bounded time. Not parallel: it would starve the timing tests.
func TestE2EPeriodicLoadMillion(t *testing.T) {
	ps := startPeriodic(t)
	const jobs = 1000000
	const bound = 45 * time.Second
	b := make([]byte, 0, 32*jobs)
	b = append(b, `{"jobs":[`...)
	for i := range jobs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"func":"big","name":"`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `"}`...)
	}
	b = append(b, "]}"...)
	t.Logf("LOAD frame of %d bytes", len(b))

	c := dialPerClient(t, ps.unix)
	w := harness.NewWithin(bound, ps.cmd.Process.Pid)
	stop := w.Guard(c.c)
	start := time.Now()
	c.send("load", perLoad, string(b))
	c.send("after", perPing)
	r, err := c.tryRecv(harness.Stretch(bound, harness.MaxShare))
	if stop() {
		t.Fatalf("LOAD of %d jobs not answered after %v", jobs, w)
	} else if err != nil {
		t.Fatalf("after LOAD: %v", err)
	}
	if r.msgID != "after" || string(r.body) != string([]byte{perPong}) {
		t.Fatalf("after LOAD: %v, want PONG", r)
	}
	loaded := time.Since(start)
	m, raw := c.status()
	if m["big"] != (perStat{0, jobs, 0}) {
		t.Errorf("STATUS %.200q, want big,0,%d,0", raw, jobs)
	}
	t.Logf("LOAD of %d jobs answered after %v, STATUS after %v", jobs, loaded, time.Since(start))
	dialPerClient(t, ps.tcp).ping()
}

// 15. Listeners: a stale unix socket file is replaced, a live one stops a
// second server (exit 1, with a message), the file goes when the server
// exits, several TCP listeners serve alike, and "off" listens on nothing.
func TestE2EPeriodicListeners(t *testing.T) {
	t.Parallel()
	skipPeriodic(t)

	t.Run("unix socket", func(t *testing.T) {
		t.Parallel()
		sock := filepath.Join(t.TempDir(), "p.sock")
		// A leftover socket file nobody listens on.
		l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		l.SetUnlinkOnClose(false)
		l.Close()
		if fi, err := os.Stat(sock); err != nil || fi.Mode()&os.ModeSocket == 0 {
			t.Fatalf("stale socket file: %v %v", fi, err)
		}
		n := perNet{"unix", sock}
		srv := startServerProc(t, "--periodic-listen", "unix://"+sock)
		waitPeriodicUp(t, srv, n)
		c := dialPerClient(t, n)
		c.submit(perJob{Name: "j", Func: "first"})

		// A second server on the live socket exits 1 and leaves it be.
		second := launchServer(t, serverBinary(t), "--periodic-listen", "unix://"+sock)
		code, ok := second.exited(e2eWaitTimeout)
		if !ok {
			t.Fatal("a second server on a live socket is still running")
		}
		if out := second.stderr.String(); code != 1 || !strings.Contains(out, sock) {
			t.Errorf("second server: exit %d, output:\n%s\nwant exit 1 and a message naming %s", code, out, sock)
		}
		c.ping()
		c2 := dialPerClient(t, n)
		if m, raw := c2.status(); m["first"].jobs != 1 {
			t.Errorf("the first server after the second's try: STATUS %q", raw)
		}

		if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code, ok := srv.exited(e2eWaitTimeout); !ok || code != 0 {
			t.Fatalf("after SIGTERM: exited %v, status %d", ok, code)
		}
		if _, err := os.Lstat(sock); !os.IsNotExist(err) {
			t.Errorf("socket file after exit: %v, want it removed", err)
		}
	})

	t.Run("two tcp listeners", func(t *testing.T) {
		t.Parallel()
		srv, others := startServerPorts(t, 3, "--periodic-listen", "tcp://127.0.0.1:0", "--periodic-listen=tcp://127.0.0.2:0")
		for _, a := range others {
			waitPeriodicUp(t, srv, perNet{"tcp", a})
		}
	})

	t.Run("off", func(t *testing.T) {
		t.Parallel()
		srv := startServerProc(t, "--periodic-listen", "off")
		c := dialGear(t, srv.addr, "client")
		c.send(pEchoReq, "up")
		c.expect(pEchoRes, "up")
		if got, err := listeningTCP(srv); err != nil || len(got) != 1 {
			t.Errorf("with --periodic-listen off the server listens on %v (%v), want only %s", got, err, srv.addr)
		}
	})

	t.Run("bad url", func(t *testing.T) {
		t.Parallel()
		for _, url := range []string{"bogus://x", "unix://relative/path"} {
			s := launchServer(t, serverBinary(t), "--periodic-listen", url)
			code, ok := s.exited(e2eWaitTimeout)
			if !ok || code != 1 || !strings.Contains(s.stderr.String(), url) {
				t.Errorf("--periodic-listen %s: exited %v status %d, output:\n%s\nwant exit 1 naming the URL", url, ok, code, s.stderr.String())
			}
		}
	})
}

// listeningTCP lists the server's listening TCP addresses.
func listeningTCP(s *serverProc) ([]string, error) {
	addrs, err := harness.Listening(s.cmd.Process.Pid)
	var out []string
	for _, a := range addrs {
		out = append(out, a.String())
	}
	return out, err
}
