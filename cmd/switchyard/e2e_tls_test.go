package main

// --ssl end to end, driven by a real TLS client: Debian's openssl
// s_client. Debian's libgearman (and so its gearman tool) is built without
// TLS, as is its gearmand, so they serve here as the plain-text clients of
// --plain-port; run against SWITCHYARD_BIN=gearmand, the TLS tests skip.

import (
	"bufio"
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"switchyard/engine/tlstest"
)

// tlsFiles writes a CA file (root and intermediate), a server certificate
// the intermediate issued and its key, and the root alone for the clients
// to trust: a client verifies only if the server sends the intermediate,
// which it takes from the CA file as gearmand (OpenSSL) does.
type tlsFiles struct{ ca, cert, key, root string }

func writeTLSFiles(t *testing.T) tlsFiles {
	t.Helper()
	root := tlstest.CA("switchyard test root")
	inter := root.Issue("switchyard test intermediate", true)
	leaf := inter.Issue("switchyard test server", false)
	dir := t.TempDir()
	w := func(name string, parts ...[]byte) string {
		return writeFile(t, dir, name, string(bytes.Join(parts, nil)))
	}
	return tlsFiles{
		ca:   w("gearmand-ca.pem", root.CertPEM, inter.CertPEM),
		cert: w("gearmand.pem", leaf.CertPEM),
		key:  w("gearmand.key", leaf.KeyPEM),
		root: w("root.pem", root.CertPEM),
	}
}

// startTLSServer starts switchyard with --ssl on -p 0 and a plain port
// (--plain-port 0), and returns both addresses, read from the listening
// line.
func startTLSServer(t *testing.T, f tlsFiles) (srv *serverProc, tlsAddr, plainAddr string) {
	t.Helper()
	bin := serverBinary(t)
	if isGearmand(t) {
		t.Skip("Debian's gearmand is built without TLS: its --ssl serves plain text")
	}
	requireTool(t, "openssl")
	srv = launchServer(t, bin, "--plain-port", "0",
		"--ssl", "--ssl-ca-file", f.ca, "--ssl-certificate", f.cert, "--ssl-key", f.key)
	re := regexp.MustCompile(`\slistening\s+\{"gearman": \["([^"]+)", "([^"]+)"\], "tls": \["([^"]+)"\]`)
	var m []string
	waitUntil(t, e2eWaitTimeout, "the listening line", func() (bool, string) {
		out := srv.stderr.String()
		m = re.FindStringSubmatch(out)
		select {
		case <-srv.done:
			t.Fatalf("server exited early (%v):\n%s", srv.waitErr, out)
		default:
		}
		return m != nil, out
	})
	if m[1] != m[3] {
		t.Fatalf("the -p port %s is not the TLS one %s", m[1], m[3])
	}
	return srv, m[3], m[2]
}

// pipeConn is a net.Conn over a process's stdin and stdout, so that the
// binary-protocol helpers can drive a TLS client process.
type pipeConn struct {
	r *os.File // the process's stdout
	w *os.File // its stdin
}

func (p pipeConn) Read(b []byte) (int, error)  { return p.r.Read(b) }
func (p pipeConn) Write(b []byte) (int, error) { return p.w.Write(b) }
func (p pipeConn) Close() error {
	p.w.Close()
	return p.r.Close()
}
func (p pipeConn) LocalAddr() net.Addr                { return nil }
func (p pipeConn) RemoteAddr() net.Addr               { return nil }
func (p pipeConn) SetDeadline(t time.Time) error      { p.w.SetDeadline(t); return p.r.SetDeadline(t) }
func (p pipeConn) SetReadDeadline(t time.Time) error  { return p.r.SetReadDeadline(t) }
func (p pipeConn) SetWriteDeadline(t time.Time) error { return p.w.SetWriteDeadline(t) }

// dialSClient connects `openssl s_client` to addr, trusting only rootFile
// and checking that the certificate names 127.0.0.1; what the returned
// connection writes goes over TLS, and what the server answers comes back.
func dialSClient(t *testing.T, addr, rootFile, name string) *gearConn {
	t.Helper()
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	// -quiet: only the server's bytes on stdout (and no command letters
	// read from stdin); -verify_return_error: a chain that does not verify
	// fails the handshake.
	host, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(requireTool(t, "openssl"), "s_client", "-quiet", "-connect", net.JoinHostPort(host, port),
		"-CAfile", rootFile, "-verify_return_error", "-verify_ip", host)
	cmd.Stdin, cmd.Stdout = stdinR, stdoutW
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start openssl s_client: %v", err)
	}
	stdinR.Close()
	stdoutW.Close()
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	c := pipeConn{r: stdoutR, w: stdinW}
	t.Cleanup(func() {
		// -quiet implies -ign_eof: s_client stays until the server closes.
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		c.Close()
		if t.Failed() {
			t.Logf("openssl s_client %s (%s): stderr:\n%s", addr, name, tail(stderr.String(), 4096))
		}
	})
	return &gearConn{t: t, c: c, r: bufio.NewReader(c), name: name}
}

