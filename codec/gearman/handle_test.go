package gearman

import (
	"strings"
	"testing"
)

func TestHandles(t *testing.T) {
	h := NewHandles("H:box")
	if got := string(h.Append(nil, 42)); got != "H:box:42" {
		t.Fatalf("Append = %q", got)
	}
	if got := string(h.Prefix()); got != "H:box:" {
		t.Fatalf("Prefix = %q", got)
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
		id, ok := h.Parse([]byte(tt.in))
		if id != tt.id || ok != tt.ok {
			t.Errorf("Parse(%q) = %d, %v; want %d, %v", tt.in, id, ok, tt.id, tt.ok)
		}
	}
}

func TestDefaultHandlePrefix(t *testing.T) {
	p := DefaultHandlePrefix()
	if !strings.HasPrefix(p, "H:") || len(p) < 3 {
		t.Fatalf("DefaultHandlePrefix = %q", p)
	}
	if got := string(NewHandles("").Prefix()); got != p+":" {
		t.Fatalf(`NewHandles("").Prefix() = %q, want %q`, got, p+":")
	}
}

// FuzzHandles checks that Parse accepts exactly what Append makes.
func FuzzHandles(f *testing.F) {
	f.Add([]byte("H:box:42"), uint64(42))
	f.Add([]byte("H:box:18446744073709551615"), uint64(1<<64-1))
	f.Add([]byte("H:box:042"), uint64(0))
	f.Add([]byte("H:box:"), uint64(7))
	h := NewHandles("H:box")
	f.Fuzz(func(t *testing.T, in []byte, id uint64) {
		if got, ok := h.Parse(h.Append(nil, id)); !ok || got != id {
			t.Fatalf("Parse(Append(%d)) = %d, %v", id, got, ok)
		}
		if got, ok := h.Parse(in); ok && string(h.Append(nil, got)) != string(in) {
			t.Fatalf("Parse(%q) = %d, which appends as %q", in, got, h.Append(nil, got))
		}
	})
}
