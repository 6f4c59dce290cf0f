package gearman

import "testing"

func TestHandles(t *testing.T) {
	h := newHandles("H:box")
	if got := string(h.append(nil, 42)); got != "H:box:42" {
		t.Fatalf("append = %q", got)
	}
	tests := []struct {
		in string
		id uint64
		ok bool
	}{
		{"H:box:42", 42, true},
		{"H:box:0", 0, true},
		{"H:box:18446744073709551615", 1<<64 - 1, true},
		{"H:box:18446744073709551616", 0, false},
		{"H:box:042", 0, false},
		{"H:box:", 0, false},
		{"H:box:4x", 0, false},
		{"H:other:42", 0, false},
		{"H:box", 0, false},
		{"", 0, false},
	}
	for _, tt := range tests {
		id, ok := h.parse([]byte(tt.in))
		if id != tt.id || ok != tt.ok {
			t.Errorf("parse(%q) = %d, %v; want %d, %v", tt.in, id, ok, tt.id, tt.ok)
		}
	}
}
