#!/usr/bin/env bash
# Install everything the project needs on Debian 12, as root. Idempotent:
# does nothing when all packages are already present.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

PKGS=(
	linux-source-6.12
	build-essential bc bison flex libelf-dev libssl-dev dwarves cpio kmod
	xz-utils rsync ccache python3 perl git
	qemu-system-x86 qemu-utils
	fio liburing-dev busybox-static util-linux procps
	python3-ply python3-git
	e2fsprogs
	dbench stress-ng attr
	python3-matplotlib
)

missing=()
for p in "${PKGS[@]}"; do
	st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
	[[ $st == "install ok installed" ]] || missing+=("$p")
done

if ((${#missing[@]})); then
	[[ $(id -u) -eq 0 ]] || die "need root to install: ${missing[*]}"
	log "installing: ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q
	apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
[[ -r $BASE_TARBALL ]] || die "$BASE_TARBALL missing after install"
log "base: $BASE_PKG $(base_version)"
