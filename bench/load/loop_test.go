package load

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// fakeServer is just enough of a Gearman server to drive one client or
// worker connection: serve is called per request packet and writes replies.
type fakeServer struct {
	ln    net.Listener
	wg    sync.WaitGroup
	serve func(w *bufio.Writer, typ uint32, args [][]byte)
}

func startFake(t *testing.T, argc map[uint32]int, serve func(w *bufio.Writer, typ uint32, args [][]byte)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeServer{ln: ln, serve: serve}
	t.Cleanup(func() { ln.Close(); f.wg.Wait() })
	f.wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			f.wg.Go(func() {
				defer conn.Close()
				r := bufio.NewReader(conn)
				w := bufio.NewWriter(conn)
				for {
					var hdr [headerSize]byte
					if _, err := io.ReadFull(r, hdr[:]); err != nil {
						return
					}
					typ := binary.BigEndian.Uint32(hdr[4:8])
					body := make([]byte, binary.BigEndian.Uint32(hdr[8:12]))
					if _, err := io.ReadFull(r, body); err != nil {
						return
					}
					var args [][]byte
					for n := argc[typ]; n > 1; n-- {
						var a []byte
						a, body = splitArg(body)
						args = append(args, a)
					}
					f.serve(w, typ, append(args, body))
					if r.Buffered() == 0 {
						w.Flush()
					}
				}
			})
		}
	})
	return ln.Addr().String()
}

// writeRes writes a response packet.
func writeRes(w *bufio.Writer, typ uint32, args ...string) {
	body := ""
	for i, a := range args {
		if i > 0 {
			body += "\x00"
		}
		body += a
	}
	var hdr [headerSize]byte
	copy(hdr[:], resMagic[:])
	binary.BigEndian.PutUint32(hdr[4:8], typ)
	binary.BigEndian.PutUint32(hdr[8:12], uint32(len(body)))
	w.Write(hdr[:])
	w.WriteString(body)
}

var requestArgc = map[uint32]int{typeSubmitJob: 3, typeSubmitJobBg: 3, typeWorkComplete: 2, typeCanDo: 1}

func TestClientMatchesResultsInAnyOrder(t *testing.T) {
	// Every other job's WORK_COMPLETE overtakes its JOB_CREATED, and every
	// third one fails.
	n := 0
	addr := startFake(t, requestArgc, func(w *bufio.Writer, typ uint32, args [][]byte) {
		if typ != typeSubmitJob && typ != typeSubmitJobBg {
			t.Errorf("client sent packet type %d", typ)
			return
		}
		n++
		handle := fmt.Sprintf("H:fake:%d", n)
		if typ == typeSubmitJobBg {
			writeRes(w, typeJobCreated, handle)
			return
		}
		result := typeWorkComplete
		if n%3 == 0 {
			result = typeWorkFail
		}
		if n%2 == 0 {
			writeRes(w, result, handle, string(args[2]))
			writeRes(w, typeJobCreated, handle)
		} else {
			writeRes(w, typeJobCreated, handle)
			writeRes(w, result, handle, string(args[2]))
		}
	})
	for _, background := range []bool{false, true} {
		t.Run(fmt.Sprintf("background=%v", background), func(t *testing.T) {
			n = 0
			c := &Client{Addr: addr, Function: "f", Payload: []byte("p"), InFlight: 4, Background: background}
			ph := &Phase{Start: time.Now(), Budget: NewBudget(30), Grace: 10 * time.Second}
			res, err := c.Run(context.Background(), ph)
			if err != nil {
				t.Fatal(err)
			}
			wantFailed := int64(10)
			if background {
				wantFailed = 0
			}
			if res.Submitted != 30 || res.Finished != 30 || res.Failed != wantFailed || res.Measured != 30-wantFailed ||
				res.Latency.TotalCount() != res.Measured || res.Abandoned != 0 {
				t.Errorf("got %+v", res)
			}
		})
	}
}

func TestClientAbandonsWhenServerStalls(t *testing.T) {
	addr := startFake(t, requestArgc, func(w *bufio.Writer, typ uint32, args [][]byte) {
		writeRes(w, typeJobCreated, "H:fake:1") // and never a result
	})
	c := &Client{Addr: addr, Function: "f", InFlight: 1}
	ph := &Phase{Start: time.Now(), Budget: NewBudget(1), Grace: 0}
	res, err := c.Run(context.Background(), ph)
	if err != nil || res.Abandoned != 1 || res.Finished != 0 {
		t.Errorf("got %+v, %v; want 1 abandoned job and no error", res, err)
	}
}

