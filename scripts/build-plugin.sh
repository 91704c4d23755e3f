#!/usr/bin/env bash
# Build insncount (tools/insncount), the QEMU TCG plugin that counts guest
# instructions, for the QEMU this machine runs, into build/tools:
#   insncount.so   the plugin (vm/vm.sh --insncount loads it)
#   insncount.qemu the QEMU version it was built for ("7.2.22" and so on)
#   calib.elf      its calibration image (tests/host/insncount.sh)
#
# A plugin is built against qemu-plugin.h, the plugin API of one QEMU
# version (QEMU refuses a plugin whose API level it no longer supports).
# Debian ships no such header in a binary package, so it comes from the
# source package of the installed qemu-system-x86's upstream version,
# fetched with a private apt configuration (nothing in /etc/apt changes):
# only the .orig tarball, and only that one file is kept. It is kept in
# VSTOR_CACHE too, so other clones do not fetch it again.
#
#   --source-version V   use the qemu source package V (an apt version such
#                        as 1:10.0.13+ds-0+deb13u1) instead, for a QEMU
#                        whose source the mirror lacks; QEMU says at start
#                        whether it accepts the plugin's API level
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
. "$(dirname "$0")/lib.sh"

srcver=""
while (($#)); do
	case $1 in
	--source-version) srcver=$2; shift 2 ;;
	*) die "usage: $0 [--source-version V]" ;;
	esac
done

OUT=$BUILD/tools
HDRS=$BUILD/qemu-plugin-api        # one directory per upstream version
MIRROR=http://deb.debian.org

qemu_bin=$(command -v qemu-system-x86_64) ||
	die "no qemu-system-x86_64 on this machine (scripts/setup.sh installs it)"
# "QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b3)"
qemu_ver=$("$qemu_bin" --version | sed -n '1s/^QEMU emulator version \([0-9.]*\).*/\1/p')
[[ -n $qemu_ver ]] || die "cannot read the version of $qemu_bin: $("$qemu_bin" --version | head -n 1)"

# The source version of the installed package; its upstream part
# ("7.2+dfsg" of "1:7.2+dfsg-7+deb12u18") names the .orig tarball.
if [[ -z $srcver ]]; then
	srcver=$(dpkg-query -W -f='${source:Version}' qemu-system-x86 2>/dev/null) ||
		die "qemu-system-x86 is not installed as a Debian package; give --source-version"
fi
upstream=${srcver#*:}
upstream=${upstream%-*}

# The releases whose sources may hold it: the host's, with its updates,
# security and backports suites.
# shellcheck disable=SC1091 # the host's
codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
case $codename in
bookworm | trixie) ;;
*) die "build-plugin.sh knows Debian 12 (bookworm) and 13 (trixie), not '${codename:-unknown}'" ;;
esac

hdr_dir=$HDRS/$upstream
cache_dir=""
vstor_cache_usable && cache_dir=$VSTOR_CACHE/qemu-plugin-api/$upstream

