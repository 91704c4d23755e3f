#!/usr/bin/env bash
# Build fio with virtio-blk passthrough support (ioengine=io_uring_cmd
# cmd_type=vblk): Debian bookworm's fio 3.33 source plus tools/fio/*.patch,
# into build/fio/fio, and its t/io_uring into build/fio/io_uring.
# Idempotent: a stamp holds a hash of the patches and the build settings,
# and nothing is redone while it matches and the binaries are there.
#
# Host side effects (as root on Debian 12), each printed as "host change":
# - when apt cannot find fio 3.33's source and no deb-src entry for bookworm
#   main is configured, it adds one, for the mirror of the bookworm entry
#   and with that entry's Signed-By, in the file
#   /etc/apt/sources.list.d/vstor-src.sources, and keeps it (later runs
#   need it to fetch the source again); removed again if it does not help;
# - apt-get update, and apt-get install of the missing build dependencies.
# An existing deb-src entry whose Signed-By differs from its deb entry's
# makes apt refuse every source: that stops the script with the files named.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
. "$(dirname "$0")/lib.sh"

FIO_PATCHES=$TOP/tools/fio
FIO_UPSTREAM=3.33
SRC=$BUILD/fio-src                # downloaded source package and its tree
TREE=$SRC/fio                     # the unpacked, patched tree we build in
OUT=$BUILD/fio                    # build/fio/fio -> ../fio-src/fio/fio
STAMP=$OUT/.stamp
# apt_path OPTION: a file or directory option of apt's, as a full path
# (apt_path Dir::Etc::sourceparts/d is /etc/apt/sources.list.d/).
apt_path() {
	local v=
	eval "$(apt-config shell v "$1")"
	echo "$v"
}
# Our deb-src entry: /etc/apt/sources.list.d/vstor-src.sources.
SRC_LIST=$(apt_path Dir::Etc::sourceparts/d)
SRC_LIST=${SRC_LIST%/}/vstor-src.sources
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
fio_key=$({
	printf 'fio %s\nconfigure %s\n' "$FIO_UPSTREAM" "${CONFIGURE[*]}"
	for p in "${patches[@]}"; do
		printf '%s ' "$(basename "$p")"
		sha256sum <"$p"
	done
} | sha256sum | cut -d' ' -f1)

# A tree built with the same key, compiler and libraries, kept in
# VSTOR_CACHE by an earlier clone, is taken as it is: no download, no
# apt, no build (22-41 s in a fresh clone here). Removing the cache costs
# time, never correctness.
cache_key=$({
	echo "r1 $fio_key"
	gcc --version | head -n 1
	dpkg-query -W -f '${Package} ${Version}\n' liburing-dev libaio-dev zlib1g-dev 2>/dev/null || true
} | sha256sum | cut -c1-24)
cache=$VSTOR_CACHE/fio/$cache_key
links() {
	ln -sfn ../fio-src/fio/fio "$OUT/fio"
	ln -sfn ../fio-src/fio/t/io_uring "$OUT/io_uring"
}
# cache_lock: hold VSTOR_CACHE/fio/.lock (fd 8) while the cache is read or
# changed: two clones of the project may build fio at once.
cache_lock() {
	vstor_cache_usable && mkdir -p "$VSTOR_CACHE/fio" && exec 8>>"$VSTOR_CACHE/fio/.lock" && flock 8
}

# cache_save: keep TREE for the next clone, in place of an older one (and
# of any copy a killed save left); a failure only costs that clone a build.
cache_save() {
	local new=""
	[[ ! -f $cache/done && $(cat "$OUT/.cache-key" 2>/dev/null) == "$cache_key" ]] || return 0
	cache_lock || return 0
	if new=$(mktemp -d "$VSTOR_CACHE/fio/.new.XXXXXX") && cp -a "$TREE" "$new/tree" && touch "$new/done"; then
		find "$VSTOR_CACHE/fio" -mindepth 1 -maxdepth 1 ! -name "${new##*/}" ! -name .lock -exec rm -rf {} + || true
		mv -T "$new" "$cache" && log "kept the fio tree in $cache" && new=""
	fi
	[[ -z $new ]] || rm -rf "$new"
	exec 8>&-
}

