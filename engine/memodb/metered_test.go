package memodb

import (
	"encoding/binary"
	"io"
	"testing"
	"time"

	codec "switchyard/codec/memodb"
	"switchyard/engine/budget"
)

// waitUsed waits for the budget to hold want: the server reads on its own
// goroutines.
func waitUsed(t *testing.T, b *budget.Budget, want int64) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for b.Used() != want {
		if time.Now().After(deadline) {
			t.Fatalf("the budget holds %d, want %d", b.Used(), want)
		}
		time.Sleep(time.Millisecond) // polling another goroutine's count, bounded above
	}
}

// A message's header holds the budget for its size until the next message
// begins or the connection closes; one the budget cannot take closes the
// connection before mangos allocates it, and the server goes on.
func TestMeteredBudget(t *testing.T) {
	b := budget.New(1000)
	f := start(t, Config{Budget: b, MaxMessage: 1 << 20})

	partial := f.raw()
	if _, err := partial.c.Write(append(binary.BigEndian.AppendUint64(nil, 600), make([]byte, 10)...)); err != nil {
		t.Fatal(err)
	}
	waitUsed(t, b, 600)

	refused := f.raw() // 600 + 500 > 1000
	if _, err := refused.c.Write(binary.BigEndian.AppendUint64(nil, 500)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(refused.c); err != nil && !isReset(err) {
		t.Fatalf("the refused peer: %v, want its connection closed", err)
	}
	if b.Refused() != 1 {
		t.Fatalf("refused %d, want 1", b.Refused())
	}
	waitUsed(t, b, 600)

	partial.c.Close()
	waitUsed(t, b, 0)

	// Whole messages: each holds the budget until the next begins, and
	// the server answers them.
	r := f.raw()
	for id := uint32(1); id <= 3; id++ {
		if err := r.request(id, codec.AppendHeartbeat(nil, []byte{0, 0, 0, 0})); err != nil {
			t.Fatal(err)
		}
		if got, _, err := r.reply(); err != nil || got != id {
			t.Fatalf("reply to request %d: %d, %v", id, got, err)
		}
	}
	if used := b.Used(); used > 64 {
		t.Fatalf("the budget holds %d after three small messages, want at most the last", used)
	}
}

// FuzzMeteredScan feeds a stream, cut anywhere, through a metered
// connection's scan: what it holds of the budget is always what the
// headers seen announce, never negative, and all of it comes back.
func FuzzMeteredScan(f *testing.F) {
	msg := func(body string) []byte {
		return append(binary.BigEndian.AppendUint64(nil, uint64(len(body))), body...)
	}
	hs := []byte{0, 'S', 'P', 0, 0, 48, 0, 0}
	f.Add(append(append(hs, msg("\x80\x00\x00\x01heartbeat")...), msg("")...), uint8(3))
	f.Add(append(hs, binary.BigEndian.AppendUint64(nil, 1<<40)...), uint8(1))
	f.Add(append(hs, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff), uint8(7))
	f.Fuzz(func(t *testing.T, stream []byte, cut uint8) {
		b := budget.New(1 << 20)
		c := &meteredConn{need: spHandshake}
		c.hold = b.Hold(func() {})
		step := int(cut%16) + 1
		for len(stream) > 0 {
			k := min(step, len(stream))
			ok := c.scan(stream[:k])
			stream = stream[k:]
			if c.taken != b.Used() || c.taken < 0 {
				t.Fatalf("taken %d, the budget holds %d", c.taken, b.Used())
			}
			if !ok {
				if c.held+c.last <= 1<<20 {
					t.Fatalf("refused with %d announced, under the budget", c.held+c.last)
				}
				break
			}
			if c.taken != c.held+c.last {
				t.Fatalf("taken %d, announced %d", c.taken, c.held+c.last)
			}
		}
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
		c.hold.Release()
		if b.Used() != 0 {
			t.Fatalf("the budget holds %d after the connection closed", b.Used())
		}
	})
}
