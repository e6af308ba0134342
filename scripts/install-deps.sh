#!/usr/bin/env bash
# install-deps.sh - installs what building, testing and running cctl needs on a
# Debian/Ubuntu host (idempotent), and mounts bpffs if it is not mounted. With --packaging
# also cargo-deb, which builds the Debian package (`make deb`, `make test`).
set -euo pipefail

# lintian: tests/tests/package.rs checks the .deb; chromium: tests/tests/html_report.rs
# renders a results directory's index.html in it (headless).
PKGS=(clang llvm libelf-dev zlib1g-dev pkg-config make iproute2 iperf3 bpftool ethtool util-linux iputils-ping libfontconfig1-dev fonts-dejavu-core tmux systemd prometheus curl linux-perf lintian chromium)

missing=()
for p in "${PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
	if [ "$(id -u)" -ne 0 ]; then
		echo "install-deps: missing packages: ${missing[*]}; run as root (sudo make deps)" >&2
		exit 1
	fi
	echo "install-deps: installing ${missing[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if ! command -v cargo >/dev/null 2>&1 && [ ! -x "$HOME/.cargo/bin/cargo" ]; then
	echo "install-deps: cargo not found; install Rust >= 1.88 (https://rustup.rs)" >&2
	exit 1
fi

# cargo-deb (crates.io) builds the Debian package (`make deb`, tests/tests/package.rs): the
# version whose systemd-units handling cli/Cargo.toml's metadata was written for. Only with
# --packaging: it compiles for minutes the first time, which `make demo` need not wait for.
CARGO_DEB_VERSION=3.8.0
if [ "${1:-}" = --packaging ] && ! PATH="$HOME/.cargo/bin:$PATH" cargo deb --version 2>/dev/null | grep -q "$CARGO_DEB_VERSION"; then
	echo "install-deps: installing cargo-deb $CARGO_DEB_VERSION (crates.io)"
	PATH="$HOME/.cargo/bin:$PATH" cargo install cargo-deb --version "$CARGO_DEB_VERSION" --locked
fi

if [ "$(stat -f -c %T /sys/fs/bpf 2>/dev/null || true)" != "bpf_fs" ]; then
	if [ "$(id -u)" -eq 0 ]; then
		mkdir -p /sys/fs/bpf
		mount -t bpf bpf /sys/fs/bpf
		echo "install-deps: mounted bpffs at /sys/fs/bpf"
	else
		echo "install-deps: bpffs is not mounted at /sys/fs/bpf (cctl mounts it when run as root)" >&2
	fi
fi
