#!/usr/bin/env bash
# Build the root file system of second-level guests: the guests a vstor guest
# boots with the host's QEMU (tests/guest/bridge.sh, bench/guest/bridge.sh).
# Booted from the host's root over 9p, such a guest reads every file through
# two 9p layers under TCG inside TCG. This archive holds only what those
# guests run, so that they read it from the first-level guest's memory
# instead (see vm.sh --initramfs):
#
#   - these host programs with the shared libraries ldd lists for them, at
#     their own paths: dash (/bin/sh, as on the host: busybox's sh would run
#     its own applets before any program), bash, kmod (modprobe) and
#     python3 with the modules that tests/guest/lib.sh's fio_field imports,
#     blkzone (tests/guest/inner-zoned.sh) and the project's vblk_pt
#     (build/tools, make tools); busybox (static) for every other command
#     (cat, mount, nproc, ...);
#   - as /usr/bin/fio, the project's fio (build/fio/fio, scripts/build-fio.sh:
#     Debian's fio 3.33 without the optional engines). Debian's own links 64
#     shared libraries (84 MB), and linking them took 21 s at every start in
#     a second-level guest, against a few for this one's 5;
#   - the guest kernel's modules (build/obj-FLAVOR/modroot, at that path);
#   - vm/guest-init.sh (the init) and the scripts the second-level guests run,
#     at their paths in this checkout; and tests/guest/inner-suspend.sh, run
#     by a first-level guest booted from this archive (tests/host/sleep.sh):
#     a guest that suspends to RAM copies its root into memory first, since
#     9p does not survive the suspend.
#
#   vm/initramfs.sh [--flavor guest|debug] [--out FILE]
#   vm/initramfs.sh --check FILE
#
# Writes FILE (default build/initramfs/nested-KBASE-FLAVOR.cpio, an uncompressed
# newc cpio archive) and FILE.inputs, a line per file that went in: its path
# and its sha256 (files of this checkout and its build directory: scripts,
# kernel modules) or its size and modification time (the host's programs
# and libraries). Nothing is rebuilt while FILE.inputs matches. --check
# (what vm.sh --initramfs runs, also inside a guest) exits 1, naming the
# files, when FILE.inputs no longer matches them.
# Builds on the host, as root: the archive has device nodes (/dev/console,
# /dev/null), and every program is tried in it with chroot.
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"

