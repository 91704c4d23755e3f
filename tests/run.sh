#!/usr/bin/env bash
# The test command. Works out every test it will run before running any
# (the plan), runs the build steps the chosen tests need, then the host
# suites and one guest boot per guest suite, and prints KTAP: one result per
# test, numbered against that plan, ending with "N passed, N failed, N
# skipped". A test that does not report, a guest that dies, a plan the guest
# does not keep, a timeout: each is "not ok", never a missing line.
#
#   tests/run.sh [--debug] [SELECTION...]     run tests
#   tests/run.sh --list [SELECTION...]        list them, run nothing
#
#   SELECTION  SUITE, SUITE:TEST, "host" or "guest" (all host or all guest
#              suites), each on the kernel base KBASE (scripts/lib.sh);
#              BASE/... the same on the other base (mainline/poll,
#              6.12/guest). Default: everything on KBASE, and on the other
#              base the subset OTHER_BASE_DEFAULT names, less OTHER_BASE_SKIP
#              (both below). Unknown names are an error.
#   --debug    build and boot the debug kernel (KASAN, lockdep); test
#              timeouts are tripled
#
# Logs: build/logs/SUITE/ (host tests: TEST.log; guest suites: the kept run
# directory with console.log, output, dmesg and tests/TEST.log); the other
# base's under build/logs/BASE/.
# KBASE and lib.sh's settings are set anew in suite_info_on's subshell, on
# purpose: shellcheck's notes that those changes stay there do not apply.
# shellcheck disable=SC2030,SC2031
set -uo pipefail
# shellcheck source=../scripts/lib.sh
. "$(dirname "$0")/../scripts/lib.sh"
. "$TOP/tests/suite.sh"

flavor=guest list_only=0 scale=1
sels=()
while (($#)); do
	case $1 in
	--debug) flavor=debug scale=3 ;;
	--list) list_only=1 ;;
	-h | --help) sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	-*) die "unknown option $1 (see tests/run.sh --help)" ;;
	*) read -ra words <<<"$1"; sels+=("${words[@]}") ;;
	esac
	shift
done

# ---- the plan -------------------------------------------------------------

# The bases: KBASE's tests go by their plain names, the other base's by
# BASE/SUITE:TEST. By default the other base runs the subset below (see
# Documentation/workflow.md, "Two bases", for why these).
PRIMARY=$KBASE
case $PRIMARY in
mainline) OTHER=6.12 ;;
*) OTHER=mainline ;;
esac
OTHER_BASE_DEFAULT=(build:roundtrip series workflow:cover_letters workflow:cover_apply build:tools pt vhost
	sleep repoll:repoll_stopped_poller_reset repoll:repoll_stopped_poller_unbind repoll:repoll_store_module_ref
	repoll:repoll_pci_reset repoll:repoll_pci_reset_polled repoll:repoll_pci_reset_race)
[[ -z ${VSTOR_OTHER_BASE_DEFAULT+set} ]] || read -ra OTHER_BASE_DEFAULT <<<"$VSTOR_OTHER_BASE_DEFAULT"
# Tests of those suites the other base leaves out by default, for time:
# what they add over the primary base's run is a kind of backend (null_blk,
# a virtio disk, files on tmpfs and XFS, brd), not the kernel code the
# bases differ in; a block device (null_blk in vb_bp, brd in vb_hostile)
# and a file (vb_ext4) are served on both. Nor do vhost-blk's read-only
# mode, its workers' fairness, its device node's mode and its drain on a
# backend that stops answering (vb_ro, vb_fair, vb_bp_fair,
# vb_bp_fair_load, vb_perms, vb_stall), or passthrough's own uAPI
# semantics (GET_INFO, ids, the range and permission checks, read-only
# disks, fio's cross-checks, trim and flush, 32-bit callers): code of the
# series alone, the same on both bases. What stays on both is what meets
# the APIs the bases differ in: io_uring's command, task_work, polling and
# cancelling (pt_cancel, pt_exit_defer, pt_exec_inflight, pt_late_sqe,
# pt_poll_runtime ...), bio mapping (pt_segments, pt_fio_verify), hostile
# commands, hot-unplug, and the vhost core's worker ownership (vb_cgroup).
OTHER_BASE_SKIP=(vhost:vb_null vhost:vb_vd vhost:vb_tmpfs vhost:vb_xfs
	vhost:vb_ro vhost:vb_fair vhost:vb_bp_fair vhost:vb_bp_fair_load
	vhost:vb_brd vhost:vb_perms vhost:vb_stall
	pt:pt_info pt:pt_get_id pt:pt_cross_check pt:pt_ranges pt:pt_perms
	pt:pt_readonly pt:pt_fio_cross pt:pt_fio_trim_flush pt:pt_compat32)
