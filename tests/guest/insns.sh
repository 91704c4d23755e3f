# insncount (tools/insncount) on a Linux guest, booted with the plugin
# (vm.sh --insncount), 2 vCPUs and a two-queue file disk (vstor0) with one
# poll queue: a user loop of known length counts exactly; user and kernel
# are told apart; an idle vCPU adds next to nothing while a busy one runs;
# ranges (a module's text, the kernel's block, io_uring and virtio code)
# load at a marker and count, and a bad reload keeps the ranges in force;
# the storage stack's instructions per I/O agree within 2% between two
# runs of one job, each counted in windows inside it; a polling vCPU's spin
# is counted.
# The host suite insncount checks the plugin against its calibration image.
# shellcheck shell=bash disable=SC2034 # TESTS, desc_*, SUITE_*: read by the runner

SUITE_ORDER=60
SUITE_VM=(--cpus 2 --disk file:queues=2 --append virtio_blk.num_poll_queues=1 --insncount)
SUITE_NEEDS=(kernel tools plugin fio)
TESTS=(ic_user_exact ic_split ic_idle ic_ranges ic_entries ic_repeat ic_poll_spin)

IC_JSON=/run/vstor/insncount.json
IC_RANGES=/run/vstor/insncount.ranges
MARK=$TOOLS/insnmark

# ic_id: a marker id not used before in this boot.
ic_id() {
	local n
	n=$(cat /tmp/ic_id 2>/dev/null || echo 100)
	echo $((n + 1)) >/tmp/ic_id
	echo "$n"
}

# ic_stat ID1 ID2: the counts between two markers, into the associative
# array IC (IC[kernel], IC[user.1], IC[range.virtio_blk] ...).
declare -A IC
ic_stat() {
	local out k v
	out=$(/usr/bin/python3 "$TOP/tools/insncount/insnstat.py" "$IC_JSON" "$1" "$2") ||
		fail "insnstat: $out" || return
	IC=()
	while IFS='=' read -r k v; do
		IC[$k]=$v
	done <<<"$out"
}

# ic_fio ID1 ID2 FIO-ARGS...: markers around one fio job, on vCPU 1
# (with its markers), its counts in IC; IC_IOS is the I/Os it completed.
ic_fio() {
	local m1=$1 m2=$2
	shift 2
	taskset -c 1 "$MARK" "$m1" || return
	taskset -c 1 "${FIO_BIN:-fio}" --output-format=json --output=/tmp/ic.json "$@" \
		>/tmp/ic.log 2>&1 || { cat /tmp/ic.log; fail "fio failed"; return; }
	taskset -c 1 "$MARK" "$m2" || return
	IC_IOS=$(fio_field /tmp/ic.json read 'j["total_ios"]') || return
	ic_stat "$m1" "$m2"
}

desc_ic_user_exact="a user loop of 4N+2 instructions between markers counts exactly that on its vCPU"
ic_user_exact() {
	local a b n want got
	for n in 1000 1000000; do
		a=$(ic_id) b=$(ic_id)
		taskset -c 1 "$MARK" --loop "$n" "$a" "$b" || return
		ic_stat "$a" "$b" || return
		expect_eq "vCPU of the markers" "${IC[vcpu1]} ${IC[vcpu2]}" "1 1" || return
		want=$((4 * n + 2)) got=${IC[user.1]}
		note "N=$n: vCPU 1 user ${IC[user.1]} (want $want), kernel ${IC[kernel.1]}; vCPU 0 user ${IC[user.0]} kernel ${IC[kernel.0]}"
		# Only another process scheduled onto vCPU 1 in between could add.
		((got >= want && got <= want + want / 100)) ||
			fail "N=$n: vCPU 1 ran $got user instructions, want $want (+1% at most)" || return
	done
}

