package main

// Issue 45's attacks on a cluster of real processes, each refused: the
// certificates are the ones docs/security.md makes with openssl (its
// script runs here), the strangers' are made in Go. The clients that
// present certificates are real ones: openssl s_client, Python's ssl,
// Perl's Gearman::Client, and libgearman built with TLS when
// $SWITCHYARD_LIBGEARMAN_TLS names its build (see libgearmanTLS).

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
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

// docCerts runs docs/security.md's openssl script in dir: the nodes' CA
// and n1..n4's certificates, the clients' CA and payroll-worker's and
// operator's.
func docCerts(t *testing.T, dir string) {
	t.Helper()
	requireTool(t, "openssl")
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "security.md"))
	if err != nil {
		t.Fatal(err)
	}
	var script string
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(string(doc), -1) {
		if strings.Contains(m[1], "ec_paramgen_curve") {
			script = m[1]
			break
		}
	}
	if script == "" {
		t.Fatal("docs/security.md has no openssl script")
	}
	cmd := exec.Command(requireTool(t, "bash"), "-c", script)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("docs/security.md's script: %v\n%s", err, out)
	}
}

// loadCA reads a CA certificate and key that openssl made, for Go to
// issue more with.
func loadCA(t *testing.T, certFile, keyFile string) *tlstest.Cert {
	t.Helper()
	cb, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	cp, _ := pem.Decode(cb)
	kp, _ := pem.Decode(kb)
	if cp == nil || kp == nil {
		t.Fatalf("%s or %s: no PEM", certFile, keyFile)
	}
	cert, err := x509.ParseCertificate(cp.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	key, err := x509.ParsePKCS8PrivateKey(kp.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return &tlstest.Cert{Cert: cert, Key: key.(*ecdsa.PrivateKey), CertPEM: cb}
}

// sClient runs openssl s_client against addr with args (the CA, the
// certificate, the name to check), writes in, and returns the answer: a
// line, or what came before the server closed the connection (nothing,
// for a refused certificate), within timeout.
func sClient(t *testing.T, addr, in string, timeout time.Duration, args ...string) string {
	t.Helper()
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(requireTool(t, "openssl"), append([]string{"s_client", "-quiet", "-connect", addr, "-verify_return_error"}, args...)...)
	var stderr syncBuffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdinR, stdoutW, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stdinR.Close()
	stdoutW.Close()
	defer func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
		stdinW.Close()
		stdoutR.Close()
	}()
	stdinW.Write([]byte(in))
	stdoutR.SetReadDeadline(time.Now().Add(timeout))
	var out []byte
	buf := make([]byte, 4096)
	for !bytes.HasSuffix(out, []byte("\n")) {
		n, err := stdoutR.Read(buf)
		out = append(out, buf[:n]...)
		if err != nil {
			if os.IsTimeout(err) {
				t.Fatalf("openssl s_client %s: no answer within %v; stderr:\n%s", addr, timeout, tail(stderr.String(), 2048))
			}
			break // EOF: s_client ended
		}
	}
	return string(out)
}

// labelled reads a labelled sample of n's /metrics, 0 if absent.
func labelled(t *testing.T, n *clusterNode, name, label string) float64 {
	t.Helper()
	b, err := httpGet(n, "/metrics")
	if err != nil {
		return 0
	}
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name+"{"+label+"}") + ` (\S+)$`).FindSubmatch(b)
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}

func httpGet(n *clusterNode, path string) ([]byte, error) {
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + n.addr("metrics") + path)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// holds tells whether a file under dir holds needle.
func holds(t *testing.T, dir string, needle []byte) bool {
	t.Helper()
	found := false
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || found {
			return nil
		}
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, needle) {
			found = true
		}
		return nil
	})
	return found
}

