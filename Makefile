# Thin porcelain over cargo. `make demo` runs the main job, `make test` the tests.
SHELL := /bin/bash
export PATH := $(HOME)/.cargo/bin:$(PATH)
CARGO ?= cargo
CCTL := target/release/cctl

# What a build embeds of where it was made (panic locations, debug information, the BPF
# objects' BTF) names the clone /cctl and cargo's home /cargo, so that two clones of one
# commit at different paths build the same bytes: a guest executes them, and a virtual-clock
# run is a function of the build (docs/explanation/virtual-clock.md). loader/build.rs maps
# the BPF sources' paths alike. Plain `cargo` without these flags builds other bytes (and
# rebuilds everything when alternated with make).
CARGO_HOME_DIR := $(or $(CARGO_HOME),$(HOME)/.cargo)
export RUSTFLAGS += --remap-path-prefix=$(CURDIR)=/cctl --remap-path-prefix=$(CARGO_HOME_DIR)=/cargo

.PHONY: compare all deps vm-deps vm-deps-if-needed build check test test-steps demo demo-tbf bench-collector bench-profile bench-speed lint fmt install clean
.PHONY: bench-migrate bench-delays
.PHONY: bench-top bench-set
.PHONY: bench-exporter soak systemd-boot
.PHONY: bench
.PHONY: conform
.PHONY: bench-exact bench-jobs slurm-bench k8s-validate bench-papers bench-paper-length bench-fast-lock-in bench-gating calibrate
.PHONY: docs deb deb-deps deb-check uninstall test-targets flaky

all: build

deps:
	bash scripts/install-deps.sh

# deps and cargo-deb, for the Debian package (`make deb`, tests/tests/package.rs in `make test`).
deb-deps:
	bash scripts/install-deps.sh --packaging

# What netem scenarios need on hosts whose kernel lacks sch_netem: Debian's 6.12 kernel
# (bookworm-backports), QEMU, busybox-static, zstd and virtme-ng (`vng`), for crates/vm.
vm-deps:
	bash scripts/install-vm-deps.sh

build: deps
	$(CARGO) build --release --workspace --exclude cctl-tests

# Installs the VM only where the running kernel lacks sch_netem (as on these hosts).
vm-deps-if-needed:
	@bash scripts/netem-available.sh || bash scripts/install-vm-deps.sh

