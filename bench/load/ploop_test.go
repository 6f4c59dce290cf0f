package load

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakePeriodic is just enough of a Periodic server for the load
// generators: SUBMIT_JOB queues (every second SUCCESS is held back and sent
// after the next, so replies come out of order), GRAB_JOB parks until a job
// is due, WORK_DONE deletes, PING answers PONG, STATUS lists the queue.
type fakePeriodic struct {
	t      *testing.T
	ln     net.Listener
	wg     sync.WaitGroup
	mu     sync.Mutex
	nextID int64
	queue  []fakeJob          // not yet assigned, in submit order
	parked []fakeGrab         // GRAB_JOBs waiting
	doing  map[string]fakeJob // by handle
	done   int
	// silent: SUBMIT_JOB gets no reply; reply, when set, replaces SUCCESS.
	silent bool
	reply  string
	// gate, when set, holds back each SUCCESS until a value arrives on it.
	gate     chan struct{}
	submitAt time.Time // when the last SUBMIT_JOB came
}

// submits returns how many SUBMIT_JOBs came and when the last one did.
func (f *fakePeriodic) submits() (int64, time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.nextID, f.submitAt
}

type fakeJob struct {
	id      int64
	name    string
	schedAt int64
	raw     []byte
}

type fakeGrab struct {
	w     *fakeConn
	msgID []byte
}

type fakeConn struct {
	mu sync.Mutex
	w  *bufio.Writer
}

func (c *fakeConn) send(payload ...[]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range payload {
		var hdr [8]byte
		copy(hdr[:], "\x00RES")
		binary.BigEndian.PutUint32(hdr[4:], uint32(len(p)))
		c.w.Write(hdr[:])
		c.w.Write(p)
	}
	c.w.Flush()
}

func startFakePeriodic(t *testing.T) *fakePeriodic {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakePeriodic{t: t, ln: ln, doing: make(map[string]fakeJob)}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop); ln.Close(); f.wg.Wait() })
	f.wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			f.wg.Go(func() { f.serve(conn, stop) })
		}
	})
	f.wg.Go(func() { // the scheduler
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				f.assign()
			}
		}
	})
	return f
}

func (f *fakePeriodic) addr() string { return f.ln.Addr().String() }

func (f *fakePeriodic) assign() {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now().Unix()
	for i := 0; i < len(f.queue) && len(f.parked) > 0; {
		job := f.queue[i]
		if job.schedAt > now {
			i++
			continue
		}
		f.queue = append(f.queue[:i], f.queue[i+1:]...)
		g := f.parked[0]
		f.parked = f.parked[1:]
		handle := fmt.Sprint(job.id)
		f.doing[handle] = job
		g.w.send(fmt.Appendf(nil, "%s\x00\x01\x05\x00\x01%s\x00\x01%s", g.msgID, handle, job.raw))
	}
}

