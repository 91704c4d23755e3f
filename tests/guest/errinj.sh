# Errors injected under virtio-blk (QEMU's blkdebug, vm.sh --disk err=...):
# EIO and ENOSPC on reads, writes and flushes, once and always, on every
# path a request can take: the interrupt path with completion batching on
# and off, poll queues (an IOPOLL ring), passthrough (the CQE's status),
# chained scatter-gather lists, and QEMU stopping the VM on an error and
# continuing it, and one block node holding a request (a blkdebug
# breakpoint) or all of them (a throttle) while the VM runs. Each error
# must reach the one caller whose I/O it hit
# (build/tools/batch_err: 16 I/Os submitted together, the bad block among
# them), leave no request in flight and no tag taken, and the disk usable.
# shellcheck shell=bash disable=SC2034 # TESTS, desc_*, SUITE_*: read by the runner

# The paths (batch_err's mode and flags), each with a block of its own for
# every error injected once: a once-rule fires for the first request that
# touches its sector and is gone.
EI_PATHS=(libaio uring uring_nobatch uring_poll pt pt_poll sgl_uring sgl_pt)
# 4 KiB blocks: the errors injected always, shared by every path.
declare -A EI_ALWAYS=([read:eio]=1000 [read:enospc]=1100 [write:eio]=1200 [write:enospc]=1300)
# The block of a once-error: path p, operation o, errno e.
ei_once_block() {
	local p=$1 k=0 i
	for i in "${!EI_PATHS[@]}"; do [[ ${EI_PATHS[$i]} == "$p" ]] && k=$((i * 4)); done
	[[ $2 == write ]] && k=$((k + 2))
	[[ $3 == enospc ]] && k=$((k + 1))
	echo $((2000 + 100 * k))
}
ei_rules() {
	local r="" key p o e
	for key in "${!EI_ALWAYS[@]}"; do
		r+=",err=${key%%:*}:${key#*:}:$((EI_ALWAYS[$key] * 8)):always"
	done
	for p in "${EI_PATHS[@]}"; do
		for o in read write; do
			for e in eio enospc; do
				r+=",err=$o:$e:$(($(ei_once_block "$p" "$o" "$e") * 8)):once"
			done
		done
	done
	echo "$r"
}

SUITE_VM=(--cpus 2
	--disk "file:size=256M,queues=2,werror=report,rerror=report$(ei_rules)"
	--disk "file:size=16M,queues=1,werror=report,err=flush:eio:-:always"
	--disk "file:size=16M,queues=1,werror=report,err=flush:enospc:-:always"
	--disk "file:size=16M,queues=1,werror=report,err=flush:eio:-:once"
	--disk "file:size=16M,queues=1,werror=report,err=flush:enospc:-:once"
	--disk "file:size=16M,queues=1,err=write:enospc:8192:once,rerror=stop,err=read:eio:16384:once"
	--disk "file:size=64M,queues=2,werror=report,errsector=100000"
	--append virtio_blk.num_poll_queues=1)
SUITE_NEEDS=(kernel tools fio)

TESTS=(ei_read ei_write ei_flush ei_stop_cont ei_pause ei_node_hold ei_vhost)

BATCH=/sys/kernel/debug/virtio_blk/irq_batch

# ei_flags PATH: batch_err's mode and flags for PATH.
ei_flags() {
	case $1 in
	libaio) echo libaio ;;
	uring | uring_nobatch) echo io_uring ;;
	uring_poll) echo "-p io_uring" ;;
	pt) echo pt ;;
	pt_poll) echo "-p pt" ;;
	sgl_uring) echo "-s 8 io_uring" ;;
	sgl_pt) echo "-s 8 pt" ;;
	esac
}

# no_leaks DISK: nothing in flight on DISK and no tag taken in any of its
# hardware contexts.
no_leaks() {
	local d=$1 f busy
	expect_eq "$d in flight" "$(awk '{ print $1 + $2 }' "/sys/block/$d/inflight")" 0 || return
	for f in /sys/kernel/debug/block/"$d"/hctx*/tags; do
		busy=$(awk -F= '$1 == "busy" { n += $2 } END { print n + 0 }' "$f")
		expect_eq "${f#/sys/kernel/debug/block/} busy" "$busy" 0 || return
	done
}

