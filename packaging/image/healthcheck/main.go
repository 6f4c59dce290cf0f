// Command switchyard-healthcheck is the container image's health check:
// the image has no shell and no curl, so a runtime's health command
// (podman run --health-cmd, Docker's HEALTHCHECK) runs this. It asks
// switchyard's /healthz and exits 0 when the answer is 200 ("ok": the
// stored jobs are loaded and every listener is open), 1 otherwise, saying
// why on stderr.
//
//	switchyard-healthcheck [http://HOST:PORT/PATH]
//
// The default is http://127.0.0.1:9418/healthz, the metrics endpoints'
// port. It speaks just enough HTTP/1.0 for that, without net/http, to keep
// the image small.
package main

import (
	"bufio"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"
)

const (
	defaultURL = "http://127.0.0.1:9418/healthz"
	timeout    = 3 * time.Second
)

func main() {
	target := defaultURL
	if len(os.Args) > 2 {
		fmt.Fprintln(os.Stderr, "usage: switchyard-healthcheck [http://HOST:PORT/PATH]")
		os.Exit(2)
	}
	if len(os.Args) == 2 {
		target = os.Args[1]
	}
	status, err := check(target, timeout)
	if err != nil {
		fmt.Fprintf(os.Stderr, "switchyard-healthcheck: %s: %v\n", target, err)
		os.Exit(1)
	}
	fmt.Println(status)
}

// check GETs target and returns its status line if the status is 200.
func check(target string, timeout time.Duration) (string, error) {
	u, err := url.Parse(target)
	if err != nil {
		return "", err
	}
	if u.Scheme != "http" || u.Host == "" {
		return "", fmt.Errorf("want http://HOST:PORT/PATH")
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "80")
	}
	conn, err := net.DialTimeout("tcp", host, timeout)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(timeout))
	path := u.RequestURI()
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.0\r\nHost: %s\r\nUser-Agent: switchyard-healthcheck\r\n\r\n", path, u.Host); err != nil {
		return "", err
	}
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("no answer: %v", err)
	}
	line = strings.TrimRight(line, "\r\n")
	// "HTTP/1.1 200 OK"
	proto, rest, _ := strings.Cut(line, " ")
	code, _, _ := strings.Cut(rest, " ")
	if !strings.HasPrefix(proto, "HTTP/") {
		return "", fmt.Errorf("not an HTTP answer: %q", line)
	}
	// The body says why ("starting", "stopping"); it follows the headers.
	var body string
	for {
		h, err := r.ReadString('\n')
		if err != nil || strings.TrimRight(h, "\r\n") == "" {
			break
		}
	}
	if b, err := r.ReadString('\n'); err == nil || b != "" {
		body = strings.TrimSpace(b)
	}
	if code != "200" {
		return "", fmt.Errorf("%s (%s)", line, body)
	}
	return line + " " + body, nil
}
