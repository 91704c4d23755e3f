#!/usr/bin/env bash
# Runs in the first-level guest (see bench/bridge.sh): starts the bridge (two
# with more than one vCPU: a worker per queue, and one worker) and
# qemu-storage-daemon on /dev/ram0, boots the second-level guest with those
# disks, QEMU's own virtio-blk and (QEMU >= 9) QEMU's virtio-blk on
# IOThreads and keeps its results, logs and the daemons' counters in this
# guest's run directory (/run/vstor, which the host keeps; inner/ is the
# second-level guest's own run directory). The second-level guest boots
# from vm/initramfs.sh's archive, made on the host.
#   bridge.sh CPUS RUNTIME REPS "QD..."
set -euo pipefail
TOP=$(cd "$(dirname "$0")/../.." && pwd)
. "$TOP/bench/guest/lib.sh"
cpus=$1 runtime=$2 reps=$3 qd=$4
dev=/dev/ram0 work=/tmp/brbench inner=/run/vstor/inner
rm -rf $work $inner
mkdir -p $work $inner

"$TOOLS/vhost-blk-bridge" --socket $work/bridge.sock --backend $dev --queues "$cpus" \
	--serial bridge --stats $work/bridge.stats 2>$work/bridge.log &
bpid=$!
pids=("$bpid") socks=("$work/bridge.sock" "$work/qsd.sock")
# The same with all queues on one vhost worker: the peer of one IOThread.
w1=()
if ((cpus > 1)); then
	"$TOOLS/vhost-blk-bridge" --socket $work/bridge-w1.sock --backend $dev --queues "$cpus" \
		--workers one --serial bridge-w1 2>$work/bridge-w1.log &
	pids+=($!) socks+=("$work/bridge-w1.sock")
	w1=(--qemu -chardev --qemu "socket,id=vb1,path=$work/bridge-w1.sock"
		--qemu -device --qemu "vhost-user-blk-pci,chardev=vb1,num-queues=$cpus")
fi
# QEMU >= 9.0 spreads a virtio-blk device's queues over IOThreads
# (iothread-vq-mapping): the userspace answer to vhost-blk's workers. With
# one IOThread (iot1) and with one per queue (iotN), the same queues and
# backend. Older QEMU (Debian 12's 7.2) has no such property: left out.
qver=$(qemu-system-x86_64 --version | sed -n 's/^QEMU emulator version \([0-9]*\)\..*/\1/p')
iot=()
if ((${qver:-0} >= 9)); then
	for t in 1 "$cpus"; do
		map="" objs=()
		for ((i = 0; i < t; i++)); do
			objs+=(--qemu -object --qemu "iothread,id=iot$t-$i")
			map+="${map:+,}{\"iothread\": \"iot$t-$i\"}"
		done
		iot+=("${objs[@]}"
			--qemu -blockdev --qemu "driver=host_device,node-name=i$t,filename=$dev,cache.direct=on,aio=io_uring,locking=off"
			--qemu -device --qemu "{\"driver\": \"virtio-blk-pci\", \"drive\": \"i$t\", \"num-queues\": $cpus, \"serial\": \"iot$t\", \"iothread-vq-mapping\": [$map]}")
		((cpus > 1)) || break
	done
fi
qemu-storage-daemon \
	--blockdev "driver=host_device,node-name=f,filename=$dev,cache.direct=on,aio=io_uring,locking=off" \
	--export "type=vhost-user-blk,id=e,node-name=f,addr.type=unix,addr.path=$work/qsd.sock,writable=on,num-queues=$cpus" \
	>$work/qsd.log 2>&1 &
pids+=($!)
# socks_up: every daemon's socket is there.
socks_up() {
	local k
	for k in "${socks[@]}"; do [[ -S $k ]] || return 1; done
}
for ((i = 0; i < 100; i++)); do
	socks_up && break
	sleep 0.1
