package main

import (
	"runtime"
	"runtime/debug"
	"sync"
)

// version is switchyard's release. The Makefile's VERSION reads it from
// here, and a build may replace it (go build -ldflags "-X main.version=V").
// The admin port's "version" answers it, one word, as gearmand answers its.
var version = "0.2.0"

// revision is the git commit the binary was built from, "+dirty" if the
// tree had changes: make build stamps it (-ldflags "-X
// main.revision=..."); else the go command's own stamp, if any, is used.
var revision string

// buildInfo is what -V, the status page and switchyard_build_info report
// about this binary.
type buildInfo struct {
	Version   string // the release, version above
	Revision  string // the git commit it was built from, "+dirty" if the tree had changes; "unknown" outside git
	GoVersion string
}

var readBuild = sync.OnceValue(func() buildInfo {
	b := buildInfo{Version: version, Revision: "unknown", GoVersion: runtime.Version()}
	if revision != "" {
		b.Revision = revision
		return b
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	var rev string
	var dirty bool
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev != "" {
		b.Revision = rev
		if dirty {
			b.Revision += "+dirty"
		}
	}
	return b
})

// versionLine is -V's answer.
func versionLine() string {
	b := readBuild()
	return "switchyard " + b.Version + " (commit " + b.Revision + ", " + b.GoVersion + "; gearmand 1.1.20 compatible)"
}