func (f *fakePeriodic) serve(conn net.Conn, stop chan struct{}) {
	defer conn.Close()
	go func() { <-stop; conn.Close() }()
	r := bufio.NewReader(conn)
	c := &fakeConn{w: bufio.NewWriter(conn)}
	read := func() []byte {
		var hdr [8]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return nil
		}
		if string(hdr[:4]) != "\x00REQ" {
			f.t.Errorf("request magic %q", hdr[:4])
			return nil
		}
		p := make([]byte, binary.BigEndian.Uint32(hdr[4:]))
		if _, err := io.ReadFull(r, p); err != nil {
			return nil
		}
		return p
	}
	hs := read()
	if len(hs) != 1 || (hs[0] != 1 && hs[0] != 2) {
		f.t.Errorf("handshake %q", hs)
		return
	}
	var held []byte // a SUCCESS held back
	for {
		var gated []byte // a SUCCESS that waits for the gate
		p := read()
		if p == nil {
			return
		}
		parts := bytes.SplitN(p, []byte{0, 1}, 3)
		if len(parts) < 2 || len(parts[1]) != 1 {
			f.t.Errorf("request %q", p)
			return
		}
		msgID, cmd := parts[0], parts[1][0]
		var data []byte
		if len(parts) == 3 {
			data = parts[2]
		}
		ok := append(append([]byte(nil), msgID...), 0, 1, pcmdSuccess)
		f.mu.Lock()
		switch {
		case hs[0] == 1 && cmd == pcmdSubmitJob:
			var job struct {
				Name    string `json:"name"`
				Func    string `json:"func"`
				SchedAt int64  `json:"sched_at"`
			}
			if err := json.Unmarshal(data, &job); err != nil || job.Name == "" || job.Func == "" {
				f.t.Errorf("SUBMIT_JOB %q: %v", data, err)
			}
			f.nextID++
			f.submitAt = time.Now()
			raw := bytes.Replace(data, []byte(`"job_id":0`), fmt.Appendf(nil, `"job_id":%d`, f.nextID), 1)
			f.queue = append(f.queue, fakeJob{id: f.nextID, name: job.Name, schedAt: job.SchedAt, raw: raw})
			switch {
			case f.silent:
			case f.gate != nil:
				gated = ok
			case f.reply != "":
				c.send(append(append([]byte(nil), msgID...), f.reply...))
			case held == nil:
				held = ok
				if r.Buffered() == 0 { // nothing to swap with
					c.send(held)
					held = nil
				}
			default:
				c.send(ok, held)
				held = nil
			}
		case hs[0] == 1 && cmd == pcmdStatus:
			c.send(fmt.Appendf(nil, "%s\x00\x01f,0,%d,%d\n", msgID, len(f.queue)+len(f.doing), len(f.doing)))
		case hs[0] == 2 && cmd == pcmdCanDo:
		case hs[0] == 2 && cmd == pcmdGrabJob:
			f.parked = append(f.parked, fakeGrab{w: c, msgID: msgID})
		case hs[0] == 2 && cmd == pcmdWorkDone:
			if _, ok := f.doing[string(data)]; !ok {
				f.t.Errorf("WORK_DONE %q of no running job", data)
			}
			delete(f.doing, string(data))
			f.done++
		case cmd == pcmdPing:
			c.send(append(append([]byte(nil), msgID...), 0, 1, pcmdPong))
		default:
			f.t.Errorf("type %d connection sent command %d", hs[0], cmd)
		}
		f.mu.Unlock()
		if gated != nil {
			select {
			case <-f.gate:
				c.send(gated)
			case <-stop:
				return
			}
		}
	}
}

