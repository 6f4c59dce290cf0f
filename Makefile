GO      ?= go
BIN     := bin/switchyard
PKGS    := ./...

.PHONY: all build run test test-unit test-race deps vet fmt fuzz bench clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/switchyard

run: build
	./$(BIN) --verbose INFO -l stderr

# deps installs the real Gearman clients the end-to-end tests drive.
deps:
	@./.ci/deps

test: deps vet
	$(GO) test -count=1 $(PKGS)
	$(GO) test -count=1 -race ./sched/... ./engine/...

vet:
	$(GO) vet $(PKGS)
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

fuzz:
	$(GO) test ./codec/gearman -run '^$$' -fuzz FuzzParse -fuzztime 60s

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./codec/... ./sched/...

clean:
	rm -rf bin
