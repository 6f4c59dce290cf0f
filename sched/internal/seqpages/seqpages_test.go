package seqpages

import "testing"

type page struct{ n int }

// pagesOf lists the run's pages as their n, -1 for nil.
func pagesOf(r *Run[page]) []int {
	out := make([]int, r.Len())
	for i := range out {
		out[i] = -1
		if p := r.At(i); p != nil {
			out[i] = p.n
		}
	}
	return out
}

func TestRun(t *testing.T) {
	type op struct {
		do    string // "make", "free"
		pn    uint64
		limit int
		made  bool // make: a page came back
	}
	tests := []struct {
		name  string
		ops   []op
		first uint64
		pages []int // each page's n (the number it was made as), -1 for nil
	}{
		{"empty", nil, 0, []int{}},
		{"one page", []op{{do: "make", pn: 7, made: true}}, 7, []int{7}},
		{"a gap at the back", []op{{do: "make", pn: 7, made: true}, {do: "make", pn: 9, made: true}}, 7, []int{7, -1, 9}},
		{"a gap at the front", []op{{do: "make", pn: 9, made: true}, {do: "make", pn: 7, made: true}}, 7, []int{7, -1, 9}},
		{"made twice is the same page", []op{{do: "make", pn: 3, made: true}, {do: "make", pn: 3, made: true}}, 3, []int{3}},
		{"free the front trims the gap", []op{{do: "make", pn: 7, made: true}, {do: "make", pn: 9, made: true}, {do: "free", pn: 7}}, 9, []int{9}},
		{"free the back trims the gap", []op{{do: "make", pn: 7, made: true}, {do: "make", pn: 9, made: true}, {do: "free", pn: 9}}, 7, []int{7}},
		{"free the middle keeps the ends", []op{{do: "make", pn: 7, made: true}, {do: "make", pn: 8, made: true}, {do: "make", pn: 9, made: true}, {do: "free", pn: 8}}, 7, []int{7, -1, 9}},
		{"free the last page empties the run", []op{{do: "make", pn: 7, made: true}, {do: "free", pn: 7}}, 0, []int{}},
		{"free outside the run", []op{{do: "make", pn: 7, made: true}, {do: "free", pn: 3}, {do: "free", pn: 30}}, 7, []int{7}},
		{"limit at the back", []op{{do: "make", pn: 7, made: true}, {do: "make", pn: 9, limit: 3, made: true}, {do: "make", pn: 10, limit: 3}}, 7, []int{7, -1, 9}},
		{"limit at the front", []op{{do: "make", pn: 9, made: true}, {do: "make", pn: 7, limit: 3, made: true}, {do: "make", pn: 6, limit: 3}}, 7, []int{7, -1, 9}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r Run[page]
			for _, o := range tt.ops {
				switch o.do {
				case "make":
					p := r.Make(o.pn, o.limit)
					if (p != nil) != o.made {
						t.Fatalf("Make(%d, %d) = %v, want a page: %t", o.pn, o.limit, p, o.made)
					}
					if p != nil {
						if p.n != 0 && p.n != int(o.pn) {
							t.Fatalf("Make(%d) returned page %d", o.pn, p.n)
						}
						p.n = int(o.pn)
						if r.Page(o.pn) != p {
							t.Fatalf("Page(%d) is not the page Make returned", o.pn)
						}
					}
				case "free":
					r.Free(o.pn)
					if r.Page(o.pn) != nil {
						t.Fatalf("Page(%d) after Free", o.pn)
					}
				}
			}
			got := pagesOf(&r)
			if r.First() != tt.first || len(got) != len(tt.pages) {
				t.Fatalf("run from %d: %v, want from %d: %v", r.First(), got, tt.first, tt.pages)
			}
			for i := range got {
				if got[i] != tt.pages[i] {
					t.Fatalf("run from %d: %v, want %v", r.First(), got, tt.pages)
				}
			}
		})
	}
}

// A run that moves along, made at the back and freed at the front, does
// not keep the array of its longest extent.
func TestRunLetsGo(t *testing.T) {
	var r Run[page]
	for pn := range uint64(1000) {
		r.Make(pn, 0)
	}
	for pn := range uint64(990) {
		r.Free(pn)
	}
	if r.Len() != 10 || r.First() != 990 {
		t.Fatalf("run of %d from %d, want 10 from 990", r.Len(), r.First())
	}
	if c := cap(r.pages); c > 4*10+64 {
		t.Fatalf("a run of 10 pages keeps an array of %d", c)
	}
}
