#!/usr/bin/env bash
# Run benchmarks and write a results directory (what make bench runs).
#
#   bench/run.sh [OPTIONS] [BENCH [BENCH-OPTIONS]]...
#
# BENCH is one of bench/report.py's names (--list shows them); none means all of
# them, in that order. Options after a BENCH go to that benchmark (the
# header of bench/BENCH.sh lists them); OPTIONS before the first BENCH go to
# every benchmark that has them:
#   --cpus N --runtime S --reps N --qd "Q..." --flavor guest|debug --insns 0|1
# and
#   --out DIR   the results directory (default build/results/<UTC time>,
#               with build/results/latest pointing at it)
#   --list      the benchmarks, their defaults and run times
# For example:
#   bench/run.sh --runtime 2 --reps 1 poll pt --qd 1 virtiofs --killpriv
#
# Every option is checked before the first guest boots. The benchmarks run
# one at a time (never two guests at once on this machine), each after any
# kernel build has finished. The terminal gets the guests' output and each
# benchmark's tables; the results directory gets report.md, raw/, plots/
# and logs/ (bench/README.md). Exit status 1 when a benchmark failed; the
# others still run, and what the failed one left is kept.
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"
PY=/usr/bin/python3
REPORT=$TOP/bench/report.py
COMMON="cpus runtime reps qd flavor insns"

mapfile -t valid < <("$PY" "$REPORT" names)
# quote ARG...: the arguments quoted for eval (nothing for none).
quote() {
	(($# == 0)) || printf '%q ' "$@"
}
is_bench() {
	local v
	for v in "${valid[@]}"; do
		[[ $1 == "$v" ]] && return 0
	done
	return 1
}

out="" global=() names=() argstr=()
all_args=("$@")
while (($#)); do
	case $1 in
	--list)
		"$PY" "$REPORT" list
		echo
		for b in "${valid[@]}"; do
			printf '%-9s defaults: %s\n' "$b" "$(BENCH_MODE=defaults "$TOP/bench/$b.sh" | tr '\n' ' ')"
		done
		exit 0
		;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
	--out) (($# >= 2)) || die "--out needs a directory"; out=$2; shift 2 ;;
	--*)
		o=${1#--}
		[[ " $COMMON " == *" $o "* ]] ||
			die "unknown option $1 before a benchmark (common options: --${COMMON// / --}; others go after the benchmark's name)"
		(($# >= 2)) || die "$1 needs a value"
		global+=("$1" "$2")
		shift 2
		;;
	*) break ;;
	esac
done
while (($#)); do
	is_bench "$1" || die "unknown benchmark '$1'; valid: ${valid[*]}"
	for n in "${names[@]}"; do
		[[ $n == "$1" ]] && die "benchmark $1 given twice"
	done
	names+=("$1")
	shift
	own=()
	while (($#)) && ! is_bench "$1"; do
		own+=("$1")
		shift
	done
	argstr+=("$(quote "${own[@]}")")
done
if ((${#names[@]} == 0)); then
	names=("${valid[@]}")
	for _ in "${names[@]}"; do
		argstr+=("")
	done
fi

# Each benchmark's arguments: the common options it has, then its own.
# All are checked (settings printed, nothing booted) before anything runs.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
declare -a bargs
for i in "${!names[@]}"; do
	n=${names[$i]}
	has=" $(BENCH_MODE=options "$TOP/bench/$n.sh") "
	a=()
	skipped=()
	for ((k = 0; k < ${#global[@]}; k += 2)); do
		if [[ $has == *" ${global[k]#--} "* ]]; then
			a+=("${global[k]}" "${global[k + 1]}")
		else
			skipped+=("${global[k]}")
		fi
	done
	((${#skipped[@]} == 0)) || log "$n has no ${skipped[*]}: not applied to it"
	eval "own=(${argstr[$i]})"
	a+=("${own[@]}")
	bargs[i]=$(quote "${a[@]}")
	BENCH_MODE=check "$TOP/bench/$n.sh" "${a[@]}" >"$tmp/$n.settings" ||
		die "$n: bad options (nothing was run)"
done

# One benchmark run at a time on this machine.
mkdir -p "$BUILD/results"
exec 7>"$BUILD/results/.lock"
if ! flock -n 7; then
	log "waiting for another benchmark run to finish"
	flock 7
fi

# The results directory.
if [[ -z $out ]]; then
	stamp=$(date -u +%Y%m%dT%H%M%SZ)
	out=$BUILD/results/$stamp
	k=1
	while ! mkdir "$out" 2>/dev/null; do
		out=$BUILD/results/$stamp-$k
		k=$((k + 1))
	done
	ln -sfn "${out##*/}" "$BUILD/results/latest"
fi
mkdir -p "$out/raw" "$out/logs" "$out/plots"
out=$(cd "$out" && pwd)

BENCH_SERIES=$PATCHES/series BENCH_BASE_PKG=$BASE_PKG BENCH_BASE_VERSION=$(base_version) \
	BENCH_GUEST_OBJ=$(kobj guest) "$PY" "$REPORT" machine "$out" "${all_args[@]}"
log "results: $out"

# wait_kbuild: a kernel build in progress would take the cores the guest
# measures with; wait until it is done (scripts/lib.sh kbuild_lock).
wait_kbuild() {
	local lock=$KSRC/.git/vstor-kbuild.lock
	[[ -e $lock ]] || return 0
	exec 8<"$lock"
	if ! flock -n 8; then
		log "waiting for a kernel build to finish"
		flock 8
	fi
	exec 8<&-
}

failed=()
for i in "${!names[@]}"; do
	n=${names[$i]}
	eval "a=(${bargs[$i]})"
	mkdir -p "$out/logs/$n"
	wait_kbuild
	log "$n: $(tr '\n' ' ' <"$tmp/$n.settings")"
	start=$(date -u '+%Y-%m-%d %H:%M:%S')
	t0=$(date +%s)
	"$PY" "$REPORT" record "$out" "$n" --settings "$tmp/$n.settings" \
		"args=$("$PY" -c 'import json, sys; print(json.dumps(sys.argv[1:]))' "${a[@]}")" \
		"start=$start UTC" "load=$(cut -d' ' -f1-3 /proc/loadavg)" status=running
	rc=0
	BENCH_MODE=run BENCH_DIR=$out "$TOP/bench/$n.sh" "${a[@]}" 2>&1 |
		tee "$out/logs/$n/run.log" || rc=${PIPESTATUS[0]}
	secs=$(($(date +%s) - t0))
	"$PY" "$REPORT" record "$out" "$n" "exit=$rc" "seconds=$secs" status=done
	echo
	"$PY" "$REPORT" table "$out" "$n" | tee -a "$out/logs/$n/run.log"
	echo
	if ((rc)); then
		failed+=("$n")
		log "$n FAILED (exit $rc) after ${secs}s; its log: $out/logs/$n/run.log"
	else
		log "$n done in ${secs}s"
	fi
	"$PY" "$REPORT" render "$out" || log "report: rendering failed"
done

log "report: $out/report.md"
((${#failed[@]} == 0)) || die "failed: ${failed[*]}"
