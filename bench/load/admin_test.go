package load

import (
	"bufio"
	"context"
	"net"
	"testing"
)

func TestParseAdminStatus(t *testing.T) {
	got, err := parseAdminStatus("f\t1000000\t0\t0\nbusy fn\t3\t2\t4\n")
	if err != nil || got["f"] != 1000000 || got["busy fn"] != 3 || len(got) != 2 {
		t.Errorf("got %v, %v", got, err)
	}
	for _, bad := range []string{"f\t1\t0\n", "f\tx\t0\t0\n"} {
		if _, err := parseAdminStatus(bad); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

// QueuedJobs against a scripted admin port: one exchange, a listing up to
// its ".", and a function it does not list counts none.
func TestQueuedJobs(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			if line, _ := bufio.NewReader(c).ReadString('\n'); line == "status\n" {
				c.Write([]byte("other\t5\t0\t1\nbench\t42\t1\t2\n.\n"))
			}
			c.Close()
		}
	}()
	for fn, want := range map[string]int64{"bench": 42, "absent": 0} {
		if n, err := QueuedJobs(context.Background(), l.Addr().String(), fn); err != nil || n != want {
			t.Errorf("QueuedJobs(%q) = %d, %v; want %d", fn, n, err, want)
		}
	}
}