desc_ic_split="system calls count as kernel, a user loop as user: dd's 1-byte copies spend more in the kernel than in user space"
ic_split() {
	local a b per
	a=$(ic_id) b=$(ic_id)
	taskset -c 1 "$MARK" "$a" || return
	taskset -c 1 dd if=/dev/zero of=/dev/null bs=1 count=100000 status=none || return
	taskset -c 1 "$MARK" "$b" || return
	ic_stat "$a" "$b" || return
	per=$((${IC[kernel.1]} / 200000))
	note "dd, 100000 1-byte reads and writes: vCPU 1 kernel ${IC[kernel.1]} ($per per system call), user ${IC[user.1]}"
	((${IC[kernel.1]} > ${IC[user.1]})) || fail "kernel ${IC[kernel.1]} <= user ${IC[user.1]}" || return
	# A system call's entry, work and exit take some hundreds of instructions.
	((per >= 50 && per <= 20000)) || fail "$per kernel instructions per system call" || return
	a=$(ic_id) b=$(ic_id)
	taskset -c 1 "$MARK" --loop 10000000 "$a" "$b" || return
	ic_stat "$a" "$b" || return
	note "user loop of 40000002: vCPU 1 user ${IC[user.1]}, kernel ${IC[kernel.1]} (timer interrupts)"
	((${IC[kernel.1]} * 20 < ${IC[user.1]})) ||
		fail "the user loop's vCPU ran ${IC[kernel.1]} kernel instructions, more than 5% of ${IC[user.1]}"
}

desc_ic_idle="an idle vCPU executes under 1% of what a busy one does in the same time"
ic_idle() {
	local a b busy idle
	a=$(ic_id) b=$(ic_id)
	# vCPU 1 spins in user space for about 3 s; vCPU 0 has nothing to do.
	taskset -c 1 "$MARK" "$a" || return
	taskset -c 1 timeout 3 sh -c 'while :; do :; done'
	taskset -c 1 "$MARK" "$b" || return
	ic_stat "$a" "$b" || return
	busy=$((${IC[user.1]} + ${IC[kernel.1]})) idle=$((${IC[user.0]} + ${IC[kernel.0]}))
	note "3 s: busy vCPU 1 $busy instructions, idle vCPU 0 $idle (user ${IC[user.0]}, kernel ${IC[kernel.0]})"
	((busy > 10000000)) || fail "the busy vCPU ran only $busy instructions in 3 s" || return
	((idle * 100 < busy)) || fail "the idle vCPU ran $idle instructions, 1% or more of the busy one's $busy"
}

# The storage stack's code, as ranges: the block layer, io_uring, the
# virtio core and ring (which the 9p root uses too), virtio_blk.
STACK=(block io_uring virtio virtio_blk)
ic_load_ranges() {
	local rec before
	before=$(grep -c '"id":65535' "$IC_JSON")
	# Made once per boot (nm over the kernel's objects is slow under TCG).
	if [[ ! -s /tmp/ic.ranges ]]; then
		/usr/bin/python3 "$TOP/tools/insncount/insnranges.py" --obj "$(dirname "$MODROOT")" \
			/tmp/ic.ranges block=dir:block io_uring=dir:io_uring \
			virtio=dir:drivers/virtio virtio_blk=mod:virtio_blk \
			reqs=entry:blk_mq_start_request || return
	fi
	cp /tmp/ic.ranges "$IC_RANGES" || return
	"$MARK" --reload || return
	expect_eq "reload records" "$(grep -c '"id":65535' "$IC_JSON")" $((before + 1)) || return
	rec=$(grep '"id":65535' "$IC_JSON" | tail -n 1)
	grep -q '"loaded":[1-9]' <<<"$rec" || fail "reload: $rec"
}

