# libsdp: LD_PRELOAD sockets accelerator (SDP over software iWARP).
#   make          build build/libsdp.so (the preload shim), build/libsdp-engine.so (Go engine)
#                 and build/sdpstat (the live view of SDP sockets)
#   make demo     real unmodified programs over SDP, compared with plain TCP
#   make test     everything CI runs
#   make compat   the compatibility suite (tests/compat): real programs over SDP
#   make bench    the benchmarks against plain TCP (results/, git-ignored; BENCH_QUICK=1: short)
#   make install  the libraries in $(PREFIX)/lib, sdpstat and sdp_run in $(PREFIX)/bin, the sample
#                 rules file and manual pages in $(PREFIX)/share (PREFIX=/usr/local; DESTDIR honoured)
#   make uninstall  removes what make install installed (same PREFIX and DESTDIR)
#   make deb      build/libsdp_<version>_<arch>.deb (scripts/deb.sh), checked by lintian

GO      ?= go
CC      ?= gcc
BUILD   := build
CFLAGS  ?= -O2 -g
# initial-exec: the shim is loaded with the program (LD_PRELOAD), so its few thread-locals sit in
# the static TLS block and each access is one instruction, not a call to __tls_get_addr on every
# send and receive (1.5% of a 64-byte send's CPU).
SHIM_CFLAGS := $(CFLAGS) -std=gnu11 -Wall -Wextra -Werror -fPIC -fvisibility=hidden -D_GNU_SOURCE -ftls-model=initial-exec
# Go is in /usr/local/go/bin on a fresh machine; make works from a shell whose PATH lacks it.
export PATH := $(PATH):/usr/local/go/bin

GO_SRC  := $(shell find preload sdpcore iwarp shm internal -name '*.go' ! -name '*_test.go' 2>/dev/null) go.mod go.sum
SDPSTAT_SRC := $(shell find cmd/sdpstat internal -name '*.go' ! -name '*_test.go' 2>/dev/null) go.mod go.sum

# Where make install puts things. LIBDIR may be a multiarch directory (make deb installs with
# PREFIX=/usr LIBDIR=/usr/lib/<triplet>); sdp_run finds libsdp.so through LIBDIR's path
# relative to BINDIR, so an installed tree can move as a whole (a DESTDIR staging tree runs too).
PREFIX  ?= /usr/local
BINDIR  ?= $(PREFIX)/bin
LIBDIR  ?= $(PREFIX)/lib
DOCDIR  ?= $(PREFIX)/share/doc/libsdp
MANDIR  ?= $(PREFIX)/share/man
INSTALL ?= install

.PHONY: all demo test deps check gotest reliability asan soak wirecheck fuzz compat bench clean \
	install uninstall deb FORCE

all: $(BUILD)/libsdp.so $(BUILD)/libsdp-engine.so $(BUILD)/sdpstat

