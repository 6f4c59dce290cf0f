package harness

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"switchyard/bench/cgroup"
)

// Config says how to start one server.
type Config struct {
	Name string // e.g. "switchyard", "gearmand"
	Path string // the binary
	// Args is the command line (without the binary). It must make the
	// server listen on one address and let the kernel pick the port
	// (e.g. "-L 127.0.0.1 -p 0"): Start reads the port back from /proc.
	// Picking a free port and passing it would race with anything else
	// binding one meanwhile.
	Args []string
	// Log, when set, also receives the server's stdout and stderr.
	Log io.Writer
	// Listeners is how many TCP addresses the server listens on; 0 means
	// one. With more than one (switchyard with its Periodic listener), the
	// Gearman address is the one that answers the admin command "getpid"
	// with the server's PID, and the others go to Server.Others.
	Listeners int
	// StartTimeout bounds how long the server may take to accept
	// connections; 0 means 10 s. One that replays a large stored queue
	// before it listens may need more.
	StartTimeout time.Duration
	// Budget, when set, runs the server in a CPU cgroup of its own.
	Budget *CPUBudget
}

// Server is a running server process.
type Server struct {
	Name string
	Addr string // where it listens (the Gearman address), e.g. 127.0.0.1:41234
	Port int
	// Others are the addresses other than Addr it listens on, sorted
	// (Config.Listeners).
	Others []string

	cmd     *exec.Cmd
	exited  chan struct{} // closed when the process has exited
	waitErr error         // valid once exited is closed
	output  *tail
	prior   Usage         // of the servers this one replaced (Restart)
	group   *cgroup.Group // with Config.Budget
}

// startTimeout bounds how long a server may take to accept connections,
// unless Config.StartTimeout says otherwise.
const startTimeout = 10 * time.Second

// Start starts the server, finds the port it listens on and returns once
// that port accepts connections.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	s := &Server{
		Name:   cfg.Name,
		exited: make(chan struct{}),
		output: &tail{max: 8 << 10},
	}
	// Not CommandContext: the server is stopped by Stop, gracefully.
	s.cmd = exec.Command(cfg.Path, cfg.Args...)
	var out io.Writer = s.output
	if cfg.Log != nil {
		out = io.MultiWriter(s.output, cfg.Log)
	}
	s.cmd.Stdout, s.cmd.Stderr = out, out
	// Its own process group, so a terminal's ^C reaches only the bench,
	// which then stops the server itself.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	g, err := cfg.Budget.group(cfg.Name)
	if err != nil {
		return nil, err
	}
	if err := startIn(g, s.cmd); err != nil {
		return nil, errors.Join(err, removeGroup(g))
	}
	s.group = g
	go func() {
		s.waitErr = s.cmd.Wait()
		close(s.exited)
	}()
	timeout := cfg.StartTimeout
	if timeout == 0 {
		timeout = startTimeout
	}
	if err := s.waitAccepting(ctx, max(cfg.Listeners, 1), timeout); err != nil {
		s.Stop()
		return nil, fmt.Errorf("%s %s: %w%s", cfg.Name, strings.Join(s.cmd.Args, " "), err, s.outputNote())
	}
	return s, nil
}

// waitAccepting waits until the server listens on want addresses, sets
// Addr, Port and Others, and checks that a connection is accepted at Addr.
func (s *Server) waitAccepting(ctx context.Context, want int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	addrs, err := WaitListening(ctx, s.PID(), s.exited)
	// A server may open its listeners one after the other.
	for err == nil && len(addrs) < want {
		select {
		case <-ctx.Done():
			return fmt.Errorf("listens on %v, want %d addresses: %w", addrs, want, ctx.Err())
		case <-time.After(10 * time.Millisecond): // polling a starting process
		}
		addrs, err = WaitListening(ctx, s.PID(), s.exited)
	}
	if errors.Is(err, ErrExited) {
		return fmt.Errorf("exited before listening: %v", s.waitErr)
	}
	if err != nil {
		return err
	}
	if len(addrs) != want {
		return fmt.Errorf("listens on %v, want %d address(es)", addrs, want)
	}
	if want == 1 {
		s.Addr, s.Port = addrs[0].String(), int(addrs[0].Port())
		conn, err := net.DialTimeout("tcp", s.Addr, time.Second)
		if err != nil {
			return err
		}
		return conn.Close()
	}
	var gearman []netip.AddrPort
	for _, a := range addrs {
		if answersGetpid(a.String(), s.PID()) {
			gearman = append(gearman, a)
		} else {
			s.Others = append(s.Others, a.String())
		}
	}
	if len(gearman) != 1 {
		return fmt.Errorf("of %v, %d answer the admin getpid, want one (the Gearman port)", addrs, len(gearman))
	}
	s.Addr, s.Port = gearman[0].String(), int(gearman[0].Port())
	return nil
}

