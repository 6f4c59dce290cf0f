GO      ?= go
BIN     := bin/switchyard
PKGS    := ./...
# VERSION is the release, read from the one place it is written.
VERSION := $(shell sed -n 's/^var version = "\(.*\)"$$/\1/p' cmd/switchyard/version.go)

.PHONY: all build run test test-unit test-race faults jepsen jepsen-short deps vet fmt proto fuzz bench bench-latency bench-micro bench-report bench-deps conformance clean man install uninstall deb image

all: build

# CGO_ENABLED=0: Pebble, the durable queue, would otherwise compile C
# (zstd, its block cache's allocator); the server needs no C at all.
# The git commit is stamped into the binary (-V, the metrics) from git
# itself: Go's own stamp (-buildvcs) is off where GOFLAGS says so, and in a
# git worktree, whose .git is a file. "+dirty": git status lists a change.
REVISION := $(shell git rev-parse HEAD 2>/dev/null)$(shell test -n "$$(git status --porcelain 2>/dev/null)" && echo +dirty)
LDFLAGS  := -X main.revision=$(REVISION)
build:
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/switchyard

run: build
	./$(BIN) --verbose INFO -l stderr

# deps installs the real Gearman clients the end-to-end tests drive.
deps:
	@./.ci/deps

# test keeps each go test run's -json stream in $(TESTLOG)/ (every test's
# whole output, for a failure that does not come back) and prints what
# plain go test prints; .ci/testlog failures $(TESTLOG)/*.json shows the
# failed tests again, whole. Files tests keep (t.ArtifactDir: the status
# page's screenshot) go to $(TESTLOG)/artifacts/_artifacts/, each test's
# directory named in its output.
TESTLOG := test-results

# TESTTIMEOUT bounds each package's run: it stops a hung one, and is no
# figure of how long a run takes. Beside other builds and two busy loops,
# cmd/switchyard needed more than go test's own 10m.
TESTTIMEOUT ?= 60m

test: deps vet
	@rm -rf $(TESTLOG)
	@mkdir -p $(TESTLOG)/artifacts
	GO=$(GO) ./.ci/gotest $(TESTLOG)/unit.json -count=1 -timeout $(TESTTIMEOUT) -artifacts -outputdir $(CURDIR)/$(TESTLOG)/artifacts $(PKGS)
	GO=$(GO) ./.ci/gotest $(TESTLOG)/race.json -count=1 -timeout $(TESTTIMEOUT) -race ./sched/... ./engine/...

# faults is the fault suite (cmd/switchyard/e2e_faults_test.go): hostile
# peers against the real binary, with its RSS and another client's ECHO
# time asserted, so it runs alone, after make test. Its -json stream goes
# to $(TESTLOG)/faults.json.
faults:
	@mkdir -p $(TESTLOG)
	SWITCHYARD_FAULTS=1 GO=$(GO) ./.ci/gotest $(TESTLOG)/faults.json -count=1 -run '^TestFault' -timeout $(TESTTIMEOUT) ./cmd/switchyard

# jepsen is the cluster's partition suite (bench/jepsen, docs/cluster.md):
# every schedule of faults, FullFaults each, against three nodes in network
# namespaces, its history checked; as root, about ten minutes, alone. Each
# schedule's history, the checker's verdict and the nodes' output go to
# $(TESTLOG)/jepsen/SCHEDULE/, the run's table to $(TESTLOG)/jepsen/table.md.
# jepsen-short runs every schedule with a few faults (CI, about three
# minutes). Without root the suite skips, and says why.
JEPSEN = rm -rf $(TESTLOG)/jepsen && mkdir -p $(TESTLOG)/jepsen && \
	SWITCHYARD_JEPSEN_OUT=$(CURDIR)/$(TESTLOG)/jepsen GO=$(GO) ./.ci/gotest $(TESTLOG)/jepsen.json \
	  -count=1 -run '^TestJepsen$$' -timeout 40m ./bench/jepsen; status=$$?; \
	cat $(TESTLOG)/jepsen/table.md 2>/dev/null; exit $$status
