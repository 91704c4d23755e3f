#!/usr/bin/env bash
# Check the series the way a maintainer would: every patch passes
# checkpatch.pl --strict, and the guest kernel builds (without new warnings)
# at every patch, not just at the top. The build check checks out each commit
# of build/linux in place (only changed files recompile), so the tree must be
# clean; it returns to where it was. It builds in build/obj-bisect with the
# guest kernel's configuration.
#   scripts/check-series.sh [checkpatch|bisect|all]
set -euo pipefail
. "$(dirname "$0")/lib.sh"

what=${1:-all}
rc=0

if [[ $what == checkpatch || $what == all ]]; then
	while read -r p; do
		[[ -z $p || $p == \#* ]] && continue
		if out=$(cd "$KSRC" && ./scripts/checkpatch.pl --strict -q --no-summary "$PATCHES/$p" 2>&1) &&
			[[ -z $out ]]; then
			echo "checkpatch: $p: clean"
		else
			printf '%s\n' "$out" | sed 's/^/  /'
			echo "checkpatch: $p: FAILED"
			rc=1
		fi
	done <"$PATCHES/series"
fi

if [[ $what == bisect || $what == all ]]; then
	[[ -z $(git -C "$KSRC" status --porcelain --untracked-files=no) ]] ||
		die "build/linux has uncommitted changes: commit or stash them first"
	# A tree of its own, so the guest kernel the tests boot is never touched,
	# and the guest's full .config at every patch: a patch that adds a
	# Kconfig symbol is built with it enabled, and an earlier patch that does
	# not know the symbol yet cannot drop it for the later ones.
	cfg=$(kobj guest)/.config
	[[ -f $cfg ]] || die "build the guest kernel first (scripts/build-kernel.sh)"
	kbuild_lock
	obj=$BUILD/obj-bisect
	mkdir -p "$obj"
	orig=$(git -C "$KSRC" symbolic-ref -q --short HEAD || git -C "$KSRC" rev-parse HEAD)
	trap 'git -C "$KSRC" checkout -q "$orig"' EXIT
	export KBUILD_BUILD_TIMESTAMP="2000-01-01" KBUILD_BUILD_USER=vstor KBUILD_BUILD_HOST=vstor
	export CCACHE_BASEDIR=$BUILD CCACHE_NOHASHDIR=1
	for c in $(git -C "$KSRC" rev-list --reverse base..HEAD); do
		subj=$(git -C "$KSRC" log -1 --format=%s "$c")
		git -C "$KSRC" checkout -q "$c"
		start=$SECONDS
		cp "$cfg" "$obj/.config"
		if make -C "$KSRC" O="$obj" CC="ccache gcc" olddefconfig >"$obj/config.log" 2>&1 &&
			make -C "$KSRC" O="$obj" CC="ccache gcc" -j"$(nproc)" bzImage modules >"$obj/bisect.log" 2>&1 &&
			! grep -q 'warning:' "$obj/bisect.log"; then
			echo "builds: $subj: ok ($((SECONDS - start))s)"
		else
			grep -E 'error|warning' "$obj/bisect.log" | head -20 | sed 's/^/  /'
			echo "builds: $subj: FAILED"
			rc=1
		fi
	done
	git -C "$KSRC" checkout -q "$orig"
	trap - EXIT
fi
exit $rc
