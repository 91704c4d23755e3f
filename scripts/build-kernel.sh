#!/usr/bin/env bash
# Configure and build a guest kernel from build/linux.
#   scripts/build-kernel.sh [guest|debug]
#   scripts/build-kernel.sh --check-debuginfo [debug]
# It refuses a tree that was not made from kernel/patches as they are now
# (scripts/prepare.sh --check; make prepare recreates or explains).
# --check-debuginfo builds nothing: it checks that scripts/faddr2line turns a
# function offset into file:line, in vmlinux and in virtio_blk.ko, for a
# flavour built with debug info (the debug flavour).
# The config is tinyconfig + kernel/configs/guest.config (+ debug.config),
# merged with the kernel's own merge_config.sh. Every option a fragment asks
# for must land in the final .config, or the build fails. The object tree is
# only touched when the resulting .config differs, so an unchanged tree
# rebuilds nothing; compiles go through ccache.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

check_debuginfo=0 flavor=${1:-guest}
if [[ $flavor == --check-debuginfo ]]; then
	check_debuginfo=1 flavor=${2:-debug}
fi
case $flavor in
guest) frags=("$CONFIGS/guest.config") ;;
debug) frags=("$CONFIGS/guest.config" "$CONFIGS/debug.config") ;;
*) die "unknown flavour '$flavor' (guest or debug)" ;;
esac

# check_lines OBJ: scripts/faddr2line turns FUNC+0x10 into FILE:LINE, a line
# of FUNC's body, for a function of vmlinux and one of virtio_blk.ko.
check_lines() {
	local obj=$1 bin func file def out line rc=0
	while read -r bin func file; do
		[[ -f $obj/$bin ]] || die "$obj/$bin not found: build the kernel first"
		def=$(grep -nE "^[^[:space:]].*[ *]$func\(" "$KSRC/$file" | head -n 1 | cut -d: -f1)
		[[ -n $def ]] || die "$func not found in $KSRC/$file"
		out=$("$KSRC/scripts/faddr2line" "$obj/$bin" "$func+0x10" 2>&1) || true
		line=$(printf '%s\n' "$out" | sed -nE "s|^$func at (.*/)?$file:([0-9]+).*|\2|p" | head -n 1)
		if [[ -n $line ]] && ((line >= def && line < def + 500)); then
			log "faddr2line ${bin##*/} $func+0x10: $file:$line ($func starts at line $def)"
		else
			printf '%s\n' "$out" | sed 's/^/  /' >&2
			printf 'error: faddr2line %s %s+0x10: no line of %s in %s (no debug info?)\n' \
				"${bin##*/}" "$func" "$func" "$file" >&2
			rc=1
		fi
	done <<-EOF
		vmlinux virtio_device_reinit drivers/virtio/virtio.c
		drivers/block/virtio_blk.ko virtblk_probe drivers/block/virtio_blk.c
	EOF
	return "$rc"
}

if ((check_debuginfo)); then
	check_lines "$(kobj "$flavor")"
	exit
fi

series_require "to build $KSRC"
kbuild_lock
obj=$(kobj "$flavor")
scratch=$obj.kconfig
mkdir -p "$obj" "$scratch"
base=$(cat "$KSRC/.git/base-version" 2>/dev/null || echo unknown)
npatch=$(series_patches "$PATCHES" | grep -c . || true)
kver=$(make -s -C "$KSRC" kernelversion)
log "building $flavor kernel: base $BASE_PKG $base (Linux $kver) + $npatch patches ($(series_work))"

kmake() { make -s -C "$KSRC" "$@"; }