# Up to date: built from these patches and settings, with this compiler
# and these libraries (OUT/.cache-key).
if [[ -f $STAMP && $(cat "$STAMP") == "$fio_key" && -x $OUT/io_uring &&
	$(cat "$OUT/.cache-key" 2>/dev/null) == "$cache_key" ]] &&
	"$OUT/fio" --version >/dev/null 2>&1; then
	log "fio is up to date: $("$OUT/fio" --version)"
	cache_save
	exit 0
fi
if [[ -f $cache/done && ! -L $cache/tree ]] && cache_lock; then
	mkdir -p "$SRC" "$OUT"
	rm -rf "$TREE.restore"
	if mkdir "$TREE.restore" && cp -a "$cache/tree/." "$TREE.restore/" && rm -rf "$TREE" &&
		mv -T "$TREE.restore" "$TREE" && links && "$OUT/fio" --version >/dev/null 2>&1 &&
		[[ -x $OUT/io_uring ]]; then
		echo "$fio_key" >"$STAMP"
		echo "$cache_key" >"$OUT/.cache-key"
		log "fio restored from $cache: $("$OUT/fio" --version)"
		exit 0
	fi
	exec 8>&-
	rm -rf "$TREE.restore"
	log "could not restore fio from $cache: building"
fi

[[ $(id -u) -eq 0 ]] || die "need root (apt-get) to build fio"
export DEBIAN_FRONTEND=noninteractive

# The Debian version of fio $FIO_UPSTREAM in the fetched Sources indexes:
# what apt can actually fetch, whichever deb-src entry provides it.
source_version() {
	local t
	t=$(apt-cache showsrc --only-source fio 2>/dev/null || true)
	awk -v up="$FIO_UPSTREAM" '$1 == "Version:" && index($2, up "-") == 1 {
		print $2; exit }' <<<"$t"
}

# What apt-get update would fetch, from the configured entries alone (no
# download): one quoted URI per line. Works before any update, unlike
# apt-get indextargets, which lists only indexes already fetched.
update_uris() {
	apt-get update --print-uris -q 2>/dev/null | sed -n "s/^'\([^']*\)'.*/\1/p"
}

# The mirror of the configured bookworm binary entry (a local mirror or
# proxy), so that the sources come from the same place; with a slash at the end.
bookworm_mirror() {
	update_uris | sed -n 's|^\(.*/\)dists/bookworm/InRelease$|\1|p' | head -n1
}

# Is a deb-src entry for bookworm main from URI configured?
src_configured() {
	update_uris | grep -qF "${1%/}/dists/bookworm/main/source/Sources"
}