# ei_rw OP: every path, EIO and ENOSPC, always and once, for OP (read or
# write) on vstor0; prints the counts per path.
ei_rw() {
	local op=$1 d p e mode flags dev out bad good w="" total=0 b blk fails
	d=$(disk_by_serial vstor0) || fail "no vstor0" || return
	echo none >"/sys/block/$d/queue/scheduler"
	[[ $op == write ]] && w=-w
	for p in "${EI_PATHS[@]}"; do
		[[ $p == uring_nobatch ]] && echo N >$BATCH || echo Y >$BATCH
		read -ra flags <<<"$(ei_flags "$p")"
		dev=/dev/$d
		[[ ${flags[-1]} == pt ]] && dev=/dev/vblk/$d
		b=0
		for e in eio enospc; do
			for mode in always once; do
				if [[ $mode == always ]]; then
					blk=${EI_ALWAYS[$op:$e]} fails=3
				else
					blk=$(ei_once_block "$p" "$op" "$e") fails=1
				fi
				# shellcheck disable=SC2086 # $w: one flag or none
				out=$("$TOOLS/batch_err" $w -e $fails "${flags[@]}" "$dev" "$blk" 16 3 2>&1) ||
					{ echo Y >$BATCH; fail "$p $op $e $mode: $out"; return; }
				read -r _ bad _ good <<<"$out"
				b=$((b + bad)) total=$((total + bad))
			done
		done
		note "$p: $b injected errors reached their caller, every other $op of the batch succeeded"
		no_leaks "$d" || { echo Y >$BATCH; return; }
	done
	echo Y >$BATCH
	note "$op: $total errors in all, on ${#EI_PATHS[@]} paths"
	# Usable after: a verified write and read elsewhere on the disk.
	fio_json /tmp/ei.json --name=after --filename="/dev/$d" --ioengine=io_uring --direct=1 \
		--rw=randwrite --bs=4k --iodepth=16 --offset=128M --size=16M --verify=crc32c >/dev/null ||
		fail "fio verify after the errors failed" || return
	no_leaks "$d"
}

desc_ei_read="reads: EIO and ENOSPC, always and once, on 8 paths (libaio and io_uring with irq batching, io_uring without, polled io_uring, passthrough, polled passthrough, 8-segment io_uring and passthrough): each reaches its reader alone, no request or tag leaks, fio verify after"
ei_read() { ei_rw read; }

desc_ei_write="writes: the same 8 paths and 4 errors; the writes that succeeded read back as written"
ei_write() { ei_rw write; }

desc_ei_flush="flushes: EIO and ENOSPC always reach fsync(2), io_uring fsync and passthrough FLUSH; injected once, only the first flush fails"
ei_flush() {
	local s d m e out total=0
	for s in vstor1 vstor2; do
		d=$(disk_by_serial $s) || fail "no $s" || return
		expect_eq "$s cache" "$(cat "/sys/block/$d/queue/write_cache")" "write back" || return
		for m in fsync io_uring pt; do
			e=/dev/$d
			[[ $m == pt ]] && e=/dev/vblk/$d
			out=$("$TOOLS/batch_err" flush $m "$e" 3 3 2>&1) || fail "$s $m: $out" || return
			total=$((total + 3))
		done
		no_leaks "$d" || return
	done
	for s in vstor3 vstor4; do
		d=$(disk_by_serial $s) || fail "no $s" || return
		out=$("$TOOLS/batch_err" flush fsync "/dev/$d" 3 1 2>&1) || fail "$s fsync: $out" || return
		out=$("$TOOLS/batch_err" flush io_uring "/dev/$d" 2 0 2>&1) || fail "$s io_uring: $out" || return
		out=$("$TOOLS/batch_err" flush pt "/dev/vblk/$d" 2 0 2>&1) || fail "$s pt: $out" || return
		total=$((total + 1))
		no_leaks "$d" || return
	done
	note "flush: $total errors in all, each where it was injected"
}

