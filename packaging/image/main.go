// Command image builds switchyard's container image without a container
// daemon, with go-containerregistry: one layer FROM scratch holding the
// static binary, a health check program, a non-root user and the
// directories it writes to, and a configuration that runs switchyard with
// container defaults. It writes a docker-archive tarball, which
// "podman load" and "docker load" read.
//
// It is a module of its own so that go-containerregistry, a build tool,
// stays out of the server's go.mod (as nfpm does: make deb runs it with
// go run at a fixed version).
//
//	go run . -switchyard BIN -healthcheck BIN -version V -revision R -o OUT.tar
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The image's user, as distroless's "nonroot": not root, and no user of
// the host's by accident.
const (
	uid      = 65532
	userName = "switchyard"
)

// Paths in the image.
const (
	binPath         = "/usr/sbin/switchyard"
	healthcheckPath = "/usr/bin/switchyard-healthcheck"
	dataDir         = "/var/lib/switchyard"
	runDir          = "/run/switchyard" // the Worker-Controller socket's default directory
	configPath      = "/etc/gearmand.conf"
	metricsPort     = "9418"
)

// containerDefaults is /etc/gearmand.conf, the configuration file
// switchyard reads when --config-file is not given. Options given on the
// command line (podman run IMAGE --verbose INFO ...) win over it, option
// by option, which an ENTRYPOINT's arguments would not: switchyard, like
// gearmand, refuses an option given twice.
//   - every protocol on every IPv4 address of the container (-L): a
//     container is reached through its own network;
//   - the metrics endpoints too, for /healthz probes from outside (their
//     default is 127.0.0.1);
//   - the queue in the volume, the log on stderr.
//
// '#' does not start a comment in this format: the comment line holds no
// word that looks like an option.
var containerDefaults = "# switchyard's defaults in this image; the command line wins, option by option.\n" +
	"--listen=0.0.0.0\n" +
	"--metrics-listen=0.0.0.0:" + metricsPort + "\n" +
	"--data-dir=" + dataDir + "\n" +
	"--log-file=stderr\n"

// exposedPorts are the TCP ports switchyard listens on by default: Gearman,
// Periodic, dwork, MemoDB, and the metrics (/healthz).
var exposedPorts = []string{"4730", "5000", "6125", "12703", metricsPort}

type options struct {
	switchyard, healthcheck, license string
	version, revision, source, arch  string
	tag, out                         string
	created                          time.Time
}

func main() {
	var o options
	var created string
	flag.StringVar(&o.switchyard, "switchyard", "bin/switchyard", "the static switchyard binary")
	flag.StringVar(&o.healthcheck, "healthcheck", "bin/switchyard-healthcheck", "the static health check binary")
	flag.StringVar(&o.license, "license", "LICENSE", "the license file")
	flag.StringVar(&o.version, "version", "", "the release (org.opencontainers.image.version, the tag)")
	flag.StringVar(&o.revision, "revision", "", "the git commit (org.opencontainers.image.revision)")
	flag.StringVar(&o.source, "source", "", "the source repository's URL (org.opencontainers.image.source); none if empty")
	flag.StringVar(&o.arch, "arch", "amd64", "the binaries' architecture (GOARCH)")
	flag.StringVar(&created, "created", "", "the image's creation time, RFC 3339 (the commit's, for a reproducible image); default now")
	flag.StringVar(&o.out, "o", "bin/switchyard-image.tar", "the docker-archive tarball to write")
	flag.Parse()
	if o.version == "" {
		fail(fmt.Errorf("-version is required"))
	}
	o.created = time.Now().UTC().Truncate(time.Second)
	if created != "" {
		t, err := time.Parse(time.RFC3339, created)
		if err != nil {
			fail(fmt.Errorf("-created: %v", err))
		}
		o.created = t.UTC()
	}
	o.tag = "localhost/switchyard:" + o.version
	if err := build(o); err != nil {
		fail(err)
	}
	fmt.Printf("wrote %s (%s)\n", o.out, o.tag)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "image:", err)
	os.Exit(1)
}

// build writes the image's tarball.
func build(o options) error {
	img, err := image(o)
	if err != nil {
		return err
	}
	tag, err := name.NewTag(o.tag)
	if err != nil {
		return err
	}
	tmp := o.out + ".tmp"
	if err := tarball.WriteToFile(tmp, tag, img); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, o.out)
}

