# Build, test, benchmark and demo gpu-hold. `make generate` needs clang (it
# installs clang, llvm and libbpf-dev from Debian packages when missing);
# nothing else does: the generated BPF objects are committed.
GO      ?= go
BIN     := bin/gpu-hold
# The fleet queue's build (-tags etcd): the one binary that links the etcd
# client, whose package init would cost every hold milliseconds before
# main. gpu-hold execs it, from its own directory, for an etcd queue.
FLEET_BIN := bin/gpu-hold-fleet
# Where a hold waits while tickets are ahead of its own (package lobby): it
# links only the queue, so a waiting hold costs the host little. gpu-hold
# execs it from its own directory, and it execs gpu-hold back.
LOBBY_BIN := bin/gpu-hold-lobby
# A static binary: no dynamic loader and libc to map at every start (about
# 1 ms of each hold's start-up), and it runs on any host's glibc. User and
# group names then come from /etc/passwd and /etc/group only (an NSS-only
# user shows as a number in messages).
export CGO_ENABLED ?= 0

# Where `make install` puts things (DESTDIR is prepended; PREFIX=/usr for
# a package). systemd reads units, tmpfiles.d and sysusers.d under
# /usr/local/lib as well as /usr/lib.
PREFIX      ?= /usr/local
BINDIR      ?= $(PREFIX)/bin
MANDIR      ?= $(PREFIX)/share/man
SHAREDIR    ?= $(PREFIX)/share
UNITDIR     ?= $(PREFIX)/lib/systemd/system
TMPFILESDIR ?= $(PREFIX)/lib/tmpfiles.d
SYSUSERSDIR ?= $(PREFIX)/lib/sysusers.d

.PHONY: build check-deps test test-kernels bench generate run clean man completions install uninstall deb

# -buildvcs=auto: --version names the commit (a GOFLAGS=-buildvcs=false
# in the environment would drop it), and a tree without git still builds.
build:
	$(GO) build -buildvcs=auto -o $(BIN) ./cmd/gpu-hold
	$(GO) build -buildvcs=auto -tags etcd -o $(FLEET_BIN) ./cmd/gpu-hold
	$(GO) build -buildvcs=auto -o $(LOBBY_BIN) ./cmd/gpu-hold-lobby

# gpu-hold must not link the etcd client (grpc, protobuf's runtime through
# it, x/net/trace): each would be package init in every hold. .ci/run runs it.
check-deps:
	@bad=$$($(GO) list -deps ./cmd/gpu-hold | grep -E '^(go\.etcd\.io|google\.golang\.org/grpc|google\.golang\.org/genproto|golang\.org/x/net/trace|go\.uber\.org/zap)' || true); \
	if [ -n "$$bad" ]; then echo "check-deps: gpu-hold (built without -tags etcd) links what only gpu-hold-fleet may:" $$bad "(import queue/etcdq only from cmd/gpu-hold/fleet_etcd.go)" >&2; exit 1; fi
	@$(GO) list -tags etcd -deps ./cmd/gpu-hold | grep -q '^go\.etcd\.io/etcd/client/v3$$' || { echo "check-deps: gpu-hold-fleet (-tags etcd) does not link the etcd client" >&2; exit 1; }
	@bad=$$($(GO) list -deps ./cmd/gpu-hold-lobby | grep -E '^(github\.com/(cilium|prometheus|spf13|rs)/|google\.golang\.org/|net/http$$|github\.com/gpu-hold/gpu-hold/(hold|tracker|bpf|internal/(metrics|record|device|teardown|cgroup))$$)' || true); \
	if [ -n "$$bad" ]; then echo "check-deps: gpu-hold-lobby links more than the queue:" $$bad "(every waiting hold would pay for it)" >&2; exit 1; fi

# The test command (README, .ci/run). As root it really loads the eBPF
# tracker; with GPU_HOLD_REQUIRE_BPF=1 (set by .ci/run) a host that cannot
# load it fails the eBPF tests instead of skipping them.
test:
	$(GO) vet ./...
	$(GO) vet -tags etcd ./cmd/...
	$(GO) test -count=1 -tags etcd ./cmd/...
	$(GO) test -count=1 -parallel 8 -timeout 15m ./...

# The eBPF tests on each kernel of the matrix (issues #22, #48), one line
# per kernel: the host's, and Debian 12's 6.1 and Debian 13's 6.12 booted
# under qemu with TCG (the kernel packages are downloaded, not installed;
# GPU_HOLD_KERNELS=5.10 adds the floor's leg). As root; .ci/test-kernels
# says what it needs and installs it.
test-kernels:
	GO="$(GO)" .ci/test-kernels

# Benchmarks (issue #7): prints a markdown table, writes internal/bench/results.json,
# and draws its main figures as SVG in internal/bench/figures (internal/bench/plot is a module
# of its own: the plotting library is no dependency of gpu-hold).
bench: build
	$(GO) run ./internal/bench -bin $(BIN) -out internal/bench/results.json $(BENCH_FLAGS)
	cd internal/bench/plot && $(GO) run . -in ../results.json -out ../figures

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