# ei_on_stop WHAT COMMAND...: COMMAND's I/O makes QEMU stop the VM; the host
# continues it (vm/qmp.py vstor-cont-on-stop) and COMMAND must succeed.
ei_on_stop() {
	local what=$1 pid
	shift
	host_qmp '{"execute": "vstor-cont-on-stop", "arguments": {"timeout": 20, "after": 1}}' >/tmp/ei-cont.out &
	pid=$!
	sleep 0.5
	"$@" || { wait $pid; fail "the $what failed"; return; }
	wait $pid || fail "QMP: $(cat /tmp/ei-cont.out)" || return
	note "$what: $(cat /tmp/ei-cont.out)"
	grep -q '"status": "io-error"' /tmp/ei-cont.out || fail "the VM did not stop for the $what's error"
}

# ei_block: the 4 KiB that ei_stop_cont writes.
ei_block() { printf 'vstor-errinj-%04d\n' {1..256} | head -c 4096; }

desc_ei_stop_cont="QEMU stops the VM on an ENOSPC write (werror default) and on an EIO read (rerror=stop); continued over QMP, the request is retried and succeeds: no caller sees an error, the data is there"
ei_stop_cont() {
	local d
	d=$(disk_by_serial vstor5) || fail "no vstor5" || return
	# Block 1024 is sector 8192 (ENOSPC once), block 2048 sector 16384 (EIO once).
	ei_on_stop write dd if=<(ei_block) of="/dev/$d" bs=4096 seek=1024 count=1 \
		iflag=fullblock oflag=direct status=none || return
	cmp <(ei_block) <(dd if="/dev/$d" bs=4096 skip=1024 count=1 iflag=direct status=none) ||
		fail "the retried write's data is not on the disk" || return
	ei_on_stop read dd if="/dev/$d" of=/dev/null bs=4096 skip=2048 count=1 iflag=direct status=none ||
		return
	no_leaks "$d"
}

desc_ei_pause="the VM stopped and continued over QMP three times during fio verify on the interrupt and poll paths: every I/O completes, the data verifies, nothing leaks"
ei_pause() {
	local d fpid i rc=0
	d=$(disk_by_serial vstor0) || fail "no vstor0" || return
	fio_json /tmp/eip.json --name=irq --filename="/dev/$d" --ioengine=io_uring --direct=1 \
		--rw=randwrite --bs=4k --iodepth=16 --offset=160M --size=16M --verify=crc32c \
		--name=poll --filename="/dev/$d" --ioengine=io_uring --hipri=1 --direct=1 \
		--rw=randwrite --bs=4k --iodepth=8 --offset=192M --size=16M --verify=crc32c >/dev/null &
	fpid=$!
	for i in 1 2 3; do
		sleep 1
		host_qmp '{"execute": "vstor-pause", "arguments": {"seconds": 2}}' >/dev/null ||
			{ rc=1; break; }
	done
	wait $fpid || fail "fio verify across the pauses failed" || return
	((rc == 0)) || fail "QMP stop/cont failed" || return
	no_leaks "$d"
}

# ei_hmp CMD: run HMP command CMD in QEMU; fails if it prints anything (HMP
# reports its errors as text).
ei_hmp() {
	local r
	r=$(host_qmp "{\"execute\": \"human-monitor-command\", \"arguments\": {\"command-line\": \"$1\"}}") ||
		fail "HMP $1: $r" || return
	[[ $r == *'"return": ""'* ]] || fail "HMP $1: $r"
}