done
socks_up || { cat $work/*.log; exit 1; }

# Counting (the counting boot of bench/bridge.sh): this guest's instructions
# per second-level I/O. The second-level guest asks for each window through
# its run directory (inner/ic.req, a token) once its fio job is past its
# start; ic_server places the markers here and answers with the window's
# row (inner/ic.done, "TOKEN ROW", or "TOKEN fail WHY"). Every path takes
# each second-level 4 KiB O_DIRECT I/O to /dev/ram0 as one bio, so the I/Os
# are brd_submit_bio's calls.
ic_server() {
	local req=$inner/ic.req done=$inner/ic.done tok a0 a b ans
	while :; do
		if [[ ! -s $req ]]; then
			sleep 0.2
			continue
		fi
		read -r tok <"$req"
		rm -f "$req"
		a0=$IC_NEXT a=$((IC_NEXT + 1)) b=$((IC_NEXT + 2))
		IC_NEXT=$((IC_NEXT + 3))
		"$IC_MARK" --seq "$a0" 1000 "$a" $((IC_SECS * 1000)) "$b"
		if ic_count bios "$a0" "$a" "$b" >$work/ic.out 2>&1; then
			ans=$IC_ROW
		else
			ans="fail $(tail -n 1 $work/ic.out)"
		fi
		echo "$tok $ans" >"$done.tmp"
		mv "$done.tmp" "$done"
	done
}
count=0
if ic_on; then
	count=1
	IC_STACK=(block io_uring vhost vhost_blk)
	IC_EXTRA=(bios=entry:brd_submit_bio)
	ic_setup
	ic_server &
	pids+=($!)
fi

info "== outer guest: $(nproc) vCPUs, backing $dev ($(($(cat /sys/block/ram0/size) / 2048)) MiB brd)"
info "== inner guest: $cpus vCPUs, 1 GiB; disks: bridge (vhost-blk, a worker per queue)${w1:+, bridge-w1 (one worker)}, qemu (virtio-blk-pci in QEMU's main loop)${iot:+, iot1 and iot$cpus (virtio-blk-pci with iothread-vq-mapping over 1 and $cpus IOThreads)}, qsd (qemu-storage-daemon); $cpus queues each; $(qemu-system-x86_64 --version | head -n 1)"
rc=0
"$TOP/vm/vm.sh" --keep $inner --initramfs "${BUILD:-$TOP/build}/initramfs/nested-${KBASE:-6.12}-guest.cpio" --minimal \
	--cpus "$cpus" --mem 1G --shared-mem --no-disk --timeout 3000 \
	--qemu -chardev --qemu "socket,id=vb,path=$work/bridge.sock" \
	--qemu -device --qemu "vhost-user-blk-pci,chardev=vb,num-queues=$cpus" \
	--qemu -blockdev --qemu "driver=host_device,node-name=q,filename=$dev,cache.direct=on,aio=io_uring,locking=off" \
	--qemu -device --qemu "virtio-blk-pci,drive=q,num-queues=$cpus,serial=qemu" \
	--qemu -chardev --qemu "socket,id=qs,path=$work/qsd.sock" \
	--qemu -device --qemu "vhost-user-blk-pci,chardev=qs,num-queues=$cpus" \
	"${w1[@]}" "${iot[@]}" \
	-- "$TOP/bench/guest/bridge-inner.sh" "$runtime" "$reps" "$qd" "$count" || rc=$?
kill -USR1 $bpid
sleep 1
# Keep the daemons' counters and logs for the host too.
cp "$work"/bridge.stats "$work"/*.log /run/vstor/
mapfile -t st < <(/usr/bin/python3 "$TOP/tools/statsfile.py" $work/bridge.stats \
	messages rebuilds cpu_us 'vring.*.requests')
info "== bridge: messages ${st[0]:-?} rebuilds ${st[1]:-?} cpu_us ${st[2]:-?} requests through vhost-blk ${st[3]:-?}"
kill "${pids[@]}"
wait "${pids[@]}" 2>/dev/null || true
((rc == 0)) || {
	echo "inner guest failed ($rc); its logs: $(cat $inner/hostpath 2>/dev/null || echo $inner)"
	tail -n 30 $inner/console.log
	exit 1
}
