package load

import (
	"bufio"
	"context"
	"fmt"
	"regexp"
	"sync"
	"testing"
	"time"
)

// A version 4 UUID as uuid_unparse writes it.
var uuidForm = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestUUIDText(t *testing.T) {
	a, b := newUUIDText(), newUUIDText()
	seen := make(map[string]bool)
	for range 100_000 {
		for _, u := range []*uuidText{a, b} {
			s := string(u.next())
			if !uuidForm.MatchString(s) {
				t.Fatalf("%q is not a UUID's text", s)
			}
			if seen[s] {
				t.Fatalf("%q came twice", s)
			}
			seen[s] = true
		}
	}
	if string(a.text[:18]) == string(b.text[:18]) {
		t.Errorf("two connections share the random half %q", a.text[:18])
	}
}

func TestUUIDTextCounts(t *testing.T) {
	for _, tc := range []struct {
		n    uint64
		tail string // the text after the random half, for the n-th unique
	}{
		{1, "8000-000000000001"},
		{0xff, "8000-0000000000ff"},
		{0x1234_5678_9abc, "8000-123456789abc"},
		{0x0001_0000_0000_0000, "8001-000000000000"},
		{0x3fff_ffff_ffff_ffff, "bfff-ffffffffffff"},
	} {
		u := newUUIDText()
		u.n = tc.n - 1
		if got := string(u.next()[19:]); got != tc.tail {
			t.Errorf("unique %#x ends %q, want %q", tc.n, got, tc.tail)
		}
	}
}

func TestUUIDTextAllocatesNothing(t *testing.T) {
	u := newUUIDText()
	if n := testing.AllocsPerRun(1000, func() { u.next() }); n != 0 {
		t.Errorf("next allocates %v times", n)
	}
}

func TestClientSendsUniques(t *testing.T) {
	var mu sync.Mutex
	uniques := make(map[string]int)
	n := 0
	addr := startFake(t, requestArgc, func(w *bufio.Writer, typ uint32, args [][]byte) {
		mu.Lock()
		uniques[string(args[1])]++
		n++
		handle := fmt.Sprintf("H:fake:%d", n)
		mu.Unlock()
		writeRes(w, typeJobCreated, handle)
	})
	for _, unique := range []int{0, UUIDLen} {
		t.Run(fmt.Sprint("unique=", unique), func(t *testing.T) {
			clear(uniques)
			c := &Client{Addr: addr, Function: "f", Payload: []byte("p"), InFlight: 8, Background: true, Unique: unique}
			ph := &Phase{Start: time.Now(), Budget: NewBudget(2000), Grace: 10 * time.Second}
			var wg sync.WaitGroup
			for range 2 {
				wg.Go(func() {
					if _, err := c.Run(context.Background(), ph); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
			mu.Lock()
			defer mu.Unlock()
			if unique == 0 {
				if uniques[""] != 2000 || len(uniques) != 1 {
					t.Errorf("without uniques the server saw %d distinct ones", len(uniques))
				}
				return
			}
			if len(uniques) != 2000 {
				t.Errorf("2000 jobs carried %d distinct uniques", len(uniques))
			}
			for u := range uniques {
				if !uuidForm.MatchString(u) {
					t.Fatalf("unique %q is not a UUID's text", u)
				}
			}
		})
	}
}

func TestClientRefusesOtherUniqueLengths(t *testing.T) {
	c := &Client{Addr: "127.0.0.1:1", Function: "f", InFlight: 1, Unique: 20}
	if _, err := c.Run(context.Background(), &Phase{Start: time.Now(), Budget: NewBudget(1)}); err == nil {
		t.Error("Unique 20 accepted")
	}
}