// TestE2EClusterSecurity: a three-node cluster with mutual TLS between the
// nodes, client certificates on the Gearman port and the ops token, and 20
// background jobs of payroll queued. Every attempt of issue 45 fails: a
// membership change from a plain job connection, the HTTP membership calls
// without the token, with a wrong one or from another site, strangers at
// the Raft port, and rogue nodes added by the operator (no TLS, another
// CA, another node's certificate), none of which gets a byte of the log;
// a legitimate fourth node joins and catches up; clients with a
// certificate are served and clients without one are not.
func TestE2EClusterSecurity(t *testing.T) {
	if isGearmand(t) {
		t.Skip("a switchyard cluster")
	}
	certDir := t.TempDir()
	docCerts(t, certDir)
	f := func(name string) string { return filepath.Join(certDir, name) }
	nodeArgs := func(id string) []string {
		return []string{"--cluster-tls-cert", f(id + ".pem"), "--cluster-tls-key", f(id + ".key"), "--cluster-tls-ca", f("nodes-ca.pem"),
			"--ssl", "--ssl-certificate", f(id + ".pem"), "--ssl-key", f(id + ".key"), "--ssl-ca-file", f("clients-ca.pem"),
			"--ssl-verify-client", "--plain-port", "0"}
	}
	c := startClusterWith(t, 3, nodeArgs, 1)
	l := c.leader()
	tlsAddr := func(n *clusterNode) string { return n.addr("gearman") } // the -p port: TLS
	sub := dialGear(t, c.gearman(l), "submitter")
	for i := range 20 {
		sub.submit(pSubmitJobBg, "payroll", fmt.Sprint("u", i), fmt.Sprintf("payroll-secret-%02d", i))
	}
	secret := []byte("payroll-secret-")
	members := func() int {
		st, err := clusterStatus(c.leader())
		if err != nil {
			t.Fatal(err)
		}
		return len(st.Members)
	}

	t.Run("admin membership over plain connections", func(t *testing.T) {
		for _, n := range c.nodes { // the leader's own port, and the followers' relays
			for _, cmd := range []string{"cluster add evil 127.0.0.1:17004", "cluster remove n2"} {
				got, err := adminAt(c.gearman(n), cmd)
				if err != nil || !strings.HasPrefix(got, "ERR PERMISSION_DENIED ") {
					t.Errorf("%s: %q: %q, %v", n.id, cmd, got, err)
				}
			}
			if got, err := adminAt(c.gearman(n), "cluster"); err != nil || strings.Count(got, "\n") != 4 {
				t.Errorf("%s: the listing: %q, %v", n.id, got, err)
			}
		}
		if m := members(); m != 3 {
			t.Fatalf("%d members", m)
		}
	})

	t.Run("HTTP membership without the token", func(t *testing.T) {
		form := url.Values{"id": {"evil"}, "addr": {"127.0.0.1:17004"}}
		for _, tt := range []struct {
			name    string
			token   string
			headers []string
			code    int
		}{
			{"no token", "", nil, 401},
			{"a wrong token", "guess", nil, 401},
			{"cross-site, with the token", c.token, []string{"Origin", "http://evil.example", "Sec-Fetch-Site", "cross-site"}, 403},
		} {
			if code, body := c.membership("POST", "/api/cluster/members", form, tt.token, tt.headers...); code != tt.code {
				t.Errorf("add, %s: %d %s; want %d", tt.name, code, body, tt.code)
			}
			if code, body := c.membership("DELETE", "/api/cluster/members/n2", nil, tt.token, tt.headers...); code != tt.code {
				t.Errorf("remove, %s: %d %s; want %d", tt.name, code, body, tt.code)
			}
		}
		if m := members(); m != 3 {
			t.Fatalf("%d members", m)
		}
	})

	t.Run("strangers at the Raft port", func(t *testing.T) {
		raft := l.raftAddr()
		before := map[string]float64{}
		for _, r := range []string{"not_tls", "no_certificate", "unknown_authority"} {
			before[r] = labelled(t, l, "switchyard_cluster_refused_total", `reason="`+r+`"`)
		}
		conn, err := net.Dial("tcp", raft)
		if err != nil {
			t.Fatal(err)
		}
		conn.Write([]byte("\x00\x85\xa9RPCHeader garbage"))
		conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		if n, _ := io.Copy(io.Discard, conn); n != 0 {
			t.Errorf("a plain stranger read %d bytes", n)
		}
		conn.Close()
		other := tlstest.CA("another CA")
		for _, cert := range []*tlstest.Cert{nil, other.Node("n2")} {
			cfg := &tls.Config{InsecureSkipVerify: true}
			if cert != nil {
				cfg.Certificates = []tls.Certificate{cert.TLS()}
			}
			tc, err := tls.Dial("tcp", raft, cfg)
			if err != nil {
				continue
			}
			tc.SetReadDeadline(time.Now().Add(30 * time.Second))
			if n, _ := io.Copy(io.Discard, tc); n != 0 {
				t.Errorf("a TLS stranger read %d bytes", n)
			}
			tc.Close()
		}
		for r, v := range before {
			waitUntil(t, e2eWaitTimeout, r+" counted", func() (bool, string) {
				got := labelled(t, l, "switchyard_cluster_refused_total", `reason="`+r+`"`)
				return got > v, fmt.Sprint(got)
			})
		}
	})

	t.Run("rogue nodes added by the operator get nothing", func(t *testing.T) {
		other := tlstest.CA("another CA")
		otherDir := t.TempDir()
		otherCert, otherKey, err := other.Node("evil").WriteFiles(otherDir, "evil")
		if err != nil {
			t.Fatal(err)
		}
		otherCA := writeFile(t, otherDir, "ca.pem", string(other.CertPEM))
		for _, tt := range []struct {
			name    string
			args    []string
			reasons []string // what the leader may count
		}{
			// A plain node reads the ClientHello as an RPC it does not
			// know and hangs up, or answers what is no TLS.
			{"no TLS", nil, []string{"not_tls", "handshake"}},
			{"another CA's certificate", []string{"--cluster-tls-cert", otherCert, "--cluster-tls-key", otherKey, "--cluster-tls-ca", otherCA},
				[]string{"unknown_authority"}},
			// n2's certificate, stolen: the rogue says it is n2 (a switchyard
			// refuses to start with a certificate that does not name it),
			// and is added as evil.
			{"another node's certificate", []string{"--cluster-tls-cert", f("n2.pem"), "--cluster-tls-key", f("n2.key"), "--cluster-tls-ca", f("nodes-ca.pem")},
				[]string{"wrong_node"}},
		} {
			t.Run(tt.name, func(t *testing.T) {
				evil := &clusterNode{id: "evil", dir: t.TempDir()}
				claims := "evil"
				if strings.Contains(tt.name, "another node's") {
					claims = "n2"
				}
				evil.args = append([]string{"--node-id", claims, "--cluster-listen", "127.0.0.1:0", "-L", "127.0.0.1", "-p", "0",
					"-l", "stderr", "--data-dir", evil.dir, "--metrics-listen", "off", "--periodic-listen", "off", "--dwork-listen", "off",
					"--memodb-listen", "off", "--controller-socket", "off"}, tt.args...)
				c.start(evil)
				waitUntil(t, e2eWaitTimeout, "evil's raft address", func() (bool, string) { return evil.raftAddr() != "", evil.proc.stderr.String() })
				l := c.leader()
				refused := func() float64 {
					sum := 0.0
					for _, r := range tt.reasons {
						sum += labelled(t, l, "switchyard_cluster_refused_total", `reason="`+r+`"`)
					}
					return sum
				}
				before := refused()
				c.addMember("evil", evil.raftAddr()) // the operator is fooled; the handshake is not
				// Two refused dials: raft tried again after the first.
				waitUntil(t, 2*e2eWaitTimeout, "two refusals counted", func() (bool, string) {
					got := refused()
					return got >= before+2, fmt.Sprint(got)
				})
				if holds(t, evil.dir, secret) {
					t.Fatal("the rogue's data directory holds a payload")
				}
				c.removeMember("evil")
				evil.proc.kill()
				if m := members(); m != 3 {
					t.Fatalf("%d members", m)
				}
			})
		}
	})

	t.Run("a fourth node with its certificate joins and catches up", func(t *testing.T) {
		n4 := &clusterNode{id: "n4", dir: t.TempDir()}
		n4.args = append([]string{"--node-id", "n4", "--cluster-listen", "127.0.0.1:0", "-L", "127.0.0.1", "-p", "0",
			"-l", "stderr", "--data-dir", n4.dir, "--metrics-listen", "127.0.0.1:0", "--periodic-listen", "off", "--dwork-listen", "off",
			"--memodb-listen", "off", "--controller-socket", "off", "--ops-token-file", writeFile(t, t.TempDir(), "token", c.token)},
			nodeArgs("n4")...)
		c.nodes = append(c.nodes, n4)
		c.start(n4)
		waitUntil(t, e2eWaitTimeout, "n4's raft address", func() (bool, string) { return n4.raftAddr() != "", n4.proc.stderr.String() })
		c.addMember("n4", n4.raftAddr())
		waitUntil(t, e2eWaitTimeout, "n4 caught up", func() (bool, string) {
			k, err := metricsValue(n4, "switchyard_cluster_stored_jobs")
			return k == 20, fmt.Sprint(k, err)
		})
		c.waitServing(n4)
		if !holds(t, n4.dir, []byte("payroll-secret-07")) {
			t.Error("n4's data directory does not hold the jobs it caught up with")
		}
	})

	t.Run("clients with and without a certificate", func(t *testing.T) {
		// Each client check runs against the current leader (its name is
		// the certificate's), through its port and the followers'.
		withCert := func(l *clusterNode, cert, key string) []string {
			args := []string{"-CAfile", f("nodes-ca.pem"), "-verify_hostname", l.id}
			if cert != "" {
				args = append(args, "-cert", cert, "-key", key)
			}
			return args
		}
		check(t, c.onLeader(func(l *clusterNode) error {
			for _, n := range append([]*clusterNode{l}, c.followers()...) { // a follower relays: the leader checks
				if got := sClient(t, tlsAddr(n), "version\n", e2eCmdTimeout, withCert(l, f("payroll-worker.pem"), f("payroll-worker.key"))...); !strings.HasPrefix(got, "OK ") {
					return fmt.Errorf("openssl s_client with a certificate, through %s: version answered %q", n.id, got)
				}
			}
			return nil
		}))
		other := tlstest.CA("another CA")
		clientsCA := loadCA(t, f("clients-ca.pem"), f("clients-ca.key"))
		badDir := t.TempDir()
		bad := map[string][2]string{"no": {"-", "-"}}
		for name, cert := range map[string]*tlstest.Cert{"another CA's": other.Client("mallory"),
			"an expired": clientsCA.Expired(clientsCA.Client("payroll-worker"))} {
			certFile, keyFile, err := cert.WriteFiles(badDir, strings.ReplaceAll(name, " ", "-"))
			if err != nil {
				t.Fatal(err)
			}
			bad[name] = [2]string{certFile, keyFile}
		}
		l := c.leader()
		for name, files := range bad {
			cert, key := files[0], files[1]
			if cert == "-" {
				cert, key = "", ""
			}
			if got := sClient(t, tlsAddr(l), "version\n", e2eCmdTimeout, withCert(l, cert, key)...); got != "" {
				t.Errorf("openssl s_client with %s certificate: answered %q", name, got)
			}
		}

		python := requireTool(t, "/usr/bin/python3")
		py := func(l *clusterNode, cert, key string) cmdResult {
			_, port, _ := net.SplitHostPort(tlsAddr(l))
			return runCmd(t, e2eCmdTimeout, "", python, filepath.Join("testdata", "tls_client.py"), "127.0.0.1", port, l.id,
				f("nodes-ca.pem"), cert, key, "payroll", "from python")
		}
		check(t, c.onLeader(func(l *clusterNode) error {
			if r := py(l, f("payroll-worker.pem"), f("payroll-worker.key")); r.code != 0 || !strings.HasPrefix(r.stdout, "JOB_CREATED ") {
				return fmt.Errorf("Python's ssl with a certificate: %v", r)
			}
			return nil
		}))
		for name, files := range bad {
			if r := py(l, files[0], files[1]); r.code == 0 {
				t.Errorf("Python's ssl with %s certificate: %v", name, r)
			}
		}

		perl, script := requirePerl(t, "perl_tls_client.pl")
		pl := func(l *clusterNode, cert, key string) cmdResult {
			_, port, _ := net.SplitHostPort(tlsAddr(l))
			return runCmd(t, e2eCmdTimeout, "", perl, script, port, l.id, f("nodes-ca.pem"), cert, key, "payroll", "from perl")
		}
		check(t, c.onLeader(func(l *clusterNode) error {
			if r := pl(l, f("payroll-worker.pem"), f("payroll-worker.key")); r.code != 0 || !strings.HasPrefix(r.stdout, "handle: ") {
				return fmt.Errorf("Perl's Gearman::Client with a certificate: %v", r)
			}
			return nil
		}))
		for name, files := range bad {
			if r := pl(l, files[0], files[1]); r.code == 0 {
				t.Errorf("Perl's Gearman::Client with %s certificate: %v", name, r)
			}
		}

		t.Run("libgearman", func(t *testing.T) {
			gearman := libgearmanTLS(t)
			lg := func(l *clusterNode, cert, key string) cmdResult {
				_, port, _ := net.SplitHostPort(tlsAddr(l))
				cmd := exec.Command(gearman, "-S", "-h", "127.0.0.1", "-p", port, "-b", "-f", "payroll", "from libgearman")
				cmd.Env = append(os.Environ(), "GEARMAND_CA_CERTIFICATE="+f("nodes-ca.pem"), "GEARMAN_CLIENT_PEM="+cert, "GEARMAN_CLIENT_KEY="+key)
				var out, errb bytes.Buffer
				cmd.Stdout, cmd.Stderr = &out, &errb
				cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				done := make(chan error, 1)
				go func() { done <- cmd.Wait() }()
				select {
				case <-done:
				case <-time.After(e2eCmdTimeout):
					syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
					<-done
				}
				return cmdResult{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errb.String()}
			}
			// gearman -b exits 0 whatever happened to the job: the queue
			// says whether it got in.
			check(t, c.onLeader(func(l *clusterNode) error {
				before := queued(t, c.gearman(l), "payroll")
				r := lg(l, f("payroll-worker.pem"), f("payroll-worker.key"))
				if got := queued(t, c.gearman(l), "payroll"); r.code != 0 || got != before+1 {
					return fmt.Errorf("libgearman with a certificate: %d payroll jobs queued, %d before: %v", got, before, r)
				}
				return nil
			}))
			l := c.leader()
			before := queued(t, c.gearman(l), "payroll")
			for name, files := range bad {
				if name == "no" {
					continue // libgearman fails on its own without the files
				}
				r := lg(l, files[0], files[1])
				t.Logf("libgearman with %s certificate: %v", name, r)
			}
			if got := queued(t, c.gearman(l), "payroll"); got != before {
				t.Errorf("libgearman with bad certificates: %d payroll jobs queued, %d before", got, before)
			}
		})
	})

	t.Run("admin membership over TLS with a certificate", func(t *testing.T) {
		op := func(l *clusterNode, cmd string) error {
			args := []string{"-cert", f("operator.pem"), "-key", f("operator.key"), "-CAfile", f("nodes-ca.pem"), "-verify_hostname", l.id}
			if got := sClient(t, tlsAddr(l), cmd+"\n", e2eCmdTimeout, args...); got != "OK\r\n" {
				return fmt.Errorf("%s: %q", cmd, got)
			}
			return nil
		}
		var n4 *clusterNode
		for _, n := range c.nodes {
			if n.id == "n4" {
				n4 = n
			}
		}
		check(t, c.onLeader(func(l *clusterNode) error { return op(l, "cluster remove n4") }))
		if m := members(); m != 3 {
			t.Fatalf("%d members after the remove", m)
		}
		check(t, c.onLeader(func(l *clusterNode) error { return op(l, "cluster add n4 "+n4.raftAddr()) }))
		if m := members(); m != 4 {
			t.Fatalf("%d members after the add", m)
		}
	})
}