# ic_windows N FIO-ARGS...: run a 4 KiB random-read job at QD1 on vstor0,
# pinned to vCPU 1, and while it runs count N windows of 3 s each, after
# 2 s of warm-up, bracketed by markers from vCPU 0, so that fio's start and
# exit fall outside; then stop fio (SIGINT). The I/Os of a window are the
# requests started in it, counted by the plugin (entry counter "reqs" on
# blk_mq_start_request; ic_entries checks it): the disk's completed reads
# (/sys/block/vdX/stat), read by a process before and after the markers,
# take in the I/Os of those processes' start-up too, about 6% more at QD1
# on this machine. Per I/O of window K: IC_W_STACK[K] (the ranges of
# STACK), IC_W_KERNEL[K], IC_W_USER[K], IC_W_IOS[K].
declare -a IC_W_STACK IC_W_KERNEL IC_W_USER IC_W_IOS
ic_windows() {
	local n=$1 d k a b ios st r pid
	shift
	d=$(disk_by_serial vstor0) || fail "no disk vstor0" || return
	IC_W_STACK=() IC_W_KERNEL=() IC_W_USER=() IC_W_IOS=()
	taskset -c 1 "${FIO_BIN:-fio}" --name=r --filename="/dev/$d" --ioengine=io_uring \
		--direct=1 --rw=randread --bs=4k --iodepth=1 --size=256M --time_based \
		--runtime=600 --disk_util=0 --output=/tmp/ic.log "$@" &
	pid=$!
	sleep 2
	for ((k = 1; k <= n; k++)); do
		a=$(ic_id) b=$(ic_id)
		# One process for both markers: no program starts in the window.
		taskset -c 0 "$MARK" --seq "$a" 3000 "$b" || break
		ic_stat "$a" "$b" || break
		ios=${IC[entry.reqs]:-0} st=0
		((ios > 100)) || { fail "window $k: $ios I/Os"; break; }
		for r in "${STACK[@]}"; do
			st=$((st + ${IC[range.$r]:-0}))
		done
		IC_W_STACK[k]=$((st / ios)) IC_W_KERNEL[k]=$((IC[kernel] / ios))
		IC_W_USER[k]=$((IC[user] / ios)) IC_W_IOS[k]=$ios
		note "window $k: $ios I/Os; per I/O: storage stack ${IC_W_STACK[k]}, kernel ${IC_W_KERNEL[k]}, user ${IC_W_USER[k]}"
	done
	kill -INT "$pid" 2>/dev/null
	wait "$pid"
	! grep -q 'err= *[1-9]' /tmp/ic.log || { cat /tmp/ic.log; fail "fio failed"; return; }
	((${#IC_W_STACK[@]} == n)) || fail "$n windows wanted, ${#IC_W_STACK[@]} counted"
}

desc_ic_entries="an entry counter on blk_mq_start_request counts requests: exactly a block-device job's 3000 reads (as the disk's stat does) and a passthrough job's 3000 commands (which the disk's stat leaves out)"
ic_entries() {
	local d a b r1 r2 n=3000 reqs dev engine
	ic_load_ranges || return
	d=$(disk_by_serial vstor0) || fail "no disk vstor0" || return
	for dev in "/dev/$d" "/dev/vblk/$d"; do
		engine=(--ioengine=io_uring --direct=1)
		[[ $dev == /dev/vblk/* ]] && engine=(--ioengine=io_uring_cmd --cmd_type=vblk)
		a=$(ic_id) b=$(ic_id)
		r1=$(awk '{ print $1 }' "/sys/block/$d/stat")
		"$MARK" "$a" || return
		"$TOP/build/fio/fio" --name=e --filename="$dev" "${engine[@]}" --rw=randread --bs=4k \
			--size=64M --number_ios=$n --output=/tmp/ic-e.log ||
			{ cat /tmp/ic-e.log; fail "fio on $dev failed"; return; }
		"$MARK" "$b" || return
		r2=$(awk '{ print $1 }' "/sys/block/$d/stat")
		ic_stat "$a" "$b" || return
		reqs=${IC[entry.reqs]:-0}
		note "$dev, $n reads: $reqs requests started; the disk's stat moved by $((r2 - r1))"
		# Nothing else reads this disk (the root is 9p).
		expect_eq "$dev: requests started" "$reqs" "$n" || return
		if [[ $dev == /dev/vblk/* ]]; then
			expect_eq "$dev: the disk's completed reads" $((r2 - r1)) 0 || return
		else
			expect_eq "$dev: the disk's completed reads" $((r2 - r1)) "$n" || return
		fi
	done
}

desc_ic_repeat="the same job run twice, each counted over three windows: storage-stack instructions per I/O (block, io_uring, virtio, virtio_blk) agree within 2%"
# Not exactly: which paths a read takes depends on whether the host's I/O
# thread completes it before the vCPU has gone to sleep, and that varies
# with the host's load. Single 4 s windows here were up to 3.4% apart, with
# another guest running beside them; the whole kernel's count (timer ticks,
# the scheduler) varies more, and is only reported.
ic_repeat() {
	local run k st kern m1 m2
	ic_load_ranges || return
	for run in 1 2; do
		ic_windows 3 --hipri=0 || return
		st=0 kern=0
		for k in 1 2 3; do
			st=$((st + IC_W_STACK[k])) kern=$((kern + IC_W_KERNEL[k]))
		done
		note "run $run: storage stack $((st / 3)), kernel $((kern / 3)) instructions per I/O (mean of 3 windows)"
		if ((run == 1)); then m1=$((st / 3)); else m2=$((st / 3)); fi
	done
	((m1 > 500 && m1 < 100000)) || fail "$m1 storage-stack instructions per I/O" || return
	((100 * (m1 > m2 ? m1 - m2 : m2 - m1) <= 2 * m1)) ||
		fail "the two runs differ by more than 2%: $m1 and $m2 per I/O"
}

desc_ic_poll_spin="a polled read (hipri, poll queue) counts the vCPU's spin: more storage-stack instructions per I/O than an interrupt-driven one"
ic_poll_spin() {
	local irq poll
	ic_load_ranges || return
	ic_windows 1 --hipri=0 || return
	irq=${IC_W_STACK[1]}
	ic_windows 1 --hipri=1 || return
	poll=${IC_W_STACK[1]}
	note "storage-stack instructions per 4 KiB read at QD1: interrupts $irq, polled $poll"
	((poll > irq)) || fail "polled $poll <= interrupt-driven $irq per I/O: the spin is not counted"
}

desc_ic_ranges="ranges from /proc/kallsyms and the kernel's objects load at a marker and count virtio_blk's and the block layer's code; a bad reload is reported and keeps them"
ic_ranges() {
	local d rec before
	d=$(disk_by_serial vstor0) || fail "no disk vstor0" || return
	ic_load_ranges || return
	ic_fio "$(ic_id)" "$(ic_id)" --name=r --filename="/dev/$d" --ioengine=io_uring --direct=1 \
		--rw=randread --bs=4k --iodepth=1 --size=64M --number_ios=2000 || return
	note "2000 reads: kernel ${IC[kernel]}, virtio_blk ${IC[range.virtio_blk]}, block ${IC[range.block]}, io_uring ${IC[range.io_uring]}, virtio ${IC[range.virtio]}"
	((${IC[range.virtio_blk]} > 2000 * 20)) || fail "virtio_blk ran ${IC[range.virtio_blk]} instructions for 2000 I/Os" || return
	((${IC[range.virtio_blk]} < IC[kernel] / 2)) || fail "virtio_blk ${IC[range.virtio_blk]} of kernel ${IC[kernel]}: more than half" || return
	((${IC[range.block]} > 2000 * 100)) || fail "the block layer ran ${IC[range.block]} for 2000 I/Os" || return
	((${IC[range.io_uring]} > 2000 * 50)) || fail "io_uring ran ${IC[range.io_uring]} for 2000 I/Os" || return
	# A malformed file: the reload says so, the ranges in force stay.
	echo "not a range" >"$IC_RANGES"
	before=$(grep -c '"id":65535' "$IC_JSON")
	"$MARK" --reload || return
	expect_eq "reload records" "$(grep -c '"id":65535' "$IC_JSON")" $((before + 1)) || return
	rec=$(grep '"id":65535' "$IC_JSON" | tail -n 1)
	grep -qF '"error":"' <<<"$rec" || fail "bad reload: $rec" || return
	note "bad reload: $rec"
	ic_fio "$(ic_id)" "$(ic_id)" --name=r --filename="/dev/$d" --ioengine=io_uring --direct=1 \
		--rw=randread --bs=4k --iodepth=1 --size=64M --number_ios=2000 || return
	note "after it, 2000 reads: virtio_blk ${IC[range.virtio_blk]}"
	((${IC[range.virtio_blk]} > 2000 * 20)) || fail "virtio_blk stopped counting after a bad reload"
}
