// Package listen holds what every gnet frontend needs around its
// listeners: refusing ambiguous address lists, reading back the addresses
// the kernel bound, taking over unix socket paths, and routing gnet's own
// logging into zap.
package listen

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/panjf2000/gnet/v2"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// Check refuses an address given twice: gnet tells listeners apart by the
// address they were given, so two "tcp://127.0.0.1:0" could not be told
// apart (and with a fixed port the second bind would fail anyway). An empty
// list is refused unless allowEmpty (another kind of listener serves).
func Check(addrs []string, allowEmpty bool) error {
	if len(addrs) == 0 && !allowEmpty {
		return errors.New("no address to listen on")
	}
	seen := make(map[string]bool, len(addrs))
	for _, a := range addrs {
		if seen[a] {
			return fmt.Errorf("address %s given twice", a)
		}
		seen[a] = true
	}
	return nil
}

// Bound reads each listener's local address from a duplicate of its
// socket: gnet keeps the address it was asked for, not the one bound (the
// port the kernel picked for port 0).
func Bound(eng gnet.Engine, protoAddrs []string) ([]net.Addr, error) {
	out := make([]net.Addr, 0, len(protoAddrs))
	for _, pa := range protoAddrs {
		network, addr, err := Split(pa)
		if err != nil {
			return nil, err
		}
		fd, err := eng.DupListener(network, addr)
		if err != nil {
			return nil, fmt.Errorf("listener of %s: %w", pa, err)
		}
		sa, err := unix.Getsockname(fd)
		unix.Close(fd)
		if err != nil {
			return nil, fmt.Errorf("getsockname of %s: %w", pa, err)
		}
		a, err := sockaddrAddr(sa)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", pa, err)
		}
		out = append(out, a)
	}
	return out, nil
}

// Split returns the network and address under which gnet knows the
// listener of a gnet address ("tcp://host:port", "unix:///path"), for
// Engine.DupListener.
func Split(pa string) (network, addr string, err error) {
	network, addr, ok := strings.Cut(pa, "://")
	if !ok {
		return "", "", fmt.Errorf("address %q has no scheme", pa)
	}
	switch network {
	case "tcp4", "tcp6":
		network = "tcp" // as gnet records it once bound
	}
	return network, addr, nil
}

func sockaddrAddr(sa unix.Sockaddr) (net.Addr, error) {
	switch sa := sa.(type) {
	case *unix.SockaddrInet4:
		return &net.TCPAddr{IP: net.IPv4(sa.Addr[0], sa.Addr[1], sa.Addr[2], sa.Addr[3]), Port: sa.Port}, nil
	case *unix.SockaddrInet6:
		a := &net.TCPAddr{IP: append(net.IP(nil), sa.Addr[:]...), Port: sa.Port}
		if sa.ZoneId != 0 {
			if ifi, err := net.InterfaceByIndex(int(sa.ZoneId)); err == nil {
				a.Zone = ifi.Name
			}
		}
		return a, nil
	case *unix.SockaddrUnix:
		return &net.UnixAddr{Name: sa.Name, Net: "unix"}, nil
	default:
		return nil, fmt.Errorf("unexpected socket address %T", sa)
	}
}

// ClaimUnix makes the path of every unix address free to bind: a socket
// file nobody answers on (left by a server that died) is removed, one that
// answers is an error, since another server is using it, and so is a path
// that is not a socket. It returns the paths it will be safe to remove at
// exit.
func ClaimUnix(protoAddrs []string) ([]string, error) {
	var paths []string
	for _, pa := range protoAddrs {
		network, path, err := Split(pa)
		if err != nil {
			return nil, err
		}
		if network != "unix" {
			continue
		}
		fi, err := os.Lstat(path)
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			return nil, err
		case fi.Mode()&os.ModeSocket == 0:
			return nil, fmt.Errorf("%s exists and is not a socket", path)
		default:
			c, err := net.DialTimeout("unix", path, time.Second)
			if err == nil {
				c.Close()
				return nil, fmt.Errorf("%s: another server is listening there", path)
			}
			if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, err
			}
		}
		paths = append(paths, path)
	}
	return paths, nil
}

// Logger routes gnet's logging into zap; gnet's Info is our Debug.
type Logger struct{ L *zap.SugaredLogger }

func (g Logger) Debugf(f string, a ...any) { g.L.Debugf(f, a...) }
func (g Logger) Infof(f string, a ...any)  { g.L.Debugf(f, a...) }
func (g Logger) Warnf(f string, a ...any)  { g.L.Warnf(f, a...) }
func (g Logger) Errorf(f string, a ...any) { g.L.Errorf(f, a...) }
func (g Logger) Fatalf(f string, a ...any) { g.L.Fatalf(f, a...) }