# describe PATH...: the FILE.inputs lines of these files, sorted by path.
describe() {
	local f own=() other=()
	for f in "$@"; do
		case $f in
		"$TOP"/* | "$BUILD"/*) own+=("$f") ;;
		*) other+=("$f") ;;
		esac
	done
	{
		((${#own[@]} == 0)) || sha256sum -- "${own[@]}" | sed 's/^\([0-9a-f]*\)  /sha256:\1 /'
		((${#other[@]} == 0)) || stat -L -c 'size:%s,mtime:%Y %n' -- "${other[@]}"
	} | LC_ALL=C sort -k2 -u
}

flavor=guest out="" check=""
while (($#)); do
	case $1 in
	--flavor) flavor=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--check) check=$2; shift 2 ;;
	*) die "usage: $0 [--flavor guest|debug] [--out FILE] | --check FILE" ;;
	esac
done

if [[ -n $check ]]; then
	[[ -s $check && -s $check.inputs ]] || die "no $check or no $check.inputs: run $0 on the host"
	mapfile -t paths < <(cut -d' ' -f2- "$check.inputs")
	now=$(describe "${paths[@]}" 2>&1) || true
	[[ $now == "$(cat "$check.inputs")" ]] && exit 0
	{ diff <(printf '%s\n' "$now") "$check.inputs" || true; } | sed -n 's/^< //p' |
		head -n 5 | sed 's/^/changed: /' >&2
	die "$check is out of date: run $0 on the host"
fi
modroot=$(kobj "$flavor")/modroot
[[ -d $modroot/lib/modules ]] || die "no modules in $modroot: run scripts/build-kernel.sh $flavor"
out=${out:-$BUILD/initramfs/nested-$KBASE-$flavor.cpio}
mkdir -p "$(dirname "$out")"
out=$(cd "$(dirname "$out")" && pwd)/$(basename "$out")
[[ $(id -u) == 0 ]] || die "need root (device nodes, chroot)"

# Programs run by name (PATH) in the second-level guest, besides busybox's
# and fio.
# The release's python3 (Debian 12: 3.11, Debian 13: 3.13), by its own name.
PYTHON=$(readlink -f /usr/bin/python3 2>/dev/null) || PYTHON=""
[[ $PYTHON == /usr/bin/python3.* && -x $PYTHON ]] ||
	die "no /usr/bin/python3 leading to /usr/bin/python3.N on this machine (scripts/setup.sh installs it)"
PROGS=(/usr/bin/dash /usr/bin/bash /usr/bin/kmod "$PYTHON" /usr/sbin/blkzone "$BUILD/tools/vblk_pt")
FIO=$BUILD/fio/fio
# Names under which kmod runs (Debian: /usr/sbin/modprobe -> /bin/kmod ...).
KMOD_LINKS=(modprobe insmod rmmod lsmod modinfo depmod)
# Python modules the guest scripts import (tests/guest/lib.sh).
PY_IMPORTS="json, errno, os, sys"
# Scripts of this checkout run in a guest booted from the archive.
SCRIPTS=(vm/guest-init.sh tests/guest/inner-blk.sh tests/guest/inner-zoned.sh tests/guest/inner-suspend.sh
	tests/guest/claims.sh tests/guest/lib.sh tests/common.sh bench/guest/bridge-inner.sh bench/guest/lib.sh)
BUSYBOX=/usr/bin/busybox

if [[ ! -x $BUSYBOX ]] || ldd "$BUSYBOX" >/dev/null 2>&1; then
	die "no static $BUSYBOX: apt-get install busybox-static"
fi
for p in "${PROGS[@]}"; do
	[[ $p != "$BUILD"/* || -x $p ]] || die "no $p: run make tools"
	[[ -x $p ]] || die "no $p on this machine (scripts/setup.sh installs it)"
done
"$FIO" --version >/dev/null 2>&1 || die "no $FIO: run scripts/build-fio.sh (make fio)"

# The files that go in, by their paths on this machine (library paths as
# ldd prints them: /lib/x86_64-linux-gnu/... through the merged-/usr links).
files=("$BUSYBOX" "${PROGS[@]}" "$FIO")
for p in "${PROGS[@]}" "$FIO"; do
	while read -r lib; do
		files+=("$lib")
	done < <(ldd "$p" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }')
done
# Python: the modules loaded for those imports and their byte code. Run with
# -I from / so that nothing outside the standard library is picked up.
pytag=$("$PYTHON" -I -c 'import sys; print(sys.implementation.cache_tag)') ||
	die "$PYTHON does not run"
while read -r f; do
	files+=("$f")
	c=$(dirname "$f")/__pycache__/$(basename "${f%.py}").$pytag.pyc
	[[ $f == *.py && -f $c ]] && files+=("$c")
done < <(cd / && "$PYTHON" -I -c "
import sys
import $PY_IMPORTS
for m in list(sys.modules.values()):
    f = getattr(m, '__file__', None)
    if f and f.startswith(sys.prefix + '/lib/python'):
        print(f)" | sort -u)
for s in "${SCRIPTS[@]}"; do
	files+=("$TOP/$s")
done
while IFS= read -r -d '' f; do
	files+=("$f")
done < <(find "$modroot" -type f -print0)

# Up to date? The same files, with the same contents (ours) or sizes and
# modification times (the host's), as last time.
inputs=$(describe "${files[@]}")
if [[ -s $out && -f $out.inputs && $(cat "$out.inputs") == "$inputs" ]]; then
	log "initramfs $out is up to date"
	exit 0
fi

stage=$(mktemp -d "$out.stage.XXXXXX")
trap 'rm -rf "$stage"' EXIT
# Merged /usr as on Debian 12: /lib/x86_64-linux-gnu/libc.so.6 and
# /usr/lib/x86_64-linux-gnu/libc.so.6 are one file.
mkdir -p "$stage"/{usr/bin,usr/sbin,usr/lib,usr/lib64,proc,sys,dev,run,tmp,var/tmp,root,etc}
ln -s usr/bin "$stage/bin"
ln -s usr/sbin "$stage/sbin"
ln -s usr/lib "$stage/lib"
ln -s usr/lib64 "$stage/lib64"
chmod 1777 "$stage/tmp" "$stage/var/tmp"
mknod -m 600 "$stage/dev/console" c 5 1
mknod -m 666 "$stage/dev/null" c 1 3

# Files are copied (symbolic links followed) to their paths; directories on
# the way that are links on this machine (/lib) resolve inside the stage.
for f in "${files[@]}"; do
	[[ $f == "$modroot"/* || $f == "$FIO" ]] && continue
	mkdir -p "$stage$(dirname "$f")"
	cp -L --preserve=mode,timestamps "$f" "$stage$f"
done
mkdir -p "$stage$(dirname "$modroot")"
cp -a "$modroot" "$stage$modroot"
cp -L --preserve=mode,timestamps "$FIO" "$stage/usr/bin/fio"
ln -s "$(basename "$PYTHON")" "$stage/usr/bin/python3"
# Python finds its exec_prefix by this directory, even with no extension
# module in it: without it Debian 13's 3.13 warns "Could not find platform
# dependent libraries" at every start.
dynload=$("$PYTHON" -I -c 'import sysconfig; print(sysconfig.get_config_var("DESTSHARED"))') || dynload=""
[[ $dynload == /* ]] || die "$PYTHON does not say where its extension modules are"
mkdir -p "$stage$dynload"
ln -s dash "$stage/usr/bin/sh"
for l in "${KMOD_LINKS[@]}"; do
	ln -s ../bin/kmod "$stage/usr/sbin/$l"
done
# busybox for every other command, after the real programs so that none of
# them is shadowed.
for a in $("$BUSYBOX" --list); do
	[[ -e $stage/usr/bin/$a || -L $stage/usr/bin/$a || -e $stage/usr/sbin/$a || -L $stage/usr/sbin/$a ]] ||
		ln -s busybox "$stage/usr/bin/$a"
done
printf 'root:x:0:0:root:/root:/bin/sh\n' >"$stage/etc/passwd"
printf 'root:x:0:\n' >"$stage/etc/group"

# Every program must start in the new root (a missing library shows here,
# on the host, rather than minutes into a nested boot).
if ! chk=$(chroot "$stage" /bin/sh -c 'set -e; fio --version; modprobe --version | grep -q kmod
	if ! /usr/bin/python3 -c "import '"$PY_IMPORTS"'; print(json.dumps(1))" 2>/tmp/py.err ||
		[ -s /tmp/py.err ]; then cat /tmp/py.err; exit 1; fi
	rm -f /tmp/py.err; nproc; cat /dev/null; blkzone --version >/dev/null
	bash -c "hostname >/dev/null"' 2>&1); then
	die "the archive's programs do not run: $chk"
fi

(cd "$stage" && find . -mindepth 1 | LC_ALL=C sort |
	cpio -o -H newc -R 0:0 --quiet) >"$out.tmp"
mv "$out.tmp" "$out"
printf '%s\n' "$inputs" >"$out.inputs"
log "initramfs $out: $(du -m "$out" | cut -f1) MB, $(wc -l <"$out.inputs") files ($(echo "$chk" | head -n 1))"
