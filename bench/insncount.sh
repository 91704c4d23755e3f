#!/usr/bin/env bash
# Benchmark: what the insncount plugin costs (tools/insncount). The same
# guest work booted without and with the plugin, boots alternated: a user
# loop of a billion instructions (insnmark --loop), timed, and fio io_uring
# 4k random reads at QD1 for RUNTIME seconds, IOPS; with the plugin, also
# the guest instructions per read of a window in the middle of the job.
#   bench/insncount.sh [--cpus N] [--runtime S] [--reps N] [--flavor F]
# Defaults: 2 vCPUs, 12 s, 2 boots of each kind.
# Run alone it goes through bench/run.sh (a results directory in build/results).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cpus=2 runtime=12 reps=2
bench_opts "cpus runtime reps flavor" "$@"
bench_need "$BUILD/tools/insncount.so" "make plugin (scripts/build-plugin.sh)"
((runtime >= 8)) || die "$BENCH_NAME: --runtime must be at least 8 s (the counted window is RUNTIME - 6 s)"
bench_checked
echo "rep,plugin,loop_insns,loop_s,iops,window_ios,stack_per_io,kernel_per_io,user_per_io" \
	>"$BENCH_DIR/raw/insncount.csv"
for ((r = 1; r <= reps; r++)); do
	for mode in off on; do
		dir=$BENCH_LOG/$mode-$r
		args=()
		[[ $mode == off ]] || args=(--insncount)
		rc=0
		"$TOP/vm/vm.sh" --flavor "$flavor" --keep "$dir" --cpus "$cpus" --timeout 900 \
			--disk file:queues=2 "${args[@]}" -- \
			"$TOP/bench/guest/insncount.sh" "$mode" "$r" "$runtime" || rc=$?
		((rc == 0)) || bench_fail "the guest ($mode, boot $r) failed (vm.sh exit $rc)" "$rc"
		if [[ -s $dir/insncount-row.csv ]]; then
			cat "$dir/insncount-row.csv" >>"$BENCH_DIR/raw/insncount.csv"
		else
			bench_fail "the guest ($mode, boot $r) wrote no insncount-row.csv"
		fi
		rm -f "$dir"/disk*.img
	done
done
bench_done
