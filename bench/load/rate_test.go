package load

import (
	"bufio"
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// RateClient against the fake server: results overtaking their
// JOB_CREATED and failures are matched and counted, the budget bounds
// the jobs, and every job measured has a latency.
func TestRateClientMatchesResults(t *testing.T) {
	var n atomic.Int64
	addr := startFake(t, requestArgc, func(w *bufio.Writer, typ uint32, args [][]byte) {
		if typ != typeSubmitJob {
			t.Errorf("rate client sent packet type %d", typ)
			return
		}
		k := n.Add(1)
		handle := fmt.Sprintf("H:fake:%d", k)
		result := typeWorkComplete
		if k%3 == 0 {
			result = typeWorkFail
		}
		if k%2 == 0 {
			writeRes(w, result, handle, string(args[2]))
			writeRes(w, typeJobCreated, handle)
		} else {
			writeRes(w, typeJobCreated, handle)
			writeRes(w, result, handle, string(args[2]))
		}
	})
	c := &RateClient{Addr: addr, Function: "f", Payload: []byte("p"), Conns: 3, Rate: 2000}
	ph := &Phase{Start: time.Now(), End: time.Now().Add(time.Minute), Budget: NewBudget(30), Grace: 10 * time.Second}
	res, err := c.Run(context.Background(), ph)
	if err != nil {
		t.Fatal(err)
	}
	if res.Due != 30 || res.Sent != 30 || res.Failed != 10 || res.Measured != 20 || res.Done != 20 ||
		res.Latency.TotalCount() != 20 || res.Lag.TotalCount() != 30 || res.Abandoned != 0 {
		t.Errorf("got %+v", res)
	}
}

// A server that never answers: the client stops at the phase's end and
// gives up on what is out after the grace period, each due job measured
// at the wait it had.
func TestRateClientAbandonsWhenServerStalls(t *testing.T) {
	var n atomic.Int64
	addr := startFake(t, requestArgc, func(w *bufio.Writer, typ uint32, args [][]byte) {
		writeRes(w, typeJobCreated, fmt.Sprintf("H:fake:%d", n.Add(1))) // and never a result
	})
	c := &RateClient{Addr: addr, Function: "f", Conns: 1, Rate: 1000, MaxOutstanding: 5}
	begin := time.Now()
	ph := &Phase{Start: begin, End: begin.Add(50 * time.Millisecond), Grace: 0}
	res, err := c.Run(context.Background(), ph)
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 5 || res.Abandoned != 5 || res.Measured != 0 || res.Latency.TotalCount() != 5 || res.Due < res.Sent {
		t.Errorf("got %+v; want 5 sent, 5 abandoned and measured at their wait", res)
	}
}
