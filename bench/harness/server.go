package harness

import (
	"context"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Config says how to start one server.
type Config struct {
	Name string // e.g. "switchyard", "gearmand"
	Path string // the binary
	// Args returns the command line (without the binary) to listen on
	// 127.0.0.1:port.
	Args func(port int) []string
	// Log, when set, also receives the server's stdout and stderr.
	Log io.Writer
}

// Server is a running server process.
type Server struct {
	Name string
	Addr string // 127.0.0.1:port
	Port int

	cmd     *exec.Cmd
	exited  chan struct{} // closed when the process has exited
	waitErr error         // valid once exited is closed
	output  *tail
}

// startTimeout bounds how long a server may take to accept connections.
const startTimeout = 10 * time.Second

// Start starts the server on a free loopback port and returns once the port
// accepts connections.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	s := &Server{
		Name:   cfg.Name,
		Port:   port,
		Addr:   net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		exited: make(chan struct{}),
		output: &tail{max: 8 << 10},
	}
	// Not CommandContext: the server is stopped by Stop, gracefully.
	s.cmd = exec.Command(cfg.Path, cfg.Args(port)...)
	var out io.Writer = s.output
	if cfg.Log != nil {
		out = io.MultiWriter(s.output, cfg.Log)
	}
	s.cmd.Stdout, s.cmd.Stderr = out, out
	// Its own process group, so a terminal's ^C reaches only the bench,
	// which then stops the server itself.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		s.waitErr = s.cmd.Wait()
		close(s.exited)
	}()
	if err := s.waitAccepting(ctx); err != nil {
		s.Stop()
		return nil, fmt.Errorf("%s %s: %w%s", cfg.Name, strings.Join(s.cmd.Args, " "), err, s.outputNote())
	}
	return s, nil
}

func (s *Server) waitAccepting(ctx context.Context) error {
	deadline := time.Now().Add(startTimeout)
	for {
		conn, err := net.DialTimeout("tcp", s.Addr, time.Second)
		if err == nil {
			return conn.Close()
		}
		select {
		case <-s.exited:
			return fmt.Errorf("exited before accepting: %v", s.waitErr)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not accepting on %s after %v: %w", s.Addr, startTimeout, err)
		}
	}
}

// PID is the server's process id.
func (s *Server) PID() int { return s.cmd.Process.Pid }

// Usage reads the server's memory and CPU use now.
func (s *Server) Usage() (Usage, error) {
	if err := s.Alive(); err != nil {
		return Usage{}, err
	}
	return ReadUsage(s.PID())
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
	return died
}

// Output returns the last few kilobytes the server wrote.
func (s *Server) Output() string { return s.output.String() }

func (s *Server) outputNote() string {
	if out := strings.TrimSpace(s.output.String()); out != "" {
		return "\nserver output (end):\n" + out
	}
	return ""
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
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
