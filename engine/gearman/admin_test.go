package gearman

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	codec "switchyard/codec/gearman"
	"switchyard/sched"
)

// The buckets gearmand 1.1.20 was observed to use for these names.
func TestBucketMatchesGearmand(t *testing.T) {
	for name, want := range map[string]uint32{"fa": 799, "fb": 345, "fc": 84, "new": 749, "f": 751, "": 1, "H:vm:1": 71, "H:vm:2": 374, "H:vm:4": 434, "H:vm:3": 722} {
		if got := bucket(name); got != want {
			t.Errorf("bucket(%q) = %d, want %d", name, got, want)
		}
	}
}

// TestAdminReplies checks every text command against gearmand 1.1.20's
// bytes, including its line endings.
func TestAdminReplies(t *testing.T) {
	addr, _ := startServer(t, Config{Verbose: "INFO"}, sched.Config{})
	w := dial(t, addr)
	w.send(req(codec.SetClientID, "wid1"), req(codec.CanDo, "fa"), req(codec.CanDo, "fb"), req(codec.EchoReq, "s"))
	w.expect(res(codec.EchoRes, "s"))
	c := dial(t, addr)
	c.send(req(codec.SubmitJobBg, "fc", "u1", "x"), req(codec.SubmitJobHighBg, "fc", "", "x"), req(codec.SubmitJobLowBg, "fc", "u2", "x"), req(codec.SubmitJob, "fa", "", "x"))
	hc := c.handle()
	c.handle()
	c.handle()
	c.handle()

	a := dial(t, addr)
	tests := []struct {
		cmd, want string
		list      bool
	}{
		{"status\r\n", "fc\t3\t0\t0\nfb\t0\t0\t1\nfa\t1\t0\t1\n.\n", true},
		{"STATUS extra words\n", "fc\t3\t0\t0\nfb\t0\t0\t1\nfa\t1\t0\t1\n.\n", true},
		{"prioritystatus\r\n", "fc\t1\t1\t1\t0\nfb\t0\t0\t0\t1\nfa\t0\t1\t0\t1\n.\n", true},
		{"version\r\n", "OK 0.0.0-test\n", false},
		{"verbose\r\n", "OK INFO\n", false},
		{"foo bar\r\n", "ERR UNKNOWN_COMMAND Unknown+server+commandfoo\r\n", false},
		{"\r\n", "ERR UNKNOWN_COMMAND Unknown+server+command\r\n", false},
		{"show\r\n", "ERR UNKNOWN_COMMAND Unknown+server+commandshow\r\n", false},
		{"show foo\r\n", "ERR UNKNOWN_SHOW_ARGUMENTS\r\n", false},
		{"show jobs x\r\n", "ERR UNKNOWN_SHOW_ARGUMENTS\r\n", false},
		{"cancel job H:lap:999999\r\n", "ERR UNKNOWN_JOB\r\n", false},
		{"cancel foo bar\r\n", "ERR UNKNOWN_ERROR\r\n", false},
		{"cancel job\r\n", "ERR UNKNOWN_COMMAND Unknown+server+commandcancel\r\n", false},
		{"create function\r\n", "ERR INVALID_ARGUMENTS An+incomplete+set+of+arguments+was+sent+to+this+command+create\r\n", false},
		{"create function newf\r\n", "OK\r\n", false},
		{"drop function newf\r\n", "OK\r\n", false},
		{"drop function newf\r\n", "ERR function not found\r\n", false},
		{"drop function fa\r\n", "ERR there are still connected workers or executing clients\r\n", false},
		{"drop\r\n", "ERR INVALID_ARGUMENTS An+incomplete+set+of+arguments+was+sent+to+this+command+drop\r\n", false},
		{"maxqueue\r\n", "ERR INVALID_ARGUMENTS An+incomplete+set+of+arguments+was+sent+to+this+command+maxqueue\r\n", false},
		{"maxqueue fc\r\n", "OK\r\n", false},
		{"maxqueue fc 10\r\n", "OK\r\n", false},
		{"maxqueue fc 1 2 3\r\n", "OK\r\n", false},
		{"maxqueue fc abc\r\n", "OK\r\n", false},
		{"show unique jobs\r\n", "\n\nu1\nu2\n.\n", true}, // as gearmand orders them
	}
	for _, tt := range tests {
		a.send([]byte(tt.cmd))
		var got string
		if tt.list {
			got = a.listing()
		} else {
			got = a.line()
		}
		if got != tt.want {
			t.Errorf("%q:\n got %q\nwant %q", tt.cmd, got, tt.want)
		}
	}
	a.send([]byte("getpid\n"))
	if got := a.line(); got != fmt.Sprintf("OK %d\n", os.Getpid()) {
		t.Errorf("getpid %q", got)
	}
	a.send([]byte("workers\n"))
	ws := a.listing()
	lines := strings.Split(strings.TrimSuffix(ws, ".\n"), "\n")
	if len(lines) != 4 || !regexp.MustCompile(`^\d+ 127\.0\.0\.1 wid1 : fb fa$`).MatchString(lines[2]) ||
		!regexp.MustCompile(`^\d+ 127\.0\.0\.1 - :$`).MatchString(lines[0]) {
		t.Errorf("workers %q", ws)
	}
	a.send([]byte("show jobs\r\n"))
	jobs := a.listing()
	if !strings.Contains(jobs, hc+"\t0\t0\t1\n") || strings.Count(jobs, "\n") != 5 {
		t.Errorf("show jobs %q", jobs)
	}
	a.send([]byte("cancel job " + hc + "\r\n"))
	if got := a.line(); got != "OK\r\n" {
		t.Errorf("cancel %q", got)
	}
	a.send([]byte("status\n"))
	if got := a.listing(); !strings.HasPrefix(got, "fc\t2\t0\t0\n") {
		t.Errorf("after cancel %q", got)
	}
}

func TestAdminShutdown(t *testing.T) {
	got := make(chan bool, 1)
	addr, _ := startServer(t, Config{Shutdown: func(g bool) { got <- g }}, sched.Config{})
	a := dial(t, addr)
	a.send([]byte("shutdown graceful\r\n"))
	if l := a.line(); l != "OK\r\n" {
		t.Fatalf("%q", l)
	}
	if !<-got {
		t.Fatal("not graceful")
	}
}
