#!/usr/bin/env bash
# The main job, `make demo`: set up, build the patched guest kernel, boot it
# once and show the series at work in five short sections (the guest side is
# scripts/demo-guest.sh):
#   1. poll queues: the boot's num_poll_queues, each disk's hctx types and
#      IRQ lines, a runtime change of /sys/block/vdX/num_poll_queues;
#   2. fio io_uring 4k random reads, plain vs hipri, QD1 and QD16, with
#      interrupts per I/O;
#   3. io_uring passthrough on /dev/vblk/vdX beside /dev/vdX, and GET_INFO;
#   4. virtio-fs on tools/vufsd with 2 request queues: CPUs per queue, fio
#      pinned per vCPU, requests per queue by the daemon's counters;
#   5. vhost-blk serving a brd disk to vhost_blk_test, with its per-vring
#      counters.
# Every number it prints is measured in this run. Any step that fails ends
# it with a non-zero status and a "demo: FAILED" line. Its output and the
# guest's logs are kept in build/logs/demo/. The full benchmarks are
# `make bench`.
#   scripts/demo.sh [--runtime S]     S: seconds per measured run (default 3)
set -euo pipefail
# shellcheck source=SCRIPTDIR/lib.sh
. "$(dirname "$0")/lib.sh"

runtime=3
while (($#)); do
	case $1 in
	--runtime) runtime=$2; shift 2 ;;
	*) die "unknown option $1 (see the header of $0)" ;;
	esac
done
[[ $runtime =~ ^[1-9][0-9]?$ ]] || die "--runtime takes 1 to 99 seconds"

LOGS=$BUILD/logs/demo
VMDIR=$LOGS/vm

now_us() { echo "${EPOCHREALTIME/./}"; }
secs() { awk -v us="$1" 'BEGIN { printf "%.1f", us / 1e6 }'; }

fail() {
	printf '\ndemo: FAILED: %s\n' "$*" >&2
	printf 'demo: output and logs so far: %s\n' "$LOGS" >&2
	exit 1
}

# step NAME CMD...: run a set-up step, timed; a failure ends the demo.
steps=()
step() {
	local name=$1 t0 rc=0
	shift
	t0=$(now_us)
	"$@" || rc=$?
	((rc == 0)) || fail "set-up step '$name' ($*) exited $rc"
	steps+=("$name $(secs $(($(now_us) - t0)))")
}

# tools: what the tour runs (vblk_pt, vhost_blk_test, vufsd) into build/tools.
tools() {
	make -s -C "$TOP/tests/tools" OUT="$BUILD/tools" &&
		make -s -C "$TOP/tools/vufsd" OUT="$BUILD/tools"
}

main() {
	local t_start t0 rc=0 vm_us boot n sec_ms name shown setup_us a load
	t_start=$(now_us)
	printf '== vstor demo: set-up (a fresh machine installs packages and builds the kernel and fio; after that these steps do nothing)\n'
	step setup "$TOP/scripts/setup.sh"
	step prepare "$TOP/scripts/prepare.sh"
	step kernel "$TOP/scripts/build-kernel.sh" guest
	step tools tools
	step fio "$TOP/scripts/build-fio.sh"
	setup_us=$(($(now_us) - t_start))

	local vm=("$TOP/vm/vm.sh" --cpus 2 --keep "$VMDIR" --timeout 600
		--disk file:queues=2 --disk null:queues=2
		--virtiofs "tag=demo,queues=2"
		--modules "virtio_blk vhost_blk"
		--append "virtio_blk.num_poll_queues=1 brd.rd_nr=1 brd.rd_size=65536"
		-- "$TOP/scripts/demo-guest.sh" "$runtime")
	shown=""
	for a in "${vm[@]}"; do
		a=${a//"$VMDIR"/build/logs/demo/vm}
		a=${a//"$TOP/"/}
		[[ $a =~ ^[][A-Za-z0-9_./=:,+-]+$ ]] || a="'$a'"
		shown+=" $a"
	done
	load=$(cut -d' ' -f1-3 /proc/loadavg)
	printf '\n== booting the patched guest once for the whole tour (host: %s CPUs, load average %s):\n   %s\n' \
		"$(nproc)" "$load" "${shown# }"
	t0=$(now_us)
	"${vm[@]}" || rc=$?
	vm_us=$(($(now_us) - t0))
	# Disk images and the share's files are data, not logs.
	rm -rf "$VMDIR"/disk*.img "$VMDIR/fs-demo" "$VMDIR/qmp" "$VMDIR"/*.sock
	((rc == 0)) || fail "the guest run exited $rc (guest logs: $VMDIR/console.log, dmesg, output)"
	[[ -s $VMDIR/summary && -s $VMDIR/timings ]] || fail "the guest left no summary in $VMDIR"
	(($(wc -l <"$VMDIR/timings") == 5)) || fail "the guest finished $(wc -l <"$VMDIR/timings") of 5 sections"

	printf '\n== What this run showed (every number measured above, in this run; host load average %s at the boot)\n' "$load"
	sed 's/^/ - /' "$VMDIR/summary"

	local sum_ms=0 parts=() boot_ms list steplist
	while read -r n sec_ms name; do
		sum_ms=$((sum_ms + sec_ms))
		parts+=("$n $name $(secs $((sec_ms * 1000)))")
	done <"$VMDIR/timings"
	boot=$(cat "$VMDIR/uptime")
	boot_ms=$(awk -v s="$boot" 'BEGIN { printf "%d", s * 1000 }')
	printf -v list '%s, ' "${parts[@]}"
	printf -v steplist '%s, ' "${steps[@]}"
	printf '\n== Time of this run (seconds)\n'
	printf ' set-up %7s  (%s)\n' "$(secs "$setup_us")" "${steplist%, }"
	printf ' guest  %7s  (boot %s; sections: %s; QEMU start-up, power-off and checks %s)\n' \
		"$(secs "$vm_us")" "$(secs $((boot_ms * 1000)))" "${list%, }" \
		"$(secs $((vm_us - (boot_ms + sum_ms) * 1000)))"
	printf ' total  %7s\n' "$(secs $(($(now_us) - t_start)))"

	cat <<EOF

== Next
 - make test      the whole test suite: KTAP, every feature case by case, the vhost-user-blk bridge with nested guests
 - make bench     the full benchmarks (poll queues, runtime changes, passthrough vs NVMe, vhost-blk, the bridge, virtio-fs vs virtiofsd)
 - README.md and Documentation/: passthrough.md, vhost-blk.md, vhost-blk-bridge.md, vufsd.md, results.md, workflow.md
 - vm/vm.sh boots the same guest with your own command (see its header)

demo: logs of this run in $LOGS (demo.txt: this output; vm/: console.log, dmesg, vufsd's log and counters)
EOF
}

rm -rf "$LOGS"
mkdir -p "$LOGS"
# Not in an || list: that would turn off set -e inside main.
main 2>&1 | tee "$LOGS/demo.txt"
