#!/usr/bin/env bash
# What the build robots would say: the series built as the robots that
# build every posted series build it (the kernel test robot: many
# architectures, compilers and configurations, W=1), at the last patch of
# each cover letter group, with every warning the series adds named.
#
#   scripts/robot.sh [--config "NAME ..."] [--group "GROUP ..."] [--list]
#   make robot KBASE=mainline [R="NAME ..."] [G="GROUP ..."]
#
# --list names the configurations and the groups. A GROUP is a template of
# kernel/cover/KBASE by file name (2-virtio-blk), by name (virtio-blk) or
# by number (2). Not part of make test: a full run took about an hour
# per base, cold, on two cores (Documentation/workflow.md, "Build robots").
#
# Each configuration (robot_config below) is a named set: ARCH, the
# toolchain (the host's gcc, Debian's aarch64 cross gcc, Debian's clang
# with LLVM=1), a base config (defconfig, allmodconfig) and a fragment of
# the options the series depends on, and is built with W=1 (kernel-doc
# included). Its .config is made once per run, at the series' last commit
# (where every option the fragment names exists), in its own object
# directory build/robot/KBASE/NAME; every build copies it in and runs
# olddefconfig, so that a commit before a Kconfig symbol exists
# (CONFIG_VHOST_BLK) drops it and the next one has it again. An option of
# the fragment that the commit's Kconfig has but the .config lacks fails
# the configuration: it would not test what it says.
#
# What is built: the directories of every file the series changes outside
# include/, Documentation/ and tools/ (block/, drivers/block/, ...; make
# DIR/ compiles every object the configuration enables there), and, in a
# configuration with CONFIG_UAPI_HEADER_TEST, usr/include/ when it changes
# include/uapi/. Once at the base (tag base) and once at the last patch of
# each group, in series order, in one source tree per base
# (build/robot/KBASE/src, made from the prepared tree's objects with an
# index of its own: the prepared tree is only read) moved from commit to
# commit, so that each build compiles what the move changed. Compiles go
# through ccache. The x86_64 configuration also runs kernel-doc (as W=1
# does on .c files) on the headers the series changes.
#
# make runs with --output-sync, so each object's compiler, kernel-doc and
# objtool messages come out together; they are kept per object in
# OBJ/.robot/msg/, replaced when the object is compiled again, so that the
# messages at a commit are those of every object as built there, whichever
# build compiled it.
#
# A warning is new when it points at a line the series adds or changes up
# to that commit (git diff base..COMMIT), directly or through a note (the
# use of a macro, an inlined call), or when it points elsewhere and the
# same build at the base does not have it (the same file and text; line
# numbers move). Anything else is pre-existing: listed for the files the
# series changes, counted for the others, never a failure. Errors always
# fail.
#
# Output: a table (configuration x group: pass, N new, error) on stdout and
# in build/logs/robot/KBASE/summary.txt; every new warning verbatim in
# new.txt there; per configuration and commit, the make log (NN-GROUP.log)
# and its messages sorted into classes (NN-GROUP.warnings). Exits 1 on any
# new warning or error.
#
# Toolchains other than the host's gcc come from Debian: arm64 needs
# gcc-aarch64-linux-gnu, clang needs clang-N, lld-N and llvm-N (N is
# ROBOT_LLVM, default 19: Debian 12 and 13 both ship it, and mainline
# wants at least 17). Run as root, the robot installs what the chosen
# configurations lack with apt-get, as setup.sh does; otherwise it names
# the packages. JOBS (default: the number of CPUs) is make's -j.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

# Nothing of a calling make reaches kbuild (make robot W=2 would otherwise
# change every build's flags through MAKEFLAGS).
unset MAKEFLAGS MFLAGS MAKELEVEL MAKEOVERRIDES

CONFIG_NAMES=(x86_64 x86_64-y x86_64-nocompat i386 arm64 clang allmod
	no-io-uring no-zoned no-blkcg no-memcg no-pm-sleep no-debugfs)
LLVM_VERSION=${ROBOT_LLVM:-19}
RB=$BUILD/robot/$KBASE     # source tree and object directories
LOGS=$BUILD/logs/robot/$KBASE
src=$RB/src
jobs=${JOBS:-$(nproc)}

usage() {
	sed -n '7,12p' "$0" | sed 's/^# \{0,1\}//'
	exit "${1:-0}"
}

