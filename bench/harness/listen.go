package harness

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Listening returns the TCP addresses process pid listens on, read from the
// kernel: the socket inodes among /proc/PID/fd matched against the LISTEN
// rows of /proc/PID/net/tcp and tcp6. A server started with port 0 (the
// kernel picks a free port) is found this way whatever it logs: gearmand
// logs "Listening on 127.0.0.1:0". Reading another user's /proc/PID/fd
// needs privilege; a child of the caller is fine.
//
// An empty result means the process has not called listen(2) yet (a socket
// that is only bound is not in state LISTEN), so callers poll until it is
// not empty. The addresses are sorted.
func Listening(pid int) ([]netip.AddrPort, error) {
	inodes, err := socketInodes(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return nil, err
	}
	var out []netip.AddrPort
	for _, table := range []string{"tcp", "tcp6"} {
		f, err := os.Open(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if errors.Is(err, fs.ErrNotExist) && table == "tcp6" {
			continue // a kernel without IPv6
		}
		if err != nil {
			return nil, err
		}
		addrs, err := parseListening(f, inodes)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("/proc/%d/net/%s: %w", pid, table, err)
		}
		out = append(out, addrs...)
	}
	slices.SortFunc(out, func(a, b netip.AddrPort) int { return a.Compare(b) })
	return slices.Compact(out), nil
}

// WaitListening polls Listening until process pid listens on something and
// returns what. It gives up when ctx ends, or when exited (closed once the
// process has exited; nil if not known) is closed.
func WaitListening(ctx context.Context, pid int, exited <-chan struct{}) ([]netip.AddrPort, error) {
	tick := time.NewTicker(10 * time.Millisecond) // polling a starting process, not synchronising
	defer tick.Stop()
	for {
		addrs, err := Listening(pid)
		select {
		case <-exited:
			return nil, ErrExited
		default:
		}
		if err != nil || len(addrs) > 0 {
			return addrs, err
		}
		select {
		case <-exited:
			return nil, ErrExited
		case <-ctx.Done():
			return nil, fmt.Errorf("process %d not listening: %w", pid, ctx.Err())
		case <-tick.C:
		}
	}
}

// ErrExited is WaitListening's error when the process exited before it listened.
var ErrExited = errors.New("exited before listening")

// socketInodes returns the inodes of the sockets among the links of an fd
// directory ("socket:[12345]").
func socketInodes(dir string) (map[uint64]bool, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	inodes := make(map[uint64]bool)
	for _, e := range ents {
		link, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			continue // closed since ReadDir
		}
		rest, ok := strings.CutPrefix(link, "socket:[")
		if !ok {
			continue
		}
		if n, err := strconv.ParseUint(strings.TrimSuffix(rest, "]"), 10, 64); err == nil {
			inodes[n] = true
		}
	}
	return inodes, nil
}

// tcpListen is the state column of a listening socket (TCP_LISTEN).
const tcpListen = "0A"

// parseListening returns the local addresses of the rows of a /proc/net/tcp
// or tcp6 table in state LISTEN whose inode is in inodes. A row is
//
//	sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode ...
//	0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 16095 ...
func parseListening(r io.Reader, inodes map[uint64]bool) ([]netip.AddrPort, error) {
	var out []netip.AddrPort
	sc := bufio.NewScanner(r)
	sc.Scan() // the header
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 10 {
			return nil, fmt.Errorf("short row %q", sc.Text())
		}
		if f[3] != tcpListen {
			continue
		}
		inode, err := strconv.ParseUint(f[9], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("inode in %q: %w", sc.Text(), err)
		}
		if !inodes[inode] {
			continue
		}
		ap, err := parseProcAddr(f[1])
		if err != nil {
			return nil, err
		}
		out = append(out, ap)
	}
	return out, sc.Err()
}

// parseProcAddr parses a /proc/net/tcp address, "0100007F:1F90". The kernel
// prints the address as 32-bit words in the machine's byte order (so
// 127.0.0.1 is 0100007F on x86) and the port as a plain number.
func parseProcAddr(s string) (netip.AddrPort, error) {
	hexIP, hexPort, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("address %q: no port", s)
	}
	port, err := strconv.ParseUint(hexPort, 16, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("address %q: %w", s, err)
	}
	raw, err := hex.DecodeString(hexIP)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.AddrPort{}, fmt.Errorf("address %q: bad IP", s)
	}
	for i := 0; i < len(raw); i += 4 {
		binary.NativeEndian.PutUint32(raw[i:], binary.BigEndian.Uint32(raw[i:]))
	}
	ip, _ := netip.AddrFromSlice(raw)
	return netip.AddrPortFrom(ip, uint16(port)), nil
}
