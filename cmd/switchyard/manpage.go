package main

// switchyard(8), in roff, written from optTable as --help is: an option, its
// default and its description are written once, in flags.go, and the man
// page and the help cannot drift apart. docs/switchyard.8 is this output;
// TestManPage fails when it is stale, and "make man" rewrites it.

import (
	"fmt"
	"io"
	"strings"
)

// Where the packaged service keeps things (packaging/: the unit, the
// defaults file, the logrotate file); the man page names them in FILES.
const (
	pkgDefaultsFile  = "/etc/default/switchyard"
	pkgUnitFile      = "/lib/systemd/system/switchyard.service"
	pkgLogrotateFile = "/etc/logrotate.d/switchyard"
	pkgDataDir       = "/var/lib/switchyard"
	pkgLogFile       = "/var/log/switchyard/switchyard.log"
	pkgPidFile       = "/run/switchyard/switchyard.pid"
)

// writeManPage writes switchyard(8).
func writeManPage(w io.Writer) error {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }

	p(`.\" Generated from cmd/switchyard's option table by "make man"; do not edit.`)
	p(`.TH SWITCHYARD 8 "" "switchyard %s" "System Manager's Manual"`, version)
	// Option names and paths are searched for and copied: no hyphenation,
	// and lines left-aligned rather than stretched around long words.
	p(".nh")
	p(".ad l")

	p(".SH NAME")
	p(`switchyard \- job broker, a drop\-in replacement for gearmand`)

	p(".SH SYNOPSIS")
	p(".B switchyard")
	p(`.RI [ options ]`)
	p(`.RB [ @\fIfile\fP ]`)

	p(".SH DESCRIPTION")
	p("%s", roffText("switchyard is a job broker: clients hand it jobs, workers take them, results flow back. "+
		"It speaks the Gearman protocol, binary and text admin, as gearmand 1.1.20 (Debian's gearman-job-server) does, "+
		"on TCP port "+defaultPort+", and takes gearmand's command line and configuration file, "+
		"so gearmand's clients, workers, gearman(1), gearadmin(1) and init files work with it unchanged."))
	p(".PP")
	p("%s", roffText("The same scheduler also serves, unless turned off: "+
		"Periodic on TCP port "+defaultPeriodicPort+" (--periodic-listen), "+
		"the Worker-Controller protocol on the unix socket "+defaultControllerSocket+" (--controller-socket), "+
		"dwork's hub (ZeroMQ) on TCP port "+defaultDworkPort+" (--dwork-listen), "+
		"the MemoDB broker protocol (NNG) on TCP port "+defaultMemodbPort+" (--memodb-listen), "+
		"and gearmand's HTTP protocol with -r http on port "+defaultHTTPPort+" (--http-port), "+
		"each on the address of -L (MemoDB on 127.0.0.1 when -L is not given); "+
		"and metrics, a health check (/healthz) and a status page over HTTP on "+defaultMetricsListen+" (--metrics-listen). "+
		"A default port that is taken turns its protocol off, with a notice in the log; an address given explicitly must work. "+
		"A job submitted over any protocol may be run by a worker of any other."))
	p(".PP")
	p("%s", roffText("Background jobs are kept on disk in --data-dir (-q durable, the default) and survive a restart or a crash. "+
		"-q builtin keeps them in memory only, as gearmand's builtin queue; "+
		"-q libsqlite3 uses gearmand's SQLite queue file."))
	p(".PP")
	p("%s", roffText("Options are read from the command line, then from the configuration file (--config-file, or @file), "+
		"which holds options written as on the command line, separated by spaces or newlines; "+
		"the command line wins. An option may be given once, except those that say they may be repeated. "+
		"An unknown option or a bad value is an error, in gearmand's words."))

	p(".SH OPTIONS")
	for _, g := range groupOrder {
		p(".SS %s", roffQuote(g))
		for _, d := range optTable {
			if d.group != g || d.hidden {
				continue
			}
			p(".TP")
			p("%s", manOptionHead(d))
			text := d.help
			if d.dflt != "" && !strings.Contains(text, "Default") {
				text = strings.TrimSpace(text) + " Default: " + d.dflt + "."
			}
			p("%s", roffText(text))
		}
	}

	p(".SH SIGNALS")
	for _, s := range [][2]string{
		{"SIGHUP", "Reopens the log file (--log-file), so that logrotate(8) may move it away; logs that it did. Also reads every certificate, key and CA file again (--ssl-certificate, --ssl-key, --ssl-ca-file, --cluster-tls-cert, --cluster-tls-key, --cluster-tls-ca): new TLS handshakes use them, connections already open keep theirs, and a file that fails to load leaves the ones loaded before in use, with an error in the log. The server goes on; SIGHUP never stops it."},
		{"SIGTERM, SIGINT", "Stop accepting connections, write what is pending, remove the pid file (--pid-file) and exit 0, at once, as gearmand does. Jobs still queued stay in the durable queue for the next start."},
		{"SIGUSR1, SIGUSR2", "Ignored, as by Debian's gearmand."},
	} {
		p(".TP")
		p(".B %s", s[0])
		p("%s", roffText(s[1]))
	}

	p(".SH FILES")
	for _, f := range [][2]string{
		{defaultConfigFile, "The default configuration file (--config-file), read if it exists."},
		{pkgDefaultsFile, "The packaged service's options: SWITCHYARD_OPTS is added to its command line."},
		{pkgUnitFile, "The packaged systemd unit."},
		{pkgDataDir, "The packaged service's data directory (--data-dir): the durable queue."},
		{pkgLogFile, "The packaged service's log file (--log-file)."},
		{pkgPidFile, "The packaged service's pid file (--pid-file)."},
		{defaultControllerSocket, "The Worker-Controller protocol's main socket (--controller-socket); the workers' sockets go beside it."},
		{pkgLogrotateFile, "Rotates the log file and sends SIGHUP to the process in the pid file."},
	} {
		p(".TP")
		p(".I %s", f[0])
		p("%s", roffText(f[1]))
	}

	p(".SH EXIT STATUS")
	p("%s", roffText("0 after a clean stop (SIGTERM, SIGINT, or the admin command shutdown with --admin-shutdown), "+
		"and after -h or -V. "+
		"1 when the command line or the configuration file is wrong, or when the server cannot start "+
		"(a port or address given explicitly that cannot be bound, a data directory held by another switchyard, "+
		"a TLS file that cannot be loaded). With -d, the parent exits with the child's status once the child listens, or fails to."))

	p(".SH SEE ALSO")
	p(".BR gearmand (8),")
	p(".BR gearman (1),")
	p(".BR gearadmin (1),")
	p(".BR logrotate (8),")
	p(".BR systemd.exec (5)")

	_, err := io.WriteString(w, b.String())
	return err
}

