package harness

import (
	"bufio"
	"net"
	"testing"
	"time"
)

// GetpidAt reads the pid from the Gearman admin answer "OK 1234", and
// anything else is an error.
func TestGetpidAt(t *testing.T) {
	tests := []struct {
		answer string
		pid    int
		ok     bool
	}{
		{"OK 1234\n", 1234, true},
		{"OK 1234\r\n", 1234, true},
		{"ERR unknown_command Unknown+server+command\r\n", 0, false},
		{"OK\n", 0, false},
		{"OK twelve\n", 0, false},
	}
	for _, tt := range tests {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			if line, err := bufio.NewReader(c).ReadString('\n'); err == nil && line == "getpid\n" {
				c.Write([]byte(tt.answer))
			}
		}()
		pid, err := GetpidAt(ln.Addr().String(), 2*time.Second)
		ln.Close()
		if (err == nil) != tt.ok || pid != tt.pid {
			t.Errorf("answer %q: %d, %v; want %d, ok %v", tt.answer, pid, err, tt.pid, tt.ok)
		}
	}
	if _, err := GetpidAt("", time.Second); err == nil {
		t.Error("no address: no error")
	}
}