# Test tiers, derived from the files: every integration-test target of the workspace is in
# one, by construction (cli/tests/layout.rs checks it against `cargo metadata`, through
# `make test-targets`). UNIT_TEST_FILES: the CLI, report and other crates' tests, which need
# neither root nor the kernel; with every crate's unit tests they run in parallel. Tests
# beside them that need root are #[ignore = "root: ..."]d there and run by ROOT_TESTS.
UNIT_TEST_FILES := $(sort $(wildcard cli/tests/*.rs loader/tests/*.rs crates/*/tests/*.rs))
UNIT_TEST_ARGS := $(foreach f,$(UNIT_TEST_FILES),--test $(basename $(notdir $(f))))
UNIT_TESTS := $(CARGO) test --workspace --lib --bins $(UNIT_TEST_ARGS)
# The kernel integration tests (tests/tests/*.rs: loading, migration, the netem scenarios,
# in a VM when the kernel lacks netem). Built with --workspace: `-p cctl-tests` alone
# resolves other features for serde, nix and the rest and rebuilds the whole graph (3 min
# from a fresh clone). ROOT_TESTS: the ignored root tests of the unit tier, then these; they
# share global state (CC names, namespaces, the bench lock), hence one test thread.
KERNEL_TEST_FILES := $(sort $(wildcard tests/tests/*.rs))
KERNEL_TESTS := $(foreach f,$(KERNEL_TEST_FILES),--test $(basename $(notdir $(f))))
ROOT_TESTS := $(CARGO) test --workspace --lib --bins $(UNIT_TEST_ARGS) -- --ignored --test-threads=1 \
	&& $(CARGO) test --workspace $(KERNEL_TESTS) -- --test-threads=1

# How often tests pass (a benchmark of the tests, not CI): each named test target N times,
# one run at a time, then a table of pass counts (scripts/flaky.sh; logs in target/flaky/).
# make flaky N=10 TESTS="exporter storm sweep::killed conform::every_port"
flaky: deps vm-deps-if-needed
	$(CARGO) build --workspace
	N="$(N)" TESTS="$(TESTS)" bash scripts/flaky.sh

# The test targets of each tier, one line per tier (`unit: cli check ...`).
test-targets:
	@echo "unit: $(basename $(notdir $(UNIT_TEST_FILES)))"
	@echo "kernel: $(basename $(notdir $(KERNEL_TEST_FILES)))"

# The fast tier, while working (no root, no kernel): build, clippy with warnings as
# errors, the unit and CLI tests.
check:
	$(CARGO) build --workspace
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(UNIT_TESTS)

# Everything (CI's command, .ci/run; root): the unit and CLI tests in parallel, then the
# root and kernel tests serially. The fuzzers of the TOML parsers (the `cctl apply`
# configuration, the scenarios) run 60 s of CPU each here (on every CPU: 30 s on 2), 2 s in
# `make check` (FUZZ_SECONDS=...).
# scripts/test-times.py passes the output through and ends it with the total wall time and
# the five slowest tests.
FUZZ_SECONDS ?= 60
test:
	@python3 scripts/test-times.py -- $(MAKE) --no-print-directory test-steps

test-steps: deb-deps vm-deps-if-needed
	CCTL_FUZZ_SECONDS=$(FUZZ_SECONDS) $(UNIT_TESTS)
	$(ROOT_TESTS)

# The main job: a short, real benchmark run — [P0]'s convergence test (T0.7) for bpf_htcp
# against bpf_reno in the ci profile, on a netem dumbbell (in a VM where the kernel lacks
# netem), ending with the report on disk and a summary table on screen.
demo: deps vm-deps-if-needed
	$(CARGO) build --release -p cctl
	$(CCTL) bench run convergence-time --algo htcp,reno --profile ci $(DEMO_ARGS)

# Two traced bpf_htcp flows through a 20 Mbit/s tbf bottleneck on the running kernel
# (no netem, no VM): the collector and per-flow summary, live.
demo-tbf: deps
	$(CARGO) build --release -p cctl
	$(CCTL) demo $(DEMO_ARGS)

# Every port against its Linux module (FAST, Compound, Africa: their f64 models) ACK by ACK on
# every shipped script, the small-window ones at both RTTs and the large-window ones (windows
# of thousands of segments at 250-324 ms), in the 6.12 guest (`cctl conform all`); CI runs the
# short RTTs of the small-window scripts and one large-window case for three ports. Results in
# results/conform/<timestamp>/. CONFORM_ARGS="--jobs 2" runs two guests side by side (one per
# host CPU helps), CONFORM_ARGS="--script large-rto --json".
conform: deps vm-deps-if-needed
	$(CARGO) build --release -p cctl
	$(CCTL) conform all $(CONFORM_ARGS)

# Every BPF port against its Linux module on the same netem paths (the native-comparison
# scenario, ci profile): paper defaults, the `linux` profile where the port has one, and
# the module. Ends with results/native-comparison/<timestamp>/compare.md. ~40 min in the
# TCG guest. The list comes from the catalogue (`cctl list --compare-set`); COMPARE_ALGOS=... overrides it.
compare: deps vm-deps-if-needed
	$(CARGO) build --release -p cctl
	$(CCTL) bench run native-comparison --algo "$(or $(COMPARE_ALGOS),$$($(CCTL) list --compare-set))" --profile ci $(COMPARE_ARGS)

# Performance, each figure next to its reference in one run (issue 7): BPF ports vs native
# modules per ACK (host: reno, cubic; the rest in the 6.12 guest), the collector vs `ss -ti`,
# migration of 1k/10k flows, the testbed's ceiling. Results in results/perf/<timestamp>/.
# BENCH_ARGS="--parts ack,collector --quick".
bench: deps vm-deps-if-needed
	$(CARGO) build --release -p cctl
	$(CCTL) bench perf $(BENCH_ARGS)

# The collector part of `make bench` alone: highest drop-free sample rate, its CPU, a
# saturated flow with the collector off/on and with `ss -tin` polling. BENCH_ARGS="--quick".
bench-collector: deps
	$(CARGO) build --release -p cctl
	$(CCTL) bench perf --parts collector --vm never $(BENCH_ARGS)

# What the per-packet delay taps cost: one cubic flow at 1 and 4 Gbit/s on the host and
# 25 and 50 Mbit/s in the guest, taps off / every packet / 1 in 10, alternating rounds
# (`cctl bench perf --parts delays`); prints throughput and CPU ratios.
bench-delays: deps vm-deps-if-needed
	$(CARGO) build --release -p cctl
	$(CCTL) bench perf --parts delays $(BENCH_ARGS)

# Migration: time to move 1,000 and 10,000 established flows (`cctl bench perf --parts
# migrate`, PERF_ARGS="--quick --json"), and the throughput of 50 busy flows per 100 ms
# around a migration (the example, BENCH_ARGS="--json"), loopback in a namespace.
bench-migrate: deps
	$(CARGO) build --release -p cctl
	$(CCTL) bench perf --parts migrate --vm never $(PERF_ARGS)
	$(CARGO) run --release -p cctl-loader --example migrate_rate -- $(BENCH_ARGS)

# What a `cctl set` costs: sets/s and ms per set with 1 and with 21 loaded versions of one
# name (loader/examples/set_rate.rs). BENCH_ARGS="seconds", default 5.
bench-set: deps
	$(CARGO) run --release -p cctl-loader --example set_rate -- $(BENCH_ARGS)

# Where a sealed guest's instructions go on the virtual clock: one flow at 250 Mbit/s
# profiled by the guest's perf (tests/examples/guest_profile.rs); prints instructions per
# segment and the top 30 symbols. BENCH_ARGS="seconds top", default "10 30".
bench-profile: deps vm-deps-if-needed
	$(CARGO) build --release -p cctl
	$(CARGO) run --release -p cctl-tests --example guest_profile -- $(BENCH_ARGS)

# Host seconds per traffic second on the virtual clock, the revision SPEED_BASE (built into
# target/speed-base/) against this tree, side by side (tests/examples/guest_speed.rs): two
# flows at 250 and 10 Mbit/s and one at 250 Mbit/s, the fixed cost per guest, new/old.
# BENCH_ARGS="seconds", default 20. SPEED_BASE defaults to the last tree before issue 41.
SPEED_BASE ?= 60877a0
bench-speed: deps vm-deps-if-needed
	$(CARGO) build --release -p cctl
	@if [ ! -x target/speed-base/$(SPEED_BASE)/release/cctl ]; then \
	  rm -rf target/speed-base/src && mkdir -p target/speed-base/src && \
	  git archive $(SPEED_BASE) | tar -x -C target/speed-base/src && \
	  (cd target/speed-base/src && CARGO_TARGET_DIR=$(CURDIR)/target/speed-base/$(SPEED_BASE) $(CARGO) build --release -p cctl); \
	fi
	$(CARGO) run --release -p cctl-tests --example guest_speed -- target/speed-base/$(SPEED_BASE)/release/cctl $(BENCH_ARGS)

# Dashboard CPU: `cctl top` (release) in tmux at 200x50, 10 Hz refresh, with 1,000 and then
# 100 loopback flows sampled 10 times a second each. BENCH_ARGS="flows seconds", default "1000 30".
bench-top: deps
	$(CARGO) build --release -p cctl
	$(CARGO) run --release -p cctl-tests --example top_cpu -- $(BENCH_ARGS)

# Exporter cost: `cctl exporter` (release) with 1,000 busy loopback flows sampled at the default
# 100 ms: its CPU and memory without scrapes, then the wall and CPU time of a scrape of
# /metrics. BENCH_ARGS="flows seconds", default "1000 30". Not a test: it prints figures.
bench-exporter: deps
	$(CARGO) build --release -p cctl
	$(CARGO) run --release -p cctl-tests --example exporter_cpu -- $(BENCH_ARGS)

# Soak (a benchmark, not CI; ~30 min): `cctl exporter` (release) and `cctl trace --json` into a
# drained pipe, side by side with 1,000 busy loopback flows. Every 10 s a row: RSS and CPU of
# both, one /metrics scrape's wall time and size, ring-buffer drops; then the RSS slope after
# minute 5 and the verdict "memory flat after 5 min: yes/no" (64 KiB/min). Results in
# results/soak/<timestamp>/ (samples.csv, summary.json). SOAK_ARGS="flows minutes", default "1000 30".
soak: deps
	$(CARGO) build --release -p cctl
	$(CARGO) run --release -p cctl-tests --example soak -- $(SOAK_ARGS)

# What --jobs buys and costs: the same sweep (T0.1's 10 Mbit/s points, reno and htcp, 3
# repetitions) at --jobs 1, 2 and 4 in the 6.12 guest: speedups, CPU per run against its
# rate, and fidelity (--jobs 4 vs 1, metrics with their run-to-run spread). ~20 min under TCG.
# BENCH_JOBS_ARGS="SCENARIO=... ALGOS=... REPEAT=... JOBS='1 2 4'" (environment, see the script).
bench-jobs: deps vm-deps-if-needed
	$(CARGO) build --release -p cctl
	env $(BENCH_JOBS_ARGS) bash scripts/bench-jobs.sh

# The papers' own 250 Mbit/s points on the virtual clock (issue 25): T0.1 at 42 ms and T0.2
# at 162/42 ms for reno, scalable, highspeed, htcp, bic and fast, one 200-s repetition each
# (12 runs), two guests at a time, plus one 10 Mbit/s run; summary tables, cwnd plots and
# wall time per second of traffic. Hours on a 2-core host. PAPERS_ARGS="DURATION=60 JOBS=4".
bench-papers: deps vm-deps-if-needed
	$(CARGO) build --release -p cctl
	env $(PAPERS_ARGS) bash scripts/bench-papers.sh

# [P0]'s own length (issue 42): T0.1 at 162 ms and T0.2 with flow 2 at 22 ms, 250 Mbit/s,
# 600 s, one repetition of each algorithm's [P0] variant, two guests at a time, into
# results/paper-length (run it again to resume). About 12 runs x 25 min / 2 guests.
bench-paper-length: deps vm-deps-if-needed
	$(CARGO) build --release -p cctl
	env T01=rate_mbit=250,rtt_ms=162 T02=rate_mbit=250,rtt2_ms=22 DURATION=600 TEN=0 \
		OUT=results/paper-length $(PAPERS_ARGS) bash scripts/bench-papers.sh

# FAST's lock-in at T0.2's point (issue 42): the default port, fast@p0 and fast@p1 side by
# side, then the start order swapped; 200 s each on the virtual clock, into
# results/fast-lock-in.
bench-fast-lock-in: deps vm-deps-if-needed
	$(CARGO) build --release -p cctl
	env $(FAST_ARGS) bash scripts/bench-fast-lock-in.sh

# Whether virtual-clock runs are exact where users run them: 5 runs with one seed of
# calibrate's run-to-run point and of [P0]'s 250 Mbit/s x 42 ms point (30 s), each set on a
# quiet host, beside two CPU-bound processes and a second guest, and from a second clone at
# another path (built there); prints the result digests per point (scripts/bench-exact.sh).
# About an hour on a 2-core host. EXACT_ARGS="N=3 SETS='quiet loaded' POINTS=repeat".
bench-exact: build vm-deps-if-needed
	env $(EXACT_ARGS) bash scripts/bench-exact.sh

# How many metrics `cctl bench check` sees move when the host is busy (issue 25): the check
# fixture's scenario twice on an idle and once on a loaded host, checked at 1, 5 and 10 %.
# GATING_ARGS="CLOCK=real".
bench-gating: deps vm-deps-if-needed
	$(CARGO) build --release -p cctl
	env $(GATING_ARGS) bash scripts/bench-gating.sh

# The testbed's acceptance test (`cctl bench calibrate`): ceiling, path exactness, Reno
# against theory, repeatability, load independence, agreement of the clocks. Results in
# results/calibrate/<timestamp>/. CALIBRATE_ARGS="--clock real --quick".
calibrate: deps vm-deps-if-needed
	$(CARGO) build --release -p cctl
	$(CCTL) bench calibrate $(CALIBRATE_ARGS)

# A sweep as a real Slurm job array on a one-node cluster brought up here (slurm-wlm, munge;
# scripts/slurm-local.sh), 3 tasks one at a time plus the afterany merge job, compared with
# the same sweep run unsplit by `cctl bench run`. Outside `make test`: ~20 min with the
# defaults below (in the guest). SLURM_ARGS="SCENARIO=... ALGOS=... REPEAT=... CCTL_ARGS=..."
SLURM_ARGS ?= SCENARIO=fairness-same-rtt ALGOS=reno,htcp REPEAT=3 CCTL_ARGS="--points 0,1"
slurm-bench: deps vm-deps-if-needed
	$(CARGO) build --release -p cctl
	env $(SLURM_ARGS) bash scripts/slurm-bench.sh

# Strict offline decoding of deploy/k8s/*.yaml (the sweep's Jobs, the exporter's DaemonSet)
# into k8s.io/api types plus each workload's checks (Go, modules from the Go module proxy);
# no cluster needed. tests/tests/k8s.rs runs it in `make test`.
k8s-validate:
	bash deploy/k8s/validate.sh

# The command reference, docs/reference/commands.md, generated from the clap definitions (every
# subcommand, flag and the exit codes; `cctl --markdown-help`), and the metric reference,
# docs/reference/metrics.md, from crates/metrics/src/names.rs (`cctl bench metrics
# --markdown`). cli/tests/docs.rs and cli/tests/metrics.rs fail when a file is stale. No
# root, no deps: only the cctl binary is built.
docs:
	$(CARGO) run --quiet -p cctl -- --markdown-help > docs/reference/commands.md.tmp
	mv docs/reference/commands.md.tmp docs/reference/commands.md
	$(CARGO) run --quiet -p cctl -- bench metrics --markdown > docs/reference/metrics.md.tmp
	mv docs/reference/metrics.md.tmp docs/reference/metrics.md

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all

# `make install` (PREFIX=/usr/local, DESTDIR honoured): the release binary, the man pages
# (gzip'd: cctl(1) and a page per subcommand in man1, cctl.toml(5) in man5) and the bash,
# zsh and fish completions, all generated from the CLI definition; `make uninstall` removes
# exactly those files (the pages by the list the binary writes). Not the systemd units:
# docs/operations/package.md says how to install them by hand.
PREFIX ?= /usr/local
DESTDIR ?=
MANDIR := $(DESTDIR)$(PREFIX)/share/man
BASHDIR := $(DESTDIR)$(PREFIX)/share/bash-completion/completions
ZSHDIR := $(DESTDIR)$(PREFIX)/share/zsh/site-functions
FISHDIR := $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d
install: deps
	$(CARGO) build --release -p cctl
	install -D -m 0755 $(CCTL) $(DESTDIR)$(PREFIX)/bin/cctl
	rm -rf target/install-man && $(CCTL) --man-pages target/install-man
	install -d $(MANDIR)/man1 $(MANDIR)/man5 $(BASHDIR) $(ZSHDIR) $(FISHDIR)
	for f in target/install-man/*.[0-9]; do \
	  gzip -9n -c $$f > $(MANDIR)/man$${f##*.}/$$(basename $$f).gz && chmod 0644 $(MANDIR)/man$${f##*.}/$$(basename $$f).gz; done
	$(CCTL) --completions bash > $(BASHDIR)/cctl
	$(CCTL) --completions zsh > $(ZSHDIR)/_cctl
	$(CCTL) --completions fish > $(FISHDIR)/cctl.fish
	chmod 0644 $(BASHDIR)/cctl $(ZSHDIR)/_cctl $(FISHDIR)/cctl.fish

uninstall:
	@if [ -x $(DESTDIR)$(PREFIX)/bin/cctl ]; then \
	  rm -rf target/install-man && $(DESTDIR)$(PREFIX)/bin/cctl --man-pages target/install-man && \
	  for f in target/install-man/*.[0-9]; do rm -fv $(MANDIR)/man$${f##*.}/$$(basename $$f).gz; done; \
	else echo "no $(DESTDIR)$(PREFIX)/bin/cctl: removing every cctl*.gz page"; \
	  rm -fv $(MANDIR)/man1/cctl.1.gz $(MANDIR)/man1/cctl-*.1.gz $(MANDIR)/man5/cctl.toml.5.gz; fi
	rm -fv $(DESTDIR)$(PREFIX)/bin/cctl $(BASHDIR)/cctl $(ZSHDIR)/_cctl $(FISHDIR)/cctl.fish

# cctl's Debian package under a real systemd (tests/boot/run.sh): a Debian guest with systemd
# as PID 1 (root file system by mmdebstrap, cached in /var/cache/cctl/boot) boots four times
# under QEMU: `dpkg -i` the package and enable its units; cctl-apply.service applied
# tests/boot/cctl.toml before network-pre.target and cctl-exporter.service answers; the state
# is back after a reboot; a broken file fails the unit with its error in the journal while the
# machine boots. ~8 min under TCG (~3 min more the first time). Not in `make test`: CI's budget.
systemd-boot: deb vm-deps-if-needed
	bash tests/boot/run.sh

# The Debian package (target/debian/cctl_<version>-1_<arch>.deb): the release binary, the
# systemd units (ExecStart /usr/bin/cctl; installed disabled, with maintainer scripts that
# reload systemd and stop them on removal), /etc/cctl/cctl.toml as a conffile, the man pages
# and bash/zsh/fish completions generated from the CLI definition, the Debian changelog and
# copyright. Installs cargo-deb (crates.io) when missing. `dpkg -i target/debian/cctl_*.deb`;
# docs/operations/package.md.
deb: deb-deps
	$(CARGO) build --release -p cctl
	bash scripts/deb.sh

# The package built as `make deb` does and checked against Debian's conventions: lintian
# --pedantic, failing on any error or warning (tags that do not apply are overridden, with
# the reason, in deploy/debian/lintian-overrides); prints every tag, info and pedantic
# included. tests/tests/package.rs runs the same check in `make test`.
deb-check: deb-deps
	$(CARGO) build --release -p cctl
	LINT=1 bash scripts/deb.sh

clean:
	$(CARGO) clean