# The apt source files: sources.list and sources.list.d/*.list, *.sources.
apt_source_files() {
	local list parts f
	list=$(apt_path Dir::Etc::sourcelist/f)
	parts=$(apt_path Dir::Etc::sourceparts/d)
	[[ -f $list ]] && echo "$list"
	for f in "${parts%/}"/*.list "${parts%/}"/*.sources; do
		[[ -f $f ]] && echo "$f"
	done
	return 0
}

# apt_entries: one line per enabled entry, type and URI, from the source
# files: "FILE TYPE URI SIGNED-BY", the URI without its final slash,
# SIGNED-BY "-" when there is none and "(inline)" for an inline key.
apt_entries() {
	local f
	apt_source_files | while read -r f; do
		case $f in
		*.sources) awk -v f="$f" -v RS= '
			{
				delete v; key = ""
				n = split($0, l, "\n")
				for (i = 1; i <= n; i++) {
					if (l[i] ~ /^#/) continue
					if (l[i] ~ /^[ \t]/) { if (key == "signed-by" && v[key] == "") v[key] = "(inline)"; continue }
					if (!match(l[i], /^[A-Za-z0-9-]+:/)) continue
					key = tolower(substr(l[i], 1, RLENGTH - 1))
					val = substr(l[i], RLENGTH + 1); gsub(/^[ \t]+|[ \t]+$/, "", val)
					v[key] = val
				}
				if (tolower(v["enabled"]) == "no") next
				sb = ("signed-by" in v && v["signed-by"] != "") ? v["signed-by"] : "-"
				nt = split(v["types"], t, /[ \t]+/); nu = split(v["uris"], u, /[ \t]+/)
				for (a = 1; a <= nt; a++) for (b = 1; b <= nu; b++) {
					sub(/\/+$/, "", u[b]); print f, t[a], u[b], sb }
			}' "$f" ;;
		*) awk -v f="$f" '
			$1 !~ /^deb(-src)?$/ { next }
			{
				sb = "-"; i = 2
				if ($2 ~ /^\[/) for (; i <= NF; i++) {
					o = $i; gsub(/[][]/, "", o)
					if (o ~ /^signed-by=/) sb = substr(o, 11)
					if ($i ~ /\]$/) { i++; break }
				}
				uri = $i; sub(/\/+$/, "", uri); print f, $1, uri, sb
			}' "$f" ;;
		esac
	done
}

# The files that name URI in an entry, each with the entry types and
# Signed-By values found: "FILE (deb-src, Signed-By: /etc/apt/x.gpg)".
files_naming() {
	apt_entries | awk -v uri="${1%/}" '$3 == uri {
		if (!($1 in o)) o[$1] = n++
		d = $2 ", Signed-By: " ($4 == "-" ? "none" : $4)
		if (index(t[$1] "; ", d "; ") == 0) t[$1] = t[$1] (t[$1] == "" ? "" : "; ") d }
		END { for (f in o) r[o[f]] = f; for (i = 0; i < n; i++) printf "%s (%s)\n", r[i], t[r[i]] }'
}

# The Signed-By values (file names or fingerprints, not inline keys) of the
# entries that name URI, in the order found.
signed_by_of() {
	apt_entries | awk -v uri="${1%/}" '$3 == uri && $4 != "-" && $4 != "(inline)" && !seen[$4]++ { print $4 }'
}

# apt refuses to read any source (and so every apt-get command fails) when
# two entries for one URI and suite, such as a deb and a deb-src, name
# different Signed-By values. Detect it and name the files; a stale entry of
# ours is replaced, anything else is left to the administrator.
check_apt_sources() {
	local err line uri suite detail files
	err=$(apt-get indextargets 2>&1 >/dev/null) && return 0
	line=$(grep -m1 'Conflicting values set for option Signed-By' <<<"$err" || true)
	if [[ $line =~ regarding\ source\ ([^ ]+)\ ([^:]+):\ (.*)$ ]]; then
		uri=${BASH_REMATCH[1]} suite=${BASH_REMATCH[2]} detail=${BASH_REMATCH[3]}
		files=$(files_naming "$uri")
		if [[ -f $SRC_LIST ]] && grep -qF "$SRC_LIST (" <<<"$files"; then
			host_change "removing $SRC_LIST (ours, from an earlier run): its Signed-By conflicts with the other entries for $uri"
			rm -f "$SRC_LIST"
			apt-get indextargets >/dev/null 2>&1 && return 0
		fi
		die "apt refuses all its sources: the entries for $uri $suite name different Signed-By values ($detail).
Files with entries for $uri:
  ${files//$'\n'/$'\n'  }
Give the deb-src entry the same Signed-By as the deb entry (or remove it), then rerun."
	fi
	die "apt cannot read its sources:
$err"
}

# add_bookworm_src URI: write $SRC_LIST with a deb-src entry for bookworm
# main. Its Signed-By must equal that of the deb entry for URI (see
# check_apt_sources): try the deb entry's own, the Debian keyring (what
# debian.sources names), then none; keep the first that apt reads.
add_bookworm_src() {
	local uri=$1 signed c
	local -a cands=()
	while read -r c; do cands+=("$c"); done < <(signed_by_of "$uri")
	[[ " ${cands[*]} " == *" $DEBIAN_KEYRING "* ]] || cands+=("$DEBIAN_KEYRING")
	cands+=("")
	for signed in "${cands[@]}"; do
		[[ -z $signed || ! $signed == /* || -r $signed ]] || continue
		{
			echo "# Added by vstor's scripts/build-fio.sh: the fio source package."
			printf 'Types: deb-src\nURIs: %s\nSuites: bookworm\nComponents: main\n' "$uri"
			[[ -z $signed ]] || printf 'Signed-By: %s\n' "$signed"
		} >"$SRC_LIST"
		src_added=1
		if apt-get indextargets >/dev/null 2>&1 && src_configured "$uri"; then
			host_change "added $SRC_LIST:"
			sed 's/^/        /' "$SRC_LIST" >&2
			return 0
		fi
	done
	die "apt reads no deb-src entry for bookworm main from $uri, whether with Signed-By ${cands[*]:0:${#cands[@]}-1} or none (an inline key in the deb entry?); add one by hand"
}

host_change() { printf '==> host change: %s\n' "$*" >&2; }

# Remove our entry again if the run fails before it proved useful.
src_added=0
src_ok=0
on_exit() {
	if ((src_added && !src_ok)) && [[ -f $SRC_LIST ]]; then
		host_change "removing $SRC_LIST again (it did not provide fio $FIO_UPSTREAM)"
		rm -f "$SRC_LIST"
	fi
}
trap on_exit EXIT

check_apt_sources

missing=()
for p in "${PKGS[@]}"; do
	st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
	[[ $st == "install ok installed" ]] || missing+=("$p")
done

# Where fio's source comes from: the fetched Sources indexes if they have
# it; otherwise apt-get update, and if still nothing provides it and no
# deb-src entry for bookworm main is configured, our own entry.
ver=$(source_version)
updated=0
if [[ -z $ver ]]; then
	mirror=$(bookworm_mirror)
	mirror=${mirror:-http://deb.debian.org/debian/}
	if src_configured "$mirror"; then
		log "apt-get update (a deb-src entry for bookworm main is configured; its Sources index has no fio $FIO_UPSTREAM yet)"
		apt-get update -q
		updated=1
		ver=$(source_version)
		[[ -n $ver ]] || die "a deb-src entry for bookworm main from $mirror is configured, but after apt-get update apt-cache showsrc finds no fio $FIO_UPSTREAM; entries for it:
$(files_naming "$mirror" | sed 's/^/  /')"
	else
		log "no deb-src entry for bookworm main from $mirror is configured"
		add_bookworm_src "$mirror"
		log "apt-get update (fetches the new Sources index)"
		apt-get update -q
		updated=1
		ver=$(source_version)
		[[ -n $ver ]] || die "apt-get update with $SRC_LIST gave no fio $FIO_UPSTREAM source (apt-cache showsrc fio); is $mirror reachable and a Debian bookworm mirror?"
	fi
	src_ok=1
fi
if ((${#missing[@]})); then
	if ((!updated)); then
		log "apt-get update"
		apt-get update -q
	fi
	host_change "installing: ${missing[*]}"
	apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# The source package, from bookworm: fetch it unless already here.
log "fio source: $ver"
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
rm -f "$OUT/.cache-key"
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
make -C "$TREE" -s -j"$(nproc)" fio t/io_uring >"$TREE/build.log" 2>&1 || {
	tail -n 50 "$TREE/build.log" >&2
	die "fio build failed (log: $TREE/build.log)"
}

links
"$OUT/fio" --version >/dev/null || die "$OUT/fio does not run"
[[ -x $OUT/io_uring ]] || die "$OUT/io_uring was not built"
echo "$fio_key" >"$STAMP"
echo "$cache_key" >"$OUT/.cache-key"
log "built $OUT/fio: $("$OUT/fio" --version)"
cache_save
