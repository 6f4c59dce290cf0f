package main

import (
	"runtime"
	"strings"
	"testing"
)

func TestVersionLine(t *testing.T) {
	got := versionLine()
	for _, want := range []string{"switchyard " + version + " ", "(commit ", runtime.Version(), "gearmand 1.1.20 compatible"} {
		if !strings.Contains(got, want) {
			t.Errorf("versionLine() = %q, want it to contain %q", got, want)
		}
	}
	if strings.ContainsAny(version, " \t\n") || version == "" {
		t.Errorf("version %q: the admin port answers it as one word", version)
	}
}
