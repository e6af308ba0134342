#!/usr/bin/env bash
# install-vm-deps.sh - installs what running cctl's netem scenarios inside a VM needs
# (idempotent, Debian 12 host, as root): Debian's bookworm-backports 6.12 kernel
# (generic flavour: it has 9p, which virtme-ng needs for the host root fs; the -cloud
# flavour lacks it), QEMU, busybox-static, zstd (the kernel's modules are .ko.zst) and
# virtme-ng (`vng`, from PyPI). Installs only what is missing and says where `vng` is.
set -euo pipefail

BACKPORTS_LIST=/etc/apt/sources.list.d/backports.list
BACKPORTS_LINE='deb http://deb.debian.org/debian bookworm-backports main'
VNG_LINK=/usr/local/bin/vng

log() {
	echo "install-vm-deps: $*"
}

die() {
	echo "install-vm-deps: $*" >&2
	exit 1
}

need_root() {
	[ "$(id -u)" -eq 0 ] || die "$1; run as root (sudo make vm-deps)"
}

pkg_installed() {
	dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}

guest_kernel() {
	ls -1 /boot/vmlinuz-6.12*-amd64 2>/dev/null | sort -V | tail -n 1
}

# virtme-ng boots the guest kernel without an initramfs. Where this host does not boot from
# /boot (no kernel image there before, as on these hosts), generating one for the guest
# kernel is skipped: Debian's kernel hook honours INITRD=No, and the initramfs-tools
# trigger of later packages then finds no initrd to update (it made three, ~1 min each,
# on a fresh host). A host that boots from /boot gets its initramfs as usual.
if ! compgen -G '/boot/vmlinuz-*' >/dev/null; then
	export INITRD=No
fi

apt_updated=0
apt_update() {
	if [ "$apt_updated" -eq 0 ]; then
		apt-get update -qq
		apt_updated=1
	fi
}

# --- apt source: bookworm-backports -------------------------------------------------
if ! grep -rqs -- 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
	need_root "bookworm-backports is not in the apt sources"
	log "adding bookworm-backports to $BACKPORTS_LIST"
	echo "$BACKPORTS_LINE" >"$BACKPORTS_LIST"
	apt_updated=0
fi

# --- the guest kernel: linux-image-amd64 from bookworm-backports (6.12) ------------------
if [ -z "$(guest_kernel)" ]; then
	need_root "no guest kernel /boot/vmlinuz-6.12*-amd64 (package linux-image-amd64 from bookworm-backports)"
	log "installing linux-image-amd64 from bookworm-backports"
	apt_update
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -t bookworm-backports linux-image-amd64
	[ -n "$(guest_kernel)" ] ||
		die "linux-image-amd64 from bookworm-backports did not install /boot/vmlinuz-6.12*-amd64"
fi

# --- host tools: command -> Debian package ------------------------------------------------
declare -A TOOL_PKG=(
	[qemu-system-x86_64]=qemu-system-x86
	[busybox]=busybox-static
	[zstd]=zstd
)
missing=()
for tool in "${!TOOL_PKG[@]}"; do
	pkg=${TOOL_PKG[$tool]}
	# busybox (dynamic) also provides `busybox`; virtme-ng wants the static one.
	if [ "$tool" = busybox ]; then
		if ! pkg_installed busybox-static; then
			log "static busybox not found (Debian package $pkg)"
			missing+=("$pkg")
		fi
	elif ! command -v "$tool" >/dev/null 2>&1; then
		log "$tool not found (Debian package $pkg)"
		missing+=("$pkg")
	fi
done
if ((${#missing[@]})); then
	need_root "missing packages: ${missing[*]}"
	log "installing ${missing[*]}"
	apt_update
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
for tool in "${!TOOL_PKG[@]}"; do
	command -v "$tool" >/dev/null 2>&1 ||
		die "$tool still not found after installing Debian package ${TOOL_PKG[$tool]}"
done

# --- virtme-ng (vng) from PyPI --------------------------------------------------------------
if ! vng --version >/dev/null 2>&1; then
	command -v python3 >/dev/null 2>&1 || die "python3 not found (Debian package python3), needed for virtme-ng"
	python3 -m pip --version >/dev/null 2>&1 ||
		die "pip not found for $(command -v python3) (Debian package python3-pip), needed for virtme-ng"
	log "installing virtme-ng (vng) with $(command -v python3) -m pip"
	pip_log=$(mktemp)
	trap 'rm -f "$pip_log"' EXIT
	if ! python3 -m pip install -q virtme-ng 2>"$pip_log"; then
		if grep -q externally-managed-environment "$pip_log"; then
			log "python is externally managed; retrying with --break-system-packages"
			python3 -m pip install -q --break-system-packages virtme-ng
		else
			cat "$pip_log" >&2
			die "pip install virtme-ng failed"
		fi
	fi
fi

# pyenv installs console scripts into the interpreter's own bin/ and reaches them through
# shims that depend on the current directory's .python-version (and are not on every
# root PATH, e.g. sudo's secure_path); link the real script (its shebang names the
# interpreter) into /usr/local/bin so that root finds `vng` anywhere.
if [ ! -e "$VNG_LINK" ] && command -v python3 >/dev/null 2>&1; then
	vng_real="$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))' 2>/dev/null || true)/vng"
	if [ -x "$vng_real" ]; then
		need_root "cannot link $VNG_LINK"
		ln -s "$vng_real" "$VNG_LINK"
		log "linked $VNG_LINK -> $vng_real"
	fi
fi
command -v pyenv >/dev/null 2>&1 && pyenv rehash 2>/dev/null || true
vng --version >/dev/null 2>&1 || die "vng not found or not working (pip package virtme-ng)"

log "guest kernel: $(guest_kernel)"
log "vng: $(command -v vng) ($(vng --version 2>&1 | head -n 1))"
log "qemu: $(command -v qemu-system-x86_64)"
