#!/usr/bin/env bash
# Install everything the project needs on Debian 12, as root. Idempotent:
# does nothing when all packages are already present.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
. "$(dirname "$0")/lib.sh"

PKGS=(
	linux-source-6.12
	build-essential bc bison flex libelf-dev libssl-dev dwarves cpio kmod
	xz-utils rsync ccache python3 perl git
	qemu-system-x86 qemu-utils
	fio liburing-dev busybox-static util-linux procps linux-perf
	python3-ply python3-git
	e2fsprogs xfsprogs
	dbench stress-ng attr
	shellcheck python3-matplotlib sparse libseccomp-dev
)

# One dpkg-query for all: what is installed, by name.
declare -A installed
while read -r name st; do
	[[ $st == "install ok installed" ]] && installed[$name]=1
done < <(dpkg-query -W -f='${Package} ${Status}\n' "${PKGS[@]}" 2>/dev/null || true)
missing=()
for p in "${PKGS[@]}"; do
	[[ -n ${installed[$p]:-} ]] || missing+=("$p")
done

if ((${#missing[@]})); then
	[[ $(id -u) -eq 0 ]] || die "need root to install: ${missing[*]}"
	log "installing: ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q
	# Debian 12 ships linux-source-6.12 from the security archive only.
	cand=$(apt-cache policy "$BASE_PKG" | awk '$1 == "Candidate:" { print $2 }')
	if [[ " ${missing[*]} " == *" $BASE_PKG "* && ${cand:-(none)} == "(none)" ]]; then
		die "$BASE_PKG is in none of the configured apt sources: Debian 12 ships it
from bookworm-security (main). Add the security archive, for instance this
stanza in /etc/apt/sources.list.d/debian.sources:
  Types: deb
  URIs: http://deb.debian.org/debian-security
  Suites: bookworm-security
  Components: main
  Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
or this line in /etc/apt/sources.list:
  deb http://deb.debian.org/debian-security bookworm-security main
then rerun."
	fi
	apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
[[ -r $BASE_TARBALL ]] || die "$BASE_TARBALL missing after install"
log "base: $BASE_PKG $(base_version)"
