package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

// The units: Debian's gearman-job-server's, for switchyard (in place), and
// switchyard's own, the package's, with make install's @sbindir@ and
// @sysconfdir@ in it.
const (
	inPlaceUnit = "../../packaging/gearman-job-server/switchyard.service"
	ownUnit     = "../../packaging/switchyard.service.in"
)

func readUnit(t *testing.T) string { return readFile(t, inPlaceUnit) }

// readOwnUnit is switchyard.service as the Debian package installs it.
func readOwnUnit(t *testing.T) string {
	return strings.NewReplacer("@sbindir@", "/usr/sbin", "@sysconfdir@", "/etc").Replace(readFile(t, ownUnit))
}

// unitValues returns every value of key in the unit, in order.
func unitValues(unit, key string) []string {
	var vals []string
	for _, line := range strings.Split(unit, "\n") {
		if v, ok := strings.CutPrefix(line, key+"="); ok {
			vals = append(vals, v)
		}
	}
	return vals
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
	if words[0] != "/usr/local/sbin/switchyard" {
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
// the switchyard under test in place of /usr/local/sbin/switchyard, and
// that binary takes the unit's command line (--check-args).
func TestE2EServiceUnitVerify(t *testing.T) {
	t.Parallel()
	if isGearmand(t) {
		t.Skip("switchyard's unit")
	}
	bin := serverBinary(t)
	unit := strings.ReplaceAll(readUnit(t), "/usr/local/sbin/switchyard", bin)
	words := unitExecStart(t, unit, envFile(debianDefaults))
	mustRun(t, "", words[0], append([]string{"--check-args"}, words[1:]...)...)
	verifyUnit(t, unit)
}

// verifyUnit runs systemd-analyze verify on a unit and fails on anything it
// says; it returns the unit's path. The unit's man: link is looked up in
// the committed man page, so that verify does not need it installed.
func verifyUnit(t *testing.T, unit string) string {
	t.Helper()
	analyze := requireTool(t, "systemd-analyze")
	dir := t.TempDir()
	path := filepath.Join(dir, "switchyard.service")
	if err := os.WriteFile(path, []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	man := filepath.Join(dir, "man")
	if err := os.MkdirAll(filepath.Join(man, "man8"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(man, "man8", "switchyard.8"), []byte(readFile(t, manPath)), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(analyze, "verify", path)
	// ":" keeps the system's man pages (gearmand(8)) after ours.
	cmd.Env = append(os.Environ(), "MANPATH="+man+":")
	out, err := cmd.CombinedOutput()
	// verify exits 0 on an unknown key or a bad value, and says so.
	if err != nil || len(out) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	return path
}

// The package's unit, with the package's /etc/default/switchyard, is a
// command line switchyard accepts that means a daemon on the loopback
// addresses, with its data, log and pid file in the directories the unit
// has systemd make; the logrotate file and the man page name the same
// paths.
func TestPackageUnitCommandLine(t *testing.T) {
	isolate(t)
	unit := readOwnUnit(t)
	if got := unitValues(unit, "EnvironmentFile"); !slices.Equal(got, []string{"-" + pkgDefaultsFile}) {
		t.Fatalf("EnvironmentFile=%q", got)
	}
	words := unitExecStart(t, unit, envFile(readFile(t, "../../packaging/default")))
	if words[0] != "/usr/sbin/switchyard" {
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
		w.Listen, w.Daemon, w.LogFile = "localhost", true, pkgLogFile
		w.PidFile, w.DataDir = pkgPidFile, pkgDataDir
	})())
	for key, val := range map[string]string{
		"User": "switchyard", "Group": "switchyard", "Type": "forking", "PIDFile": pkgPidFile,
		"Conflicts":     "gearman-job-server.service",
		"Documentation": "man:switchyard(8)",
		// The directories of the data, the log and the pid file.
		"StateDirectory": filepath.Base(pkgDataDir), "LogsDirectory": filepath.Base(filepath.Dir(pkgLogFile)),
		"RuntimeDirectory": filepath.Base(filepath.Dir(pkgPidFile)),
	} {
		if got := unitValues(unit, key); !slices.Equal(got, []string{val}) {
			t.Errorf("%s=%q, want %q", key, got, val)
		}
	}
	if filepath.Dir(pkgDataDir) != "/var/lib" || filepath.Dir(filepath.Dir(pkgLogFile)) != "/var/log" ||
		filepath.Dir(filepath.Dir(pkgPidFile)) != "/run" || filepath.Dir(defaultControllerSocket) != filepath.Dir(pkgPidFile) {
		t.Errorf("the paths are not in the unit's directories: %s %s %s %s", pkgDataDir, pkgLogFile, pkgPidFile, defaultControllerSocket)
	}
	rotate := readFile(t, "../../packaging/logrotate")
	if !strings.Contains(rotate, "\n"+filepath.Dir(pkgLogFile)+"/*.log {\n") ||
		!strings.Contains(rotate, `kill -HUP "$(cat `+pkgPidFile+`)"`) {
		t.Errorf("the logrotate file does not rotate %s and signal the pid in %s:\n%s", pkgLogFile, pkgPidFile, rotate)
	}
}

// systemd-analyze verify finds nothing to say about the package's unit,
// the built binary takes its command line, and its hardening keeps
// systemd-analyze security's exposure at 1.2 or lower (9.2 without it).
func TestE2EPackageUnitVerify(t *testing.T) {
	t.Parallel()
	if isGearmand(t) {
		t.Skip("switchyard's unit")
	}
	bin := serverBinary(t)
	unit := strings.ReplaceAll(readOwnUnit(t), "/usr/sbin/switchyard", bin)
	words := unitExecStart(t, unit, envFile(readFile(t, "../../packaging/default")))
	mustRun(t, "", words[0], append([]string{"--check-args"}, words[1:]...)...)
	path := verifyUnit(t, unit)
	// --threshold is in tenths: it fails above 1.2.
	r := runCmd(t, e2eCmdTimeout, "", "systemd-analyze", "security", "--offline=true", "--threshold=12", path)
	if r.code != 0 {
		t.Fatalf("systemd-analyze security: %s", r)
	}
	if !strings.Contains(r.stdout, "Overall exposure level for switchyard.service: 1.") {
		t.Errorf("systemd-analyze security: %s", r)
	}
}
