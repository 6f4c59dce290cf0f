package gearman

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/panjf2000/gnet/v2"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"switchyard/engine/listen"
)

// drainPoll is how often Drain looks at the number of running jobs. A job
// stops running on a worker's report, on its disconnection or on a timer,
// on any goroutine; polling one counter is simpler than hooking each of
// those, and a drain is in no hurry.
const drainPoll = 10 * time.Millisecond

// Drain is the graceful half of a shutdown. It stops accepting connections
// and stops handing out jobs (GRAB_JOB gets NO_JOB, PRE_SLEEP and new work
// bring no NOOP), while the open connections are served as before, so that
// workers can report the jobs they hold to the clients waiting for them.
// It returns nil once no job is running and the last reports have been
// written to their clients' sockets, or ctx's error. Queued jobs stay
// queued. Stop then closes everything; Drain must not run concurrently
// with Stop.
func (s *Server) Drain(ctx context.Context) error {
	s.loop.Drain()
	s.closeGates() // TLS: refused at connect too; open ones go on
	if err := s.closeListeners(); err != nil {
		// OnOpen still closes every new connection at once.
		s.log.Warn("cannot close the listening sockets", zap.Error(err))
	}
	t := time.NewTicker(drainPoll)
	defer t.Stop()
	for s.sched.Running() > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return s.flushLoops(ctx)
}

// flushLoops returns once the replies handed between event loops have been
// written. The event that handled a worker's last report may still be
// running, about to hand the result to its client's loop, so every loop
// first runs a no-op task (it queues behind that event); then, while any
// connection has a hand-off pending, they all do so again.
func (s *Server) flushLoops(ctx context.Context) error {
	loops := s.loop.Loops()
	done := make(chan struct{}, len(loops))
	barrier := gnet.RunnableFunc(func(context.Context) error {
		done <- struct{}{}
		return nil
	})
	for {
		for _, el := range loops {
			if err := el.Execute(ctx, barrier); err != nil {
				return err
			}
		}
		for range loops {
			select {
			case <-done:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if !s.handOffPending() {
			return nil
		}
	}
}

// handOffPending reports whether a connection has replies from another
// goroutine that its loop has not taken yet.
func (s *Server) handOffPending() bool {
	for _, cn := range s.snapshot() {
		if cn.Pending() {
			return true
		}
	}
	return false
}

// closeListeners closes the listening sockets while the engine runs on.
// gnet has no call for that, and shutdown(2) on a listener makes gnet's
// accept loop fail, which stops the whole engine. So each descriptor gnet
// listens on is replaced, with dup3, by an unreachable listening socket:
// the kernel closes the real socket, so that connecting clients are
// refused, and drops it from gnet's epoll set; should gnet be accepting at
// that instant, the stand-in answers EAGAIN; and Stop closes the stand-in
// as gnet's listener. gnet's descriptors are found by comparing every open
// descriptor with a copy from DupListener; none of them is closed before
// Stop, which does not run concurrently.
func (s *Server) closeListeners() error {
	standIn, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("stand-in socket: %w", err)
	}
	defer unix.Close(standIn)
	// An empty name binds to a fresh abstract address: no path on disk.
	if err := unix.Bind(standIn, &unix.SockaddrUnix{}); err != nil {
		return fmt.Errorf("stand-in socket: bind: %w", err)
	}
	if err := unix.Listen(standIn, 0); err != nil {
		return fmt.Errorf("stand-in socket: listen: %w", err)
	}
	var errs []error
	for _, a := range s.cfg.Addrs {
		network, addr, err := listen.Split(a)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		dup, err := s.loop.Engine().DupListener(network, addr)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", a, err))
			continue
		}
		fds, err := sameFile(dup)
		for _, fd := range fds {
			if err == nil {
				err = unix.Dup3(standIn, fd, unix.O_CLOEXEC)
			}
		}
		if err == nil && len(fds) == 0 {
			err = errors.New("no descriptor of the engine's found")
		}
		unix.Close(dup)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", a, err))
		}
	}
	return errors.Join(errs...)
}

// sameFile lists this process's other descriptors of fd's socket.
func sameFile(fd int) ([]int, error) {
	var want unix.Stat_t
	if err := unix.Fstat(fd, &want); err != nil {
		return nil, err
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil || n == fd {
			continue
		}
		var st unix.Stat_t
		if unix.Fstat(n, &st) == nil && st.Dev == want.Dev && st.Ino == want.Ino {
			out = append(out, n)
		}
	}
	return out, nil
}
