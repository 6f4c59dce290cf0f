// Package ceiling measures what this machine's loopback allows any job
// server: 64-byte round trips between a load-generator process and a
// server process that does nothing but echo (gnet, one event loop per core
// like switchyard's default). A job that needs a worker round trip cannot be
// dispatched faster than this, so the figure bounds the fg and bg-drain
// scenarios of `make bench`.
package ceiling

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"

	"switchyard/bench/load"
)

// echo is the whole server: every byte read is written back.
type echo struct {
	gnet.BuiltinEventEngine
	ready func(addr string)
	err   error // why OnBoot shut down
}

// OnBoot reports the address bound, which differs from the one asked for
// when that had port 0.
func (e *echo) OnBoot(eng gnet.Engine) gnet.Action {
	addr, err := boundAddr(eng)
	if err != nil {
		e.err = err
		return gnet.Shutdown
	}
	e.ready(addr)
	return gnet.None
}

// boundAddr reads the listener's address from a duplicate of its socket.
func boundAddr(eng gnet.Engine) (string, error) {
	fd, err := eng.Dup()
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return "", err
	}
	switch sa := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), uint16(sa.Port)).String(), nil
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr), uint16(sa.Port)).String(), nil
	}
	return "", fmt.Errorf("unexpected socket address %T", sa)
}

func (e *echo) OnTraffic(c gnet.Conn) gnet.Action {
	b, _ := c.Next(-1)
	_, _ = c.Write(b)
	return gnet.None
}

// Serve runs the echo server on addr (host:port), one event loop per core,
// until the process ends; ready is called once it accepts connections, with
// the address bound (port 0 in addr lets the kernel pick the port).
func Serve(addr string, ready func(addr string)) error {
	e := &echo{ready: ready}
	err := gnet.Run(e, "tcp://"+addr,
		gnet.WithMulticore(true), gnet.WithReuseAddr(true), gnet.WithTCPNoDelay(gnet.TCPNoDelay))
	if err == nil {
		err = e.err
	}
	return err
}

// PingPong sends n messages of size bytes to addr, spread over conns
// connections, each waiting for its echo before sending the next.
func PingPong(addr string, conns, size, n int) error {
	if err := check(conns, size); err != nil {
		return err
	}
	cs := make([]net.Conn, conns)
	for i := range cs {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return err
		}
		defer c.Close()
		cs[i] = c
	}
	var wg sync.WaitGroup
	errs := make([]error, conns)
	for i, c := range cs {
		share := n / conns
		if i < n%conns {
			share++
		}
		wg.Go(func() {
			out, in := message(i, size), make([]byte, size)
			for range share {
				if errs[i] = roundTrip(c, out, in); errs[i] != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Result is what Run measured.
type Result struct {
	RoundTrips int64         // completed inside the measured window
	Window     time.Duration // the measured window
	Latency    *hdrhistogram.Histogram
}

// Run keeps one message of size bytes in flight on each of
// conns connections to addr from start to end, and measures the round
// trips that begin after measureFrom (the warm-up is not counted).
func Run(ctx context.Context, addr string, conns, size int, measureFrom, end time.Time) (Result, error) {
	res := Result{Window: end.Sub(measureFrom), Latency: load.NewLatencyHistogram()}
	if err := check(conns, size); err != nil {
		return res, err
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make([]error, conns)
	for i := range conns {
		wg.Go(func() {
			var d net.Dialer
			c, err := d.DialContext(ctx, "tcp", addr)
			if err != nil {
				errs[i] = err
				return
			}
			defer c.Close()
			stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
			defer stop()
			h := load.NewLatencyHistogram()
			var n int64
			out, in := message(i, size), make([]byte, size)
			for {
				start := time.Now()
				if !start.Before(end) {
					break
				}
				if errs[i] = roundTrip(c, out, in); errs[i] != nil {
					return
				}
				if !start.Before(measureFrom) {
					n++
					_ = h.RecordValue(max(time.Since(start).Microseconds(), 1))
				}
			}
			mu.Lock()
			res.RoundTrips += n
			res.Latency.Merge(h)
			mu.Unlock()
		})
	}
	wg.Wait()
	return res, errors.Join(errs...)
}

func check(conns, size int) error {
	if conns < 1 || size < 1 {
		return errors.New("ceiling: conns and size must be positive")
	}
	return nil
}

// message is connection i's bytes: each connection's differ, so an echo
// delivered to the wrong one is caught.
func message(i, size int) []byte {
	out := make([]byte, size)
	for k := range out {
		out[k] = byte(i + k)
	}
	return out
}

// roundTrip sends out and reads its echo into in.
func roundTrip(c net.Conn, out, in []byte) error {
	if _, err := c.Write(out); err != nil {
		return err
	}
	if _, err := io.ReadFull(c, in); err != nil {
		return err
	}
	if string(in) != string(out) {
		return fmt.Errorf("ceiling: got back %q, sent %q", in, out)
	}
	return nil
}
