#!/usr/bin/env bash
# Build fio with virtio-blk passthrough support (ioengine=io_uring_cmd
# cmd_type=vblk): Debian bookworm's fio 3.33 source plus tools/fio/*.patch,
# into build/fio/fio. As root on Debian 12: installs the build dependencies
# and, when no deb-src entry for bookworm main is configured, adds one in
# /etc/apt/sources.list.d/vstor-src.sources. Idempotent: a stamp holds a hash
# of the patches and the build settings, and nothing is redone while it
# matches and the binary runs.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

FIO_PATCHES=$TOP/tools/fio
FIO_UPSTREAM=3.33
SRC=$BUILD/fio-src                # downloaded source package and its tree
TREE=$SRC/fio                     # the unpacked, patched tree we build in
OUT=$BUILD/fio                    # build/fio/fio -> ../fio-src/fio/fio
STAMP=$OUT/.stamp
SRC_LIST=/etc/apt/sources.list.d/vstor-src.sources
DEBIAN_KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
# dpkg-dev: apt-get source, dpkg-source; flex and bison: arithmetic in job
# files, as in Debian's package.
PKGS=(dpkg-dev gcc make ccache pkg-config flex bison
	liburing-dev libaio-dev zlib1g-dev)
# Only what the tests need: no optional engines, whatever is installed.
CONFIGURE=(--disable-native --disable-numa --disable-rdma --disable-rados
	--disable-rbd --disable-http --disable-gfapi --disable-pmem
	--disable-xnvme --disable-libzbc --disable-libnfs --disable-tcmalloc
	--disable-dfs)

shopt -s nullglob
patches=("$FIO_PATCHES"/*.patch)
shopt -u nullglob
((${#patches[@]})) || die "no patches in $FIO_PATCHES"

# What the build depends on: the patches, in order, and the settings.
want=$({
	printf 'fio %s\nconfigure %s\n' "$FIO_UPSTREAM" "${CONFIGURE[*]}"
	for p in "${patches[@]}"; do
		printf '%s ' "$(basename "$p")"
		sha256sum <"$p"
	done
} | sha256sum | cut -d' ' -f1)

if [[ -f $STAMP && $(cat "$STAMP") == "$want" ]] &&
	"$OUT/fio" --version >/dev/null 2>&1; then
	log "fio is up to date: $("$OUT/fio" --version)"
	exit 0
fi

[[ $(id -u) -eq 0 ]] || die "need root (apt-get) to build fio"
export DEBIAN_FRONTEND=noninteractive

# Is a deb-src entry for bookworm main configured? apt-get indextargets lists
# what apt-get update would fetch, whether or not it has been fetched.
have_bookworm_src() {
	local t
	# shellcheck disable=SC2016 # $(...) are apt's placeholders
	t=$(apt-get indextargets --format '$(TARGET_OF) $(RELEASE) $(CODENAME) $(COMPONENT)')
	awk '$1 == "deb-src" && ($2 == "bookworm" || $3 == "bookworm") &&
		$4 == "main" { found = 1 } END { exit !found }' <<<"$t"
}

# The mirror of the configured bookworm main binary entry, so that the
# sources come from the same place (a local mirror or proxy).
bookworm_mirror() {
	local t
	# shellcheck disable=SC2016 # $(...) are apt's placeholders
	t=$(apt-get indextargets --format '$(TARGET_OF) $(RELEASE) $(COMPONENT) $(REPO_URI)')
	awk '$1 == "deb" && $2 == "bookworm" && $3 == "main" { print $4; exit }' <<<"$t"
}

# The Debian version of fio $FIO_UPSTREAM in the fetched Sources indexes.
source_version() {
	local t
	t=$(apt-cache showsrc --only-source fio 2>/dev/null || true)
	awk -v up="$FIO_UPSTREAM" '$1 == "Version:" && index($2, up "-") == 1 {
		print $2; exit }' <<<"$t"
}

# add_bookworm_src: write $SRC_LIST. apt refuses entries for one source
# with different Signed-By values, so try the Debian keyring (what
# debian.sources normally names), then none; keep the first that apt reads.
add_bookworm_src() {
	local uri signed
	uri=$(bookworm_mirror)
	uri=${uri:-http://deb.debian.org/debian/}
	log "adding a deb-src entry for bookworm main ($uri) in $SRC_LIST"
	for signed in "$DEBIAN_KEYRING" ""; do
		[[ -z $signed || -r $signed ]] || continue
		{
			printf 'Types: deb-src\nURIs: %s\nSuites: bookworm\nComponents: main\n' "$uri"
			[[ -z $signed ]] || printf 'Signed-By: %s\n' "$signed"
		} >"$SRC_LIST"
		if apt-get indextargets >/dev/null 2>&1 && have_bookworm_src; then
			return 0
		fi
	done
	rm -f "$SRC_LIST"
	die "apt does not accept a deb-src entry for bookworm main; add one by hand"
}

update=0
if ! have_bookworm_src; then
	add_bookworm_src
	update=1
fi

missing=()
for p in "${PKGS[@]}"; do
	st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
	[[ $st == "install ok installed" ]] || missing+=("$p")
done
((${#missing[@]})) && update=1

# The entry may be configured but its Sources index never fetched.
((update)) || [[ -n $(source_version) ]] || update=1

if ((update)); then
	log "apt-get update"
	apt-get update -q
fi
if ((${#missing[@]})); then
	log "installing: ${missing[*]}"
	apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# The source package, from bookworm: fetch it unless already here.
ver=$(source_version)
[[ -n $ver ]] || die "no fio $FIO_UPSTREAM source package in the apt sources"
dsc=$SRC/fio_${ver#*:}.dsc
mkdir -p "$SRC" "$OUT"
if [[ ! -f $dsc ]]; then
	log "downloading fio $ver source"
	# The directory is root's: download as root, not as the _apt sandbox
	# user, which could not write there.
	(cd "$SRC" && apt-get source -q --download-only \
		-o APT::Sandbox::User=root "fio=$ver")
fi

# A fresh tree every time the patches change.
log "unpacking $(basename "$dsc") into $TREE"
rm -rf "$TREE"
dpkg-source -x "$dsc" "$TREE" >"$SRC/unpack.log" 2>&1 || {
	cat "$SRC/unpack.log" >&2
	die "dpkg-source -x $dsc failed"
}
for p in "${patches[@]}"; do
	log "applying $(basename "$p")"
	patch -d "$TREE" -p1 --batch --forward --quiet <"$p" ||
		die "$(basename "$p") does not apply to fio $ver"
done

log "configuring and building fio ($(nproc) jobs)"
export CCACHE_BASEDIR=$BUILD CCACHE_NOHASHDIR=1
(cd "$TREE" && ./configure --cc="ccache gcc" "${CONFIGURE[@]}" >configure.log 2>&1) || {
	cat "$TREE/configure.log" >&2
	die "fio configure failed"
}
make -C "$TREE" -s -j"$(nproc)" fio >"$TREE/build.log" 2>&1 || {
	tail -n 50 "$TREE/build.log" >&2
	die "fio build failed (log: $TREE/build.log)"
}

ln -sfn ../fio-src/fio/fio "$OUT/fio"
"$OUT/fio" --version >/dev/null || die "$OUT/fio does not run"
echo "$want" >"$STAMP"
log "built $OUT/fio: $("$OUT/fio" --version)"
