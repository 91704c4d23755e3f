#!/usr/bin/env bash
# Print the sparse that `make C=2` must use on the kernel base KBASE, after
# building it if need be. Mainline's Makefile quietly turns C=2 into no
# check at all ("sparse is not available or not up to date") when
# scripts/checker-valid.sh rejects the sparse it is given: since 6.14 that
# needs __typeof_unqual__, which Debian 12's and 13's sparse 0.6.4 lacks.
# Debian sid's sparse (0.6.5~rc1 on 2026-12-04) has it. Its binary package
# needs a newer glibc than Debian 12's, so its source package is fetched
# with a private apt configuration (nothing in /etc/apt changes) and only
# the sparse program is built, into build/sparse/sparse.
#
#   scripts/build-sparse.sh      prints "sparse" or the path of the one built
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
. "$(dirname "$0")/lib.sh"

# valid CHECKER: whether the base accepts CHECKER (a base without the
# check accepts any sparse).
valid() {
	[[ ! -f $KSRC/scripts/checker-valid.sh ]] ||
		[[ $(sh "$KSRC/scripts/checker-valid.sh" "$1" 2>/dev/null) == 1 ]]
}

command -v sparse >/dev/null || die "sparse is not installed (scripts/setup.sh installs it)"
if valid sparse; then
	echo sparse
	exit 0
fi
out=$BUILD/sparse
if [[ -x $out/sparse ]] && valid "$out/sparse"; then
	echo "$out/sparse"
	exit 0
fi

suite=sid apt=$BUILD/sparse/apt
log "Debian's sparse ($(sparse --version)) is too old for ${KSRC#"$TOP"/}; building sparse from Debian $suite's source package"
rm -rf "$apt"
private_apt "$apt" "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $suite main"
opts=("${PRIVATE_APT[@]}")
(cd "$apt" && apt-get "${opts[@]}" source --download-only sparse) >"$apt/source.log" 2>&1 ||
	die "could not download sparse's source package from Debian $suite: see $apt/source.log"
orig=$(compgen -G "$apt/sparse_*.orig.tar.*" | head -n 1) ||
	die "no sparse_*.orig.tar.* in $apt"
rm -rf "$apt/src" && mkdir -p "$apt/src"
tar -xf "$orig" -C "$apt/src" --strip-components=1
make -s -C "$apt/src" -j"$(nproc)" sparse HAVE_LLVM=no HAVE_GTK=no HAVE_SQLITE=no HAVE_LIBXML=no \
	>"$apt/build.log" 2>&1 || die "building sparse failed: see $apt/build.log"
install -m 0755 "$apt/src/sparse" "$out/sparse.tmp"
mv "$out/sparse.tmp" "$out/sparse"
valid "$out/sparse" || die "$out/sparse (from $(basename "$orig")) is still rejected by ${KSRC#"$TOP"/}/scripts/checker-valid.sh"
log "built $out/sparse from $(basename "$orig")"
echo "$out/sparse"
