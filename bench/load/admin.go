package load

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// QueuedJobs asks a Gearman server's admin protocol for "status" on a
// connection of its own and returns how many jobs of function it holds
// (queued and running; none if it lists no such function).
func QueuedJobs(ctx context.Context, addr, function string) (int64, error) {
	var d net.Dialer
	return QueuedJobsVia(ctx, d.DialContext, addr, function)
}

// QueuedJobsVia is QueuedJobs on a connection dial opens.
func QueuedJobsVia(ctx context.Context, dial func(ctx context.Context, network, addr string) (net.Conn, error), addr, function string) (int64, error) {
	st, err := QueuedByFunction(ctx, dial, addr)
	return st[function], err
}

// QueuedByFunction asks "status" on a connection dial opens (nil:
// net.Dialer's) and returns the jobs each function listed holds (queued
// and running).
func QueuedByFunction(ctx context.Context, dial func(ctx context.Context, network, addr string) (net.Conn, error), addr string) (map[string]int64, error) {
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	conn, err := dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	deadline := time.Now().Add(30 * time.Second)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	_ = conn.SetDeadline(deadline)
	if _, err := conn.Write([]byte("status\n")); err != nil {
		return nil, err
	}
	r := bufio.NewReader(conn)
	var text strings.Builder
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return nil, fmt.Errorf("status: %w after %q", err, text.String())
		}
		if line == ".\n" {
			break
		}
		text.WriteString(line)
	}
	return parseAdminStatus(text.String())
}

// parseAdminStatus parses the lines of "status", function TAB total TAB
// running TAB workers, into function -> total.
func parseAdminStatus(text string) (map[string]int64, error) {
	out := make(map[string]int64)
	for line := range strings.SplitSeq(text, "\n") {
		if line == "" {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 4 {
			return nil, fmt.Errorf("status line %q: want function, total, running, workers", line)
		}
		n, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("status line %q: %w", line, err)
		}
		out[f[0]] = n
	}
	return out, nil
}