jepsen:
	@SWITCHYARD_JEPSEN=full; export SWITCHYARD_JEPSEN; $(JEPSEN)

jepsen-short:
	@SWITCHYARD_JEPSEN=short; export SWITCHYARD_JEPSEN; $(JEPSEN)

vet:
	$(GO) vet $(PKGS)
	cd packaging/image && $(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# man rewrites docs/switchyard.8, the man page, from the option table in
# cmd/switchyard/flags.go; TestManPage fails while the committed page is
# stale.
man:
	$(GO) test ./cmd/switchyard -count=1 -run '^TestManPage$$' -update

# install puts the binary, the man page, the systemd unit, the logrotate
# file and the unit's options file (the example configuration) under
# $(DESTDIR)$(PREFIX), with GNU's directory variables (sbindir, mandir,
# sysconfdir, ...) to move each. An options or logrotate file that is
# already there is kept. logrotate reads /etc/logrotate.d only: with the
# default PREFIX, give sysconfdir=/etc for it to rotate the log.
PREFIX         ?= /usr/local
prefix         ?= $(PREFIX)
exec_prefix    ?= $(prefix)
sbindir        ?= $(exec_prefix)/sbin
datarootdir    ?= $(prefix)/share
mandir         ?= $(datarootdir)/man
man8dir        ?= $(mandir)/man8
sysconfdir     ?= $(prefix)/etc
systemdunitdir ?= $(prefix)/lib/systemd/system
INSTALL        ?= install
INSTALL_PROGRAM ?= $(INSTALL) -m 0755
INSTALL_DATA   ?= $(INSTALL) -m 0644

install: build
	$(INSTALL) -d $(DESTDIR)$(sbindir) $(DESTDIR)$(man8dir) $(DESTDIR)$(systemdunitdir) \
	  $(DESTDIR)$(sysconfdir)/default $(DESTDIR)$(sysconfdir)/logrotate.d
	$(INSTALL_PROGRAM) $(BIN) $(DESTDIR)$(sbindir)/switchyard
	gzip -9n <docs/switchyard.8 >$(DESTDIR)$(man8dir)/switchyard.8.gz
	chmod 0644 $(DESTDIR)$(man8dir)/switchyard.8.gz
	sed -e 's|@sbindir@|$(sbindir)|g' -e 's|@sysconfdir@|$(sysconfdir)|g' packaging/switchyard.service.in \
	  >$(DESTDIR)$(systemdunitdir)/switchyard.service
	chmod 0644 $(DESTDIR)$(systemdunitdir)/switchyard.service
	@for f in default:default/switchyard logrotate:logrotate.d/switchyard; do \
	  src=packaging/$${f%%:*}; dst=$(DESTDIR)$(sysconfdir)/$${f#*:}; \
	  if [ -e "$$dst" ]; then echo "kept $$dst (packaging's is $$src)"; \
	  else echo "$(INSTALL_DATA) $$src $$dst"; $(INSTALL_DATA) $$src $$dst || exit 1; fi; \
	done

uninstall:
	rm -f $(DESTDIR)$(sbindir)/switchyard $(DESTDIR)$(man8dir)/switchyard.8.gz \
	  $(DESTDIR)$(systemdunitdir)/switchyard.service
	@echo "kept $(DESTDIR)$(sysconfdir)/default/switchyard and $(DESTDIR)$(sysconfdir)/logrotate.d/switchyard"

# deb builds bin/switchyard_$(VERSION)_$(DEB_ARCH).deb with nfpm (run from
# the module proxy at a fixed version, so that it stays out of go.mod) from
# the tree make install stages for Debian's paths; packaging/nfpm.yaml
# says what goes where.
NFPM     ?= $(GO) run github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.45.2
DEB_ARCH ?= $(shell $(GO) env GOARCH)
DEB      := bin/switchyard_$(VERSION)_$(DEB_ARCH).deb

deb: build
	rm -rf bin/deb-root $(DEB)
	$(MAKE) --no-print-directory install DESTDIR=$(CURDIR)/bin/deb-root PREFIX=/usr sysconfdir=/etc \
	  systemdunitdir=/lib/systemd/system
	VERSION=$(VERSION) DEB_ARCH=$(DEB_ARCH) $(NFPM) package --config packaging/nfpm.yaml --packager deb --target $(DEB)
	rm -rf bin/deb-root

# image builds bin/switchyard-image.tar, a docker-archive tarball of the
# container image (podman load, docker load), without a container daemon:
# packaging/image, a module of its own so that go-containerregistry stays
# out of go.mod, writes it FROM scratch with bin/switchyard (static, as
# make build makes it) and the health check program. The labels name the
# release, the commit (with +dirty for a changed tree) and IMAGE_SOURCE,
# the repository's URL (git's origin by default; no label if none); the
# image's time is the commit's, so a commit builds the same image.
IMAGE         := bin/switchyard-image.tar
IMAGE_SOURCE  ?= $(shell git remote get-url origin 2>/dev/null)
IMAGE_CREATED ?= $(shell git log -1 --format=%cI 2>/dev/null)

image: build
	cd packaging/image && CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o ../../bin/switchyard-healthcheck ./healthcheck
	cd packaging/image && $(GO) run . -switchyard ../../$(BIN) -healthcheck ../../bin/switchyard-healthcheck \
	  -license ../../LICENSE -version $(VERSION) -revision "$(REVISION)" -source "$(IMAGE_SOURCE)" \
	  -arch $$($(GO) env GOARCH) -created "$(IMAGE_CREATED)" -o ../../$(IMAGE)

# proto regenerates codec/controller/controller.pb.go from controller.proto
# and codec/dwork/dwork.pb.go from dwork.proto (the go:generate lines in each
# package's doc.go). The .pb.go files are committed, so only a change to a
# .proto needs this. It needs protoc
# (apt-get install -y protobuf-compiler; 3.21 made the committed file) and
# protoc-gen-go at the version the module requires (go install
# google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12), found on PATH or in
# $(go env GOPATH)/bin.
proto:
	PATH="$$($(GO) env GOPATH)/bin:$$PATH" $(GO) generate ./codec/controller ./codec/dwork

# fuzz runs each fuzz target for about a minute on a 2-core machine. The
# limits are counts, not -fuzztime 60s: go1.26's fuzz coordinator can fail a
# timed run as it ends, with "context deadline exceeded" and no failing
# input (golang/go#75804, fixed in Go 1.27).
fuzz:
	$(GO) test ./codec/gearman -run '^$$' -fuzz '^FuzzParse$$' -fuzztime 4000000x
	$(GO) test ./codec/gearman -run '^$$' -fuzz '^FuzzParserSplit$$' -fuzztime 1000000x
	$(GO) test ./codec/gearman -run '^$$' -fuzz '^FuzzHandles$$' -fuzztime 1300000x
	$(GO) test ./codec/periodic -run '^$$' -fuzz '^FuzzParseFrame$$' -fuzztime 3000000x
	$(GO) test ./codec/periodic -run '^$$' -fuzz '^FuzzParseMessage$$' -fuzztime 3000000x
	$(GO) test ./codec/periodic -run '^$$' -fuzz '^FuzzDecodeJob$$' -fuzztime 1500000x
	$(GO) test ./codec/periodic -run '^$$' -fuzz '^FuzzDecodeJobList$$' -fuzztime 1800000x
	$(GO) test ./codec/periodic -run '^$$' -fuzz '^FuzzAppendJob$$' -fuzztime 450000x
	$(GO) test ./codec/controller -run '^$$' -fuzz '^FuzzParseFrame$$' -fuzztime 1500000x
	$(GO) test ./codec/controller -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime 2000000x
	$(GO) test ./codec/dwork -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime 1500000x
	$(GO) test ./codec/memodb -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime 2500000x
	$(GO) test ./engine/gearman -run '^$$' -fuzz FuzzServer -fuzztime 180000x
	$(GO) test ./engine/periodic -run '^$$' -fuzz FuzzServer -fuzztime 200000x
	$(GO) test ./engine/gearhttp -run '^$$' -fuzz FuzzServer -fuzztime 30000x
	$(GO) test ./engine/gearhttp -run '^$$' -fuzz '^FuzzFraming$$' -fuzztime 800000x
	$(GO) test ./engine/dwork -run '^$$' -fuzz '^FuzzHandle$$' -fuzztime 400000x
	$(GO) test ./engine/dwork -run '^$$' -fuzz '^FuzzScanner$$' -fuzztime 1400000x
	$(GO) test ./engine/memodb -run '^$$' -fuzz '^FuzzMeteredScan$$' -fuzztime 1m
	$(GO) test ./sched/replicated -run '^$$' -fuzz '^FuzzDecodeEntry$$' -fuzztime 2000000x
	$(GO) test ./sched/replicated -run '^$$' -fuzz '^FuzzDecodeLog$$' -fuzztime 2000000x
	$(GO) test ./sched/replicated -run '^$$' -fuzz '^FuzzSegment$$' -fuzztime 15000x
	$(GO) test ./sched/replicated -run '^$$' -fuzz '^FuzzRestore$$' -fuzztime 110000x
	$(GO) test ./sched/durable -run '^$$' -fuzz '^FuzzMark$$' -fuzztime 1200000x
	$(GO) test ./engine/cluster -run '^$$' -fuzz '^FuzzHandshake$$' -fuzztime 150000x

# bench runs the load scenarios against bin/switchyard and, when installed,
# gearmand (see bench/results/README.md); the periodic-*, controller* and
# dwork-* ones against switchyard alone; the cluster-* ones against three
# switchyard nodes and, when installed, three nats-server (JetStream).
# BENCHFLAGS=--quick for a short run.
BENCHFLAGS ?=
bench: build
	$(GO) build -o bin/switchyard-bench ./bench/cmd/switchyard-bench
	./bin/switchyard-bench --switchyard $(BIN) --out bench/results $(BENCHFLAGS)

# bench-latency runs the open-loop scenarios only: the same offered rates on
# switchyard and gearmand, and the latency-throughput curve (fg-curve), three
# rounds, about 17 minutes on 2 cores; make bench-report then draws curve.svg.
bench-latency: build
	$(GO) build -o bin/switchyard-bench ./bench/cmd/switchyard-bench
	./bin/switchyard-bench --switchyard $(BIN) --out bench/results --rounds 3 \
	  --scenarios fg-curve,fg-rate,http-rate,memodb-rate,periodic-rate $(BENCHFLAGS)

bench-micro:
	$(GO) test -run '^$$' -bench . -benchmem ./codec/... ./sched/...

bench-report:
	$(GO) run ./bench/cmd/switchyard-bench-report --dir bench/results

# bench-deps installs Debian's gearmand, the baseline of make bench, and
# nats-server, the cluster scenarios' JetStream peer (.ci/deps installs
# both as well, for the tests).
bench-deps:
	@if [ "$$(id -u)" -eq 0 ]; then sudo=; else sudo=sudo; fi; \
	  $$sudo apt-get update && $$sudo apt-get install -y gearman-job-server nats-server

# conformance runs gearmand 1.1.20's own test programs (t/ in a gearmand
# source tree whose test suite is already built; nothing here builds it:
# docs/compatibility.md, "gearmand's own test suite") against Debian's gearmand
# (GEARMAND=/usr/sbin/gearmand) and bin/switchyard, program by program,
# each started as the suite starts it, and prints both servers' counts side
# by side. CONFORMANCE_TIMEOUT=300 bounds each program on each server (s).
# Not part of make test or CI: it takes about half an hour.
GEARMAND_SRC ?=
GEARMAND ?= /usr/sbin/gearmand
conformance:
	@if [ -z "$(GEARMAND_SRC)" ]; then \
	  echo "make conformance: give the gearmand 1.1.20 tree whose test suite is built: make conformance GEARMAND_SRC=DIR" >&2; \
	  exit 2; \
	fi
	@$(MAKE) --no-print-directory build
	CONFORMANCE_GEARMAND=$(GEARMAND) ./.ci/conformance "$(GEARMAND_SRC)" $(BIN)

clean:
	rm -rf bin
