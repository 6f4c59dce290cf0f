package gearman

import "testing"

func TestBodyPool(t *testing.T) {
	big := 1 << 20
	tests := []struct {
		name     string
		put      []int // capacities given back, in order
		get      int
		wantFrom int // index into put of the buffer get must return; -1 = new
	}{
		{"empty pool", nil, big, -1},
		{"exact fit", []int{big}, big, 0},
		{"tail a little short of a fresh buffer", []int{big + big/16 - 40}, big + 30, 0},
		{"too small", []int{big - 1}, big, -1},
		{"more than twice too large", []int{2*big + 1}, big, -1},
		{"newest fitting first", []int{big, big}, big, 1},
		{"small buffers are not kept", []int{largeBody}, largeBody, -1},
		{"over the limit is dropped", []int{20 << 20, 20 << 20}, 20 << 20, 0},
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
			b := p.get(tt.get)
			if len(b) != 0 || cap(b) < tt.get {
				t.Fatalf("get(%d): len %d cap %d", tt.get, len(b), cap(b))
			}
			for i, g := range given {
				if &g[:1][0] == &b[:1][0] && i != tt.wantFrom {
					t.Fatalf("got buffer %d, want %d", i, tt.wantFrom)
				}
				if i == tt.wantFrom && &g[:1][0] != &b[:1][0] {
					t.Fatalf("did not get buffer %d", i)
				}
			}
			if p.bytes < 0 || p.bytes > p.limit {
				t.Fatalf("pool holds %d bytes, limit %d", p.bytes, p.limit)
			}
		})
	}
}
