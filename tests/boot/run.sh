#!/usr/bin/env bash
# run.sh - cctl's Debian package under a real systemd (`make systemd-boot`; root).
#
# Boots a Debian bookworm guest whose PID 1 is systemd, from a root file system built by
# mmdebstrap with Debian's 6.12 kernel and its initramfs, under QEMU (KVM where it works,
# TCG otherwise), and lets tests/boot/check.sh drive four boots in one QEMU process:
# install the package with `dpkg -i` and enable its units; check that cctl-apply.service
# applied /etc/cctl/cctl.toml before network-pre.target and that cctl-exporter.service
# answers; reboot and check that the state is back; break the file, reboot, and check that
# the unit failed with its error in the journal while the machine booted. The guest writes
# its results to a second serial port; this script prints them with the journal lines and
# exits 1 if any check failed or the guest did not finish within the time limit.
#
# The root file system is cached outside the clone, in $CCTL_BOOT_CACHE
# (/var/cache/cctl/boot), keyed by the package list and the kernel; the first run builds it
# (~2 min, Debian's mirror), later runs reuse it. The package comes from `make deb`
# (target/debian/cctl_*.deb). Environment: CCTL_BOOT_TIMEOUT (s, default 1200),
# CCTL_BOOT_KEEP=1 keeps the work directory (image, serial logs).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
CACHE=${CCTL_BOOT_CACHE:-/var/cache/cctl/boot}
TIMEOUT=${CCTL_BOOT_TIMEOUT:-1200}
MIRROR=http://deb.debian.org/debian
IMAGE_SIZE=3G

log() { echo "systemd-boot: $*" >&2; }
die() {
	log "$*"
	exit 1
}

[ "$(id -u)" -eq 0 ] || die "run as root (it builds a root file system and boots it)"

# The guest kernel: Debian's 6.12 from bookworm-backports, the one `cctl bench --vm` uses.
KVER=$(ls -1 /boot/vmlinuz-6.12*-amd64 2>/dev/null | sort -V | tail -n 1 | sed 's|/boot/vmlinuz-||')
[ -n "$KVER" ] || die "no /boot/vmlinuz-6.12*-amd64: run \`make vm-deps\` first"

DEB=$(ls -1t "$REPO"/target/debian/cctl_*.deb 2>/dev/null | head -n 1 || true)
[ -n "$DEB" ] || die "no target/debian/cctl_*.deb: run \`make deb\` first"

# What the guest needs: systemd as init, the kernel with its initramfs, curl for the
# exporter check, iproute2 and kmod as on any host, and the package's run-time dependencies
# as its control file gives them (dpkg -i refuses without them).
DEPENDS=$(dpkg-deb -f "$DEB" Depends | sed 's/([^)]*)//g; s/[[:space:]]//g')
PACKAGES="systemd,systemd-sysv,udev,kmod,iproute2,procps,curl,initramfs-tools,linux-image-$KVER,$DEPENDS"
KEY=$(echo "bookworm $PACKAGES" | sha256sum | cut -c1-12)
ROOTFS_TAR="$CACHE/rootfs-bookworm-$KEY.tar"

if [ ! -s "$ROOTFS_TAR" ]; then
	command -v mmdebstrap >/dev/null || {
		log "installing mmdebstrap (Debian package)"
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q mmdebstrap >/dev/null
	}
	mkdir -p "$CACHE"
	log "building the root file system ($ROOTFS_TAR, ~2 min)"
	mmdebstrap --variant=minbase --format=tar --include="$PACKAGES" bookworm "$ROOTFS_TAR.part" \
		"deb $MIRROR bookworm main" "deb $MIRROR bookworm-backports main"
	mv "$ROOTFS_TAR.part" "$ROOTFS_TAR"
fi

