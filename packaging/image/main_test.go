package main

import (
	"archive/tar"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// buildTest builds an image from small stand-in binaries and reads it back
// from its tarball, as a runtime's load would.
func buildTest(t *testing.T) (v1.Image, options) {
	t.Helper()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	o := options{
		switchyard:  write("switchyard", "switchyard binary"),
		healthcheck: write("healthcheck", "healthcheck binary"),
		license:     write("LICENSE", "BSD-3-Clause text"),
		version:     "9.8.7",
		revision:    "0123456789abcdef",
		source:      "https://example.invalid/switchyard",
		arch:        "amd64",
		tag:         "localhost/switchyard:9.8.7",
		out:         filepath.Join(dir, "image.tar"),
		created:     time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
	}
	if err := build(o); err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(o.out, nil)
	if err != nil {
		t.Fatal(err)
	}
	return img, o
}

// The configuration: switchyard as uid 65532 in its volume, the default
// ports exposed, the labels, the health check.
func TestImageConfig(t *testing.T) {
	img, o := buildTest(t)
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if cf.OS != "linux" || cf.Architecture != "amd64" || !cf.Created.Time.Equal(o.created) {
		t.Errorf("os %q arch %q created %v", cf.OS, cf.Architecture, cf.Created)
	}
	if c.User != "65532:65532" || !slices.Equal(c.Entrypoint, []string{"/usr/sbin/switchyard"}) || len(c.Cmd) != 0 ||
		c.WorkingDir != "/var/lib/switchyard" || c.StopSignal != "SIGTERM" {
		t.Errorf("user %q entrypoint %q cmd %q workdir %q stop %q", c.User, c.Entrypoint, c.Cmd, c.WorkingDir, c.StopSignal)
	}
	if got := slices.Sorted(maps.Keys(c.Volumes)); !slices.Equal(got, []string{"/var/lib/switchyard"}) {
		t.Errorf("volumes %q", got)
	}
	if got := slices.Sorted(maps.Keys(c.ExposedPorts)); !slices.Equal(got, []string{"12703/tcp", "4730/tcp", "5000/tcp", "6125/tcp", "9418/tcp"}) {
		t.Errorf("exposed ports %q", got)
	}
	for k, v := range map[string]string{
		"org.opencontainers.image.version":  "9.8.7",
		"org.opencontainers.image.revision": "0123456789abcdef",
		"org.opencontainers.image.source":   "https://example.invalid/switchyard",
		"org.opencontainers.image.licenses": "BSD-3-Clause",
		"org.opencontainers.image.created":  "2026-01-02T03:04:05Z",
	} {
		if c.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, c.Labels[k], v)
		}
	}
	if h := c.Healthcheck; h == nil || !slices.Equal(h.Test, []string{"CMD", "/usr/bin/switchyard-healthcheck"}) || h.Interval == 0 {
		t.Errorf("health check %+v", h)
	}
}

// The layer's files: owners, modes and contents, every parent directory.
func TestImageFiles(t *testing.T) {
	img, o := buildTest(t)
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%d layers, %v", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	type file struct {
		mode     int64
		uid, gid int
		dir      bool
		body     string
	}
	got := map[string]file{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		name := "/" + strings.TrimSuffix(h.Name, "/")
		if dir := filepath.Dir(name); dir != "/" {
			if _, ok := got[dir]; !ok {
				t.Errorf("%s comes before its directory", name)
			}
		}
		if !h.ModTime.Equal(o.created) {
			t.Errorf("%s: time %v", name, h.ModTime)
		}
		got[name] = file{h.Mode, h.Uid, h.Gid, h.Typeflag == tar.TypeDir, string(b)}
	}
	want := map[string]file{
		"/usr/sbin/switchyard":                {0o755, 0, 0, false, "switchyard binary"},
		"/usr/bin/switchyard-healthcheck":     {0o755, 0, 0, false, "healthcheck binary"},
		"/usr/share/doc/switchyard/copyright": {0o644, 0, 0, false, "BSD-3-Clause text"},
		"/var/lib/switchyard":                 {0o750, 65532, 65532, true, ""},
		"/run/switchyard":                     {0o755, 65532, 65532, true, ""},
		"/tmp":                                {0o1777, 0, 0, true, ""},
		"/etc/passwd": {0o644, 0, 0, false, "root:x:0:0:root:/root:/sbin/nologin\n" +
			"switchyard:x:65532:65532:switchyard:/var/lib/switchyard:/sbin/nologin\n"},
		"/etc/group":         {0o644, 0, 0, false, "root:x:0:\nswitchyard:x:65532:\n"},
		"/etc/nsswitch.conf": {0o644, 0, 0, false, "hosts: files dns\n"},
		"/etc/gearmand.conf": {0o644, 0, 0, false, containerDefaults},
		"/usr":               {0o755, 0, 0, true, ""},
		"/var/lib":           {0o755, 0, 0, true, ""},
	}
	for name, w := range want {
		if g, ok := got[name]; !ok || g != w {
			t.Errorf("%s: %+v, want %+v", name, g, w)
		}
	}
	for name, g := range got {
		if g.uid != 0 && !strings.HasPrefix(name, "/var/lib/switchyard") && !strings.HasPrefix(name, "/run/switchyard") {
			t.Errorf("%s is not root's", name)
		}
	}
}

// The container defaults put the queue in the volume, the log on stderr and
// every listener, the metrics' too, on every address; nothing else.
func TestContainerDefaults(t *testing.T) {
	var opts []string
	for _, line := range strings.Split(containerDefaults, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			if strings.Contains(line, "-") {
				t.Errorf("a comment line with a dash, which gearmand's format may read as an option: %q", line)
			}
			continue
		}
		opts = append(opts, line)
	}
	want := []string{"--listen=0.0.0.0", "--metrics-listen=0.0.0.0:9418", "--data-dir=/var/lib/switchyard", "--log-file=stderr"}
	if !slices.Equal(opts, want) {
		t.Errorf("%q, want %q", opts, want)
	}
}

// The same inputs make the same image.
func TestImageReproducible(t *testing.T) {
	a, _ := buildTest(t)
	b, _ := buildTest(t)
	da, err := a.Digest()
	if err != nil {
		t.Fatal(err)
	}
	db, err := b.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if da != db {
		t.Errorf("two builds: %s and %s", da, db)
	}
}
