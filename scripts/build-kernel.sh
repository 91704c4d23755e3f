#!/usr/bin/env bash
# Configure and build a guest kernel from build/linux.
#   scripts/build-kernel.sh [guest|debug]
# It refuses a tree that was not made from kernel/patches as they are now
# (scripts/prepare.sh --check; make prepare recreates or explains).
# The config is tinyconfig + kernel/configs/guest.config (+ debug.config),
# merged with the kernel's own merge_config.sh. Every option a fragment asks
# for must land in the final .config, or the build fails. The object tree is
# only touched when the resulting .config differs, so an unchanged tree
# rebuilds nothing; compiles go through ccache.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

flavor=${1:-guest}
case $flavor in
guest) frags=("$CONFIGS/guest.config") ;;
debug) frags=("$CONFIGS/guest.config" "$CONFIGS/debug.config") ;;
*) die "unknown flavour '$flavor' (guest or debug)" ;;
esac

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

# Configure in a scratch object tree, then compare.
kmake O="$scratch" tinyconfig >/dev/null
"$KSRC/scripts/kconfig/merge_config.sh" -m -O "$scratch" "$scratch/.config" \
	"${frags[@]}" >"$scratch/merge.log" 2>&1 || {
	cat "$scratch/merge.log" >&2
	die "merge_config.sh failed"
}
kmake O="$scratch" olddefconfig >/dev/null

bad=0
for f in "${frags[@]}"; do
	while IFS= read -r line; do
		if [[ $line =~ ^(CONFIG_[A-Za-z0-9_]+)=(.*)$ ]]; then
			sym=${BASH_REMATCH[1]}
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
{
	make -C "$KSRC" O="$obj" CC="ccache gcc" -j"$jobs" bzImage modules &&
		rm -rf "$obj/modroot" &&
		make -C "$KSRC" O="$obj" INSTALL_MOD_PATH="$obj/modroot" modules_install
} >"$obj/build.log" 2>&1 || {
	grep -E 'error|Error' "$obj/build.log" | head -40 >&2
	die "kernel build failed: see $obj/build.log"
}
grep -E 'warning:' "$obj/build.log" >&2 || true
log "built $obj/arch/x86/boot/bzImage and modules (in $obj/modroot) in $((SECONDS - start))s ($(make -s -C "$KSRC" O="$obj" kernelrelease))"