# The man page, written by the binary from its own command tree.
man: build
	$(BIN) man > bin/gpu-hold.1

# Shell completions (cobra's, with dynamic completion of resources, tickets
# and hold ids from the queue directory).
completions: build
	$(BIN) completion bash > bin/gpu-hold.bash
	$(BIN) completion zsh > bin/_gpu-hold
	$(BIN) completion fish > bin/gpu-hold.fish

# Installs the binary, man page, completions, the tmpfiles.d and sysusers.d
# entries for the fleet directory and its group, and the systemd units
# (their ExecStart pointed at $(BINDIR)). Installed into the live system
# (no DESTDIR), it also creates the group and the directory.
install: man completions
	install -D -m 0755 $(BIN) $(DESTDIR)$(BINDIR)/gpu-hold
	install -D -m 0755 $(FLEET_BIN) $(DESTDIR)$(BINDIR)/gpu-hold-fleet
	install -D -m 0755 $(LOBBY_BIN) $(DESTDIR)$(BINDIR)/gpu-hold-lobby
	install -D -m 0644 bin/gpu-hold.1 $(DESTDIR)$(MANDIR)/man1/gpu-hold.1
	install -D -m 0644 bin/gpu-hold.bash $(DESTDIR)$(SHAREDIR)/bash-completion/completions/gpu-hold
	install -D -m 0644 bin/_gpu-hold $(DESTDIR)$(SHAREDIR)/zsh/vendor-completions/_gpu-hold
	install -D -m 0644 bin/gpu-hold.fish $(DESTDIR)$(SHAREDIR)/fish/vendor_completions.d/gpu-hold.fish
	install -D -m 0644 dist/tmpfiles.d/gpu-hold.conf $(DESTDIR)$(TMPFILESDIR)/gpu-hold.conf
	install -D -m 0644 dist/sysusers.d/gpu-hold.conf $(DESTDIR)$(SYSUSERSDIR)/gpu-hold.conf
	install -d -m 0755 $(DESTDIR)$(UNITDIR)
	for u in dist/systemd/*; do \
		sed 's|/usr/local/bin/gpu-hold|$(BINDIR)/gpu-hold|g' $$u > $(DESTDIR)$(UNITDIR)/$$(basename $$u) && \
		chmod 0644 $(DESTDIR)$(UNITDIR)/$$(basename $$u) || exit 1; \
	done
	@if [ -z "$(DESTDIR)" ]; then \
		command -v systemd-sysusers >/dev/null && systemd-sysusers $(SYSUSERSDIR)/gpu-hold.conf; \
		command -v systemd-tmpfiles >/dev/null && systemd-tmpfiles --create $(TMPFILESDIR)/gpu-hold.conf; \
		command -v systemctl >/dev/null && systemctl daemon-reload 2>/dev/null; true; \
	fi

# Removes what install put (not the fleet directory nor its group: they
# hold other users' records).
uninstall:
	rm -f $(DESTDIR)$(BINDIR)/gpu-hold $(DESTDIR)$(BINDIR)/gpu-hold-fleet $(DESTDIR)$(BINDIR)/gpu-hold-lobby $(DESTDIR)$(MANDIR)/man1/gpu-hold.1 \
		$(DESTDIR)$(SHAREDIR)/bash-completion/completions/gpu-hold \
		$(DESTDIR)$(SHAREDIR)/zsh/vendor-completions/_gpu-hold \
		$(DESTDIR)$(SHAREDIR)/fish/vendor_completions.d/gpu-hold.fish \
		$(DESTDIR)$(TMPFILESDIR)/gpu-hold.conf $(DESTDIR)$(SYSUSERSDIR)/gpu-hold.conf
	for u in dist/systemd/*; do rm -f $(DESTDIR)$(UNITDIR)/$$(basename $$u); done
	# The eBPF spares this build pinned, on a live system only.
	[ -n "$(DESTDIR)" ] || rm -rf /sys/fs/bpf/gpu-hold-spare

# The Debian package bin/gpu-hold_VERSION_ARCH.deb, built by nfpm (a Go
# tool of its own module, packaging/, so the product's go.mod does not
# carry it) from a `make install DESTDIR=... PREFIX=/usr` tree.
deb:
	rm -rf bin/deb-root
	$(MAKE) install DESTDIR=$(CURDIR)/bin/deb-root PREFIX=/usr
	cd packaging && $(GO) build -o ../bin/nfpm github.com/goreleaser/nfpm/v2/cmd/nfpm
	GPU_HOLD_VERSION=$${GPU_HOLD_VERSION:-0.0.0~$$(git log -1 --format=%cd.%h --date=format:%Y%m%d 2>/dev/null || echo dev)} \
		bin/nfpm package --config packaging/nfpm.yaml --packager deb --target bin/

clean:
	rm -rf bin