// check fails the test on err.
func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Error(err)
	}
}

// onLeader runs f with the current leader. When f fails and there was an
// election meanwhile (another leader, or another term), it runs f once
// more with the new leader: a change of leader closes the connections, as
// a restart of a single server does, which is not what f asks about.
func (c *testClusterE2E) onLeader(f func(l *clusterNode) error) error {
	l := c.leader()
	before, _ := clusterStatus(l)
	err := f(l)
	if err == nil {
		return nil
	}
	l2 := c.leader()
	after, _ := clusterStatus(l2)
	if l2 == l && after.Term == before.Term {
		return err
	}
	c.t.Logf("%v: during an election (%s in term %d, then %s in term %d): once more", err, l.id, before.Term, l2.id, after.Term)
	return f(l2)
}

// queued is a function's TOTAL in the admin "status" listing.
func queued(t *testing.T, addr, fn string) int {
	t.Helper()
	st, _ := adminStatus(t, addr)
	return st[fn].queued
}

// libgearmanTLS returns the gearman tool of a libgearman built with TLS,
// from $SWITCHYARD_LIBGEARMAN_TLS (gearmand 1.1.20's source tree, built
// with ./configure --enable-ssl; make bin/gearman), or skips the test
// saying how to get one: Debian's libgearman has no TLS.
func libgearmanTLS(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("SWITCHYARD_LIBGEARMAN_TLS")
	if dir == "" {
		t.Skip("libgearman with TLS: set SWITCHYARD_LIBGEARMAN_TLS to a gearmand 1.1.20 tree built with ./configure --enable-ssl " +
			"and make bin/gearman; .ci/libgearman-tls builds one (Debian's libgearman has no TLS)")
	}
	p := filepath.Join(dir, "bin", "gearman")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("SWITCHYARD_LIBGEARMAN_TLS=%s: %v", dir, err)
	}
	return p
}