// line reads one text line.
func (g *gearConn) line(timeout time.Duration) string {
	g.t.Helper()
	g.c.SetReadDeadline(time.Now().Add(timeout))
	s, err := g.r.ReadString('\n')
	if err != nil {
		g.t.Fatalf("%s: reading a line: %v (got %q)", g.name, err, s)
	}
	return s
}

// A TLS client (openssl s_client) gets admin and binary replies on the
// --ssl port and has its job run by Debian's gearman worker, which has no
// TLS and connects to the plain port; the admin listings name the TLS
// peer's address.
func TestE2ETLSOpenSSL(t *testing.T) {
	t.Parallel()
	f := writeTLSFiles(t)
	_, tlsAddr, plainAddr := startTLSServer(t, f)
	_, plainPortS, _ := net.SplitHostPort(plainAddr)
	plainPort, _ := strconv.Atoi(plainPortS)

	t.Run("admin version", func(t *testing.T) {
		c := dialSClient(t, tlsAddr, f.root, "admin")
		c.c.Write([]byte("version\n"))
		if got, want := c.line(e2eCmdTimeout), "OK "+version+"\n"; got != want {
			t.Errorf("version: %q, want %q", got, want)
		}
	})
	t.Run("binary echo", func(t *testing.T) {
		c := dialSClient(t, tlsAddr, f.root, "echo")
		c.send(pEchoReq, "over TLS")
		c.expect(pEchoRes, "over TLS")
	})
	t.Run("job to a plain worker", func(t *testing.T) {
		startGearman(t, plainPort, "-w", "-c", "1", "-f", "rev", "--", "rev")
		waitWorkers(t, plainAddr, "rev", 1)
		c := dialSClient(t, tlsAddr, f.root, "client")
		c.send(pSetClientID, "tls-client")
		h := c.submit(pSubmitJob, "rev", "", "hello")
		c.expect(pWorkComplete, h+"\x00olleh")

		// Both listeners list every connection, the TLS ones with the
		// TLS peer's address.
		re := regexp.MustCompile(`(?m)^\d+ 127\.0\.0\.1 tls-client :$`)
		if got := adminCmd(t, plainAddr, "workers"); !re.MatchString(got) {
			t.Errorf("workers on the plain port:\n%s", got)
		}
		a := dialSClient(t, tlsAddr, f.root, "admin")
		a.c.Write([]byte("workers\n"))
		var got strings.Builder
		for l := ""; l != ".\n"; {
			l = a.line(e2eCmdTimeout)
			got.WriteString(l)
		}
		if !re.MatchString(got.String()) {
			t.Errorf("workers on the TLS port:\n%s", got.String())
		}
	})
}

// A certificate, key or CA file that cannot be loaded stops the server at
// start-up with gearmand's message and status 1.
func TestE2ETLSBadFiles(t *testing.T) {
	t.Parallel()
	bin := serverBinary(t)
	if isGearmand(t) {
		t.Skip("Debian's gearmand is built without TLS and loads no file")
	}
	f := writeTLSFiles(t)
	absent := filepath.Join(t.TempDir(), "absent.pem")
	for _, tc := range []struct {
		name          string
		ca, cert, key string
		msg           string
	}{
		{"CA file", absent, f.cert, f.key, "SSL_CTX_load_verify_locations() cannot local the ca certificate " + absent},
		{"certificate", f.ca, absent, f.key, "SSL_CTX_use_certificate_file() cannot obtain certificate " + absent},
		{"key", f.ca, f.cert, absent, "SSL_CTX_use_PrivateKey_file() cannot obtain certificate " + absent},
		{"key of another certificate", f.ca, f.cert, writeTLSFiles(t).key, "SSL_CTX_check_private_key() cannot check certificate "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCmd(t, e2eCmdTimeout, "", bin, "-L", "127.0.0.1", "-p", "0", "-l", "stderr", "-q", "builtin",
				"--pid-file", filepath.Join(t.TempDir(), "pid"), "--periodic-listen", "off", "--controller-socket", "off", "--dwork-listen", "off", "--memodb-listen", "off", "--metrics-listen", "off",
				"--ssl", "--ssl-ca-file", tc.ca, "--ssl-certificate", tc.cert, "--ssl-key", tc.key)
			if r.code != 1 || !strings.Contains(r.stderr, tc.msg) {
				t.Errorf("%v\nwant exit 1 and %q", r, tc.msg)
			}
		})
	}
}

// --check-args accepts the TLS options without reading any file, as
// gearmand does (libtest's t/gearmand runs --check-args --ssl).
func TestE2ECheckArgsSSL(t *testing.T) {
	t.Parallel()
	bin := serverBinary(t)
	absent := filepath.Join(t.TempDir(), "absent.pem")
	for _, args := range [][]string{
		{"--check-args", "--ssl"},
		{"--check-args", "--ssl", "--ssl-ca-file", absent, "--ssl-certificate", absent, "--ssl-key=" + absent},
	} {
		if r := runCmd(t, e2eCmdTimeout, "", bin, args...); r.code != 0 || r.stdout != "" || r.stderr != "" {
			t.Errorf("%q: %v\nwant exit 0, no output", args, r)
		}
	}
}
