package load

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"net"
	"sync"
	"time"
)

// OpenIdle opens n connections to addr, parallel at a time, and proves each
// one is served with an ECHO_REQ round trip (a connect alone may only have
// reached the listen backlog). The caller closes them with CloseAll.
func OpenIdle(ctx context.Context, addr string, n, parallel int) ([]net.Conn, error) {
	conns := make([]net.Conn, n)
	errs := make([]error, n)
	next := make(chan int)
	var wg sync.WaitGroup
	for range max(parallel, 1) {
		wg.Go(func() {
			for i := range next {
				conns[i], errs[i] = openEchoed(ctx, addr)
			}
		})
	}
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	failed, first := 0, error(nil)
	for _, err := range errs {
		if err != nil {
			failed++
			first = cmp.Or(first, err)
		}
	}
	if failed > 0 {
		CloseAll(conns)
		return nil, fmt.Errorf("opening %d idle connections: %d failed, the first with: %w", n, failed, first)
	}
	if err := ctx.Err(); err != nil {
		CloseAll(conns)
		return nil, err
	}
	return conns, nil
}

func openEchoed(ctx context.Context, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: 30 * time.Second} // SYN retries when a backlog overflows
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	w := bufio.NewWriterSize(conn, 64)
	if err := writePacket(w, typeEchoReq, []byte("idle")); err == nil {
		err = w.Flush()
	}
	if err == nil {
		var typ uint32
		typ, _, err = newPacketReader(conn, 64).next()
		if err == nil && typ != typeEchoRes {
			err = fmt.Errorf("ECHO_REQ answered with packet type %d", typ)
		}
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	_ = conn.SetDeadline(time.Time{})
	return conn, nil
}

// CloseAll closes every non-nil connection.
func CloseAll(conns []net.Conn) {
	for _, c := range conns {
		if c != nil {
			c.Close()
		}
	}
}
