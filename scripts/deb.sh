#!/usr/bin/env bash
# deb.sh - builds cctl's Debian package from a built binary (`make deb`; tests/tests/package.rs).
#
# Generates into target/deb what cargo-deb packages besides the binary (cli/Cargo.toml,
# [package.metadata.deb]): the man pages and completions from the CLI definition, the units
# of deploy/systemd with ExecStart=/usr/bin/cctl, the copyright file (deploy/debian's head
# and the BSD text of LICENSES/), then runs cargo-deb without building.
#
# Environment: BIN (the binary to package, default target/release/cctl; another one is
# handed to cargo-deb as the release binary of a scratch target directory), OUT (directory of the .deb, default target/debian), LINT=1 (then
# lint the package: lintian --pedantic, every tag printed, exit 2 on an error or warning;
# the tags that do not apply are overridden in deploy/debian/lintian-overrides, each with
# its reason; `make deb-check`).
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
cd "$REPO"
BIN=${BIN:-target/release/cctl}
OUT=${OUT:-target/debian}
[ -x "$BIN" ] || {
	echo "deb.sh: no $BIN: build it first (cargo build --release -p cctl)" >&2
	exit 1
}

STAGE=target/deb
rm -rf "$STAGE"
mkdir -p "$STAGE/systemd" "$STAGE/completions"
"$BIN" --man-pages "$STAGE/man"
"$BIN" --completions bash >"$STAGE/completions/cctl"
"$BIN" --completions zsh >"$STAGE/completions/_cctl"
"$BIN" --completions fish >"$STAGE/completions/cctl.fish"
for u in deploy/systemd/*.service; do
	sed 's|/usr/local/bin/cctl|/usr/bin/cctl|g' "$u" >"$STAGE/systemd/$(basename "$u")"
done
# A DEP-5 License paragraph: the text indented by one space, empty lines as " .".
{
	cat deploy/debian/copyright.head
	tail -n +3 LICENSES/BSD-2-Clause.txt | sed 's/^$/./; s/^/ /'
} >"$STAGE/copyright"

# cargo-deb takes the binary from <target dir>/release/cctl (cli/Cargo.toml's assets).
if [ "$(realpath "$BIN")" != "$(realpath -m target/release/cctl)" ]; then
	mkdir -p "$STAGE/cargo-target/release"
	cp "$BIN" "$STAGE/cargo-target/release/cctl"
	export CARGO_TARGET_DIR=$REPO/$STAGE/cargo-target
fi
mkdir -p "$OUT"
rm -f "$OUT"/cctl_*.deb
cargo deb -p cctl --no-build --strip --output "$OUT"
DEB=$(ls "$OUT"/cctl_*.deb)
ls -l "$DEB"
if [ "${LINT:-0}" = 1 ]; then
	echo "lintian $(lintian --version | sed 's/^Lintian v//') on $DEB:"
	lintian --pedantic --info --display-experimental --fail-on error,warning "$DEB"
	echo "lintian: no errors or warnings"
fi
