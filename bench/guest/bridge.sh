#!/usr/bin/env bash
# Runs in the first-level guest (see bench/bridge.sh): starts the bridge and
# qemu-storage-daemon on /dev/ram0, boots the second-level guest with the
# three disks and keeps its results, logs and the daemons' counters in this
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
qemu-storage-daemon \
	--blockdev "driver=host_device,node-name=f,filename=$dev,cache.direct=on,aio=io_uring,locking=off" \
	--export "type=vhost-user-blk,id=e,node-name=f,addr.type=unix,addr.path=$work/qsd.sock,writable=on,num-queues=$cpus" \
	>$work/qsd.log 2>&1 &
qpid=$!
for ((i = 0; i < 100; i++)); do
	[[ -S $work/bridge.sock && -S $work/qsd.sock ]] && break
	sleep 0.1
done
[[ -S $work/bridge.sock && -S $work/qsd.sock ]] || { cat $work/*.log; exit 1; }

info "== outer guest: $(nproc) vCPUs, backing $dev ($(($(cat /sys/block/ram0/size) / 2048)) MiB brd)"
info "== inner guest: $cpus vCPUs, 1 GiB; disks: bridge (vhost-blk), qemu (virtio-blk-pci), qsd (qemu-storage-daemon); $cpus queues each"
rc=0
"$TOP/vm/vm.sh" --keep $inner --initramfs "${BUILD:-$TOP/build}/initramfs/nested-guest.cpio" --minimal \
	--cpus "$cpus" --mem 1G --shared-mem --no-disk --timeout 3000 \
	--qemu -chardev --qemu "socket,id=vb,path=$work/bridge.sock" \
	--qemu -device --qemu "vhost-user-blk-pci,chardev=vb,num-queues=$cpus" \
	--qemu -blockdev --qemu "driver=host_device,node-name=q,filename=$dev,cache.direct=on,aio=io_uring,locking=off" \
	--qemu -device --qemu "virtio-blk-pci,drive=q,num-queues=$cpus,serial=qemu" \
	--qemu -chardev --qemu "socket,id=qs,path=$work/qsd.sock" \
	--qemu -device --qemu "vhost-user-blk-pci,chardev=qs,num-queues=$cpus" \
	-- "$TOP/bench/guest/bridge-inner.sh" "$runtime" "$reps" "$qd" || rc=$?
kill -USR1 $bpid
sleep 1
# Keep the daemons' counters and logs for the host too.
cp "$work"/bridge.stats "$work"/bridge.log "$work"/qsd.log /run/vstor/
mapfile -t st < <(/usr/bin/python3 "$TOP/tools/statsfile.py" $work/bridge.stats \
	messages rebuilds cpu_us 'vring.*.requests')
info "== bridge: messages ${st[0]:-?} rebuilds ${st[1]:-?} cpu_us ${st[2]:-?} requests through vhost-blk ${st[3]:-?}"
kill $bpid $qpid
wait $bpid $qpid 2>/dev/null || true
((rc == 0)) || {
	echo "inner guest failed ($rc); its logs: $(cat $inner/hostpath 2>/dev/null || echo $inner)"
	tail -n 30 $inner/console.log
	exit 1
}
