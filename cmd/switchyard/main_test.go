package main

import (
	"net"
	"testing"
	"time"

	"switchyard/engine/budget"
)

// -r http's server takes the Gearman port's address rule, handles,
// exceptions and TCP keepalive.
func TestHTTPConfig(t *testing.T) {
	isolate(t)
	tests := []struct {
		args      []string
		addr      string
		keepAlive net.KeepAliveConfig
	}{
		{[]string{"-r", "http"}, ":8080", net.KeepAliveConfig{}},
		{[]string{"-r", "http", "-L", "127.0.0.1", "--http-port", "0"}, "127.0.0.1:0", net.KeepAliveConfig{}},
		{[]string{"-r", "http", "-L", "::1", "--http-port", "http-alt"}, "[::1]:8080", net.KeepAliveConfig{}},
		{[]string{"-r", "http", "--keepalive"}, ":8080",
			net.KeepAliveConfig{Enable: true, Idle: 2 * time.Hour, Interval: 24 * time.Minute, Count: 5}},
		{[]string{"-r", "http", "--keepalive", "--keepalive-idle", "50", "--keepalive-count", "3"}, ":8080",
			net.KeepAliveConfig{Enable: true, Idle: 50 * time.Second, Interval: 10 * time.Second, Count: 3}},
	}
	for _, tc := range tests {
		o, err := parseArgs(append(tc.args, "--job-handle-prefix", "H:x", "--exceptions", "--max-packet", "1M", "--http-timeout", "5s"), envOf(nil))
		if err != nil {
			t.Fatal(err)
		}
		addrs, _ := protocolNamed(t, "http").listen(o)
		b := budget.New(1 << 20)
		c := httpConfig(&env{o: o, budget: b}, addrs[0])
		if c.Addr != tc.addr || c.KeepAlive != tc.keepAlive || c.HandlePrefix != "H:x" || !c.Exceptions ||
			c.MaxBody != 1<<20 || c.Timeout != 5*time.Second || c.Server != "switchyard/"+version || c.Budget != b {
			t.Errorf("%q: %+v", tc.args, c)
		}
	}
}

// protocolNamed is the table's row for name.
func protocolNamed(t *testing.T, name string) *protocol {
	t.Helper()
	for i := range protocols {
		if protocols[i].name == name {
			return &protocols[i]
		}
	}
	t.Fatalf("no protocol %q", name)
	return nil
}
