package harness

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestParseMachineCPU(t *testing.T) {
	const tick = time.Second / clockTicks
	tests := []struct {
		name    string
		stat    string
		want    MachineCPU
		wantErr string
	}{
		{
			// user nice system idle iowait irq softirq steal guest guest_nice
			name: "kernel 6",
			stat: "cpu  91461 7 33557 41167 332 2 531 10 40 3\ncpu0 45610 0 16378 21264 32 0 224 0 0 0\ncpu1 45851 7 17179 19903 300 2 307 10 40 3\nintr 1840400 0\nctxt 4124018\n",
			want: MachineCPU{CPUs: 2, Busy: (91461 + 7 + 33557 + 2 + 531 + 10) * tick, Idle: (41167 + 332) * tick},
		},
		{
			name: "no guest columns, one CPU",
			stat: "cpu  100 0 50 800 50 0 0 0\ncpu0 100 0 50 800 50 0 0 0\n",
			want: MachineCPU{CPUs: 1, Busy: 150 * tick, Idle: 850 * tick},
		},
		{name: "too few columns", stat: "cpu  100 0 50 800 50 0 0\ncpu0 1\n", wantErr: "want cpu and 8"},
		{name: "a per-CPU line first", stat: "cpu0 100 0 50 800 50 0 0 0\n", wantErr: "want cpu and 8"},
		{name: "bad number", stat: "cpu  100 0 5x 800 50 0 0 0\ncpu0 1\n", wantErr: "5x"},
		{name: "no cpuN line", stat: "cpu  100 0 50 800 50 0 0 0\nintr 1\n", wantErr: "no cpuN"},
		{name: "empty", stat: "", wantErr: "EOF"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseMachineCPU(strings.NewReader(tt.stat))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestOthersShare(t *testing.T) {
	s := time.Second
	t0 := time.Unix(1000, 0)
	at := func(wall, busy, idle time.Duration) MachineCPU {
		return MachineCPU{At: t0.Add(wall), CPUs: 2, Busy: busy, Idle: idle}
	}
	tests := []struct {
		name string
		a, b MachineCPU
		ours time.Duration
		want float64
	}{
		{"idle machine, ours busy on one CPU", at(0, 0, 0), at(s, s, s), s, 0},
		{"idle machine, ours idle", at(0, 0, 0), at(s, 0, 2*s), 0, 0},
		{"two busy loops beside ours on two cores", at(0, 0, 0), at(s, 2*s, 0), s / 2, 0.75},
		{"others half, ours a quarter", at(0, 5*s, 5*s), at(2*s, 8*s, 6*s), s, 0.5},
		// The host ran the machine 1.5 s of 2 s, and said nothing of it.
		{"time the machine did not have", at(0, 0, 0), at(s, 0, 3*s/2), 0, 0.25},
		// Ticks: ours may read a tick past what the machine counted.
		{"ours over the machine by a tick", at(0, 0, 0), at(s, 2*s, 0), 2*s + 10*time.Millisecond, 0},
		{"others all", at(0, 0, 0), at(s, 2*s, 0), 0, 1},
		{"no time passed", at(s, s, s), at(s, s, s), 0, 0},
		{"readings swapped", at(2*s, s, s), at(s, s, s), 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := OthersShare(tt.a, tt.b, tt.ours); got != tt.want {
				t.Errorf("OthersShare = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestStretch(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		bound time.Duration
		share float64
		want  time.Duration
	}{
		{100 * ms, 0, 100 * ms},
		{100 * ms, -0.1, 100 * ms},
		{100 * ms, 0.5, 200 * ms},
		{100 * ms, 0.75, 400 * ms},
		{100 * ms, 0.95, 2000 * ms},
		{100 * ms, MaxShare, 5000 * ms},
		{100 * ms, 1, 5000 * ms},
		{10 * time.Second, 0.9, 100 * time.Second},
	}
	for _, tt := range tests {
		if got := Stretch(tt.bound, tt.share); got != tt.want {
			t.Errorf("Stretch(%v, %v) = %v, want %v", tt.bound, tt.share, got, tt.want)
		}
	}
}

// The live readings: what the machine counts grows with the wall time by
// at most its CPUs, and its busy time by at least what this process
// spins; a Load of this process sees the spin as ours.
func TestReadMachineCPU(t *testing.T) {
	const tick = time.Second / clockTicks
	self := func() time.Duration {
		u, err := ReadUsage(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		return u.CPU
	}
	a, err := ReadMachineCPU()
	if err != nil {
		t.Fatal(err)
	}
	if a.CPUs < 1 || a.Busy <= 0 || a.Idle < 0 {
		t.Fatalf("%+v", a)
	}
	load, err := NewLoad(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	c0 := self()
	for self()-c0 < 200*time.Millisecond {
	}
	spun := self() - c0
	b, err := ReadMachineCPU()
	if err != nil {
		t.Fatal(err)
	}
	could := b.At.Sub(a.At) * time.Duration(b.CPUs)
	if counted := b.Busy + b.Idle - a.Busy - a.Idle; counted > could+time.Duration(2*b.CPUs)*tick {
		t.Errorf("the machine counted %v in %v of wall time on %d CPUs", counted, b.At.Sub(a.At), b.CPUs)
	}
	if b.Busy-a.Busy < spun-2*tick {
		t.Errorf("busy grew %v while this process spun %v", b.Busy-a.Busy, spun)
	}
	// Only others' time can make the share: it is under what the spin
	// left them, its wall time less the CPU it took.
	if s, most := load.Share(), 1-float64(spun-2*tick)/float64(b.At.Sub(a.At)*time.Duration(b.CPUs)); s < 0 || s > most {
		t.Errorf("share %v with this process spinning %v, want at most %v", s, spun, most)
	}
}
