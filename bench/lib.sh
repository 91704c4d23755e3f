# Shared by the benchmark scripts bench/<name>.sh. Each sets the defaults of
# its settings, then calls
#   bench_opts "cpus runtime reps qd flavor" "$@"
# which parses --NAME VALUE for each NAME listed (a NAME ending in ! is a
# flag: --NAME alone sets it to 1) into the variable NAME.
#
# Run directly (bench/poll.sh --reps 3), a benchmark script hands itself to
# bench/run.sh, which makes the results directory and calls it back with
# BENCH_MODE set:
#   options  print the option names and exit
#   defaults print the default settings (NAME=VALUE lines) and exit
#   check    check the options and what the run needs, print the settings
#            and exit, booting nothing
# A script calls bench_opts, derives settings, checks what it needs
# (bench_need), then calls bench_checked, which ends check mode.
#   run      run: the guest's run directory is BENCH_LOG
#            (BENCH_DIR/logs/NAME), kept; raw results go to BENCH_DIR/raw
# shellcheck shell=bash
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"

# Every benchmark boots this kernel flavour (--flavor debug: the debug one).
flavor=guest
# --insns 1 (a benchmark that has the option): bench_vm boots the guest a
# second time with the insncount plugin (tools/insncount), in BENCH_LOG/insns,
# where the guest script counts guest instructions per I/O instead of
# measuring IOPS (bench/guest/lib.sh ic_window); --insns 0: no such boot.
insns=1
# Settings that must be whole numbers (qd: a list of them).
BENCH_NUMERIC=" cpus runtime reps changes queues iodepth poll threads window jobs pool insns "