# The object tree of a clean build is kept in VSTOR_CACHE, as ccache keeps
# each compile, under a key of what the build reads: the stamp below (the
# tree's content, the fragments, this script, the tests' modules), the
# toolchain (gcc and cc1 by version and file, and the Debian versions of
# binutils, make, pahole, libelf, bison, flex and libssl), and what the
# environment and a calling make hand kbuild (KCFLAGS, LOCALVERSION, a
# command line's W= and the like). A tree is kept or restored only under
# the key it was made with ($obj/.vstor-key). Another clone with the same key
# restores it instead of running make (a fresh clone's make took 80-125 s
# here, with every compile a ccache hit). One tree is kept per base and
# flavour (the debug flavour's is larger). Removing the cache costs time,
# never correctness; VSTOR_CACHE=off turns it off. Saves and restores
# hold kbuild_lock, as every build does: one at a time on this machine.
kcache=$VSTOR_CACHE/kobj/$BASE_PKG-$flavor
# kbuild's variables from the environment (KBUILD_BUILD_TIMESTAMP, _USER
# and _HOST are set below), and those it takes only from a command line.
KBUILD_ENV_VARS='KBUILD_[A-Z_]*|K(CFLAGS|CPPFLAGS|AFLAGS|RUSTFLAGS)|LOCALVERSION|INSTALL_MOD_[A-Z_]*|HOST[A-Z]*FLAGS|ARCH|CROSS_COMPILE|LLVM[A-Z_]*'
KBUILD_CMDLINE_VARS='CC|LD|O|W|C'
kcache_key() {
	local cc1
	cc1=$(gcc -print-prog-name=cc1) || return 1
	{
		echo "r2 $1"
		gcc --version | head -n 1
		stat -L -c '%n %s %Y' "$(command -v gcc)" "$cc1"
		dpkg-query -W -f '${Package} ${Version}\n' binutils make dwarves libelf-dev bison flex \
			libssl-dev 2>/dev/null || true
		# A calling make's command-line variables (make test KCFLAGS=...)
		# are in the environment too; W=, C= and the like only in
		# MAKEFLAGS. Others, like T=, do not reach kbuild's choices.
		env | grep -E "^($KBUILD_ENV_VARS)=" |
			grep -vE '^KBUILD_BUILD_(TIMESTAMP|USER|HOST)=' | LC_ALL=C sort || true
		[[ ${MAKEFLAGS:-} != *" -- "* ]] || printf '%s\n' "${MAKEFLAGS#* -- }" | sed 's/\\ /\x1f/g' |
			tr ' ' '\n' | grep -E "^($KBUILD_CMDLINE_VARS)=" | LC_ALL=C sort || true
	} | sha256sum | cut -c1-24
}

# kcache_paths: this clone's build directory as the scripts name it and as
# kbuild does (realpath), one per line, the real one first.
kcache_paths() {
	realpath -e "$BUILD"
	[[ $(realpath -e "$BUILD") == "$BUILD" ]] || echo "$BUILD"
}

# kcache_save KEY: keep $obj under KEY, in place of this base and flavour's
# older tree (and of any copy a killed save left). A failure only costs
# the next clone a build, never this one.
kcache_save() {
	local new flags=${MAKEFLAGS:-}
	[[ -n $1 && ! -f $kcache/$1/done && $(cat "$obj/.vstor-key" 2>/dev/null) == "$1" ]] || return 0
	# Not a tree a calling make -i, -n, -t or -q may have left unbuilt.
	flags=${flags%% *}
	[[ $flags == -* || $flags != *[intq]* ]] || return 0
	vstor_cache_usable || return 0
	if mkdir -p "$kcache" && new=$(mktemp -d "$kcache/.new.XXXXXX") &&
		cp -a "$obj" "$new/obj" && kcache_paths >"$new/build-dirs" && touch "$new/done"; then
		find "$kcache" -mindepth 1 -maxdepth 1 ! -name "${new##*/}" -exec rm -rf {} + || true
		if mv -T "$new" "$kcache/$1"; then
			log "kept the $flavor object tree in $kcache/$1"
			return 0
		fi
	fi
	[[ -z ${new:-} ]] || rm -rf "$new"
	log "could not keep the object tree in $kcache (only costs time)"
}

# kcache_rewrite DIR OLD NEW: every text file and symlink in DIR that names
# a path under OLD names it under NEW instead; fails if one still does.
kcache_rewrite() {
	local dir=$1 old=$2 new=$3 target link
	# shellcheck disable=SC2016 # perl's variables, not the shell's
	{ grep -rlIZF -- "$old/" "$dir" || (($? == 1)); } |
		OLD=$old/ NEW=$new/ xargs -0r perl -pi -e 's/\Q$ENV{OLD}\E/$ENV{NEW}/g' || return 1
	while IFS=$'\t' read -r target link; do
		ln -sfn "$new/${target#"$old/"}" "$link" || return 1
	done < <(find "$dir" -type l -lname "$old/*" -printf '%l\t%p\n')
	# perl -pi warns and goes on past a file it cannot write.
	grep -rqIF -- "$old/" "$dir"
	(($? == 1)) && [[ -z $(find "$dir" -type l -lname "$old/*" -print -quit) ]]
}

