#!/usr/bin/env bash
# In the guest (see README.md, "irq-batch-hang"): fio rounds that watch for
# a job that never finishes (tests/tools/batch_rounds.sh) on every
# virtio-blk disk, in four phases, each ROUNDS rounds of 2 s at QD128:
#   A  irq_batch=1, no delay: the reported conditions as they are
#   B  irq_batch=1, debug_enospc_delay_us=DELAY: the window between the
#      driver stopping its queue (ring full) and blk-mq putting the request
#      back on hctx->dispatch, widened
#   C  irq_batch=0, the same delay: without batching (the control)
#   P  irq_batch=0, the same delay, polled (hipri) io_uring on the poll
#      queues: the batch of upstream 6.12's poll path
#   Q  as B, but QD8 and one job per disk: the tags (8 per queue) never
#      run out, so io_uring issues every request from its submitting task
#      instead of handing the ones that find no tag to io-wq
# (POLL_ROUNDS rounds) and prints each phase's last line. Needs the hooks of
# irq-batch-hang-hooks*.diff (the debug_enospc_delay_us parameter).
# The rounds' output and the hang dumps go to the run directory the host
# keeps (/run/vstor, vm.sh --keep DIR).
#   irq-batch-hang-guest.sh [ROUNDS] [DELAY_US] [POLL_ROUNDS] [PHASES] [SCHEDS]
# PHASES: the phases to run, in order (default "A B C P"); SCHEDS: the I/O
# schedulers the rounds go through (default "none mq-deadline").
set -uo pipefail
rounds=${1:-20} delay=${2:-200} prounds=${3:-${1:-20}} phases=${4:-A B C P}
scheds=${5:-none mq-deadline}
out=/run/vstor
top=$(cd "$(dirname "$0")/../.." && pwd)
p=/sys/module/virtio_blk/parameters
[[ -e $p/debug_enospc_delay_us ]] || { echo "this kernel has no debug_enospc_delay_us: apply the hooks"; exit 1; }
mapfile -t disks < <(cd /sys/block && ls -d vd* 2>/dev/null)
((${#disks[@]})) || { echo "no virtio-blk disk"; exit 1; }
echo "disks: ${disks[*]}; $(nproc) CPUs; rounds per phase $rounds; delay $delay us; schedulers $scheds"
for d in "${disks[@]}"; do
	echo "$d: hctx types $(cat /sys/kernel/debug/block/"$d"/hctx*/type | tr '\n' ' ')"
done
summary=()
phase() { # phase NAME BATCH DELAY HIPRI ROUNDS QD JOBS
	echo "$2" >"$p/irq_batch"
	echo "$3" >"$p/debug_enospc_delay_us"
	echo "== phase $1: irq_batch=$2 debug_enospc_delay_us=$3 hipri=$4 qd=$6 jobs per disk $7"
	local engines="libaio io_uring"
	(($4)) && engines=io_uring
	"$top/tests/tools/batch_rounds.sh" --rounds "$5" --runtime 2 --slack 20 --qd "$6" \
		--jobs "$7" --hipri "$4" --engines "$engines" --sched "$scheds" --out "$out/ibh-$1" "${disks[@]}" | tee "$out/ibh-$1.txt"
	summary+=("phase $1 (irq_batch=$2 delay=$3 hipri=$4 qd=$6 jobs=$7): $(tail -1 "$out/ibh-$1.txt")")
	# A hang a queue run did not cure leaves fio stuck: the later phases
	# would not mean anything.
	grep -q 'did not help' "$out/ibh-$1.txt" && return 1
	return 0
}
for ph in $phases; do
	case $ph in
	A) phase A 1 0 0 "$rounds" 128 2 ;;
	B) phase B 1 "$delay" 0 "$rounds" 128 2 ;;
	C) phase C 0 "$delay" 0 "$rounds" 128 2 ;;
	P) phase P 0 "$delay" 1 "$prounds" 128 2 ;;
	Q) phase Q 1 "$delay" 0 "$rounds" 8 1 ;;
	*) echo "unknown phase $ph"; false ;;
	esac || break
done
echo "== summary"
printf '%s\n' "${summary[@]}"
for f in "$out"/ibh-*/hang-*/vd*.txt; do
	[[ -e $f ]] || continue
	echo "== first hang dump: $f"
	grep -E '^(==|-- hctx[0-9]+/(state|dispatch))' -A3 "$f" | head -60
	break
done