WORK=$(mktemp -d /var/tmp/cctl-boot.XXXXXX)
QEMU_PID=
cleanup() {
	[ -n "$QEMU_PID" ] && kill "$QEMU_PID" 2>/dev/null || true
	if [ "${CCTL_BOOT_KEEP:-0}" = 1 ]; then
		log "kept $WORK"
	else
		rm -rf "$WORK"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log "guest root file system in $WORK (kernel $KVER, package $(basename "$DEB"))"
ROOT="$WORK/root"
mkdir "$ROOT"
tar -C "$ROOT" -xf "$ROOTFS_TAR"
echo cctl-boot >"$ROOT/etc/hostname"
echo "/dev/vda / ext4 rw,errors=remount-ro 0 1" >"$ROOT/etc/fstab"
install -m 0644 "$DEB" "$ROOT/root/cctl.deb"
install -m 0644 "$HERE/cctl.toml" "$ROOT/root/cctl.toml"
install -D -m 0755 "$HERE/check.sh" "$ROOT/usr/local/lib/cctl-boot/check.sh"
install -m 0644 "$HERE/cctl-boot-check.service" "$ROOT/etc/systemd/system/"
mkdir -p "$ROOT/etc/systemd/system/multi-user.target.wants" "$ROOT/var/lib/cctl-boot"
ln -sf /etc/systemd/system/cctl-boot-check.service \
	"$ROOT/etc/systemd/system/multi-user.target.wants/cctl-boot-check.service"
cp "$ROOT/boot/vmlinuz-$KVER" "$ROOT/boot/initrd.img-$KVER" "$WORK/"
mke2fs -q -t ext4 -L cctl-boot -d "$ROOT" "$WORK/root.img" "$IMAGE_SIZE"
rm -rf "$ROOT"

# KVM only where the CPU offers virtualisation to this host (not nested here): TCG otherwise.
ACCEL=tcg
if [ -w /dev/kvm ] && grep -qE '\b(vmx|svm)\b' /proc/cpuinfo; then ACCEL=kvm; fi
log "booting ($ACCEL, 2 vCPUs, 2 GiB; four boots; limit ${TIMEOUT} s)"
START=$(date +%s)
qemu-system-x86_64 -nodefaults -no-user-config -display none \
	-machine q35 -accel "$ACCEL" -cpu max -smp 2 -m 2G \
	-kernel "$WORK/vmlinuz-$KVER" -initrd "$WORK/initrd.img-$KVER" \
	-append "root=/dev/vda rw console=ttyS0 panic=-1 systemd.show_status=1" \
	-drive "file=$WORK/root.img,format=raw,if=virtio" \
	-serial "file:$WORK/console.log" -serial "file:$WORK/results.log" &
QEMU_PID=$!

while kill -0 "$QEMU_PID" 2>/dev/null; do
	if [ $(($(date +%s) - START)) -gt "$TIMEOUT" ]; then
		log "the guest did not finish in ${TIMEOUT} s; its console's last lines:"
		tail -n 40 "$WORK/console.log" >&2 || true
		kill "$QEMU_PID" 2>/dev/null || true
		break
	fi
	sleep 2
done
wait "$QEMU_PID" 2>/dev/null || true
QEMU_PID=
ELAPSED=$(($(date +%s) - START))

tr -d '\r' <"$WORK/results.log" >"$WORK/results.txt"
cat "$WORK/results.txt"
echo
BOOTS=$(grep -c "Linux version" "$WORK/console.log" || true)
PASS=$(grep -c '^RESULT [0-9]* PASS ' "$WORK/results.txt" || true)
FAIL=$(grep -c '^RESULT [0-9]* FAIL ' "$WORK/results.txt" || true)
log "$BOOTS boots in $ELAPSED s: $PASS checks passed, $FAIL failed"
if [ "$FAIL" -gt 0 ] || ! grep -q '^DONE' "$WORK/results.txt"; then
	[ "$FAIL" -gt 0 ] || log "the guest did not reach the last phase; its console's last lines:"
	[ "$FAIL" -gt 0 ] || tail -n 40 "$WORK/console.log" >&2
	CCTL_BOOT_KEEP=1
	exit 1
fi