// manOptionHead is an option's .TP tag: "\fB\-b\fR, \fB\-\-backlog\fR=\fIarg\fR".
func manOptionHead(d *optDef) string {
	var b strings.Builder
	if d.short != 0 {
		fmt.Fprintf(&b, `\fB\-%c\fR, `, d.short)
	}
	fmt.Fprintf(&b, `\fB\-\-%s\fR`, roffDashes(d.long))
	if d.value {
		b.WriteString(`=\fIarg\fR`)
	}
	return b.String()
}

// roffText makes one line of text safe as a roff text line: backslashes
// escaped, the dashes of a word that starts with one (an option, a negative
// number) made minus signs, which can be searched for and copied and where
// a line does not break, and a leading '.' or '\” kept from being read as
// a request.
func roffText(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	var b strings.Builder
	option := false // in a word that starts with a dash: all its dashes are minus signs
	for i := 0; i < len(s); i++ {
		c := s[i]
		wordStart := i == 0 || strings.IndexByte(" ('\"/=[", s[i-1]) >= 0
		switch {
		case c == '-' && wordStart:
			option = true
		case c == ' ' || c == ')' || c == ',':
			option = false
		}
		if c == '-' && option {
			b.WriteString(`\-`)
			continue
		}
		b.WriteByte(c)
	}
	out := b.String()
	if strings.HasPrefix(out, ".") || strings.HasPrefix(out, "'") {
		out = `\&` + out
	}
	return out
}

// roffDashes escapes every dash of an option name.
func roffDashes(s string) string { return strings.ReplaceAll(s, "-", `\-`) }

// roffQuote quotes a macro argument that may hold spaces.
func roffQuote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