// image is the image: its one layer and its configuration.
func image(o options) (v1.Image, error) {
	layerTar, err := rootfs(o)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	})
	if err != nil {
		return nil, err
	}
	img, err := mutate.Append(empty.Image, mutate.Addendum{
		Layer: layer,
		History: v1.History{
			Created:   v1.Time{Time: o.created},
			CreatedBy: "make image (packaging/image): switchyard " + o.version,
			Comment:   "FROM scratch",
		},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = o.arch, "linux"
	cf.Created = v1.Time{Time: o.created}
	cf.Config = config(o)
	return mutate.ConfigFile(img, cf)
}

// config is what a runtime runs: switchyard as its user, in its volume.
func config(o options) v1.Config {
	labels := map[string]string{
		"org.opencontainers.image.title":       "switchyard",
		"org.opencontainers.image.description": "Job broker, a drop-in replacement for gearmand (Gearman, Periodic, Worker-Controller, dwork, MemoDB)",
		"org.opencontainers.image.version":     o.version,
		"org.opencontainers.image.licenses":    "BSD-3-Clause",
		"org.opencontainers.image.created":     o.created.Format(time.RFC3339),
	}
	if o.revision != "" {
		labels["org.opencontainers.image.revision"] = o.revision
	}
	if o.source != "" {
		labels["org.opencontainers.image.source"] = o.source
	}
	ports := map[string]struct{}{}
	for _, p := range exposedPorts {
		ports[p+"/tcp"] = struct{}{}
	}
	return v1.Config{
		User:         strconv.Itoa(uid) + ":" + strconv.Itoa(uid),
		Entrypoint:   []string{binPath},
		WorkingDir:   dataDir,
		Env:          []string{"PATH=/usr/sbin:/usr/bin"},
		Volumes:      map[string]struct{}{dataDir: {}},
		ExposedPorts: ports,
		Labels:       labels,
		StopSignal:   "SIGTERM",
		// Docker's image format has a health check; the OCI format has not,
		// and podman keeps it only from a Docker-format image such as this
		// archive. Kubernetes ignores it: see docs/install.md for its probe.
		Healthcheck: &v1.HealthConfig{
			Test:        []string{"CMD", healthcheckPath},
			Interval:    30 * time.Second,
			Timeout:     5 * time.Second,
			StartPeriod: 10 * time.Second,
			Retries:     3,
		},
	}
}

// entry is a file or a directory of the layer.
type entry struct {
	path string
	mode int64 // permission bits, and the sticky bit
	uid  int
	dir  bool
	body []byte
}

// rootfs is the layer's tar: entries in order, parents first, with fixed
// owners and times, so that the same inputs make the same layer.
func rootfs(o options) ([]byte, error) {
	read := func(path string) ([]byte, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		return b, nil
	}
	bin, err := read(o.switchyard)
	if err != nil {
		return nil, err
	}
	health, err := read(o.healthcheck)
	if err != nil {
		return nil, err
	}
	license, err := read(o.license)
	if err != nil {
		return nil, err
	}
	id := strconv.Itoa(uid)
	files := []entry{
		{path: "etc/passwd", mode: 0o644, body: []byte(
			"root:x:0:0:root:/root:/sbin/nologin\n" +
				userName + ":x:" + id + ":" + id + ":switchyard:" + dataDir + ":/sbin/nologin\n")},
		{path: "etc/group", mode: 0o644, body: []byte("root:x:0:\n" + userName + ":x:" + id + ":\n")},
		// Go's resolver reads it: /etc/hosts first (localhost), then DNS.
		{path: "etc/nsswitch.conf", mode: 0o644, body: []byte("hosts: files dns\n")},
		{path: strings.TrimPrefix(configPath, "/"), mode: 0o644, body: []byte(containerDefaults)},
		{path: strings.TrimPrefix(binPath, "/"), mode: 0o755, body: bin},
		{path: strings.TrimPrefix(healthcheckPath, "/"), mode: 0o755, body: health},
		{path: "usr/share/doc/switchyard/copyright", mode: 0o644, body: license},
		{path: strings.TrimPrefix(dataDir, "/"), mode: 0o750, uid: uid, dir: true},
		{path: strings.TrimPrefix(runDir, "/"), mode: 0o755, uid: uid, dir: true},
		{path: "tmp", mode: 0o1777, dir: true},
	}
	// Every parent directory, root's, 0755.
	seen := map[string]bool{}
	for _, f := range files {
		if f.dir {
			seen[f.path] = true
		}
	}
	all := files
	for _, f := range files {
		for d := f.path; strings.Contains(d, "/"); {
			d = d[:strings.LastIndexByte(d, '/')]
			if !seen[d] {
				seen[d] = true
				all = append(all, entry{path: d, mode: 0o755, dir: true})
			}
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].path < all[j].path })

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range all {
		h := &tar.Header{
			Name:    e.path,
			Mode:    e.mode,
			Uid:     e.uid,
			Gid:     e.uid,
			ModTime: o.created,
			Format:  tar.FormatPAX,
		}
		if e.dir {
			h.Typeflag, h.Name = tar.TypeDir, e.path+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