desc_ei_node_hold="vstor0's block node holds I/O while the VM runs: one write held at a blkdebug breakpoint for 3 s (QMP human-monitor-command qemu-io break/resume) while a fio verify job elsewhere completes, then the write completes with its data (on QEMU 7.2 only: QEMU 10.0's HMP qemu-io resume hangs); then the node throttled to 1 IOPS for 3 s under fio verify at QD16 and released: every I/O completes, the data verifies, nothing leaks"
ei_node_hold() {
	local d dpid r major
	d=$(disk_by_serial vstor0) || fail "no vstor0" || return
	major=$(host_qmp '{"execute": "query-version"}' | sed -n 's/.*"major": *\([0-9]*\).*/\1/p')
	[[ -n $major ]] || fail "QMP query-version: no major version" || return
	if ((major > 7)); then
		# QEMU 10.0's HMP qemu-io "resume" never returned with a request
		# suspended at the breakpoint (2026-12-05, a fresh Debian 13): the
		# monitor, and with it the VM, hung. So the breakpoint half runs
		# only on QEMU 7.2, the last version seen to work; the throttle
		# half runs everywhere.
		note "QEMU $major.x: the blkdebug breakpoint half left out (QEMU 10.0's HMP qemu-io resume hangs)"
		ei_node_throttle "$d"
		return
	fi
	ei_hmp 'qemu-io d0 \"break write_aio held\"' || return
	# Block 58000 (226.6 MiB): no error rule there, and no other test's I/O.
	dd if=<(ei_block) of="/dev/$d" bs=4096 seek=58000 count=1 iflag=fullblock \
		oflag=direct status=none 2>/tmp/eih.err &
	dpid=$!
	sleep 2
	[[ -e /proc/$dpid ]] || { ei_hmp 'qemu-io d0 \"remove_break write_aio held\"'; fail "the write was not held: $(cat /tmp/eih.err)"; return; }
	r=$(awk '{ print $2 }' "/sys/block/$d/inflight")
	expect_eq "writes in flight while one is held" "$r" 1 || { ei_hmp 'qemu-io d0 \"resume held\"'; return; }
	fio_json /tmp/eih.json --name=beside --filename="/dev/$d" --ioengine=io_uring --direct=1 \
		--rw=randwrite --bs=4k --iodepth=16 --offset=216M --size=8M --verify=crc32c >/dev/null ||
		{ ei_hmp 'qemu-io d0 \"resume held\"'; fail "fio beside the held write failed"; return; }
	[[ -e /proc/$dpid ]] || fail "the held write completed before it was resumed" || return
	note "a write held at the node for the whole of a fio verify job beside it"
	ei_hmp 'qemu-io d0 \"resume held\"' || return
	wait $dpid || fail "the held write failed once resumed: $(cat /tmp/eih.err)" || return
	cmp <(ei_block) <(dd if="/dev/$d" bs=4096 skip=58000 count=1 iflag=direct status=none) ||
		fail "the held write's data is not on the disk" || return
	no_leaks "$d" || return
	ei_node_throttle "$d"
}

# ei_node_throttle DISK: fio verify at QD16 on DISK while its node is
# throttled to 1 IOPS for 3 s, then released.
ei_node_throttle() {
	local d=$1 fpid r
	fio_json /tmp/eit.json --name=throttled --filename="/dev/$d" --ioengine=io_uring --direct=1 \
		--rw=randwrite --bs=4k --iodepth=16 --offset=216M --size=8M --loops=20 --verify=crc32c >/dev/null &
	fpid=$!
	sleep 1
	qemu_throttle vdisk0 1 || { wait $fpid; return; }
	sleep 3
	r=$(awk '{ print $1 + $2 }' "/sys/block/$d/inflight")
	qemu_throttle vdisk0 0 || { wait $fpid; return; }
	note "$r requests in flight at the throttled node"
	wait $fpid || fail "fio verify across the throttle failed" || return
	((r > 1)) || fail "only $r requests were waiting at the throttled node" || return
	no_leaks "$d"
}

desc_ei_vhost="vhost-blk (through vhost-blk-bridge and the scripted front end) on a disk whose sectors 100000-100007 fail: IOERR for the requests that touch them, OK for the rest, each queue still serves after, vhost-blk counts the errors"
ei_vhost() {
	local d
	vhost_blk_load || return
	d=$(disk_by_serial vstor6) || fail "no vstor6" || return
	br_start ei-vhost --backend "/dev/$d" --queues 2 || return
	vub --bad-sector 100000 --scenario failing || return
	br_stop || return
	no_leaks "$d"
}