# kcache_restore KEY: $obj from the tree kept under KEY. Paths of the clone
# that built it become this clone's (kbuild's .cmd files name the sources
# by absolute path), and every file is made newer than the sources, which
# a prepare has just written: make then rebuilds nothing, and after a
# checkout (scripts/check-series.sh) exactly what changed.
kcache_restore() {
	local src=$kcache/$1 tmp=$obj.restore now i ok=1
	local -a olds news
	[[ -n $1 && -f $src/done && -d $src/obj && ! -L $src/obj ]] || return 1
	vstor_cache_usable || return 1
	mapfile -t olds <"$src/build-dirs" && mapfile -t news < <(kcache_paths) || return 1
	# The real directory and the named one, both absolute, and as many here.
	[[ ${#olds[@]} -ge 1 && ${olds[0]} == /* && ${olds[-1]} == /* ]] || return 1
	rm -rf "$tmp"
	mkdir "$tmp" && cp -a "$src/obj/." "$tmp/" &&
		[[ -f $tmp/arch/x86/boot/bzImage && -d $tmp/modroot/lib/modules ]] || ok=0
	for ((i = 0; ok && i < ${#olds[@]}; i++)); do
		[[ ${olds[i]} == "${news[i]:-${news[0]}}" ]] ||
			kcache_rewrite "$tmp" "${olds[i]}" "${news[i]:-${news[0]}}" || ok=0
	done
	if ((ok)) && now=$(date +%s) && find "$tmp" -exec touch -h -d "@$now" {} + &&
		rm -rf "$obj" && mv -T "$tmp" "$obj"; then
		log "$flavor kernel restored from $src (built in ${olds[-1]}; make not run)"
		return 0
	fi
	rm -rf "$tmp"
	mkdir -p "$obj"
	log "could not restore the object tree from $src: building"
	return 1
}

# A clean tree at a commit this flavour was last built from, with the same
# fragments and this same script, needs no make at all: say so and stop.
# (A no-op make of the whole tree takes 20-40 s here; any uncommitted edit
# in build/linux means a real make.)
# The stamp names the tree by its content (git's tree object): the
# commits' dates, and so their ids, differ from one prepare to the next.
stamp="" key="" tree=""
if [[ -z $(git -C "$KSRC" status --porcelain | head -n 1) ]]; then
	tree=$(git -C "$KSRC" rev-parse 'HEAD^{tree}')
	stamp=$({
		echo "$flavor $tree"
		cat "${frags[@]}" "$0" "$KMOD_SRC"/*
	} | sha256sum | cut -d' ' -f1)
	key=$(kcache_key "$stamp") || key=""
	if [[ -f $obj/.vstor-built && $(cat "$obj/.vstor-built") == "$stamp" &&
		-f $obj/arch/x86/boot/bzImage && -d $obj/modroot/lib/modules ]] &&
		[[ -z $key || $(cat "$obj/.vstor-key" 2>/dev/null) == "$key" ]]; then
		log "$flavor kernel is up to date ($obj, built from $(git -C "$KSRC" log -1 --format=%h) with these fragments)"
		git -C "$KSRC" rev-parse HEAD >"$obj/.vstor-built-at"
		kcache_save "$key"
		exit 0
	fi
	if [[ -n $key ]] && kcache_restore "$key"; then
		echo "$stamp" >"$obj/.vstor-built"
		echo "$key" >"$obj/.vstor-key"
		git -C "$KSRC" rev-parse HEAD >"$obj/.vstor-built-at"
		exit 0
	fi
fi
rm -f "$obj/.vstor-built" "$obj/.vstor-built-at" "$obj/.vstor-key"

# Configure in a scratch object tree, then compare.
kmake O="$scratch" tinyconfig >/dev/null
"$KSRC/scripts/kconfig/merge_config.sh" -m -O "$scratch" "$scratch/.config" \
	"${frags[@]}" >"$scratch/merge.log" 2>&1 || {
	cat "$scratch/merge.log" >&2
	die "merge_config.sh failed"
}
kmake O="$scratch" olddefconfig >/dev/null

# known SYM: the base's Kconfig defines CONFIG_SYM. The fragments serve both
# bases; a symbol one of them does not have (PROC_SYSCTL is gone after
# 6.12, /proc/sys comes with SYSCTL there) is said and skipped, not asked for.
known() {
	git -C "$KSRC" grep -qE "^[[:space:]]*(menu)?config[[:space:]]+${1#CONFIG_}\$" -- '*Kconfig*'
}

bad=0
for f in "${frags[@]}"; do
	while IFS= read -r line; do
		if [[ $line =~ ^(CONFIG_[A-Za-z0-9_]+)=(.*)$ ]]; then
			sym=${BASH_REMATCH[1]}
			if ! grep -qxF -- "$line" "$scratch/.config" && ! known "$sym"; then
				log "${f##*/}: $sym does not exist in $BASE_PKG: skipped"
				continue
			fi
			grep -qxF -- "$line" "$scratch/.config" || {
				got=$(grep -E "^(# )?${sym}[= ]" "$scratch/.config" || echo "absent")
				printf 'error: %s asks for %s, final .config has: %s\n' \
					"${f##*/}" "$line" "$got" >&2
				bad=1
			}
		elif [[ $line =~ ^#\ (CONFIG_[A-Za-z0-9_]+)\ is\ not\ set$ ]]; then
			sym=${BASH_REMATCH[1]}
			if grep -qE "^$sym=" "$scratch/.config"; then
				printf 'error: %s asks for %s unset, final .config has: %s\n' \
					"${f##*/}" "$sym" "$(grep -E "^$sym=" "$scratch/.config")" >&2
				bad=1
			fi
		fi
	done <"$f"
done
((bad == 0)) || die "config fragments did not apply (see above)"

if ! cmp -s "$scratch/.config" "$obj/.config"; then
	log "config changed: installing new .config into $obj"
	cp "$scratch/.config" "$obj/.config"
fi

export KBUILD_BUILD_TIMESTAMP="2000-01-01"
export KBUILD_BUILD_USER=vstor KBUILD_BUILD_HOST=vstor
export CCACHE_BASEDIR=$BUILD CCACHE_NOHASHDIR=1
ccache -M 8G >/dev/null 2>&1 || true
jobs=${JOBS:-$(nproc)}
start=$SECONDS
# The tests' own modules (tests/kmod) build against these objects, from a
# copy in the object tree, and install next to the kernel's (updates/).
kmod=$obj/vstor-kmod
{
	make -C "$KSRC" O="$obj" CC="ccache gcc" -j"$jobs" bzImage modules &&
		rm -rf "$obj/modroot" "$kmod" &&
		make -C "$KSRC" O="$obj" INSTALL_MOD_PATH="$obj/modroot" modules_install &&
		cp -r "$KMOD_SRC" "$kmod" &&
		make -C "$KSRC" O="$obj" M="$kmod" CC="ccache gcc" W=1 modules &&
		make -C "$KSRC" O="$obj" M="$kmod" INSTALL_MOD_PATH="$obj/modroot" modules_install
} >"$obj/build.log" 2>&1 || {
	grep -E 'error|Error' "$obj/build.log" | head -40 >&2
	die "kernel build failed: see $obj/build.log"
}
grep -E 'warning:' "$obj/build.log" >&2 || true
# The tree must still be the one the stamp names: an edit made during the
# build leaves the objects unrecorded (the next build makes them again).
if [[ -n $stamp && -z $(git -C "$KSRC" status --porcelain | head -n 1) &&
	$(git -C "$KSRC" rev-parse 'HEAD^{tree}') == "$tree" ]]; then
	echo "$stamp" >"$obj/.vstor-built"
	# The commit the objects are, for scripts/check-series.sh's copy.
	git -C "$KSRC" rev-parse HEAD >"$obj/.vstor-built-at"
	[[ -z $key ]] || echo "$key" >"$obj/.vstor-key"
	kcache_save "$key"
fi
log "built $obj/arch/x86/boot/bzImage and modules (in $obj/modroot) in $((SECONDS - start))s ($(make -s -C "$KSRC" O="$obj" kernelrelease))"
