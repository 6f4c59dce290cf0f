package workerline

import (
	"net"
	"testing"
)

func TestAppend(t *testing.T) {
	for _, tc := range []struct {
		fd       int
		peer, id string
		funcs    []string
		want     string
	}{
		{12, "127.0.0.1", "", nil, "12 127.0.0.1 - :\n"},
		{12, "127.0.0.1", "client-7", []string{"f"}, "12 127.0.0.1 client-7 : f\n"},
		{-1, "unix:/run/c.sock", "worker-3", []string{"a", "b"}, "-1 unix:/run/c.sock worker-3 : a b\n"},
	} {
		if got := string(Append([]byte("x\n"), tc.fd, tc.peer, tc.id, tc.funcs)); got != "x\n"+tc.want {
			t.Errorf("Append(%d, %q, %q, %q) = %q, want %q", tc.fd, tc.peer, tc.id, tc.funcs, got, "x\n"+tc.want)
		}
		if got := string(Append(nil, tc.fd, tc.peer, []byte(tc.id), tc.funcs)); got != tc.want {
			t.Errorf("Append with a []byte id = %q, want %q", got, tc.want)
		}
	}
}

func TestAppendNumbered(t *testing.T) {
	if got, want := string(AppendNumbered(nil, "memodb", 7, []string{"a", "b"})), "-1 memodb worker-7 : a b\n"; got != want {
		t.Errorf("AppendNumbered = %q, want %q", got, want)
	}
	if got, want := string(AppendNumbered(nil, "unix:/c.sock", 1<<63, nil)), "-1 unix:/c.sock worker-9223372036854775808 :\n"; got != want {
		t.Errorf("AppendNumbered = %q, want %q", got, want)
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