// answersGetpid reports whether addr answers the Gearman admin command
// "getpid" with pid ("OK 1234"). Another protocol's listener does not: a
// Periodic server closes a connection whose first bytes are not its magic.
func answersGetpid(addr string, pid int) bool {
	got, err := GetpidAt(addr, 2*time.Second)
	return err == nil && got == pid
}

// Getpid asks the admin command "getpid" on an open connection to a
// Gearman port and reads the server's pid from its "OK 1234", waiting at
// most wait.
func Getpid(c net.Conn, wait time.Duration) (int, error) {
	_ = c.SetDeadline(time.Now().Add(wait))
	if _, err := io.WriteString(c, "getpid\n"); err != nil {
		return 0, err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return 0, err
	}
	f := strings.Fields(line)
	if len(f) != 2 || f[0] != "OK" {
		return 0, fmt.Errorf("getpid: %q", line)
	}
	return strconv.Atoi(f[1])
}

// GetpidAt is Getpid on a connection of its own to addr, dialled and
// answered within wait each. (A cluster node's relay with no leader holds
// a connection for seconds.)
func GetpidAt(addr string, wait time.Duration) (int, error) { return GetpidVia(nil, addr, wait) }

// GetpidVia is GetpidAt on a connection dial opens.
func GetpidVia(dial Dialer, addr string, wait time.Duration) (int, error) {
	if addr == "" {
		return 0, errors.New("no address")
	}
	conn, err := dial.dial("tcp", addr, wait)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	return Getpid(conn, wait)
}

// PID is the server's process id.
func (s *Server) PID() int { return s.cmd.Process.Pid }

// Usage reads the server's memory and CPU use now. After a Restart, CPU
// includes the time of the servers replaced, and PeakRSS is the highest of
// them all.
func (s *Server) Usage() (Usage, error) {
	if err := s.Alive(); err != nil {
		return Usage{}, err
	}
	u, err := ReadUsage(s.PID())
	u.CPU += s.prior.CPU
	u.PeakRSS = max(u.PeakRSS, s.prior.PeakRSS)
	return u, err
}

// Restart kills the server with SIGKILL, as a crash would, starts it again
// with cfg (on the same data: a durable queue is what it is for), and
// returns the new server and how long that took from its start to
// accepting connections. The old one must be running.
func (s *Server) Restart(ctx context.Context, cfg Config) (*Server, time.Duration, error) {
	prior, err := s.Usage()
	if err != nil {
		return nil, 0, err
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
	if err := removeGroup(s.group); err != nil {
		return nil, 0, err
	}
	begin := time.Now()
	next, err := Start(ctx, cfg)
	if err != nil {
		return nil, 0, err
	}
	took := time.Since(begin)
	next.prior = prior
	return next, took, nil
}

// Alive returns an error, with the end of the server's output, if the server
// has exited.
func (s *Server) Alive() error {
	select {
	case <-s.exited:
		return fmt.Errorf("%s exited: %v%s", s.Name, s.waitErr, s.outputNote())
	default:
		return nil
	}
}

// stopTimeout is how long a server gets to exit after SIGTERM.
const stopTimeout = 10 * time.Second

// Stop sends SIGTERM, then SIGKILL if the server has not exited in time,
// and waits for it. It returns an error if the server had already died.
func (s *Server) Stop() error {
	died := s.Alive()
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(stopTimeout):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
	return errors.Join(died, removeGroup(s.group))
}

// Procs reads the server process's CPU, and its group's counters with
// Config.Budget.
func (s *Server) Procs() ([]ProcUsage, error) {
	if err := s.Alive(); err != nil {
		return nil, err
	}
	return procsUsage([]procRef{{s.Name, s.PID(), s.group}})
}

// Output returns the last few kilobytes the server wrote.
func (s *Server) Output() string { return s.output.String() }

func (s *Server) outputNote() string {
	if out := strings.TrimSpace(s.output.String()); out != "" {
		return "\nserver output (end):\n" + out
	}
	return ""
}

// Version runs "path --version" and returns its first line.
func Version(path string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--version").CombinedOutput()
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	if err != nil && line == "" {
		return "", err
	}
	return line, nil
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