[[ -z ${VSTOR_OTHER_BASE_SKIP+set} ]] || read -ra OTHER_BASE_SKIP <<<"$VSTOR_OTHER_BASE_SKIP"
base_prefix() { [[ $1 == "$PRIMARY" ]] || echo "$1/"; }

mapfile -t SUITES < <(suite_names)
declare -A KIND VM NEEDS REQUIRES FATAL
ids=() tsuite=() tname=() ttimeout=() tdesc=() tbase=()
# suite_info_on BASE FILE: suite_info with scripts/lib.sh set up for BASE.
suite_info_on() (
	KBASE=$1
	unset PATCHES PATCHES_REL BASE_TARBALL
	. "$TOP/scripts/lib.sh"
	suite_info "$2"
)
for b in "$PRIMARY" "$OTHER"; do
pfx=$(base_prefix "$b")
for s in "${SUITES[@]}"; do
	while read -r key rest; do
		case $key in
		error) die "$rest" ;;
		kind) KIND[$s]=$rest ;;
		fatal) FATAL[$s]=$rest ;;
		vm) VM[$s]=$rest ;;
		needs) NEEDS[$s]=$rest ;;
		requires) REQUIRES[$s]=$rest ;;
		test)
			read -r t to d <<<"$rest"
			ids+=("$pfx$s:$t") tsuite+=("$s") tname+=("$t") tbase+=("$b")
			ttimeout+=($((to * scale))) tdesc+=("$d")
			;;
		esac
	done < <(suite_info_on "$b" "$(suite_file "$s")" || echo "error suite $s cannot be loaded")
	if [[ ${KIND[$s]} == guest ]]; then
		ids+=("$pfx$s:boot") tsuite+=("$s") tname+=(boot) ttimeout+=(0) tbase+=("$b")
		tdesc+=("the guest booted, ran the suite and powered off; no kernel problem outside the tests; its daemons exited cleanly")
	fi
done
done

