package workerline

import (
	"net"
	"testing"
)

func TestNumbered(t *testing.T) {
	for n, want := range map[uint64]string{0: "worker-0", 7: "worker-7", 1 << 63: "worker-9223372036854775808"} {
		if got := Numbered(n); got != want {
			t.Errorf("Numbered(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestPeer(t *testing.T) {
	for _, tc := range []struct {
		remote, local net.Addr
		want          string
	}{
		{&net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 5}, nil, "10.0.0.1"},
		{&net.TCPAddr{IP: net.IPv6loopback}, nil, "::1"},
		{&net.UnixAddr{Net: "unix"}, &net.UnixAddr{Name: "/run/p.sock", Net: "unix"}, "unix:/run/p.sock"},
		{&net.UnixAddr{Name: "@", Net: "unix"}, &net.UnixAddr{Name: "/run/p.sock", Net: "unix"}, "unix:/run/p.sock"},
		{&net.UnixAddr{Name: "@peer", Net: "unix"}, nil, "unix:@peer"},
		{nil, nil, "-"},
	} {
		if got := Peer(tc.remote, tc.local); got != tc.want {
			t.Errorf("Peer(%v, %v) = %q, want %q", tc.remote, tc.local, got, tc.want)
		}
	}
}