# robot_config NAME: set the configuration's arch, toolchain (tc: gcc,
# arm64, clang), start (the make target the .config starts from),
# fragment (the lines it must have) and desc.
robot_config() {
	local mode=m
	local -a over=()
	arch=x86_64 tc=gcc start=defconfig
	case $1 in
	x86_64)
		desc="x86_64 defconfig + the series' options, VIRTIO_BLK=m VHOST_BLK=m, CONFIG_COMPAT (IA32_EMULATION) on; also kernel-doc of the changed headers"
		;;
	x86_64-y)
		mode=y
		desc="x86_64 defconfig + the series' options built in (VIRTIO_BLK=y VHOST_BLK=y)"
		;;
	x86_64-nocompat)
		over=('# CONFIG_IA32_EMULATION is not set' '# CONFIG_X86_X32_ABI is not set' '# CONFIG_COMPAT is not set')
		desc="x86_64 as above without CONFIG_COMPAT (no IA32_EMULATION, no X32)"
		;;
	i386)
		arch=i386
		desc="i386 defconfig + the series' options (32-bit: no CONFIG_COMPAT, 32-bit pointers and longs)"
		;;
	arm64)
		arch=arm64 tc=arm64
		desc="arm64 defconfig + the series' options, Debian's aarch64-linux-gnu-gcc"
		;;
	clang)
		tc=clang
		desc="x86_64 as the first, built with Debian's clang-$LLVM_VERSION (LLVM=-$LLVM_VERSION)"
		;;
	allmod)
		start=allmodconfig
		desc="x86_64 allmodconfig (CONFIG_WERROR off), only the series' directories (and usr/include/ for its uapi headers)"
		;;
	# IO_URING asks only with EXPERT (default y), as a robot's randconfig
	# turns it off.
	no-io-uring) over=('# CONFIG_IO_URING is not set' 'CONFIG_EXPERT=y') ;;
	no-zoned) over=('# CONFIG_BLK_DEV_ZONED is not set') ;;
	no-blkcg) over=('# CONFIG_BLK_CGROUP is not set') ;;
	no-memcg) over=('# CONFIG_MEMCG is not set') ;;
	no-pm-sleep) over=('# CONFIG_PM_SLEEP is not set' '# CONFIG_SUSPEND is not set' '# CONFIG_HIBERNATION is not set') ;;
	# blktrace selects DEBUG_FS (defconfig has it).
	no-debugfs) over=('# CONFIG_DEBUG_FS is not set' '# CONFIG_BLK_DEBUG_FS is not set' '# CONFIG_BLK_DEV_IO_TRACE is not set') ;;
	*) die "no configuration '$1' (scripts/robot.sh --list)" ;;
	esac
	if [[ $1 == no-* ]]; then
		desc="x86_64 as the first with $(config_sym "${over[0]}")=n"
		((${#over[@]} == 1)) || desc+=" (${over[*]:1})"
		desc=${desc//# CONFIG_/}
		desc=${desc// is not set/=n}
		desc=${desc//(CONFIG_/(}
	fi
	if [[ $start == allmodconfig ]]; then
		# CONFIG_WERROR would stop at the first W=1 warning upstream has.
		fragment=$(printf '%s\n' '# CONFIG_WERROR is not set' '# CONFIG_OBJTOOL_WERROR is not set' \
			CONFIG_VIRTIO_BLK=m CONFIG_VHOST_BLK=m)
		return
	fi
	# What the series' code depends on or has #ifdefs and stubs for.
	fragment=$(
		cat <<-EOF
			# CONFIG_WERROR is not set
			# CONFIG_OBJTOOL_WERROR is not set
			CONFIG_MODULES=y
			CONFIG_BLOCK=y
			CONFIG_BLK_DEV=y
			CONFIG_PCI=y
			CONFIG_VIRTIO_MENU=y
			CONFIG_VIRTIO_PCI=y
			CONFIG_VIRTIO_BLK=$mode
			CONFIG_VHOST_MENU=y
			CONFIG_VHOST_BLK=$mode
			CONFIG_EVENTFD=y
			CONFIG_IO_URING=y
			CONFIG_BLK_DEV_ZONED=y
			CONFIG_CGROUPS=y
			CONFIG_BLK_CGROUP=y
			CONFIG_MEMCG=y
			CONFIG_SUSPEND=y
			CONFIG_PM_SLEEP=y
			CONFIG_DEBUG_FS=y
			CONFIG_BLK_DEBUG_FS=y
		EOF
	)
	local o sym
	for o in "${over[@]}"; do
		sym=$(config_sym "$o")
		fragment=$(printf '%s\n' "$fragment" | grep -vE "^(# )?${sym}[= ]" || true)
		fragment+=$'\n'$o
	done
}

# config_sym LINE: the CONFIG_ symbol a .config line sets.
config_sym() {
	[[ $1 =~ (CONFIG_[A-Za-z0-9_]+) ]] && printf '%s\n' "${BASH_REMATCH[1]}"
}

# toolchain: the make variables of the configuration's toolchain (kvars)
# and the commands it needs, as "command package" lines (tools).
toolchain() {
	case $tc in
	gcc)
		kvars=(ARCH="$arch" CC="ccache gcc")
		tools=("gcc build-essential")
		;;
	arm64)
		kvars=(ARCH="$arch" CROSS_COMPILE=aarch64-linux-gnu- CC="ccache aarch64-linux-gnu-gcc")
		tools=("aarch64-linux-gnu-gcc gcc-aarch64-linux-gnu")
		;;
	clang)
		kvars=(ARCH="$arch" LLVM="-$LLVM_VERSION" CC="ccache clang-$LLVM_VERSION")
		tools=("clang-$LLVM_VERSION clang-$LLVM_VERSION" "ld.lld-$LLVM_VERSION lld-$LLVM_VERSION"
			"llvm-ar-$LLVM_VERSION llvm-$LLVM_VERSION")
		;;
	esac
	kvars+=(W=1)
}

# need_tools NAME...: the toolchains of these configurations are installed,
# by apt-get when root; else say which packages to install.
need_tools() {
	local n t cmd pkg
	local -a missing=()
	for n in "$@"; do
		robot_config "$n"
		toolchain
		for t in "${tools[@]}"; do
			read -r cmd pkg <<<"$t"
			command -v "$cmd" >/dev/null || [[ " ${missing[*]} " == *" $pkg "* ]] || missing+=("$pkg")
		done
	done
	((${#missing[@]})) || return 0
	[[ $(id -u) -eq 0 ]] ||
		die "the chosen configurations need Debian's ${missing[*]}: apt-get install ${missing[*]} (as root), or leave them out (--config)"
	log "installing ${missing[*]} (the robot's cross and clang toolchains)"
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null ||
		{ apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null; } ||
		die "apt-get install ${missing[*]} failed"
}

# rgit ARGS...: git on the robot's source tree: the prepared tree's
# repository (read only), this tree's own index.
rgit() {
	GIT_DIR=$KSRC/.git GIT_WORK_TREE=$src GIT_INDEX_FILE=$RB/src.index git "$@"
}

# tree_at COMMIT: the robot's source tree holds COMMIT. Moving it rewrites
# only the files that differ, so that make rebuilds what they change. A
# tree whose last move did not finish is made again (every object is then
# compiled again, from ccache).
tree_at() {
	local at
	at=$(cat "$RB/src.at" 2>/dev/null || true)
	[[ $at == "$1" && -d $src ]] && return 0
	rm -f "$RB/src.at"
	if [[ -n $at && -f $RB/src.index && -d $src ]]; then
		rgit read-tree --reset -u "$1"
	else
		log "checking out $(git -C "$KSRC" log -1 --format='%h %s' "$1") into ${src#"$TOP"/}"
		rm -rf "$src" "$RB/src.index"
		mkdir -p "$src"
		rgit read-tree "$1"
		rgit checkout-index -a -f -u
	fi
	echo "$1" >"$RB/src.at"
}

# kmake ARGS...: make of the current configuration in the robot's tree.
kmake() {
	make -C "$src" O="$obj" "${kvars[@]}" "$@"
}

# known SYM COMMIT: COMMIT's Kconfig defines SYM (CONFIG_VHOST_BLK comes
# with the series; CONFIG_OBJTOOL_WERROR after 6.12).
known() {
	git -C "$KSRC" grep -qE "^[[:space:]]*(menu)?config[[:space:]]+${1#CONFIG_}\$" "$2" -- '*Kconfig*'
}

# check_config COMMIT: every fragment line whose symbol COMMIT has is in
# the .config; says which are not.
check_config() {
	local line sym got bad=0
	while IFS= read -r line; do
		sym=$(config_sym "$line") || continue
		if [[ $line == "# "* ]]; then
			grep -qE "^$sym=" "$obj/.config" || continue
		else
			grep -qxF -- "$line" "$obj/.config" && continue
		fi
		known "$sym" "$2" || continue
		got=$(grep -E "^(# )?${sym}[= ]" "$obj/.config" || echo absent)
		echo "config: the fragment asks for '$line', the .config has: $got"
		bad=1
	done <<<"$1"
	return "$bad"
}

# make_config: the configuration's .config at the series' last commit, in
# OBJ/.robot/config.
make_config() {
	local frag=$obj/.robot/fragment
	tree_at "$tip"
	printf '%s\n' "$fragment" >"$frag"
	{
		if [[ $start == allmodconfig ]]; then
			KCONFIG_ALLCONFIG=$frag kmake allmodconfig
		else
			kmake "$start" &&
				"$src/scripts/kconfig/merge_config.sh" -m -O "$obj" "$obj/.config" "$frag" &&
				kmake olddefconfig
		fi
	} >"$clog/config.log" 2>&1 || {
		tail -n 20 "$clog/config.log" >&2
		return 1
	}
	check_config "$fragment" "$tip" >>"$clog/config.log" || {
		grep '^config:' "$clog/config.log" >&2
		return 1
	}
	cp "$obj/.config" "$obj/.robot/config"
}

# ---- Messages --------------------------------------------------------------

# keep_messages LOG: each target's messages in LOG (kbuild's quiet line
# "  CC [M]  drivers/block/virtio_blk.o" and what follows it, which
# --output-sync keeps together) into OBJ/.robot/msg/TARGET, in place of
# what an earlier build of the target said.
keep_messages() {
	mkdir -p "$obj/.robot/msg"
	awk -v dir="$obj/.robot/msg" '
		/^  [A-Z][A-Z0-9_]*( \[M\])? +[^ ]+$/ {
			if (f != "") close(f)
			t = $NF; gsub("/", "%", t); f = dir "/" t
			if (f in seen) print >> f; else { seen[f] = 1; print > f }
			next
		}
		/^make(\[[0-9]+\])?: / { next }
		f != "" { print >> f }' "$1"
}

# current_messages: the kept messages of every target that is part of the
# build at this commit: an object whose source exists, a module whose
# member objects' sources do, an installed uapi header; concatenated.
current_messages() {
	local m t b member ok
	for m in "$obj"/.robot/msg/*; do
		[[ -f $m ]] || continue
		t=${m##*/}
		t=${t//%//}
		case $t in
		*.o)
			b=${t%.o}
			if [[ ! -f $src/$b.c && ! -f $src/$b.S ]]; then
				[[ -f $obj/$b.mod ]] || continue
				ok=1
				for member in $(<"$obj/$b.mod"); do
					[[ -f $src/${member%.o}.c || -f $src/${member%.o}.S ]] || ok=0
				done
				((ok)) || continue
			fi
			;;
		*) [[ -e $obj/$t ]] || continue ;;
		esac
		cat "$m"
	done
}

# kdoc_headers: kernel-doc, as W=1 runs it on .c files, on every header
# of the series (outside tools/) that the tree has at this commit: at the
# base too, for what upstream's headers already have.
kdoc_headers() {
	local f
	while read -r f; do
		[[ -f $src/$f ]] || continue
		PYTHONDONTWRITEBYTECODE=1 "$src/scripts/kernel-doc" -none "$src/$f" 2>&1 || true
	done < <(git -C "$KSRC" diff --name-only "$base" "$tip" -- '*.h' ':!tools/')
}

# classify ADDED BASEKEYS TOUCHED KEYS: stdin is the messages of a build,
# paths relative to the tree; stdout each distinct diagnostic as "@@ CLASS
# FILE TEXT" (tab-separated) and its text (the context before it, the
# line, its notes). CLASS:
#   error        an error (always fails)
#   new          on a line of ADDED (FILE:LINE, the lines the series adds),
#                or a note or "inlined from" of it is
#   new-other    elsewhere, and not in BASEKEYS (the base's FILE<TAB>TEXT)
#   old-touched  in BASEKEYS, in a file of TOUCHED (the series' files)
#   old          in BASEKEYS
# An empty BASEKEYS (the base's own build) makes every warning "old".
# KEYS gets the FILE<TAB>TEXT of every diagnostic (the base's BASEKEYS).
classify() {
	awk -v added="$1" -v basekeys="$2" -v touched="$3" -v keys="$4" "$AWK_PATH_NORM"'
		# primary(S): S is a diagnostic; sets pfile, pline, pmsg, perr.
		function primary(s,   hdr, rest, p) {
			if (match(s, /^[^ :]+:[0-9]+:([0-9]+:)? (fatal )?([Ww]arning|[Ee]rror): /)) {
				hdr = substr(s, 1, RLENGTH); rest = substr(s, RLENGTH + 1)
				split(hdr, p, ":"); pfile = norm(p[1]); pline = p[2]
				perr = (hdr ~ /[Ee]rror: $/)
			} else if (match(s, /^(Warning|Error|WARNING|ERROR): [^ :]+:[0-9]+ /)) {
				# kernel-doc (Python): "Warning: FILE:LINE text"
				hdr = substr(s, 1, RLENGTH - 1); rest = substr(s, RLENGTH + 1)
				sub(/^[A-Za-z]+: /, "", hdr)
				split(hdr, p, ":"); pfile = norm(p[1]); pline = p[2]
				perr = (s ~ /^(Error|ERROR)/)
			} else if (match(s, /^[^ :]+: ([Ww]arning|[Ee]rror): /)) {
				# objtool ("FILE.o: warning: objtool: FUNC+0x12: text"), cc1, ld
				hdr = substr(s, 1, RLENGTH); rest = substr(s, RLENGTH + 1)
				split(hdr, p, ":"); pfile = norm(p[1]); pline = ""
				perr = (hdr ~ /[Ee]rror: $/)
				gsub(/\+0x[0-9a-f]+(\/0x[0-9a-f]+)?/, "", rest)
			} else if (s ~ /^WARNING: /) {
				pfile = "modpost"; pline = ""; rest = substr(s, 10); perr = 0
			} else if (s !~ /^[ \t]/ && s ~ /([Ww]arning|[Ee]rror): /) {
				pfile = "?"; pline = ""; rest = s; perr = (s ~ /[Ee]rror: /)
			} else
				return 0
			pmsg = (perr ? "error: " : "warning: ") rest
			return 1
		}
		# secondary(S): the FILE:LINE a note or an "inlined from" names, or "".
		function secondary(s,   t, p) {
			if (match(s, /^[^ :]+:[0-9]+:[0-9]+: note: /)) t = substr(s, 1, RLENGTH)
			else if (match(s, /inlined from .* at [^ :]+:[0-9]+/)) { t = substr(s, RSTART, RLENGTH); sub(/.* at /, "", t) }
			else return ""
			split(t, p, ":")
			return norm(p[1]) ":" p[2]
		}
		function flush(   id) {
			if (cur == "") return
			id = file ":" line "\t" msg
			if (!(id in seen)) {
				seen[id] = 1; n++
				rtext[n] = cur; rfile[n] = file; rline[n] = line; rmsg[n] = msg
				rerr[n] = iserr; rsec[n] = sec
			}
			cur = ""; sec = ""
		}
		BEGIN {
			while ((getline l < added) > 0) add[l] = 1
			while (basekeys != "" && (getline l < basekeys) > 0) base[l]++
			while ((getline l < touched) > 0) mine[l] = 1
		}
		/^  [A-Z][A-Z0-9_]*( \[M\])? +[^ ]+$/ || /^make(\[[0-9]+\])?: / { flush(); ctx = ""; csec = ""; next }
		{ sub(/\r$/, "") }
		primary($0) {
			flush()
			file = pfile; line = pline; msg = pmsg; iserr = perr
			cur = ctx $0; sec = csec; ctx = ""; csec = ""
			next
		}
		/^In file included from |^ +from |^In function |^[^ ]+: (In|At) / || /^ +inlined from / {
			flush()
			ctx = ctx $0 "\n"
			s = secondary($0); if (s != "") csec = csec " " s
			next
		}
		cur != "" {
			cur = cur "\n" $0
			s = secondary($0); if (s != "") sec = sec " " s
		}
		END {
			flush()
			for (i = 1; i <= n; i++) {
				k = rfile[i] "\t" rmsg[i]
				print k > keys
				f = rfile[i]; sub(/\.o$/, ".c", f)
				hit = (rline[i] != "" && (rfile[i] ":" rline[i]) in add)
				m = split(rsec[i], s2, " ")
				for (j = 1; !hit && j <= m; j++) hit = (s2[j] in add)
				if (rerr[i]) c = "error"
				else if (basekeys == "") c = "old"
				else if (hit) c = "new"
				else if (base[k] > 0) { base[k]--; c = (f in mine) ? "old-touched" : "old" }
				else c = "new-other"
				print "@@ " c "\t" rfile[i] "\t" rmsg[i]
				print rtext[i]
			}
		}'
}

# added_lines FROM TO: FILE:LINE of every line FROM..TO adds (as
# check-series.sh's sparse_at).
added_lines() {
	git -C "$KSRC" diff -U0 "$1" "$2" | awk '
		/^\+\+\+ b\// { file = substr($0, 7) }
		/^@@ / { split($3, a, ","); n = (a[2] == "" ? 1 : a[2]); s = substr(a[1], 2)
			for (i = 0; i < n; i++) print file ":" s + i }'
}

# build_at COMMIT LABEL: build the configuration at COMMIT (the base, or a
# group's last patch) and sort its messages; writes LABEL.log,
# LABEL.warnings and LABEL.result (one line: new new-other old-touched
# old errors, then what is not built) in the configuration's log
# directory. Fails on a configuration that does not hold.
build_at() {
	local c=$1 label=$2 rc=0 t0=$SECONDS rel f
	local out=$clog/$label
	local -a targets=("${dirs[@]}")
	tree_at "$c"
	cp "$obj/.robot/config" "$obj/.config"
	kmake olddefconfig >"$out.log" 2>&1 || rc=1
	if ((rc == 0)) && ! check_config "$fragment" "$c" >>"$out.log"; then
		rc=1
	fi
	if ((rc)); then
		grep '^config:' "$out.log" >&2 || tail -n 5 "$out.log" >&2
		echo "0 0 0 0 1 config" >"$out.result"
		return 1
	fi
	[[ -n ${uapi:-} ]] && grep -q '^CONFIG_UAPI_HEADER_TEST=y' "$obj/.config" && targets+=(usr/include/)
	# The kept messages and the objects agree unless a build was cut short.
	touch "$obj/.robot/dirty"
	kmake -j"$jobs" --output-sync=target "${targets[@]}" >>"$out.log" 2>&1 || rc=$?
	keep_messages "$out.log"
	rm -f "$obj/.robot/dirty"
	# Paths as the tree names them: the compiler has them relative to the
	# object directory (ccache's CCACHE_BASEDIR), kernel-doc absolute.
	rel=$(realpath --relative-to="$obj" "$src")
	{
		current_messages
		[[ $name != x86_64 ]] || kdoc_headers
	} | sed -e "s|${src//./\\.}/||g" -e "s|${rel//./\\.}/||g" -e "s|${obj//./\\.}/||g" >"$out.msgs"
	if [[ $c == "$base" ]]; then
		: >"$out.added"
		classify "$out.added" "" "$out.added" "$clog/base.keys" <"$out.msgs" >"$out.warnings"
	else
		added_lines "$base" "$c" >"$out.added"
		git -C "$KSRC" diff --name-only "$base" "$c" >"$out.touched"
		classify "$out.added" "$clog/base.keys" "$out.touched" "$out.keys" <"$out.msgs" >"$out.warnings"
	fi
	# The series' C files this configuration does not build at all.
	local -a unbuilt=()
	while read -r f; do
		[[ -f $src/$f && ! -f $obj/${f%.c}.o ]] && unbuilt+=("$f")
	done < <(git -C "$KSRC" diff --name-only "$base" "$tip" -- '*.c' ':!tools/')
	{
		for cls in new new-other old-touched old error; do
			grep -c "^@@ $cls"$'\t' "$out.warnings" || true
		done | paste -sd' ' | tr -d '\n'
		((rc == 0)) || printf ' make-failed'
		printf ' %s\n' "${unbuilt[*]:-}"
	} >"$out.result"
	log "$name $label: $(summarize "$out.result") ($((SECONDS - t0)) s)"
}

# summarize RESULT: a result file in a few words.
summarize() {
	local nnew nother nerr rest
	read -r nnew nother _ _ nerr rest <"$1"
	if [[ $rest == config* ]]; then
		echo "ERROR (configuration)"
	elif ((nerr)) || [[ $rest == make-failed* ]]; then
		echo "ERROR ($nerr errors$([[ $rest == make-failed* ]] && echo ", make failed"))"
	elif ((nnew + nother)); then
		echo "$((nnew + nother)) new"
	else
		echo "pass"
	fi
}

# ---- Main ------------------------------------------------------------------

want_configs=() want_groups=() list_only=0
while (($#)); do
	case $1 in
	--config) read -ra want_configs <<<"${2:?--config needs names}"; shift 2 ;;
	--group) read -ra want_groups <<<"${2:?--group needs groups}"; shift 2 ;;
	--list) list_only=1; shift ;;
	-h | --help) usage 0 ;;
	*) usage 1 ;;
	esac