bench_opts() {
	local spec=$1 o name hit
	shift
	BENCH_NAME=$(basename "$0" .sh)
	case ${BENCH_MODE:-} in
	"") exec "$TOP/bench/run.sh" "$BENCH_NAME" "$@" ;;
	options) echo "$spec"; exit 0 ;;
	defaults | check | run) ;;
	*) die "BENCH_MODE must be options, defaults, check or run, not '$BENCH_MODE'" ;;
	esac
	while (($#)); do
		hit=""
		for o in $spec; do
			name=${o%!}
			[[ $1 == "--$name" ]] || continue
			if [[ $o == *! ]]; then
				printf -v "$name" 1
				shift
			else
				(($# >= 2)) || die "$BENCH_NAME: $1 needs a value"
				printf -v "$name" '%s' "$2"
				shift 2
			fi
			hit=1
			break
		done
		[[ -n $hit ]] || die "$BENCH_NAME: unknown option '$1' (it has: $(sed -E 's/([a-z_]+)!?/--\1/g' <<<"$spec"))"
	done
	BENCH_SPEC=$spec
}

# bench_need FILE WHAT: the run needs FILE (checked in check mode too).
bench_need() {
	[[ $BENCH_MODE == defaults || -x $1 ]] || die "$BENCH_NAME: no $1: $2"
}

# bench_checked: the settings are final (a script may derive some after
# bench_opts): check them; in check mode print them and exit, in run mode
# make the run directory.
bench_checked() {
	local o name v
	if [[ $BENCH_MODE == defaults ]]; then
		for o in $BENCH_SPEC; do
			name=${o%!}
			printf '%s=%s\n' "$name" "${!name}"
		done
		exit 0
	fi
	for o in $BENCH_SPEC; do
		name=${o%!}
		if [[ $BENCH_NUMERIC == *" $name "* ]]; then
			[[ ${!name} =~ ^[0-9]+$ ]] || die "$BENCH_NAME: --$name wants a whole number, not '${!name}'"
		elif [[ $name == qd ]]; then
			for v in ${!name}; do
				[[ $v =~ ^[1-9][0-9]*$ ]] || die "$BENCH_NAME: --qd wants queue depths like \"1 16\", not '${!name}'"
			done
			[[ -n ${!name// /} ]] || die "$BENCH_NAME: --qd is empty"
		fi
	done
	if [[ " $BENCH_SPEC " == *" insns "* ]]; then
		[[ $insns == [01] ]] || die "$BENCH_NAME: --insns is 0 or 1, not '$insns'"
		((insns == 0)) || [[ -x $BUILD/tools/insncount.so ]] ||
			die "$BENCH_NAME: no $BUILD/tools/insncount.so for --insns 1: make plugin (or --insns 0)"
	fi
	if [[ $BENCH_SPEC == *flavor* ]]; then
		[[ -r $(kobj "$flavor")/arch/x86/boot/bzImage ]] ||
			die "$BENCH_NAME: no $flavor kernel at $(kobj "$flavor")/arch/x86/boot/bzImage (make kernel)"
	fi
	if [[ $BENCH_MODE == check ]]; then
		for o in $BENCH_SPEC; do
			name=${o%!}
			printf '%s=%s\n' "$name" "${!name}"
		done
		exit 0
	fi
	[[ -n ${BENCH_DIR:-} ]] || die "BENCH_MODE=run needs BENCH_DIR"
	BENCH_LOG=$BENCH_DIR/logs/$BENCH_NAME
	mkdir -p "$BENCH_LOG" "$BENCH_DIR/raw"
	trap bench_tidy EXIT
}

# A run goes on after a failure, to keep what the guest left (a failed
# guest's partial results too); bench_done exits with the first failure.
BENCH_RC=0
bench_fail() {
	log "$BENCH_NAME: $1"
	((BENCH_RC)) || BENCH_RC=${2:-1}
}

# bench_counting: true when this benchmark counts instructions (--insns 1).
bench_counting() {
	[[ " $BENCH_SPEC " == *" insns "* ]] && ((insns))
}

# bench_vm VM.SH-ARGS...: boot the guest with the run directory kept in
# BENCH_LOG; when counting, boot it again with the plugin, run directory
# BENCH_LOG/insns.
bench_vm() {
	local rc=0
	"$TOP/vm/vm.sh" --flavor "$flavor" --keep "$BENCH_LOG" "$@" || rc=$?
	((rc == 0)) || bench_fail "the guest failed (vm.sh exit $rc)" "$rc"
	bench_counting || return 0
	log "$BENCH_NAME: the same guest again with the insncount plugin, for instructions per I/O"
	bench_tidy
	rc=0
	"$TOP/vm/vm.sh" --flavor "$flavor" --keep "$BENCH_LOG/insns" --insncount "$@" || rc=$?
	((rc == 0)) || bench_fail "the counting guest failed (vm.sh exit $rc)" "$rc"
}

# bench_raw FILE...: copy result files the guest wrote in its run directory
# to the raw results (FILE may be in a subdirectory; raw/ gets its name).
bench_raw() {
	local f
	for f in "$@"; do
		if [[ -e $BENCH_LOG/$f ]]; then
			cp "$BENCH_LOG/$f" "$BENCH_DIR/raw/${f##*/}"
		else
			bench_fail "the guest wrote no $f"
		fi
	done
}

# bench_raw_insns FILE...: when counting, the same for the counting boot's
# files (NAME-insns.csv).
bench_raw_insns() {
	bench_counting || return 0
	local BENCH_LOG=$BENCH_LOG/insns
	bench_raw "$@"
}

# bench_daemon_stats NAME TAG=STATSFILE...: the daemons' counters as raw
# results (NAME-daemons.json, NAME-queues.csv), read by field name.
bench_daemon_stats() {
	local spec
	for spec in "${@:2}"; do
		[[ -e ${spec#*=} ]] || { bench_fail "no stats file ${spec#*=}"; return 0; }
	done
	/usr/bin/python3 "$TOP/bench/report.py" daemon-stats "$BENCH_DIR" "$@" ||
		bench_fail "cannot read the daemons' stats files"
}

# bench_done: the end of a benchmark script.
bench_done() {
	exit "$BENCH_RC"
}

# bench_tidy: drop what the run directory holds besides logs and results
# (disk images, sockets, virtio-fs data directories).
bench_tidy() {
	local f
	[[ -d ${BENCH_LOG:-} ]] || return 0
	for f in "$BENCH_LOG"/* "$BENCH_LOG"/insns/*; do
		case ${f##*/} in
		disk*.img | *.sock | qmp | modroot | modules) rm -rf "$f" ;;
		fs-*) [[ -d $f ]] && rm -rf "$f" ;;
		esac
	done
	return 0
}