// TestE2ECertRotation: a node with mutual TLS between nodes and client
// certificates on its Gearman port, both from one certificate file. Its
// files replaced and SIGHUP sent, a new handshake on either port shows the
// new certificate while a connection made before goes on; a certificate
// naming another node is kept from the cluster; a damaged file is refused,
// said so in the log, and the certificates served stay.
func TestE2ECertRotation(t *testing.T) {
	if isGearmand(t) {
		t.Skip("switchyard's SIGHUP")
	}
	dir := t.TempDir()
	ca, clientCA := tlstest.CA("nodes CA"), tlstest.CA("clients CA")
	writeNode := func(cert *tlstest.Cert) {
		if _, _, err := cert.WriteFiles(dir, "node"); err != nil {
			t.Fatal(err)
		}
	}
	first := ca.Node("n1")
	writeNode(first)
	caFile := writeFile(t, dir, "nodes-ca.pem", string(ca.CertPEM))
	clientCAFile := writeFile(t, dir, "clients-ca.pem", string(clientCA.CertPEM))
	node, key := filepath.Join(dir, "node.pem"), filepath.Join(dir, "node.key")
	n := &clusterNode{id: "n1", dir: t.TempDir()}
	n.args = []string{"--node-id", "n1", "--cluster-listen", "127.0.0.1:0", "--cluster-peers", "n1@127.0.0.1:0",
		"--cluster-tls-cert", node, "--cluster-tls-key", key, "--cluster-tls-ca", caFile,
		"--ssl", "--ssl-certificate", node, "--ssl-key", key, "--ssl-ca-file", clientCAFile, "--ssl-verify-client",
		"-L", "127.0.0.1", "-p", "0", "-l", "stderr", "--data-dir", n.dir, "--metrics-listen", "off", "--periodic-listen", "off",
		"--dwork-listen", "off", "--memodb-listen", "off", "--controller-socket", "off"}
	n.proc = startProcIn(t, n.dir, serverBinary(t), n.args...)
	waitUntil(t, e2eWaitTimeout, "n1 leading", func() (bool, string) { return n.role() == "leader", n.proc.stderr.String() })
	alice := clientCA.Client("alice")
	// The Gearman port, as a client that expects the certificate of name.
	dialJob := func(name string) *tls.Conn {
		t.Helper()
		c, err := tls.Dial("tcp", n.addr("gearman"), &tls.Config{RootCAs: ca.Pool(), ServerName: name,
			Certificates: []tls.Certificate{alice.TLS()}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// The Raft port, as a member (n1 itself) dials it.
	dialRaft := func() *tls.Conn {
		t.Helper()
		c, err := tls.Dial("tcp", n.raftAddr(), &tls.Config{RootCAs: ca.Pool(), ServerName: "n1", MinVersion: tls.VersionTLS13,
			Certificates: []tls.Certificate{ca.Node("n1").TLS()}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	serial := func(c *tls.Conn) string { return c.ConnectionState().PeerCertificates[0].SerialNumber.String() }
	echo := func(g *gearConn, msg string) {
		t.Helper()
		g.send(pEchoReq, msg)
		g.expect(pEchoRes, msg)
	}
	hup := func(want string, count int) {
		t.Helper()
		if err := n.proc.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, e2eWaitTimeout, fmt.Sprintf("%d lines %q", count, want), func() (bool, string) {
			out := n.proc.stderr.String()
			return strings.Count(out, want) == count, out
		})
	}

	oldConn := dialJob("n1")
	old := &gearConn{t: t, c: oldConn, r: bufio.NewReader(oldConn), name: "the connection made first"}
	echo(old, "before")
	if serial(oldConn) != first.Cert.SerialNumber.String() || serial(dialRaft()) != first.Cert.SerialNumber.String() {
		t.Fatal("not the first certificate")
	}

	second := ca.Node("n1")
	writeNode(second)
	hup("SIGHUP: certificates reloaded", 2) // the job ports' files and the cluster's
	if got := serial(dialJob("n1")); got != second.Cert.SerialNumber.String() {
		t.Error("the Gearman port's new handshake does not show the new certificate")
	}
	if got := serial(dialRaft()); got != second.Cert.SerialNumber.String() {
		t.Error("the Raft port's new handshake does not show the new certificate")
	}
	echo(old, "after the reload")

	// A certificate naming another node: the Gearman port takes it, the
	// cluster keeps its own, which the other nodes would not refuse.
	third := ca.Node("n2")
	writeNode(third)
	hup("SIGHUP: certificates reloaded", 3)
	waitUntil(t, e2eWaitTimeout, "the cluster's refusal", func() (bool, string) {
		out := n.proc.stderr.String()
		return strings.Count(out, "SIGHUP: cannot reload the certificates") == 1 && strings.Contains(out, "not this node"), out
	})
	if got := serial(dialJob("n2")); got != third.Cert.SerialNumber.String() {
		t.Error("the Gearman port does not serve the certificate reloaded")
	}
	if got := serial(dialRaft()); got != second.Cert.SerialNumber.String() {
		t.Error("the Raft port took a certificate that names another node")
	}

	if err := os.WriteFile(node, []byte("-----BEGIN CERTIFICATE-----\nhalf written\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hup("SIGHUP: cannot reload the certificates: the ones loaded before stay in use", 3)
	if got := serial(dialJob("n2")); got != third.Cert.SerialNumber.String() {
		t.Error("after a damaged file, the Gearman port serves another certificate")
	}
	if got := serial(dialRaft()); got != second.Cert.SerialNumber.String() {
		t.Error("after a damaged file, the Raft port serves another certificate")
	}
	echo(old, "after the damaged file")
	if !n.proc.running() {
		t.Fatal("the node stopped")
	}
}

// TestE2EClusterSecureByDefault: a node that would listen for its peers
// beyond loopback without certificates does not start, and names both
// ways on; a loopback one starts without them.
func TestE2EClusterSecureByDefault(t *testing.T) {
	if isGearmand(t) {
		t.Skip("a switchyard cluster")
	}
	bin := serverBinary(t)
	common := []string{"--node-id", "n1", "-L", "127.0.0.1", "-p", "0", "-l", "stderr", "--metrics-listen", "off",
		"--periodic-listen", "off", "--dwork-listen", "off", "--memodb-listen", "off", "--controller-socket", "off"}
	r := runCmd(t, e2eCmdTimeout, "", bin, append(common, "--cluster-listen", "192.0.2.1:7000", "--data-dir", t.TempDir())...)
	if r.code != 1 || !strings.Contains(r.stderr, "is not a loopback address") ||
		!strings.Contains(r.stderr, "--cluster-tls-cert, --cluster-tls-key and --cluster-tls-ca") || !strings.Contains(r.stderr, "--cluster-insecure") {
		t.Fatalf("a non-loopback node without certificates: %v", r)
	}
	n := &clusterNode{id: "n1", dir: t.TempDir()}
	n.proc = startProcIn(t, n.dir, bin, append(common, "--cluster-listen", "127.0.0.1:0", "--cluster-peers", "n1@127.0.0.1:0", "--data-dir", n.dir)...)
	waitUntil(t, e2eWaitTimeout, "the loopback node leading", func() (bool, string) { return n.role() == "leader", n.proc.stderr.String() })
}

// TestE2EHTTPClientCertificates: the HTTP port with --http-ssl and
// --ssl-verify-client, driven by curl: a client certificate of the client
// CA submits a background job; none, another CA's or an expired one gets
// no answer and queues nothing.
func TestE2EHTTPClientCertificates(t *testing.T) {
	t.Parallel()
	if isGearmand(t) {
		t.Skip("gearmand's HTTP module has no TLS")
	}
	curl := requireTool(t, "curl")
	dir := t.TempDir()
	ca, clientCA, otherCA := tlstest.CA("server CA"), tlstest.CA("client CA"), tlstest.CA("other CA")
	serverCert, serverKey, err := ca.Issue("switchyard", false).WriteFiles(dir, "server")
	if err != nil {
		t.Fatal(err)
	}
	caFile := writeFile(t, dir, "ca.pem", string(ca.CertPEM))
	srv, others := startServerPorts(t, 2, "-r", "http", "--http-port", "0", "--http-ssl", "--ssl-certificate", serverCert,
		"--ssl-key", serverKey, "--ssl-ca-file", writeFile(t, dir, "clients-ca.pem", string(clientCA.CertPEM)), "--ssl-verify-client")
	url := "https://" + others[0] + "/payroll"
	post := func(c *tlstest.Cert) cmdResult {
		args := []string{"-sS", "-D", "-", "-o", "/dev/null", "--cacert", caFile, "-H", "X-Gearman-Background: true", "-d", "march", url}
		if c != nil {
			certFile, keyFile, err := c.WriteFiles(t.TempDir(), "client")
			if err != nil {
				t.Fatal(err)
			}
			args = append([]string{"--cert", certFile, "--key", keyFile}, args...)
		}
		return runCmd(t, e2eCmdTimeout, "", curl, args...)
	}
	for name, c := range map[string]*tlstest.Cert{"no": nil, "another CA's": otherCA.Client("mallory"),
		"an expired": clientCA.Expired(clientCA.Client("payroll"))} {
		if r := post(c); r.code == 0 {
			t.Errorf("curl with %s certificate: %v", name, r)
		}
	}
	if st, raw := adminStatus(t, srv.addr); st["payroll"].queued != 0 {
		t.Fatalf("a refused client queued a job:\n%s", raw)
	}
	if r := post(clientCA.Client("payroll")); r.code != 0 || !strings.Contains(r.stdout, "X-Gearman-Command: JOB_CREATED") {
		t.Fatalf("curl with a certificate: %v", r)
	}
	if st, raw := adminStatus(t, srv.addr); st["payroll"].queued != 1 {
		t.Fatalf("the job is not queued:\n%s", raw)
	}
}