done
((${#want_configs[@]})) || want_configs=("${CONFIG_NAMES[@]}")
for n in "${want_configs[@]}"; do robot_config "$n"; done

series_require "to run the build robot on it"
mapfile -t all < <(git -C "$KSRC" rev-list --reverse base..HEAD)
base=$(git -C "$KSRC" rev-parse 'base^{commit}')

# The groups, in series order: template name, first and last patch.
declare -a gname gfirst glast
while read -r last first tpl; do
	gname+=("$tpl") gfirst+=("$first") glast+=("$last")
done < <(for f in "$TOP"/kernel/cover/"$KBASE"/*.txt; do
	r=$(sed -n 's/^Patches: *//p' "$f" | head -n 1)
	[[ $r =~ ^([0-9]{4})(-([0-9]{4}))?$ ]] || die "$f: no 'Patches: NNNN[-MMMM]' line"
	printf '%d %d %s\n' "$((10#${BASH_REMATCH[3]:-${BASH_REMATCH[1]}}))" "$((10#${BASH_REMATCH[1]}))" "$(basename "$f" .txt)"
done | sort -n)
((${#gname[@]})) || die "no cover letter templates in kernel/cover/$KBASE"
((glast[-1] <= ${#all[@]})) || die "group ${gname[-1]} ends at patch ${glast[-1]}; the tree has ${#all[@]} commits on base"
tip=${all[glast[-1] - 1]}

if ((list_only)); then
	echo "Configurations (--config, make robot R=...):"
	for n in "${CONFIG_NAMES[@]}"; do
		robot_config "$n"
		printf '  %-16s %s\n' "$n" "$desc"
	done
	echo "Groups of kernel/cover/$KBASE, in series order (--group, make robot G=...):"
	for i in "${!gname[@]}"; do
		printf '  %-20s patches %04d-%04d\n' "${gname[i]}" "${gfirst[i]}" "${glast[i]}"
	done
	exit 0
fi

sel=()
if ((${#want_groups[@]})); then
	for w in "${want_groups[@]}"; do
		hit=""
		for i in "${!gname[@]}"; do
			[[ $w == "${gname[i]}" || $w == "${gname[i]#*-}" || $w == "${gname[i]%%-*}" ]] && hit=$i
		done
		[[ -n $hit ]] || die "no group '$w' in kernel/cover/$KBASE (scripts/robot.sh --list)"
		[[ " ${sel[*]} " == *" $hit "* ]] || sel+=("$hit")
	done
	mapfile -t sel < <(printf '%s\n' "${sel[@]}" | sort -n)
else
	sel=("${!gname[@]}")
fi

# What the series changes: the directories to build, whether uapi headers.
dirs=() uapi=""
while read -r f; do
	case $f in
	Documentation/* | tools/* | MAINTAINERS) ;;
	include/uapi/*) uapi=1 ;;
	include/*) ;;
	*) d=$(dirname "$f")/; [[ " ${dirs[*]} " == *" $d "* ]] || dirs+=("$d") ;;
	esac
done < <(git -C "$KSRC" diff --name-only base "$tip")
# A directory kbuild reaches through another one in the list goes once.
mapfile -t dirs < <(printf '%s\n' "${dirs[@]}" | sort | awk '{ for (p in top) if (index($0, p) == 1) next; top[$0] = 1; print }')

need_tools "${want_configs[@]}"
kbuild_lock
mkdir -p "$RB" "$LOGS"
export CCACHE_BASEDIR=$BUILD CCACHE_NOHASHDIR=1 CCACHE_SLOPPINESS=include_file_mtime,include_file_ctime
ccache -M 8G >/dev/null 2>&1 || true
log "robot on $BASE_PKG $(base_version): ${#want_configs[@]} configurations x ${#sel[@]} groups; building ${dirs[*]}${uapi:+ (and usr/include/ where CONFIG_UAPI_HEADER_TEST=y)}"

run_start=$SECONDS
declare -A took
for name in "${want_configs[@]}"; do
	t0=$SECONDS
	robot_config "$name"
	toolchain
	obj=$RB/$name clog=$LOGS/$name
	mkdir -p "$obj/.robot" "$clog"
	if [[ $tc == clang ]]; then
		min=$(git -C "$KSRC" show "$tip:scripts/min-tool-version.sh" | ARCH=$arch SRCARCH=x86 sh -s llvm)
		ver=$("clang-$LLVM_VERSION" -dumpversion)
		[[ $(printf '%s\n%s\n' "$min" "$ver" | sort -V | head -n 1) == "$min" ]] ||
			die "clang-$LLVM_VERSION is $ver; $BASE_PKG needs LLVM $min or later (ROBOT_LLVM=N)"
	fi
	# A build that was cut short left objects whose messages were not
	# kept: compile the directories again (from ccache).
	if [[ -f $obj/.robot/dirty ]]; then
		log "$name: the last build was cut short: compiling its directories again"
		for d in "${dirs[@]}" usr/include/; do rm -rf "${obj:?}/$d"; done
		rm -rf "$obj/.robot/msg" "$obj/.robot/dirty"
	fi
	rm -f "$clog"/*.result
	if ! make_config; then
		log "$name: the configuration could not be made (see ${clog#"$TOP"/}/config.log)"
		for i in "${sel[@]}"; do echo "0 0 0 0 1 config" >"$clog/$(printf '%04d' "${glast[i]}")-${gname[i]}.result"; done
		took[$name]=$((SECONDS - t0))
		continue
	fi
	build_at "$base" base || true
	for i in "${sel[@]}"; do
		build_at "${all[glast[i] - 1]}" "$(printf '%04d' "${glast[i]}")-${gname[i]}" || true
	done
	took[$name]=$((SECONDS - t0))
done

# ---- Report ----------------------------------------------------------------

rc=0
{
	printf 'Build robot, %s %s, series at %s, %s\n\n' "$BASE_PKG" "$(base_version)" \
		"$(git -C "$KSRC" rev-parse --short "$tip")" "$(date -u '+%Y-%m-%d %H:%M UTC')"
	printf '%-16s %-12s' config base
	for i in "${sel[@]}"; do
		g=$(printf '%04d' "${glast[i]}")-${gname[i]#*-}
		printf ' %-14s' "${g:0:14}"
	done
	printf ' %s\n' time
	for name in "${want_configs[@]}"; do
		printf '%-16s' "$name"
		# The base: how many warnings upstream has in these directories.
		r=$LOGS/$name/base.result
		if [[ -f $r ]]; then
			s=$(summarize "$r")
			[[ $s != ERROR* ]] || rc=1
			[[ $s == pass ]] && s="$(awk '{ print $4 }' "$r") upstream"
		else
			s=-
		fi
		printf ' %-12s' "${s%% (*}"
		for i in "${sel[@]}"; do
			r=$LOGS/$name/$(printf '%04d' "${glast[i]}")-${gname[i]}.result
			if [[ -f $r ]]; then
				s=$(summarize "$r")
				[[ $s == pass ]] || rc=1
			else
				s=-
				rc=1
			fi
			printf ' %-14s' "${s%% (*}"
		done
		printf ' %dm%02ds\n' "$((took[$name] / 60))" "$((took[$name] % 60))"
	done
	printf '\ntotal %dm%02ds, make -j%s\n' "$(((SECONDS - run_start) / 60))" "$(((SECONDS - run_start) % 60))" "$jobs"
	# What each configuration does not build of the series' C files.
	for name in "${want_configs[@]}"; do
		r=$LOGS/$name/$(printf '%04d' "${glast[sel[-1]]}")-${gname[sel[-1]]}.result
		[[ -f $r ]] || continue
		read -r _ _ ntouched _ _ rest <"$r"
		rest=${rest#make-failed}
		rest=${rest# }
		[[ -z $rest || $rest == config* ]] || printf '%s does not build: %s\n' "$name" "$rest"
		((ntouched == 0)) || printf '%s: %d warnings upstream already has in files the series changes (not failures; %s)\n' \
			"$name" "$ntouched" "${r%.result}.warnings"
	done
} >"$LOGS/summary.txt"
cat "$LOGS/summary.txt"

# Every new warning and error, verbatim, once (by file and text: its line
# moves from group to group), with where it was seen (CONFIG@LAST_PATCH).
for name in "${want_configs[@]}"; do
	for i in "${sel[@]}"; do
		w=$LOGS/$name/$(printf '%04d' "${glast[i]}")-${gname[i]}.warnings
		[[ -f $w ]] || continue
		awk -F'\t' -v where="$name@$(printf '%04d' "${glast[i]}")" '
			/^@@ / {
				split($1, h, " ")
				keep = (h[2] == "new" || h[2] == "new-other" || h[2] == "error")
				if (keep) print "@@\t" h[2] "\t" where "\t" $2 "\t" $3
				next
			}
			keep' "$w"
	done
done | awk -F'\t' '
	function add() {
		if (!(key in seen)) { order[++n] = key; kind[key] = cls; text[key] = rec }
		seen[key] = seen[key] " " where
	}
	/^@@\t/ { if (key != "") add(); cls = $2; where = $3; key = $4 "\t" $5; rec = ""; next }
	{ rec = rec $0 "\n" }
	END {
		if (key != "") add()
		for (i = 1; i <= n; i++) printf "== %s, in%s\n%s\n", kind[order[i]], seen[order[i]], text[order[i]]
	}' >"$LOGS/new.txt"
if [[ -s $LOGS/new.txt ]]; then
	printf '\nNew warnings and errors (all in %s):\n' "${LOGS#"$TOP"/}/new.txt"
	head -n 60 "$LOGS/new.txt"
	(($(wc -l <"$LOGS/new.txt") <= 60)) || echo "[...]"
fi
exit "$rc"