fetch_header() {
	local apt=$BUILD/qemu-plugin-api/apt-$codename keyring=/usr/share/keyrings/debian-archive-keyring.gpg
	local dir file sha want tmp
	log "fetching qemu-plugin.h from Debian's qemu $upstream source (private apt configuration in ${apt#"$TOP"/})"
	private_apt "$apt" "deb-src [signed-by=$keyring] $MIRROR/debian $codename main
deb-src [signed-by=$keyring] $MIRROR/debian $codename-updates main
deb-src [signed-by=$keyring] $MIRROR/debian $codename-backports main
deb-src [signed-by=$keyring] $MIRROR/debian-security $codename-security main"
	# Every stanza of that upstream version names the same .orig tarball;
	# its SHA-256 comes from the signed Sources index.
	read -r dir file sha < <(apt-cache "${PRIVATE_APT[@]}" showsrc qemu | awk -v up="$upstream" '
		function done() {
			if (pkg == "qemu" && ver == up && dir != "" && file != "") {
				print dir, file, sha
				exit
			}
			pkg = dir = ver = file = ""
		}
		/^$/ { done(); next }
		/^Package:/ { pkg = $2 }
		/^Version:/ { ver = $2; sub(/^[0-9]+:/, "", ver); sub(/-[^-]*$/, "", ver) }
		/^Directory:/ { dir = $2 }
		/^[^ ]/ { insha = /^Checksums-Sha256:/; next }
		insha && $3 ~ /\.orig\.tar\.xz$/ { file = $3; sha = $1 }
		END { done() }') || true
	if [[ -z ${file:-} ]]; then
		die "no qemu $upstream source in Debian's $codename suites (from $MIRROR); they have: $(apt-cache "${PRIVATE_APT[@]}" showsrc qemu | sed -n 's/^Version: //p' | sort -u | tr '\n' ' ')
give one with --source-version (a close version: QEMU checks the plugin's API level when it loads it)"
	fi
	tmp=$BUILD/qemu-plugin-api/download
	rm -rf "$tmp" && mkdir -p "$tmp"
	# The pool is the same in both archives: try the main one, then security.
	local url ok=0
	: >"$tmp/download.log"
	for url in "$MIRROR/debian/$dir/$file" "$MIRROR/debian-security/$dir/$file"; do
		if python3 - "$url" "$tmp/$file" 2>>"$tmp/download.log" <<-'EOF'; then
			import shutil, sys, urllib.request
			try:
			    with urllib.request.urlopen(sys.argv[1], timeout=120) as r, open(sys.argv[2], "wb") as f:
			        shutil.copyfileobj(r, f)
			except OSError as e:
			    sys.exit(f"{sys.argv[1]}: {e}")
		EOF
			ok=1
			break
		fi
	done
	((ok)) || die "could not download $file from $MIRROR:
$(sed 's/^/  /' "$tmp/download.log")
the index names it, but the mirror does not have it; give another version with --source-version"
	want=$sha
	sha=$(sha256sum "$tmp/$file" | cut -d' ' -f1)
	[[ $sha == "$want" ]] || die "$file: SHA-256 $sha, but Debian's Sources index says $want"
	# include/qemu/ up to QEMU 10, include/plugins/ from QEMU 11.
	tar -xJf "$tmp/$file" -C "$tmp" --wildcards --no-anchored 'include/*/qemu-plugin.h' ||
		die "$file has no include/*/qemu-plugin.h"
	mkdir -p "$hdr_dir"
	local hdr
	hdr=$(find "$tmp" -path '*/include/*/qemu-plugin.h' | head -n 1)
	[[ -n $hdr ]] || die "$file has no include/*/qemu-plugin.h"
	cp "$hdr" "$hdr_dir/qemu-plugin.h.tmp"
	echo "$file $sha" >"$hdr_dir/source"
	mv "$hdr_dir/qemu-plugin.h.tmp" "$hdr_dir/qemu-plugin.h"
	rm -rf "$tmp"
}

if [[ ! -s $hdr_dir/qemu-plugin.h ]]; then
	if [[ -n $cache_dir && -s $cache_dir/qemu-plugin.h ]]; then
		log "qemu-plugin.h of qemu $upstream from the cache ($cache_dir)"
		mkdir -p "$hdr_dir"
		cp "$cache_dir/source" "$hdr_dir/source"
		cp "$cache_dir/qemu-plugin.h" "$hdr_dir/qemu-plugin.h"
	else
		fetch_header
		if [[ -n $cache_dir ]]; then
			mkdir -p "$cache_dir"
			cp "$hdr_dir/source" "$cache_dir/source"
			cp "$hdr_dir/qemu-plugin.h" "$cache_dir/qemu-plugin.h.tmp"
			mv "$cache_dir/qemu-plugin.h.tmp" "$cache_dir/qemu-plugin.h"
		fi
	fi
fi
api=$(sed -n 's/^#define QEMU_PLUGIN_VERSION \([0-9]*\)$/\1/p' "$hdr_dir/qemu-plugin.h")
[[ -n $api ]] || die "$hdr_dir/qemu-plugin.h has no QEMU_PLUGIN_VERSION"
# Levels 1 (QEMU 7.2) and 4 (QEMU 10.0) are the ones tested; 7 (QEMU 11)
# changed the callbacks' signatures, which insncount does not handle yet.
((api <= 4)) || die "QEMU $qemu_ver has plugin API $api; insncount supports 1 to 4 so far (Documentation/insncount.md, \"QEMU versions\")"

make -s -C "$TOP/tools/insncount" OUT="$OUT" QEMU_INCLUDE="$hdr_dir" WERROR=1
echo "$qemu_ver" >"$OUT/insncount.qemu"
log "insncount: $OUT/insncount.so for QEMU $qemu_ver (plugin API $api, from qemu $upstream)"