func TestPeriodicClientsAndWorkers(t *testing.T) {
	f := startFakePeriodic(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const jobs = 300
	pool := NewPool(8)
	allDone := make(chan struct{})
	countdown := NewCountdown(jobs, func() { close(allDone) })
	workerCtx, stopWorkers := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var ready sync.WaitGroup
	workerRes := NewPeriodicWorkerResult()
	var mu sync.Mutex
	for range 2 {
		ready.Add(1)
		wk := &PeriodicWorker{Addr: f.addr(), Function: "f", Grab: 3, Pool: pool, Jobs: countdown, Ready: ready.Done}
		wg.Go(func() {
			res, err := wk.Run(workerCtx)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			workerRes.Merge(res)
			mu.Unlock()
		})
	}
	ready.Wait()
	ph := &Phase{Start: time.Now(), Budget: NewBudget(jobs), Grace: 5 * time.Second}
	var clientRes [2]ClientResult
	var cwg sync.WaitGroup
	for i := range clientRes {
		c := &PeriodicClient{Addr: f.addr(), Function: "f", Name: fmt.Sprintf("c%d-", i), Payload: 64, InFlight: 4, Pool: pool}
		cwg.Go(func() {
			var err error
			if clientRes[i], err = c.Run(ctx, ph); err != nil {
				t.Error(err)
			}
		})
	}
	cwg.Wait()
	select {
	case <-allDone:
	case <-ctx.Done():
		t.Fatal("the workers did not get every job")
	}
	// A worker counts a job when it writes its WORK_DONE: let the last
	// ones reach the server before the workers hang up.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		f.mu.Lock()
		done := f.done
		f.mu.Unlock()
		if done == jobs {
			break
		}
	}
	stopWorkers()
	wg.Wait()
	submitted := clientRes[0].Submitted + clientRes[1].Submitted
	finished := clientRes[0].Finished + clientRes[1].Finished
	if submitted != jobs || finished != jobs || clientRes[0].Latency.TotalCount()+clientRes[1].Latency.TotalCount() != jobs {
		t.Errorf("clients: %+v %+v", clientRes[0], clientRes[1])
	}
	if workerRes.Jobs != jobs || workerRes.Measured != jobs || workerRes.SinceSubmit.TotalCount() != jobs ||
		workerRes.SinceDue.TotalCount() != 0 || workerRes.Early != 0 {
		t.Errorf("workers: %+v, %d timed from submit", workerRes, workerRes.SinceSubmit.TotalCount())
	}
	if pool.InUse() != 0 {
		t.Errorf("%d tokens still taken", pool.InUse())
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done != jobs || len(f.queue) != 0 || len(f.doing) != 0 {
		t.Errorf("server: %d done, %d queued, %d running", f.done, len(f.queue), len(f.doing))
	}
}

// TestPeriodicClientPacedAndDelayed: an Interval spreads the submits out;
// a Delay sets sched_at in whole seconds; the worker times the job from
// its due time.
func TestPeriodicClientPacedAndDelayed(t *testing.T) {
	f := startFakePeriodic(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const jobs = 6
	allDone := make(chan struct{})
	readyCh := make(chan struct{})
	wk := &PeriodicWorker{Addr: f.addr(), Function: "f", Grab: 8,
		Jobs: NewCountdown(jobs, func() { close(allDone) }), Ready: func() { close(readyCh) }}
	workerCtx, stopWorker := context.WithCancel(ctx)
	var res PeriodicWorkerResult
	var werr error
	finished := make(chan struct{})
	go func() { res, werr = wk.Run(workerCtx); close(finished) }()
	<-readyCh

	begin := time.Now()
	c := &PeriodicClient{Addr: f.addr(), Function: "f", Name: "p-", InFlight: 2, Interval: 40 * time.Millisecond, Delay: 1}
	cres, err := c.Run(ctx, &Phase{Start: begin, Budget: NewBudget(jobs), Grace: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(begin); took < (jobs-1)*40*time.Millisecond {
		t.Errorf("%d paced submits took %v", jobs, took)
	}
	if cres.Finished != jobs {
		t.Errorf("client %+v", cres)
	}
	f.mu.Lock()
	for _, j := range f.queue {
		if j.schedAt < begin.Unix()+1 || j.schedAt > time.Now().Unix()+1 {
			t.Errorf("sched_at %d, submitted from %d on", j.schedAt, begin.Unix())
		}
	}
	f.mu.Unlock()
	select {
	case <-allDone:
	case <-ctx.Done():
		t.Fatal("jobs not assigned")
	}
	stopWorker()
	<-finished
	if werr != nil {
		t.Fatal(werr)
	}
	if res.Jobs != jobs || res.SinceDue.TotalCount() != jobs || res.SinceSubmit.TotalCount() != jobs || res.Early != 0 {
		t.Errorf("worker %+v: %d timed from due, %d from submit", res, res.SinceDue.TotalCount(), res.SinceSubmit.TotalCount())
	}
}

// TestPeriodicWorkerCountsEarlyJobs: a job assigned before its sched_at is
// early, and not timed from its due time.
func TestPeriodicWorkerCountsEarlyJobs(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	future := time.Now().Unix() + 100
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		c := &fakeConn{w: bufio.NewWriter(conn)}
		job := func(id int, schedAt int64) []byte {
			return fmt.Appendf(nil, `0`+"\x00\x01\x05\x00\x01"+`%d`+"\x00\x01"+`{"job_id":%d,"name":"n%d","func":"f","workload":"1x","timeout":0,"sched_at":%d,"run_at":0,"counter":0,"status":"ready"}`,
				id, id, id, schedAt)
		}
		c.send(job(1, future), []byte("ping\x00\x01\x0a"))
		io.Copy(io.Discard, conn)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wk := &PeriodicWorker{Addr: ln.Addr().String(), Function: "f", Grab: 1, Ready: cancel}
	res, err := wk.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Jobs != 1 || res.Early != 1 || res.MaxEarly < 98*time.Second || res.SinceDue.TotalCount() != 0 || res.SinceSubmit.TotalCount() != 1 {
		t.Errorf("got %+v", res)
	}
}

// A paced client whose InFlight jobs are all out when the next submit
// comes due must go on reading: only a reply frees a slot. (It once set
// its read deadline to that due time, already past, and spun without ever
// reading, so a server slower than the interval stalled it for good.)
func TestPeriodicClientPacedWhileFull(t *testing.T) {
	f := startFakePeriodic(t)
	f.gate = make(chan struct{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const jobs, interval = 3, 5 * time.Millisecond
	c := &PeriodicClient{Addr: f.addr(), Function: "f", Name: "full-", InFlight: 1, Interval: interval}
	go func() {
		for i := range int64(jobs) {
			// Each reply is let out only once the next submit is overdue.
			for n, at := f.submits(); n <= i || time.Now().Before(at.Add(2*interval)); n, at = f.submits() {
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Millisecond):
				}
			}
			select {
			case f.gate <- struct{}{}:
			case <-ctx.Done():
				return
			}
		}
	}()
	res, err := c.Run(ctx, &Phase{Start: time.Now(), Budget: NewBudget(jobs), Grace: 5 * time.Second})
	if err != nil || ctx.Err() != nil || res.Submitted != jobs || res.Finished != jobs {
		t.Errorf("got %+v, %v (context: %v); want %d jobs", res, err, ctx.Err(), jobs)
	}
}

func TestPeriodicClientAbandonsWhenServerStalls(t *testing.T) {
	f := startFakePeriodic(t)
	f.silent = true
	c := &PeriodicClient{Addr: f.addr(), Function: "f", Name: "s-", InFlight: 3}
	res, err := c.Run(context.Background(), &Phase{Start: time.Now(), Budget: NewBudget(3), Grace: 50 * time.Millisecond})
	if err != nil || res.Abandoned != 3 || res.Submitted != 3 || res.Finished != 0 {
		t.Errorf("got %+v, %v; want 3 abandoned and no error", res, err)
	}
}

func TestPeriodicClientFailsOnAnError(t *testing.T) {
	f := startFakePeriodic(t)
	f.reply = "\x00\x01job func and name are required"
	c := &PeriodicClient{Addr: f.addr(), Function: "f", Name: "e-", InFlight: 1}
	_, err := c.Run(context.Background(), &Phase{Start: time.Now(), Budget: NewBudget(1), Grace: time.Second})
	if err == nil || !strings.Contains(err.Error(), "func and name are required") {
		t.Errorf("got %v", err)
	}
}

func TestPeriodicClientStopsWithTheContext(t *testing.T) {
	f := startFakePeriodic(t)
	pool := NewPool(2) // no worker gives tokens back: the client blocks
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	c := &PeriodicClient{Addr: f.addr(), Function: "f", Name: "b-", InFlight: 4, Pool: pool}
	res, err := c.Run(ctx, &Phase{Start: time.Now(), Grace: time.Second})
	if err != nil || res.Finished != 2 || res.Submitted != 2 {
		t.Errorf("got %+v, %v; want 2 jobs and no error", res, err)
	}
}

func TestPeriodicStatus(t *testing.T) {
	f := startFakePeriodic(t)
	c := &PeriodicClient{Addr: f.addr(), Function: "f", Name: "st-", InFlight: 8}
	if _, err := c.Run(context.Background(), &Phase{Start: time.Now(), Budget: NewBudget(20), Grace: time.Second}); err != nil {
		t.Fatal(err)
	}
	st, err := PeriodicStatus(context.Background(), f.addr())
	if err != nil {
		t.Fatal(err)
	}
	if st["f"].Jobs != 20 {
		t.Errorf("STATUS %v", st)
	}
}
