package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// debianDefaults is /etc/default/gearman-job-server as Debian's
// gearman-job-server 1.1.20 installs it (its comments left out): the
// PARAMS switchyard.service passes on.
const debianDefaults = `# Parameters to pass to gearmand.
PARAMS="--listen=localhost \
 --daemon \
 --log-file=/var/log/gearman-job-server/gearmand.log"
`

// envFile reads an EnvironmentFile as systemd does, as far as Debian's
// needs: comments, KEY=VALUE, double quotes, a backslash that continues
// the line.
func envFile(text string) map[string]string {
	text = strings.ReplaceAll(text, "\\\n", "")
	env := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		env[strings.TrimSpace(k)] = strings.Trim(strings.TrimSpace(v), `"`)
	}
	return env
}

// unitExecStart returns the unit's ExecStart command line, $VARs expanded
// from env and split into words as systemd splits an unquoted $VAR.
func unitExecStart(t *testing.T, unit string, env map[string]string) []string {
	t.Helper()
	for _, line := range strings.Split(unit, "\n") {
		cmd, ok := strings.CutPrefix(line, "ExecStart=")
		if !ok {
			continue
		}
		var words []string
		for _, w := range strings.Fields(cmd) {
			if name, ok := strings.CutPrefix(w, "$"); ok {
				words = append(words, strings.Fields(env[name])...)
				continue
			}
			words = append(words, w)
		}
		return words
	}
	t.Fatal("no ExecStart in switchyard.service")
	return nil
}

func readUnit(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("switchyard.service")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// switchyard.service with Debian's PARAMS is a command line switchyard
// accepts, and means what Debian's unit means: localhost, a daemon, its
// log file and pid file, and a data directory the service owns.
func TestServiceUnitCommandLine(t *testing.T) {
	isolate(t)
	unit := readUnit(t)
	if !strings.Contains(unit, "EnvironmentFile=-/etc/default/gearman-job-server\n") {
		t.Fatal("the unit does not read Debian's /etc/default/gearman-job-server")
	}
	words := unitExecStart(t, unit, envFile(debianDefaults))
	if words[0] != "/usr/local/bin/switchyard" {
		t.Fatalf("ExecStart runs %s", words[0])
	}
	o, err := parseArgs(words[1:], envOf(nil))
	if err != nil {
		t.Fatalf("%q: %v", words[1:], err)
	}
	if len(o.Warnings) > 0 {
		t.Errorf("warnings: %q", o.Warnings)
	}
	checkOptions(t, o, want(func(w *options) {
		w.ConfigFile = o.ConfigFile // isolate's
		w.Listen, w.Daemon, w.LogFile = "localhost", true, "/var/log/gearman-job-server/gearmand.log"
		w.PidFile, w.DataDir = "/run/gearman/gearmand.pid", "/var/lib/switchyard"
	})())
	for _, line := range []string{"User=gearman", "Type=forking", "PIDFile=/run/gearman/gearmand.pid", "StateDirectory=switchyard"} {
		if !strings.Contains(unit, "\n"+line+"\n") {
			t.Errorf("the unit has no %s", line)
		}
	}
}

// systemd-analyze verify finds nothing to say about the unit, run with
// the switchyard under test in place of /usr/local/bin/switchyard, and
// that binary takes the unit's command line (--check-args).
func TestE2EServiceUnitVerify(t *testing.T) {
	t.Parallel()
	if isGearmand(t) {
		t.Skip("switchyard's unit")
	}
	bin := serverBinary(t)
	unit := strings.ReplaceAll(readUnit(t), "/usr/local/bin/switchyard", bin)
	words := unitExecStart(t, unit, envFile(debianDefaults))
	mustRun(t, "", words[0], append([]string{"--check-args"}, words[1:]...)...)

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("no systemd-analyze: the command line is checked, the unit is not")
	}
	path := filepath.Join(t.TempDir(), "switchyard.service")
	if err := os.WriteFile(path, []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runCmd(t, e2eCmdTimeout, "", analyze, "verify", path)
	// verify exits 0 on an unknown key or a bad value, and says so.
	if r.code != 0 || r.stdout != "" || r.stderr != "" {
		t.Fatalf("systemd-analyze verify: %s", r)
	}
}
