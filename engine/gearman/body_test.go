package gearman

import (
	"strings"
	"testing"

	codec "switchyard/codec/gearman"
	"switchyard/engine/internal/pages"
	"switchyard/sched"
)

func TestBodyPool(t *testing.T) {
	big := 1 << 20
	tests := []struct {
		name     string
		put      []int // capacities given back, in order
		take     int
		wantFrom int // index into put of the buffer take must return; -1 = none
	}{
		{"empty pool", nil, big, -1},
		{"exact fit", []int{big}, big, 0},
		{"a job's tail, a little short of its buffer", []int{bodyCap(big, big) - 40}, big, 0},
		{"too small", []int{big - 1}, big, -1},
		{"more than twice too large", []int{2*big + 1}, big, -1},
		{"newest fitting first", []int{big, big}, big, 1},
		{"small buffers are not kept", []int{largeBody}, largeBody, -1},
		{"the oldest make room", []int{20 << 20, 20 << 20}, 20 << 20, 1},
		{"larger than the whole pool", []int{33 << 20}, 33 << 20, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := bodyPool{limit: 32 << 20}
			var given [][]byte
			for _, c := range tt.put {
				b := make([]byte, 7, c)
				given = append(given, b)
				p.put(b)
			}
			b := p.take(tt.take)
			if tt.wantFrom < 0 {
				if b != nil {
					t.Fatalf("take(%d) = a buffer of cap %d, want none", tt.take, cap(b))
				}
				return
			}
			if b == nil || len(b) != 0 || &b[:1][0] != &given[tt.wantFrom][:1][0] {
				t.Fatalf("take(%d) did not return buffer %d", tt.take, tt.wantFrom)
			}
			if p.bytes < 0 || p.bytes > p.limit {
				t.Fatalf("pool holds %d bytes, limit %d", p.bytes, p.limit)
			}
		})
	}
}

// TestBodyCap: a large packet's buffer grows with what has arrived, never
// with what the header claims, and ends with room for the whole packet.
func TestBodyCap(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		need, have, want int
	}{
		{64 << 20, 12, minBody},              // a header alone
		{64 << 20, minBody, 2 * minBody},     // doubling
		{64 << 20, 4 * mib, 8 * mib},         // still doubling: less than an eighth here
		{64 << 20, 8 * mib, 64*mib + 4*mib},  // an eighth: all of it, plus slack
		{64 << 20, 40 * mib, 64*mib + 4*mib}, // the last step: all of it, plus slack
		{mib, 600 << 10, mib + mib/16},       // a packet mostly here: all of it
		{100 << 10, 12, 100<<10 + 100<<10/16},
	}
	for _, tt := range tests {
		if got := bodyCap(tt.need, tt.have); got != tt.want {
			t.Errorf("bodyCap(%d, %d) = %d, want %d", tt.need, tt.have, got, tt.want)
		}
	}
}

// TestSharedBody: a shared buffer goes back to the pool with its last
// reference, not before.
func TestSharedBody(t *testing.T) {
	const n = 1 << 20
	buf := make([]byte, n, bodyCap(n, n))
	for bodies.take(n) != nil { // what earlier tests left
	}
	sb := share(buf)
	sb.hold()
	sb.hold()
	for i := 0; i < 2; i++ {
		sb.drop()
		if b := bodies.take(n); b != nil {
			t.Fatalf("buffer pooled with %d references left", 2-i)
		}
	}
	sb.drop()
	if b := bodies.take(n); b == nil || &b[:1][0] != &buf[0] {
		t.Fatal("the last drop did not pool the buffer")
	}
}

// TestLargeBuffersGoBack: a large packet's buffer, mapped for it, goes
// back whether or not a job keeps it: a submit that joins a queued job of
// the same unique leaves its buffer to the frontend (sched's Kept), which
// reuses it, so twenty such submits map no more than about two buffers.
func TestLargeBuffersGoBack(t *testing.T) {
	addr, _ := startServer(t, Config{}, sched.Config{})
	before := pages.Held()
	c := dial(t, addr)
	big := strings.Repeat("x", 1<<20)
	for range 20 {
		c.send(req(codec.SubmitJobBg, "f", "u", big))
		c.handle()
	}
	// The first job keeps its buffer; the pool has the others' one.
	if grew := pages.Held() - before; grew > 3<<20 {
		t.Fatalf("twenty 1 MiB submits of one job mapped %d MiB more", grew>>20)
	}
}
