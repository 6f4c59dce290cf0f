package gearman

import (
	"strings"
	"testing"
	"time"

	codec "switchyard/codec/gearman"
	"switchyard/engine/budget"
	"switchyard/sched"
)

// A large packet the memory budget cannot take is read and thrown away,
// and refused with an error: the connection goes on, and so does the
// server for everyone else.
func TestBudgetRefusesLargePacket(t *testing.T) {
	b := budget.New(1 << 20)
	addr, _ := startServer(t, Config{Budget: b}, sched.Config{})
	p := dial(t, addr)
	big := strings.Repeat("x", 4<<20)
	p.send(req(codec.SubmitJobBg, "f", "", big), req(codec.EchoReq, "after"))
	p.expect(res(codec.Error, "MEMORY_ALLOCATION_FAILURE", "The server's memory budget is spent: packet refused"))
	p.expect(res(codec.EchoRes, "after"))
	// One that fits is taken, and its bytes are the budget's again after.
	p.send(req(codec.SubmitJobBg, "f", "", strings.Repeat("y", 256<<10)))
	p.handle()
	if b.Refused() == 0 || b.Used() > 64<<10 {
		t.Errorf("refused %d, used %d after the packets", b.Refused(), b.Used())
	}
}

// Connections that each send part of a large packet, beyond the budget
// together: what the budget cannot take is refused and thrown away as it
// comes, so the server holds no more than its budget, and a connection
// that behaves is still answered.
func TestBudgetBoundsPartialPackets(t *testing.T) {
	b := budget.New(8 << 20)
	addr, _ := startServer(t, Config{Budget: b}, sched.Config{})
	good := dial(t, addr)
	part := req(codec.SubmitJob, "f", "", strings.Repeat("z", 32<<20))[:3<<20] // 3 MiB of a 32 MiB packet
	for range 5 {
		h := dial(t, addr)
		h.send(part)
		good.send(req(codec.EchoReq, "ping"))
		good.expect(res(codec.EchoRes, "ping"))
	}
	if used := b.Used(); used > 8<<20 {
		t.Errorf("%d bytes held against a budget of 8 MiB", used)
	}
	if b.Refused() == 0 {
		t.Error("nothing refused")
	}
}

// Clients that pipeline requests and never read the replies: past the
// budget, the one holding the most unread replies is cut off, and a
// connection that behaves is still answered.
func TestBudgetCutsTheLargest(t *testing.T) {
	b := budget.New(4 << 20)
	addr, _ := startServer(t, Config{Budget: b}, sched.Config{})
	good := dial(t, addr)
	echo := req(codec.EchoReq, strings.Repeat("e", 32<<10))
	var hogs []*peer
	for range 3 {
		h := dial(t, addr)
		hogs = append(hogs, h)
	}
	deadline := time.Now().Add(20 * time.Second)
	for b.Cuts() == 0 && time.Now().Before(deadline) {
		for _, h := range hogs {
			h.c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
			h.c.Write(echo) // a write that cannot go on is the peer's kernel buffers full: fine
		}
		good.send(req(codec.EchoReq, "ping"))
		good.expect(res(codec.EchoRes, "ping"))
	}
	if b.Cuts() == 0 {
		t.Fatalf("no connection cut with %d bytes held against a budget of 4 MiB", b.Used())
	}
	good.send(req(codec.EchoReq, "still"))
	good.expect(res(codec.EchoRes, "still"))
}
