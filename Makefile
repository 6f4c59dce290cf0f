GO      ?= go
BIN     := bin/switchyard
PKGS    := ./...
# VERSION is the release, read from the one place it is written.
VERSION := $(shell sed -n 's/^var version = "\(.*\)"$$/\1/p' cmd/switchyard/version.go)

.PHONY: all build run test test-unit test-race deps vet fmt proto fuzz bench bench-micro bench-report bench-deps conformance clean

all: build

# CGO_ENABLED=0: Pebble, the durable queue, would otherwise compile C
# (zstd, its block cache's allocator); the server needs no C at all.
# -buildvcs=auto stamps the git commit into the binary (-V, the metrics)
# even where GOFLAGS says -buildvcs=false.
build:
	CGO_ENABLED=0 $(GO) build -buildvcs=auto -o $(BIN) ./cmd/switchyard

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

test: deps vet
	@rm -rf $(TESTLOG)
	@mkdir -p $(TESTLOG)/artifacts
	GO=$(GO) ./.ci/gotest $(TESTLOG)/unit.json -count=1 -artifacts -outputdir $(CURDIR)/$(TESTLOG)/artifacts $(PKGS)
	GO=$(GO) ./.ci/gotest $(TESTLOG)/race.json -count=1 -race ./sched/... ./engine/...

vet:
	$(GO) vet $(PKGS)
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

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

# bench runs the load scenarios against bin/switchyard and, when installed,
# gearmand (see bench/results/README.md); the periodic-*, controller* and
# dwork-* ones against switchyard alone; the cluster-* ones against three
# switchyard nodes and, when installed, three nats-server (JetStream).
# BENCHFLAGS=--quick for a short run.
BENCHFLAGS ?=
bench: build
	$(GO) build -o bin/switchyard-bench ./bench/cmd/switchyard-bench
	./bin/switchyard-bench --switchyard $(BIN) --out bench/results $(BENCHFLAGS)

bench-micro:
	$(GO) test -run '^$$' -bench . -benchmem ./codec/... ./sched/...

bench-report:
	$(GO) run ./bench/cmd/switchyard-bench-report --dir bench/results

# bench-deps installs Debian's gearmand, the baseline of make bench, and
# nats-server, the cluster scenarios' JetStream peer (CI needs neither).
bench-deps:
	@if [ "$$(id -u)" -eq 0 ]; then sudo=; else sudo=sudo; fi; \
	  $$sudo apt-get update && $$sudo apt-get install -y gearman-job-server nats-server

# conformance runs gearmand 1.1.20's own test programs (t/ in a gearmand
# source tree whose test suite is already built; nothing here builds it)
# against bin/switchyard, one at a time, and prints a table and
# "N passed, N failed". CONFORMANCE_TIMEOUT=300 bounds each program (s).
GEARMAND_SRC ?=
conformance:
	@if [ -z "$(GEARMAND_SRC)" ]; then \
	  echo "make conformance: give the gearmand 1.1.20 tree whose test suite is built: make conformance GEARMAND_SRC=DIR" >&2; \
	  exit 2; \
	fi
	@$(MAKE) --no-print-directory build
	./.ci/conformance "$(GEARMAND_SRC)" $(BIN)

clean:
	rm -rf bin