declare -A SEL
select_suite() { # select_suite BASE SUITE: every test of it
	local i
	for i in "${!ids[@]}"; do
		[[ ${tbase[$i]} == "$1" && ${tsuite[$i]} == "$2" ]] && SEL[${ids[$i]}]=1
	done
}
# select_words BASE WORD...: what the words select on BASE, and the build
# steps that needs there.
select_words() {
	local b=$1 pfx w s i found any need="" step
	shift
	pfx=$(base_prefix "$b")
	for w in "$@"; do
		case $w in
		host | guest)
			for s in "${SUITES[@]}"; do
				[[ ${KIND[$s]} == "$w" ]] && select_suite "$b" "$s"
			done
			;;
		*:*)
			s=${w%%:*} found=0
			[[ -n ${KIND[$s]:-} ]] || die "no suite '$s' (tests/run.sh --list shows them)"
			for i in "${!ids[@]}"; do
				[[ ${ids[$i]} == "$pfx$w" ]] && { SEL[$pfx$w]=1; found=1; }
			done
			((found)) || die "suite $s has no test '${w#*:}' (tests/run.sh --list $pfx$s)"
			# A guest test needs its boot, and the boot is judged whole.
			[[ ${KIND[$s]} == guest ]] && SEL[$pfx$s:boot]=1
			;;
		*)
			[[ -n ${KIND[$w]:-} ]] || die "no suite '$w' (tests/run.sh --list shows them)"
			select_suite "$b" "$w"
			;;
		esac
	done
	# A boot alone means the whole suite.
	for s in "${SUITES[@]}"; do
		[[ ${KIND[$s]} == guest && -n ${SEL[$pfx$s:boot]:-} ]] || continue
		any=0
		for i in "${!ids[@]}"; do
			[[ ${tbase[$i]} == "$b" && ${tsuite[$i]} == "$s" && ${tname[$i]} != boot && -n ${SEL[${ids[$i]}]:-} ]] && any=1
		done
		((any)) || select_suite "$b" "$s"
	done
	# The build steps the chosen suites stand on.
	for s in "${SUITES[@]}"; do
		for i in "${!ids[@]}"; do
			[[ ${tbase[$i]} == "$b" && ${tsuite[$i]} == "$s" && -n ${SEL[${ids[$i]}]:-} ]] && { need+=" ${NEEDS[$s]}"; break; }
		done
	done
	if [[ -n ${need// /} ]]; then
		SEL[${pfx}build:deps]=1
		[[ $need == *kernel* || $need == *tools* || $need == *tree* ]] && SEL[${pfx}build:tree]=1
		for step in $need; do
			[[ -n ${KIND[build]:-} ]] && SEL[${pfx}build:$step]=1
		done
	fi
	return 0
}
if ((${#sels[@]} == 0)); then
	for s in "${SUITES[@]}"; do select_suite "$PRIMARY" "$s"; done
	((${#OTHER_BASE_DEFAULT[@]} == 0)) || select_words "$OTHER" "${OTHER_BASE_DEFAULT[@]}"
	for w in "${OTHER_BASE_SKIP[@]}"; do
		[[ " ${ids[*]} " == *" $OTHER/$w "* ]] || die "OTHER_BASE_SKIP names $w, which is no test (tests/run.sh --list)"
		unset "SEL[$OTHER/$w]"
	done
else
	mine=() theirs=()
	for w in "${sels[@]}"; do
		if [[ $w == "$OTHER"/* ]]; then
			theirs+=("${w#"$OTHER"/}")
		else
			mine+=("${w#"$PRIMARY"/}")
		fi
	done
	((${#mine[@]} == 0)) || select_words "$PRIMARY" "${mine[@]}"
	((${#theirs[@]} == 0)) || select_words "$OTHER" "${theirs[@]}"
fi

plan=()
for i in "${!ids[@]}"; do
	[[ -n ${SEL[${ids[$i]}]:-} ]] && plan+=("$i")
done

if ((list_only)); then
	last=""
	for i in "${plan[@]}"; do
		s=${tsuite[$i]}
		if [[ $s != "$last" ]]; then
			printf '%s (%s%s)\n' "$s" "${KIND[$s]}" "${VM[$s]:+: vm.sh ${VM[$s]}}"
			last=$s
		fi
		printf '  %-34s %s\n' "${ids[$i]}" "${tdesc[$i]}"
	done
	echo "${#plan[@]} tests"
	exit 0
fi

# ---- results --------------------------------------------------------------

n=0 passed=0 failed=0 skipped=0
declare -A REPORTED
# emit ok|fail|skip INDEX [COMMENT]: the result of planned test INDEX.
emit() {
	local id=${ids[$2]}
	[[ -z ${REPORTED[$id]:-} ]] || return 0
	REPORTED[$id]=1
	n=$((n + 1))
	case $1 in
	ok) passed=$((passed + 1)); echo "ok $n $id" ;;
	skip) skipped=$((skipped + 1)); echo "ok $n $id # SKIP ${3:-}" ;;
	*) failed=$((failed + 1)); echo "not ok $n $id${3:+ # $3}" ;;
	esac
}
# requirement_unmet SUITE: why the host cannot run the suite, or nothing.
requirement_unmet() {
	local r have
	for r in ${REQUIRES[$1]}; do
		case $r in
		cmd:*) command -v "${r#cmd:}" >/dev/null || { echo "needs the command ${r#cmd:}"; return; } ;;
		file:*) [[ -e ${r#file:} ]] || { echo "needs ${r#file:}"; return; } ;;
		mem:*)
			have=$(awk '$1 == "MemAvailable:" { print int($2 / 1048576) }' /proc/meminfo)
			((have >= ${r#mem:})) || { echo "needs ${r#mem:} GiB of free host memory, has $have"; return; }
			;;
		cpus:*) (($(nproc) >= ${r#cpus:})) || { echo "needs ${r#cpus:} host CPUs, has $(nproc)"; return; } ;;
		*) echo "unknown requirement '$r'"; return ;;
		esac
	done
}

# What each build step (a test of tests/host/build.sh, the SUITE_FATAL
# suite) stands on. A failed step, on its base, stops only the steps and the
# suites that need it (SUITE_NEEDS), directly or through another step:
# everything else still runs and counts. roundtrip checks and builds
# nothing, so no one stands on it.
declare -A STEP_DEPS=([deps]="" [tree]=deps [roundtrip]=tree [kernel]=tree [tools]=tree
	[plugin]=deps [fio]=deps [initramfs]="kernel fio tools")
declare -A STEP_FAILED
for s in "${SUITES[@]}"; do
	[[ ${FATAL[$s]} == 1 ]] || continue
	for i in "${!ids[@]}"; do
		[[ ${tsuite[$i]} == "$s" && -z ${STEP_DEPS[${tname[$i]}]+set} ]] &&
			die "tests/run.sh: build step ${tname[$i]} has no entry in STEP_DEPS"
	done
done
for s in "${SUITES[@]}"; do
	for step in ${NEEDS[$s]}; do
		[[ -n ${STEP_DEPS[$step]+set} ]] || die "suite $s needs '$step', which is no build step"
	done
done

# step_failed BASE STEP...: the id of the failed build test that one of the
# STEPs is, or stands on, on BASE; nothing if none failed.
step_failed() {
	local b=$1 st d
	shift
	for st in "$@"; do
		if [[ -n ${STEP_FAILED[$b:$st]:-} ]]; then
			echo "${STEP_FAILED[$b:$st]}"
			return
		fi
		# shellcheck disable=SC2086 # a list of step names
		d=$(step_failed "$b" ${STEP_DEPS[$st]})
		if [[ -n $d ]]; then
			echo "$d"
			return
		fi
	done
}

# run_host_suite SUITE INDEX... (on the base in KBASE)
run_host_suite() {
	local s=$1 i log rc start dir why
	dir=$BUILD/logs/$(base_prefix "$KBASE")$1
	shift
	mkdir -p "$dir"
	for i in "$@"; do
		if [[ ${FATAL[$s]} == 1 ]]; then
			# shellcheck disable=SC2086 # a list of step names
			why=$(step_failed "$KBASE" ${STEP_DEPS[${tname[$i]}]})
			if [[ -n $why ]]; then
				STEP_FAILED[$KBASE:${tname[$i]}]=$why
				emit fail "$i" "not run: $why failed"
				continue
			fi
		fi
		log=$dir/${tname[$i]//\//_}.log
		start=$SECONDS
		VSTOR_FLAVOR=$flavor run_test "$(suite_file "$s")" "${tname[$i]}" "${ttimeout[$i]}" "$log"
		rc=$?
		case $rc in
		0)
			grep '^==> ' "$log" | sed 's/^/# /'
			emit ok "$i"
			;;
		4) emit skip "$i" "$(tail -n 1 "$log")" ;;
		*)
			tail -n 40 "$log" | sed 's/^/# /'
			if ((rc == 124 || rc == 137)); then
				emit fail "$i" "timed out after ${ttimeout[$i]} s; log: $log"
			else
				emit fail "$i" "exit $rc; log: $log"
			fi
			[[ ${FATAL[$s]} == 1 ]] && STEP_FAILED[$KBASE:${tname[$i]}]=${ids[$i]}
			;;
		esac
		echo "# ${ids[$i]}: $((SECONDS - start)) s"
	done
}

# run_guest_suite SUITE INDEX...: one boot; the guest's own KTAP is checked
# against the plan and renumbered.
run_guest_suite() {
	local s=$1 i keep total=0 want=() exp=() boot="" all=1
	local line id status rest vmrc=0 gplan="" bail="" j k problems=()
	keep=$BUILD/logs/$(base_prefix "$KBASE")$1
	shift
	for i in "$@"; do
		if [[ ${tname[$i]} == boot ]]; then
			boot=$i
		else
			exp+=("$i") want+=("${tname[$i]}")
			total=$((total + ttimeout[i]))
		fi
	done
	for i in "${!ids[@]}"; do
		[[ ${tbase[$i]} == "$KBASE" && ${tsuite[$i]} == "$s" && ${tname[$i]} != boot && -z ${SEL[${ids[$i]}]:-} ]] && all=0
	done
	((all)) && want=()
	rm -rf "$keep" "$keep.boot1"
	local -a vmargs
	eval "vmargs=(${VM[$s]})"
	echo "# boot $s ($flavor kernel, base $KBASE): vm/vm.sh ${VM[$s]} -- tests/guest/run.sh $s ${want[*]}"
	k=0
	while IFS= read -r line; do
		case $line in
		"ok "* | "not ok "*)
			if [[ $line =~ ^(not\ )?ok\ [0-9]+\ ([^ ]+)(.*)$ ]]; then
				# The guest names tests without the base's prefix.
				id=$(base_prefix "$KBASE")${BASH_REMATCH[2]} rest=${BASH_REMATCH[3]}
				status=ok
				[[ -n ${BASH_REMATCH[1]} ]] && status=fail
				[[ $rest == " # SKIP"* ]] && status=skip
				# Tests the guest passed over before this one.
				for ((j = k; j < ${#exp[@]}; j++)); do
					[[ ${ids[${exp[$j]}]} == "$id" ]] && break
				done
				if ((j == ${#exp[@]})); then
					problems+=("the guest reported a test nobody planned: $line")
					continue
				fi
				for (( ; k < j; k++)); do
					emit fail "${exp[$k]}" "the guest skipped it without a result"
				done
				rest=${rest# # }
				rest=${rest#SKIP }
				emit "$status" "${exp[$k]}" "$rest"
				k=$((k + 1))
			else
				problems+=("unreadable result line: $line")
			fi
			;;
		1..*) gplan=${line#1..} ;;
		"Bail out!"*) bail=$line; echo "# $line" ;;
		"KTAP version"*) ;;
		"vm: exit "*) vmrc=${line#vm: exit } ;;
		"#"*) echo "$line" ;;
		*) echo "# $line" ;;
		esac
	done < <(
		# One more boot, only when the first died of a stale INT3 before
		# any test began; the first boot's run directory stays, as
		# KEEP.boot1, and the boot test fails if the second boot does too.
		for attempt in 1 2; do
			"$TOP/vm/vm.sh" --flavor "$flavor" --keep "$keep" --timeout $((total + 300)) \
				"${vmargs[@]}" -- "$TOP/tests/guest/run.sh" --timeout-scale "$scale" \
				${VSTOR_SUITE_DIRS:+--suite-dirs "$VSTOR_SUITE_DIRS"} "$s" "${want[@]}" 2>&1
			rc=$?
			if ((attempt == 1 && rc != 0)) && stale_int3 "$keep/console.log"; then
				mv "$keep" "$keep.boot1"
				echo "# boot retried: the first guest died in boot of an INT3 its memory no longer held (see $keep.boot1/console.log)"
				continue
			fi
			echo "vm: exit $rc"
			break
		done
	)

	# What the guest did not report, and why.
	local why="the guest stopped before running it (vm.sh exit $vmrc; see $keep/console.log)"
	[[ -n $bail ]] && why="not run: $bail"
	local cur="" bad=() outside=()
	if [[ -f $keep/console.log ]]; then
		while IFS= read -r line; do
			if [[ $line =~ vstor-test:\ start\ [0-9]+\ ([^ ]+) ]]; then
				cur=${BASH_REMATCH[1]}
			elif [[ $line =~ vstor-test:\ end\  ]]; then
				cur=""
			elif [[ $line =~ $KLOG_BAD ]]; then
				if [[ -n $cur ]]; then bad+=("$cur: $line"); else outside+=("$line"); fi
			fi
		done <"$keep/console.log"
		if [[ -n $cur ]]; then
			why="the guest died during $cur (vm.sh exit $vmrc; see $keep/console.log)"
		fi
	fi
	for line in "${bad[@]}"; do echo "# kernel log: $line"; done
	for (( ; k < ${#exp[@]}; k++)); do
		emit fail "${exp[$k]}" "$why"
	done

	[[ -d $keep.boot1 ]] && RETRIED+=("$(base_prefix "$KBASE")$s")
	[[ -s $keep/status ]] || problems+=("the guest did not power off by itself (vm.sh exit $vmrc)")
	[[ -n $gplan ]] || problems+=("the guest printed no plan")
	[[ -z $gplan || $gplan == "${#exp[@]}" ]] || problems+=("the guest planned $gplan tests, the host ${#exp[@]}")
	[[ -z $bail ]] || problems+=("$bail")
	((${#outside[@]} == 0)) || problems+=("kernel log outside the tests: ${outside[0]}")
	for f in "$keep"/fs-*.rc; do
		[[ -e $f ]] || continue
		[[ $(cat "$f") == 0 || $(cat "$f") == 143 ]] ||
			problems+=("daemon $(basename "$f" .rc) exited $(cat "$f") (see ${f%.rc}.log)")
	done
	if [[ -n $boot ]]; then
		if ((${#problems[@]})); then
			printf '# %s\n' "${problems[@]}"
			emit fail "$boot" "${problems[0]}"
		else
			emit ok "$boot"
		fi
	fi
}

echo "KTAP version 1"
echo "# vstor tests, $flavor kernel, base $PRIMARY (and $OTHER/...): ${#plan[@]} tests${sels[*]:+ (selected: ${sels[*]})}"
echo "1..${#plan[@]}"
start=$SECONDS
RETRIED=()
WALL=()
for b in "$PRIMARY" "$OTHER"; do
	export KBASE=$b
	for s in "${SUITES[@]}"; do
		mine=()
		for i in "${plan[@]}"; do
			[[ ${tbase[$i]} == "$b" && ${tsuite[$i]} == "$s" ]] && mine+=("$i")
		done
		((${#mine[@]})) || continue
		if [[ ${FATAL[$s]} != 1 ]]; then
			# shellcheck disable=SC2086 # a list of step names
			why=$(step_failed "$b" ${NEEDS[$s]})
			if [[ -n $why ]]; then
				for i in "${mine[@]}"; do emit fail "$i" "not run: $why failed"; done
				continue
			fi
		fi
		why=$(requirement_unmet "$s")
		if [[ -n $why ]]; then
			for i in "${mine[@]}"; do emit skip "$i" "$why"; done
			continue
		fi
		sstart=$SECONDS
		if [[ ${KIND[$s]} == guest ]]; then
			run_guest_suite "$s" "${mine[@]}"
		else
			run_host_suite "$s" "${mine[@]}"
		fi
		WALL+=("$((SECONDS - sstart)) $(base_prefix "$b")$s")
	done
done
export KBASE=$PRIMARY
# Whatever the runner itself lost is a failure too.
for i in "${plan[@]}"; do
	[[ -n ${REPORTED[${ids[$i]}]:-} ]] || emit fail "$i" "no result (runner error)"
done
((${#RETRIED[@]} == 0)) || echo "# guests booted twice after a stale INT3: ${RETRIED[*]}"
# Where the time went, by suite, boots and builds included, longest
# first: what to cut when the run outgrows CI's budget.
((${#WALL[@]} == 0)) || printf '%s\n' "${WALL[@]}" | sort -rn |
	awk '{ printf "# suite wall time: %5d s  %s\n", $1, $2 }'
echo "# the run took $((SECONDS - start)) s ($flavor kernel)"
echo "$passed passed, $failed failed, $skipped skipped"
((failed == 0 && n == ${#plan[@]}))
