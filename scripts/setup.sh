#!/usr/bin/env bash
# Install everything the project needs on Debian 12 (bookworm) or Debian 13
# (trixie), as root. Idempotent: does nothing when all packages are already
# present. The release is read from /etc/os-release; on another one setup
# says so and tries Debian 13's list.
# With KBASE=mainline the base is linux-source-7.3, which Debian ships in
# trixie-backports: its /usr/src tarball is used when the package is
# installed; otherwise the package is fetched from that suite with a
# private apt configuration (nothing in /etc/apt changes) and its tarball
# unpacked into build/bases/ (nothing is installed).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
. "$(dirname "$0")/lib.sh"

# fetch_base: download BASE_PKG from BASE_SUITE into build/bases/BASE_PKG
# (the tarball and a file with its version), unless it is there already.
fetch_base() {
	local dir=$BASE_FETCHED apt=$BUILD/bases/apt-$BASE_SUITE deb ver
	[[ -r $dir/$BASE_PKG.tar.xz && -r $dir/version ]] && return 0
	log "fetching $BASE_PKG from Debian's $BASE_SUITE (private apt configuration in ${apt#"$TOP"/})"
	mkdir -p "$dir"
	private_apt "$apt" "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $BASE_SUITE main"
	local -a opts=("${PRIVATE_APT[@]}")
	rm -f "$apt"/*.deb
	(cd "$apt" && apt-get "${opts[@]}" download "$BASE_PKG") >/dev/null
	deb=$(compgen -G "$apt/${BASE_PKG}_*.deb" | head -n 1) ||
		die "could not download $BASE_PKG from $BASE_SUITE"
	ver=$(dpkg-deb -f "$deb" Version)
	rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
	dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$dir.tmp" "./usr/src/$BASE_PKG.tar.xz"
	mv "$dir.tmp/usr/src/$BASE_PKG.tar.xz" "$dir/$BASE_PKG.tar.xz"
	echo "$ver" >"$dir/version"
	rm -rf "$dir.tmp" "$deb"
	BASE_TARBALL=$dir/$BASE_PKG.tar.xz
}

PKGS=(
	build-essential bc bison flex libelf-dev libssl-dev dwarves cpio kmod
	xz-utils rsync ccache python3 perl git
	qemu-system-x86 qemu-utils
	fio liburing-dev busybox-static util-linux procps linux-perf
	python3-ply python3-git
	e2fsprogs xfsprogs
	dbench stress-ng attr
	shellcheck python3-matplotlib sparse libseccomp-dev
	libglib2.0-dev pkg-config
)
# What differs by release. Debian 12's QEMU 7.2 ships the C virtiofsd
# (/usr/lib/qemu/virtiofsd); from QEMU 8 on it is the Rust virtiofsd, a
# package of its own in Debian 13 (/usr/libexec/virtiofsd). Debian 12 has
# linux-source-6.12 in bookworm-security only, Debian 13 in trixie itself.
# shellcheck disable=SC1091 # the host's
codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
pretty=$(. /etc/os-release && echo "${PRETTY_NAME:-unknown}")
case $codename in
bookworm) security_suite=bookworm-security ;;
trixie) PKGS+=(virtiofsd) security_suite="" ;;
*)
	log "warning: setup.sh knows Debian 12 (bookworm) and Debian 13 (trixie); this is $pretty.
Trying Debian 13's packages: apt-get names any that this release lacks."
	PKGS+=(virtiofsd) security_suite=""
	;;
esac
# The 6.12 base comes from the host's own apt sources.
[[ -n $BASE_SUITE ]] || PKGS=("$BASE_PKG" "${PKGS[@]}")

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
	cand=$(apt-cache policy "$BASE_PKG" | awk '$1 == "Candidate:" { print $2 }')
	if [[ " ${missing[*]} " == *" $BASE_PKG "* && ${cand:-(none)} == "(none)" ]]; then
		if [[ -n $security_suite ]]; then
			die "$BASE_PKG is in none of the configured apt sources: $pretty ships it
from $security_suite (main) only. Add the security archive, for instance
this stanza in /etc/apt/sources.list.d/debian.sources:
  Types: deb
  URIs: http://deb.debian.org/debian-security
  Suites: $security_suite
  Components: main
  Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
or this line in /etc/apt/sources.list:
  deb http://deb.debian.org/debian-security $security_suite main
then rerun."
		fi
		die "$BASE_PKG is in none of the configured apt sources of $pretty.
Debian 13 (trixie) has it in main; Debian 12 in bookworm-security."
	fi
	apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
if [[ -n $BASE_SUITE && ! -r /usr/src/$BASE_PKG.tar.xz ]]; then
	command -v dpkg-deb >/dev/null || die "no dpkg-deb: setup needs a Debian host"
	fetch_base
fi
[[ -r $BASE_TARBALL ]] || die "$BASE_TARBALL missing after install"
log "base: $BASE_PKG $(base_version)"