# The SONAMEs (the file names) let ldconfig and Debian's tools treat the two objects as the
# shared libraries they are once installed in a library directory.
SHIM_SRC := shim.c $(wildcard shim/*.c)
$(BUILD)/libsdp.so: $(SHIM_SRC) $(wildcard shim/*.h) shim.map preload/abi.h Makefile | $(BUILD)
	$(CC) $(SHIM_CFLAGS) -I. -shared -Wl,-soname,libsdp.so -Wl,--version-script=shim.map -o $@ $(SHIM_SRC) -ldl -lpthread

# asyncpreemptoff=1: Go's threads would otherwise unblock SIGURG (its preemption signal) and
# swallow the application's own SIGURG: PostgreSQL wakes its backends with SIGURG read from a
# signalfd, with the signal blocked, and lost wake-ups cut pgbench to a tenth.
#
# -overlay: one line of the Go runtime replaced (scripts/go-overlay.sh): each call from the
# application's threads into the engine took a global lock in the runtime for nothing.
$(BUILD)/libsdp-engine.so: $(GO_SRC) preload/abi.h Makefile $(BUILD)/go-overlay.json | $(BUILD)
	$(GO) build -buildmode=c-shared -overlay=$(BUILD)/go-overlay.json \
		-ldflags='-X=runtime.godebugDefault=asyncpreemptoff=1 -extldflags=-Wl,-soname,libsdp-engine.so' \
		-o $@ ./preload

# Remade on every make, rewritten only when the Go runtime's file or the script changes it.
$(BUILD)/go-overlay.json: scripts/go-overlay.sh FORCE | $(BUILD)
	GO=$(GO) bash scripts/go-overlay.sh $(BUILD)

FORCE:

# A position-independent executable, with its relocations read-only after start (RELRO).
$(BUILD)/sdpstat: $(SDPSTAT_SRC) Makefile | $(BUILD)
	$(GO) build -buildmode=pie -o $@ ./cmd/sdpstat

$(BUILD):
	mkdir -p $(BUILD)

deps:
	bash scripts/install-deps.sh

demo: deps all
	bash scripts/demo.sh

check:
	@test -z "$$(gofmt -l iwarp shm sdpcore preload internal cmd tests)" || { gofmt -l iwarp shm sdpcore preload internal cmd tests; echo "gofmt needed"; exit 1; }
	$(GO) vet ./...
	bash -n scripts/*.sh scripts/sdp_run
	@# Every package the engine links initialises in every preloaded process's engine start:
	@# golang.org/x/sys/cpu's CPUID probes trap to the hypervisor in a VM (iwarp/cpu_amd64.go).
	@! GOARCH=amd64 $(GO) list -deps ./preload | grep -qx golang.org/x/sys/cpu || { echo "the engine links golang.org/x/sys/cpu on amd64"; exit 1; }

gotest: all
	$(GO) test -race -count=1 $$($(GO) list ./... | grep -v /tests/reliability)
	# The pools' allocation counts once more without the race detector, whose sync.Pool drops a
	# part of what is put: under it a 64 KiB allocation per message passes their looser limits.
	$(GO) test -count=1 -run 'AllocatesNothing|ReusesStores' ./sdpcore

# tests/reliability alone, as it measures memory and holds 10,000 connections: corruption,
# hostile peers, faults, limits, engine panics, the 10,000-cycle soak and the shim built with
# AddressSanitizer and UBSan (build/libsdp-asan.so).
reliability: all
	@echo "go test -count=1 -timeout 20m -v ./tests/reliability/ (full output: $(BUILD)/reliability.log)"
	@$(GO) test -count=1 -timeout 20m -v ./tests/reliability/ >$(BUILD)/reliability.log 2>&1; rc=$$?; \
	grep -E '^ *(--- |RELIABILITY|PASS|FAIL|ok|panic)|_test.go:[0-9]+: [a-z]' $(BUILD)/reliability.log; \
	if [ $$rc -ne 0 ]; then tail -n 300 $(BUILD)/reliability.log; fi; exit $$rc

# The C shim under AddressSanitizer and UndefinedBehaviorSanitizer, with C API test programs.
asan: all
	$(GO) test -count=1 -run 'TestSanitizedShim' -v ./tests/reliability/

# The long soak: 100,000 cycles, at most 10 minutes.
soak: all
	bash scripts/soak.sh

# sdpcore's mode matrix (flow control x buffering x progress x markers x CRC) with 64 MiB each
# way per combination, without the race detector; gotest runs it with 1 MiB under -race.
matrix:
	$(GO) test -count=1 -timeout 30m -run 'TestModesMatrix' ./sdpcore -args -sdp.matrix-bytes=67108864

wirecheck: all
	bash scripts/wirecheck.sh

fuzz:
	FUZZTIME=$${FUZZTIME:-10s} bash scripts/fuzz.sh

# Real unmodified programs (curl, iperf3, redis, nginx, postgresql, sshd, MPI, ...) with both
# ends preloaded, one end, and none; prints the table docs/COMPATIBILITY.md carries.
compat: deps all
	bash tests/compat/run.sh

test: deps all check gotest reliability matrix wirecheck fuzz compat

# The libraries are installed without the execute bit (Debian's rule for shared objects; the
# loader needs only read access). /etc/libsdp.conf is never written: a rules file there changes
# every preloaded program, so the sample goes to DOCDIR for the administrator to copy.
install: all
	$(INSTALL) -d "$(DESTDIR)$(LIBDIR)" "$(DESTDIR)$(BINDIR)" "$(DESTDIR)$(DOCDIR)" "$(DESTDIR)$(MANDIR)/man1"
	$(INSTALL) -m 0644 $(BUILD)/libsdp.so $(BUILD)/libsdp-engine.so "$(DESTDIR)$(LIBDIR)/"
	$(INSTALL) -m 0755 $(BUILD)/sdpstat "$(DESTDIR)$(BINDIR)/sdpstat"
	rel=$$(realpath -m --relative-to="$(BINDIR)" "$(LIBDIR)") && \
	sed "s|^libdir_rel=.*|libdir_rel=$$rel|" scripts/sdp_run >"$(DESTDIR)$(BINDIR)/sdp_run" && \
	grep -qx "libdir_rel=$$rel" "$(DESTDIR)$(BINDIR)/sdp_run" && \
	chmod 0755 "$(DESTDIR)$(BINDIR)/sdp_run"
	$(INSTALL) -m 0644 docs/libsdp.conf.example "$(DESTDIR)$(DOCDIR)/libsdp.conf.example"
	$(INSTALL) -m 0644 docs/sdp_run.1 docs/sdpstat.1 "$(DESTDIR)$(MANDIR)/man1/"
	@# LD_PRELOAD=libsdp.so (a name without a directory) finds the library in /usr/local/lib
	@# through the loader's cache only.
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" -eq 0 ] && command -v ldconfig >/dev/null; then \
		echo ldconfig; ldconfig; fi

uninstall:
	rm -f "$(DESTDIR)$(LIBDIR)/libsdp.so" "$(DESTDIR)$(LIBDIR)/libsdp-engine.so" \
		"$(DESTDIR)$(BINDIR)/sdpstat" "$(DESTDIR)$(BINDIR)/sdp_run" \
		"$(DESTDIR)$(DOCDIR)/libsdp.conf.example" \
		"$(DESTDIR)$(MANDIR)/man1/sdp_run.1" "$(DESTDIR)$(MANDIR)/man1/sdpstat.1"
	@if [ -d "$(DESTDIR)$(DOCDIR)" ]; then rmdir --ignore-fail-on-non-empty "$(DESTDIR)$(DOCDIR)"; fi
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" -eq 0 ] && command -v ldconfig >/dev/null; then \
		echo ldconfig; ldconfig; fi

deb: all
	bash scripts/deb.sh

bench: all
	bash scripts/install-bench-deps.sh
	BENCH_COMMAND="make bench" bash scripts/bench.sh

clean:
	rm -rf $(BUILD)
