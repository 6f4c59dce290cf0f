package main

import (
	"path/filepath"
	"testing"
)

// TestE2EBadArgs: a bad command line exits 1 with gearmand's message, as
// gearmand 1.1.20 does (libtest's t/gearmand checks the status). Run with
// SWITCHYARD_BIN=gearmand it checks gearmand itself.
func TestE2EBadArgs(t *testing.T) {
	bin := serverBinary(t)
	missing := filepath.Join(t.TempDir(), "absent.conf")
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--bad-option"}, "unrecognised option '--bad-option'"},
		{[]string{"foo"}, "unrecognised option 'foo'"},
		{[]string{"--log"}, "unrecognised option '--log'"},
		{[]string{"--check-args", "-vvv"}, "unrecognised option '-vvv'"},
		{[]string{"--verbose=BAD"}, "Invalid value for --verbose supplied"},
		{[]string{"--config-file"}, "the required argument for option '--config-file' is missing"},
		{[]string{"--config-file=" + missing}, "Could not open configuration file."},
	} {
		args := append(tc.args, "-L", "127.0.0.1", "-p", "0", "-l", "stderr", "--pid-file", filepath.Join(t.TempDir(), "pid"))
		r := runCmd(t, e2eCmdTimeout, "", bin, args...)
		if want := bin + ": " + tc.msg + "\n"; r.code != 1 || r.stderr != want || r.stdout != "" {
			t.Errorf("%q: %v\nwant exit 1, stderr %q", tc.args, r, want)
		}
	}
}
