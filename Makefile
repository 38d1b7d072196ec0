# Build, test, benchmark and demo gpu-hold. `make generate` needs clang (it
# installs clang, llvm and libbpf-dev from Debian packages when missing);
# nothing else does: the generated BPF objects are committed.
GO      ?= go
BIN     := bin/gpu-hold
# A static binary: no dynamic loader and libc to map at every start (about
# 1 ms of each hold's start-up), and it runs on any host's glibc. User and
# group names then come from /etc/passwd and /etc/group only (an NSS-only
# user shows as a number in messages).
export CGO_ENABLED ?= 0

.PHONY: build test test-kernels bench generate run clean

build:
	$(GO) build -o $(BIN) ./cmd/gpu-hold

# The test command (README, .ci/run). As root it really loads the eBPF
# tracker; with GPU_HOLD_REQUIRE_BPF=1 (set by .ci/run) a host that cannot
# load it fails the eBPF tests instead of skipping them.
test:
	$(GO) vet ./...
	$(GO) test -count=1 -parallel 8 -timeout 15m ./...

# The eBPF tests on each kernel of the matrix (issue #22), one line per
# kernel: the host's, and Debian 12's 6.1 booted under qemu with TCG (the
# kernel package is downloaded, not installed). As root; .ci/test-kernels
# says what it needs and installs it.
test-kernels:
	GO="$(GO)" .ci/test-kernels

# Benchmarks (issue #7): prints a markdown table, writes bench/results.json,
# and draws its main figures as SVG in bench/figures (bench/plot is a module
# of its own: the plotting library is no dependency of gpu-hold).
bench: build
	$(GO) run ./bench -bin $(BIN) -out bench/results.json $(BENCH_FLAGS)
	cd bench/plot && $(GO) run . -in ../results.json -out ../figures

# Regenerate the eBPF objects (bpf/lineage_bpfel.{go,o}) from bpf/lineage.bpf.c.
generate:
	@{ command -v clang && command -v llvm-strip && test -f /usr/include/bpf/bpf_helpers.h; } >/dev/null || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y clang llvm libbpf-dev; }
	$(GO) generate ./bpf/

# A real hold with no set-up: the payload leaves a setsid'd, TERM-ignoring
# child behind; the hold ends it at the 3 s max hold and shows what it ended.
run: build
	@demo=$$(mktemp -d /tmp/gpu-hold-demo.XXXXXX); \
	echo '$$ gpu-hold -l demo -t 3s -g 1s -- bash -c "setsid bash -c \"trap \\\"\\\" TERM; exec sleep 600\" & sleep 600"'; \
	$(BIN) --dir $$demo --log-format console -l demo -t 3s -g 1s --dump $$demo/record.jsonl -- \
		bash -c 'setsid bash -c "trap \"\" TERM; exec sleep 600" & echo "payload: started a setsid child that ignores TERM"; sleep 600'; \
	echo "gpu-hold exited with $$? (124: max hold reached)"; \
	echo; echo "$$ gpu-hold show $$demo/record.jsonl"; \
	$(BIN) show $$demo/record.jsonl; \
	rm -rf $$demo

clean:
	rm -rf bin
