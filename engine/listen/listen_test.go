package listen

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestCheck(t *testing.T) {
	tests := []struct {
		addrs      []string
		allowEmpty bool
		err        string
	}{
		{addrs: []string{"tcp://127.0.0.1:0", "unix:///tmp/x"}},
		{addrs: nil, err: "no address"},
		{addrs: nil, allowEmpty: true},
		{addrs: []string{"tcp://127.0.0.1:0", "tcp://127.0.0.1:0"}, err: "given twice"},
	}
	for _, tt := range tests {
		err := Check(tt.addrs, tt.allowEmpty)
		if (err == nil) != (tt.err == "") || err != nil && !strings.Contains(err.Error(), tt.err) {
			t.Errorf("Check(%q) = %v, want %q", tt.addrs, err, tt.err)
		}
	}
}

// ClaimUnix removes a socket file nobody listens on, refuses one somebody
// does and a path that is no socket, and leaves TCP addresses alone.
func TestClaimUnix(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, "stale.sock")
	// A socket file with no listener: bind without listen, then close.
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: stale}); err != nil {
		t.Fatal(err)
	}
	syscall.Close(fd)
	live := filepath.Join(dir, "live.sock")
	ln, err := net.Listen("unix", live)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	plain := filepath.Join(dir, "plain")
	os.WriteFile(plain, nil, 0o600)

	paths, err := ClaimUnix([]string{"tcp://127.0.0.1:0", "unix://" + stale, "unix://" + filepath.Join(dir, "new.sock")})
	if err != nil || len(paths) != 2 || paths[0] != stale {
		t.Fatalf("claim: %q %v", paths, err)
	}
	if _, err := os.Lstat(stale); !os.IsNotExist(err) {
		t.Fatalf("stale socket still there: %v", err)
	}
	for _, p := range []string{live, plain} {
		if _, err := ClaimUnix([]string{"unix://" + p}); err == nil {
			t.Errorf("claimed %s", p)
		}
	}
	if _, err := os.Lstat(live); err != nil {
		t.Fatalf("live socket removed: %v", err)
	}
}