func TestWorkerEchoesAndSleeps(t *testing.T) {
	const jobs = 5
	var mu sync.Mutex
	assigned, completed, sleeps := 0, 0, 0
	addr := startFake(t, requestArgc, func(w *bufio.Writer, typ uint32, args [][]byte) {
		mu.Lock()
		defer mu.Unlock()
		switch typ {
		case typeCanDo:
			if string(args[0]) != "f" {
				t.Errorf("CAN_DO %q", args[0])
			}
		case typeGrabJob:
			if assigned == jobs {
				writeRes(w, typeNoJob)
				return
			}
			assigned++
			writeRes(w, typeJobAssign, fmt.Sprintf("H:fake:%d", assigned), "f", fmt.Sprintf("payload %d", assigned))
		case typeWorkComplete:
			completed++
			if want := fmt.Sprintf("payload %d", completed); string(args[0]) != fmt.Sprintf("H:fake:%d", completed) || string(args[1]) != want {
				t.Errorf("WORK_COMPLETE %q %q, want the payload echoed", args[0], args[1])
			}
		case typePreSleep:
			sleeps++
			if sleeps == 1 {
				writeRes(w, typeNoop) // wake once; the next GRAB_JOB finds nothing again
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan struct{})
	pool := NewPool(jobs) // as if a client had submitted the jobs
	for range jobs {
		pool.tryTake()
	}
	wk := &Worker{Addr: addr, Function: "f", Grab: 1, Jobs: NewCountdown(jobs, func() { close(done) }), Pool: pool}
	var res WorkerResult
	var err error
	finished := make(chan struct{})
	go func() { res, err = wk.Run(ctx); close(finished) }()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("countdown did not fire")
	}
	// Wait until the worker has slept twice, then stop it.
	for {
		mu.Lock()
		s := sleeps
		mu.Unlock()
		if s >= 2 || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-finished
	if err != nil || res.Jobs != jobs {
		t.Errorf("got %+v, %v; want %d jobs and no error", res, err, jobs)
	}
	if n := pool.InUse(); n != 0 {
		t.Errorf("%d pool tokens still taken after %d jobs assigned", n, jobs)
	}
	mu.Lock()
	defer mu.Unlock()
	if completed != jobs || sleeps != 2 {
		t.Errorf("completed %d, slept %d; want %d, 2", completed, sleeps, jobs)
	}
}

func TestBackgroundClientWaitsForPoolTokens(t *testing.T) {
	submits := make(chan struct{}, 16)
	addr := startFake(t, requestArgc, func(w *bufio.Writer, typ uint32, args [][]byte) {
		writeRes(w, typeJobCreated, "H:fake:1")
		submits <- struct{}{}
	})
	t.Run("a token given back lets one more job in", func(t *testing.T) {
		pool := NewPool(2)
		c := &Client{Addr: addr, Function: "f", InFlight: 8, Background: true, Pool: pool}
		// The end is only a bound: the budget ends the run.
		ph := &Phase{Start: time.Now(), End: time.Now().Add(time.Minute), Budget: NewBudget(3), Grace: 10 * time.Second}
		type result struct {
			res ClientResult
			err error
		}
		ran := make(chan result, 1)
		go func() {
			res, err := c.Run(context.Background(), ph)
			ran <- result{res, err}
		}()
		<-submits
		<-submits // both tokens are taken: a worker's token comes back
		select {
		case r := <-ran:
			t.Fatalf("the client stopped with no token free: %+v, %v", r.res, r.err)
		default:
		}
		pool.Put()
		r := <-ran
		if r.err != nil || r.res.Submitted != 3 || r.res.Finished != 3 || pool.InUse() != 2 {
			t.Errorf("got %+v, %v, %d tokens taken; want 3 jobs, no error, 2 tokens taken", r.res, r.err, pool.InUse())
		}
	})
	t.Run("the phase's end stops the wait", func(t *testing.T) {
		pool := NewPool(2)
		c := &Client{Addr: addr, Function: "f", InFlight: 8, Background: true, Pool: pool}
		ph := &Phase{Start: time.Now(), End: time.Now().Add(200 * time.Millisecond), Grace: 10 * time.Second}
		res, err := c.Run(context.Background(), ph)
		if err != nil || res.Submitted != 2 || res.Finished != 2 {
			t.Errorf("got %+v, %v; want the 2 jobs the pool allows and no error", res, err)
		}
		for range 2 {
			<-submits
		}
	})
	t.Run("the context stops the wait", func(t *testing.T) {
		pool := NewPool(1)
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		c := &Client{Addr: addr, Function: "f", InFlight: 8, Background: true, Pool: pool}
		res, err := c.Run(ctx, &Phase{Start: time.Now(), Grace: 10 * time.Second})
		if err != nil || res.Submitted != 1 || res.Finished != 1 {
			t.Errorf("got %+v, %v; want the 1 job the pool allows and no error", res, err)
		}
		<-submits
	})
}

// TestClientTagsJobsInTurn: a client with Functions and a Tag submits to
// the functions in turn, every job with a unique of its own, Tag-n, at
// the start of a payload of the size asked, and lists the n of each job
// acknowledged.
func TestClientTagsJobsInTurn(t *testing.T) {
	type submit struct{ function, unique, payload string }
	var mu sync.Mutex
	var got []submit
	addr := startFake(t, requestArgc, func(w *bufio.Writer, typ uint32, args [][]byte) {
		if typ != typeSubmitJobBg {
			t.Errorf("client sent packet type %d", typ)
			return
		}
		mu.Lock()
		got = append(got, submit{string(args[0]), string(args[1]), string(args[2])})
		n := len(got)
		mu.Unlock()
		writeRes(w, typeJobCreated, fmt.Sprintf("H:fake:%d", n))
	})
	payload := make([]byte, 64)
	for i := range payload {
		payload[i] = 'x'
	}
	functions := []string{"f1", "f2", "f3"}
	c := &Client{Addr: addr, Functions: functions, Payload: payload, InFlight: 4, Background: true, Tag: "n2-c7"}
	res, err := c.Run(context.Background(), &Phase{Start: time.Now(), Budget: NewBudget(25), Grace: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.Finished != 25 || len(res.AckedSeqs) != 25 || len(got) != 25 {
		t.Fatalf("%d finished, %d acked seqs, %d submits", res.Finished, len(res.AckedSeqs), len(got))
	}
	for i, s := range got {
		n := uint64(i + 1)
		unique := fmt.Sprintf("n2-c7-%d", n)
		if s.function != functions[i%3] || s.unique != unique || len(s.payload) != 64 ||
			s.payload[:len(unique)+1] != unique+" " || UniqueOf([]byte(s.payload)) != unique {
			t.Errorf("submit %d: %+v", n, s)
		}
		if tag, seq, ok := TagSeq(s.unique); !ok || tag != "n2-c7" || seq != n {
			t.Errorf("TagSeq(%q) = %q, %d, %v", s.unique, tag, seq, ok)
		}
		if res.AckedSeqs[i] != n {
			t.Errorf("acked seq %d is %d", i, res.AckedSeqs[i])
		}
	}
	for _, bad := range []*Client{
		{Addr: addr, Function: "f", InFlight: 1, Background: true, Tag: "a b"},
		{Addr: addr, Function: "f", InFlight: 1, Background: false, Tag: "a"},
		{Addr: addr, Function: "f", InFlight: 1, Background: true, Tag: "a", Unique: UUIDLen},
	} {
		if _, err := bad.Run(context.Background(), &Phase{Start: time.Now(), Budget: NewBudget(1)}); err == nil {
			t.Errorf("%+v ran", bad)
		}
	}
	if _, _, ok := TagSeq("nodash"); ok {
		t.Error("TagSeq parsed a unique without a number")
	}
}

// TestWorkerOfSeveralFunctions: a worker with Functions says CAN_DO for
// each before it grabs.
func TestWorkerOfSeveralFunctions(t *testing.T) {
	var mu sync.Mutex
	var cando []string
	grabbed := make(chan struct{})
	var once sync.Once
	addr := startFake(t, requestArgc, func(w *bufio.Writer, typ uint32, args [][]byte) {
		mu.Lock()
		defer mu.Unlock()
		switch typ {
		case typeCanDo:
			cando = append(cando, string(args[0]))
		case typeGrabJob:
			writeRes(w, typeNoJob)
			once.Do(func() { close(grabbed) })
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wk := &Worker{Addr: addr, Functions: []string{"a", "b", "c"}, Grab: 1}
	finished := make(chan error)
	go func() { _, err := wk.Run(ctx); finished <- err }()
	select {
	case <-grabbed:
	case <-ctx.Done():
		t.Fatal("no GRAB_JOB")
	}
	cancel()
	if err := <-finished; err != nil {
		t.Error(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(cando) != "[a b c]" {
		t.Errorf("CAN_DO %q", cando)
	}
}
