# vhost-blk-bridge (tools/vhost-blk-bridge): a vhost-user-blk backend whose
# data path is vhost-blk. Driven by a scripted vhost-user front end
# (tests/tools/vub_test.py) and by the host's own QEMU booting a second-level
# guest inside this one, with the bridge serving its disk.
# shellcheck shell=bash disable=SC2034 # TESTS, desc_*, SUITE_*: read by the runner

# The guest this suite boots (vm/vm.sh options) and what it needs built.
SUITE_VM=(--cpus 2 --no-disk --append "brd.rd_nr=2 brd.rd_size=262144")
SUITE_NEEDS=(kernel tools fio initramfs)
SUITE_ORDER=90
# The nested tests run their steps with limits of their own (BR_T_*); these
# cover the sum with margin.
timeout_br_nested=1500

BR_MNT=/tmp/br-ext4

# br_stats: make the bridge rewrite its stats file now (SIGUSR1) and wait
# for the new one.
br_stats() {
	local seq i
	seq=$(awk '$1 == "seq" { print $2 }' "$BR_STATS")
	kill -USR1 "$BR_PID" || { fail "the bridge is gone"; return; }
	for ((i = 0; i < 200; i++)); do
		[[ $(awk '$1 == "seq" { print $2 }' "$BR_STATS" 2>/dev/null) != "$seq" ]] && return 0
		sleep 0.05
	done
	fail "the bridge did not answer SIGUSR1"
}

# br_get KEY [FILE]: a top-level counter; br_vring I FIELD [FILE]: a vring's.
br_get() { awk -v k="$1" '$1 == k { print $2 }' "${2:-$BR_STATS}"; }
br_vring() {
	awk -v i="$1" -v f="$2" '$1 == "vring" && $2 == i {
		for (n = 3; n < NF; n += 2) if ($n == f) print $(n + 1) }' "${3:-$BR_STATS}"
}

desc_br_cli="--help, and clear errors for bad options (--queues, --workers, --busy-poll, --sandbox, --seccomp, --sandbox-user), a missing backend, a directory, too many queues, a socket path that is a file, an unknown --socket-group; the socket is mode 0600, 0660 and the group's with --socket-group"
br_cli() {
	vhost_blk_load || return
	local out rc
	out=$("$BRIDGE" --help) || { fail "--help exited $?"; return; }
	[[ $out == *"--socket PATH"*"--backend PATH"*"--workers"* ]] || fail "--help does not describe the options" || return
	# expect_err EXIT PATTERN ARGS...: the bridge exits EXIT, saying PATTERN.
	expect_err() {
		local want=$1 pat=$2
		shift 2
		rc=0
		out=$("$BRIDGE" "$@" 2>&1) || rc=$?
		((rc == want)) || { fail "$*: exit $rc, want $want ($out)"; return; }
		[[ $out == *"$pat"* ]] || fail "$*: '$out' does not say '$pat'"
	}
	expect_err 2 "--socket and --backend are required" --socket /tmp/x.sock || return
	expect_err 2 "not a number from 1 to 128" -s /tmp/x.sock -b /dev/ram0 --queues 0 || return
	expect_err 2 "neither per-queue nor one" -s /tmp/x.sock -b /dev/ram0 --workers 3 || return
	expect_err 2 "--busy-poll: '-1' is not a number from 0 to 4294967295" -s /tmp/x.sock -b /dev/ram0 --busy-poll -1 || return
	expect_err 1 "cannot open backend /nonexistent" -s /tmp/x.sock -b /nonexistent || return
	expect_err 1 "cannot open backend /tmp: Is a directory" -s /tmp/x.sock -b /tmp || return
	rm -f /tmp/x.fifo && mkfifo /tmp/x.fifo
	expect_err 1 "neither a block device nor a regular file" -s /tmp/x.sock -b /tmp/x.fifo || return
	expect_err 1 "max_queues parameter" -s /tmp/x.sock -b /dev/ram0 --queues 17 || return
	: >/tmp/x.notsock
	expect_err 1 "exists and is not a socket" -s /tmp/x.notsock -b /dev/ram0 || return
	[[ -f /tmp/x.notsock ]] || fail "the bridge removed a regular file at its socket path" || return
	expect_err 2 "no such group" -s /tmp/x.sock -b /dev/ram0 --socket-group no-such-group || return
	expect_err 2 "neither namespace nor none" -s /tmp/x.sock -b /dev/ram0 --sandbox chroot || return
	expect_err 2 "is not kill, log or none" -s /tmp/x.sock -b /dev/ram0 --seccomp trap || return
	expect_err 1 "--sandbox-user no-such-user: no such user" -s /tmp/x.sock -b /dev/ram0 --sandbox-user no-such-user || return
	expect_err 1 "--sandbox-user root: that is root" -s /tmp/x.sock -b /dev/ram0 --sandbox-user root || return
	# The owner alone by default (0600), group 100 too with --socket-group.
	local g mode i pid
	for g in "" 100; do
		rm -f /tmp/g.sock
		"$BRIDGE" -s /tmp/g.sock -b /dev/ram0 ${g:+--socket-group "$g"} 2>/tmp/g.log &
		pid=$!
		for ((i = 0; i < 100; i++)); do
			[[ -S /tmp/g.sock ]] && break
			sleep 0.05
		done
		mode=$(stat -c %a:%g /tmp/g.sock 2>/dev/null)
		kill "$pid"
		wait "$pid"
		expect_eq "socket mode:group${g:+ with --socket-group $g}" "$mode" "$([[ -n $g ]] && echo 660:100 || echo 600:0)" || return
	done
}

desc_br_statsfile="--stats as root in a directory others may write to: a symlink or hard link to root's 0600 file, another user's file or a FIFO planted at the path is neither followed nor replaced, the bridge says so and keeps serving; a symlink at PATH.tmp (the name it used to write first) is not followed; its own file from an earlier run is replaced, and no temporary file stays"
br_statsfile() {
	vhost_blk_load || return
	local dir=/tmp/br-statsdir victim=/tmp/br-victim kind path before after i
	rm -rf "$dir" && mkdir -m 1777 "$dir" || return
	for kind in symlink hardlink foreign fifo tmplink own; do
		printf 'root only\n' >"$victim" && chmod 600 "$victim" || return
		path=$dir/$kind.stats
		case $kind in
		symlink) ln -s "$victim" "$path" ;;
		hardlink) ln "$victim" "$path" ;;
		foreign) echo "user 1000's" >"$path" && chown 1000:1000 "$path" ;;
		fifo) mkfifo -m 666 "$path" ;;
		own) echo "seq 0" >"$path" ;;
		tmplink) ln -s "$victim" "$path.tmp" && echo "seq 0" >"$path" ;;
		esac || return
		before=$(stat -c %i:%s:%Y:%F "$path")
		"$BRIDGE" -s /tmp/br-sf.sock -b /dev/ram0 --stats "$path" 2>/tmp/br-sf.log &
		BR_PID=$! BR_SOCK=/tmp/br-sf.sock BR_LOG=/tmp/br-sf.log
		for ((i = 0; i < 100; i++)); do
			[[ -S $BR_SOCK ]] && break
			sleep 0.1
		done
		[[ -S $BR_SOCK ]] || fail "$kind: the bridge did not start: $(tail -n 2 "$BR_LOG")" || return
		kill -USR1 "$BR_PID" && sleep 0.3
		after=$(stat -c %i:%s:%Y:%F "$path")
		br_stop || return
		grep -qx 'root only' "$victim" || fail "$kind: root's 0600 file was written: $(head -c 80 "$victim")" || return
		if [[ $kind == own || $kind == tmplink ]]; then
			[[ $(br_get seq "$path") -ge 2 ]] || fail "$kind: the bridge's earlier file was not replaced ($(head -n 1 "$path"))" || return
			[[ $kind == own || -L $path.tmp ]] || fail "tmplink: the link at $path.tmp was replaced" || return
		else
			[[ $after == "$before" ]] || fail "$kind: the planted name changed ($before -> $after)" || return
			grep -q "cannot write $path.*not replaced" "$BR_LOG" || fail "$kind: the log does not say why: $(tail -n 2 "$BR_LOG")" || return
		fi
	done
	[[ -z $(find "$dir" -name '.*') ]] || fail "temporary files left: $(ls -A "$dir")" || return
	note "a symlink, a hard link, another user's file and a FIFO at the stats path: refused and left alone; a symlink at the old temporary name: not followed"
}

# br_server: the sandboxed server, the supervisor's ($BR_PID) only child.
br_server() { pgrep -P "$BR_PID" | head -n 1; }

# br_inject NAME ARGS...: the sandboxed server makes this system call
# (tests/tools/syscall_inject.py, as an attacker running code in it would).
br_inject() { /usr/bin/python3 "$TOP/tests/tools/syscall_inject.py" "$(br_server)" "$@"; }

desc_br_sandbox="the default sandbox: a supervisor outside and a server running as nobody with no capabilities, no_new_privs, a seccomp filter, its own PID, mount, network, IPC and UTS namespaces and a root of /dev/vhost-blk and proc only; calls injected into the server: reopening the backend read-write through /proc/self/fd fails (EACCES), socket() and an ioctl outside the list kill it (SIGSYS), and with --seccomp none opening /etc/passwd finds nothing; the front end's I/O scenario passes, --sandbox none still serves"
br_sandbox() {
	vhost_blk_load || return
	local srv ns st root out fd rc=0
	br_start br-sbx --backend /dev/ram0 --queues 2 || return
	srv=$(br_server)
	[[ -n $srv ]] || fail "the supervisor $BR_PID has no server child" || return
	for ns in mnt pid net ipc uts; do
		[[ $(readlink "/proc/$srv/ns/$ns") != "$(readlink "/proc/self/ns/$ns")" ]] ||
			fail "the server shares the $ns namespace" || return
		[[ $(readlink "/proc/$BR_PID/ns/$ns") == "$(readlink "/proc/self/ns/$ns")" ]] ||
			fail "the supervisor left the $ns namespace" || return
	done
	st=$(awk '/^(Uid|Gid|CapEff|CapPrm|CapBnd|CapInh|CapAmb|NoNewPrivs|Seccomp):/ { printf "%s%s ", $1, $2 }' "/proc/$srv/status")
	expect_eq "the server's user, capabilities, no_new_privs and seccomp" "$st" \
		"Uid:$(id -u nobody) Gid:$(id -g nobody) CapInh:0000000000000000 CapPrm:0000000000000000 CapEff:0000000000000000 CapBnd:0000000000000000 CapAmb:0000000000000000 NoNewPrivs:1 Seccomp:2 " || return
	root=$(cd "/proc/$srv/root" && find . -mindepth 1 -maxdepth 2 ! -path './proc/*' | sort | tr '\n' ' ')
	expect_eq "the server's root" "$root" "./dev ./dev/vhost-blk ./proc " || return
	# No descriptor of a directory: one would lead anywhere through "..".
	for fd in "/proc/$srv/fd"/*; do
		[[ ! -d $fd ]] || fail "the server holds a directory: fd ${fd##*/} is $(readlink "$fd")" || return
	done
	vub --backend-size $((256 << 20)) --scenario io || return
	br_stats || return
	[[ $(br_get pid) == "$srv" ]] || fail "the stats name pid $(br_get pid), the server is $srv" || return
	# Reopening the backend through its /proc/self/fd link, read-write.
	out=$(br_inject openat -100 "/proc/self/fd/$(br_backend_fd)" 2)
	expect_eq "openat(/proc/self/fd/BACKEND, O_RDWR) injected" "$out" -13 || return
	out=$(br_inject socket 2 1 0)
	expect_eq "socket(AF_INET) injected into the server" "$out" "killed 31" || return
	wait "$BR_PID" || rc=$?
	expect_eq "the supervisor's exit after its server's SIGSYS" "$rc" 159 || return
	[[ ! -e $BR_SOCK ]] || fail "the supervisor left $BR_SOCK behind" || return
	# An ioctl outside the list (BLKGETSIZE64 on the backend's fd).
	br_start br-sbx --backend /dev/ram0 || return
	out=$(br_inject ioctl "$(br_backend_fd)" 0x80081272 0)
	expect_eq "ioctl(BLKGETSIZE64) injected into the server" "$out" "killed 31" || return
	wait "$BR_PID" || true
	# No filter: what is left is the namespaces, and nothing to open.
	br_start br-sbx --backend /dev/ram0 --seccomp none || return
	out=$(br_inject openat -100 /etc/passwd 0)
	expect_eq "openat(/etc/passwd) injected, --seccomp none" "$out" -2 || return
	br_stop || return
	br_start br-nosbx --backend /dev/ram0 --queues 2 --sandbox none || return
	[[ -z $(br_server) ]] || fail "--sandbox none: a child process" || return
	vub --backend-size $((256 << 20)) --scenario io || return
	br_stop
}

# br_backend_fd: the server's descriptor of the backend (/dev/ram0).
br_backend_fd() {
	local fd
	for fd in /proc/"$(br_server)"/fd/*; do
		[[ $(readlink "$fd") == /dev/ram0 ]] && { basename "$fd"; return; }
	done
}

# br_ram_vub NAME VUB-ARGS...: the bridge on brd ram0 (256 MiB; the scripted
# front end needs at least 24 MiB) with 2 queues, a serial and a seg_max the
# front end checks, then the front end; the bridge is left running.
br_ram_vub() {
	vhost_blk_load || return
	br_start "$1" --backend /dev/ram0 --queues 2 --serial vub-serial-0123 --seg-max 64 || return
	shift
	vub --expect-serial vub-serial-0123 --expect-seg-max 64 --expect-queues 2 \
		--backend-size $((256 << 20)) "$@"
}

desc_br_io="scripted front end, brd backend, 2 queues on 2 workers: every request type, indirect, 1 MiB requests, event index on and off; vring stop/restart from GET_VRING_BASE across the index wrap; RESET_DEVICE and RESET_OWNER, idle and with I/O in flight"
br_io() {
	br_ram_vub br-io --expect-workers per-queue --scenario io restart reset reset-busy && br_stop
}

desc_br_busy_poll="--busy-poll 1000000, all queues on one worker: the front end's I/O, restart and reset scenarios pass, vhost-blk's handlers completed requests while polling, and the stats say so; without it they did not"
br_busy_poll() {
	vhost_blk_load || return
	local q pc
	br_start br-bp --backend /dev/ram0 --queues 2 --workers one --busy-poll 1000000 || return
	vub --backend-size $((256 << 20)) --expect-workers one --scenario io restart reset-busy || return
	br_stats || return
	for q in 0 1; do
		pc=$(br_vring $q poll_completions)
		note "vring $q: $(br_vring $q requests) requests, $(br_vring $q kicks) kicks, $(br_vring $q poll_hits) poll hits, $pc completed while polling"
		((pc > 0)) || fail "vring $q: no request completed while polling" || return
	done
	br_stop || return
	# The same scenario without the option: nothing polls.
	br_start br-nobp --backend /dev/ram0 --queues 2 --workers one || return
	vub --backend-size $((256 << 20)) --scenario io || return
	br_stats || return
	for q in 0 1; do
		pc=$(br_vring $q poll_completions)
		[[ $pc == 0 ]] || fail "vring $q: $pc requests completed polling without --busy-poll" || return
	done
	br_stop
}

desc_br_disconnect="the front end disconnects with I/O in flight, and is SIGKILLed mid-I/O: acknowledged data survives, nothing stays in flight, the next connection is served"
br_disconnect() {
	br_ram_vub br-disc --scenario disconnect && br_stop
}

desc_br_malformed="malformed vhost-user messages (sizes, indices, ring sizes and addresses, memory tables, fds, features, flags, unknown requests, oversized payloads, half messages): each refused or the connection closed, the bridge keeps serving and leaks no fd"
br_malformed() {
	br_ram_vub br-mal --scenario malformed || return
	local errors
	br_stats || return
	errors=$(br_get errors)
	note "the bridge refused $errors messages"
	((errors >= 20)) || fail "only $errors messages counted as refused" || return
	br_stop
}

desc_br_readonly="--readonly on one worker: RO offered, reads match the device, writes, discards and write-zeroes fail"
br_readonly() {
	vhost_blk_load || return
	br_start br-ro --backend /dev/ram0 --queues 2 --readonly --workers one || return
	vub --expect-workers one --backend-file /dev/ram0 --scenario readonly || return
	br_stop
}

desc_br_file="a raw image file on ext4 as backend: the front end's I/O, restart and disconnect scenarios"
br_file() {
	vhost_blk_load || return
	ext4_on /dev/ram1 $BR_MNT || return
	truncate -s 64M $BR_MNT/disk.img || return
	br_start br-file --backend $BR_MNT/disk.img --queues 2 || return
	vub --backend-size $((64 << 20)) --scenario io restart disconnect || return
	br_stop
}

desc_br_failing="a backend that fails (null_blk with bad blocks): IOERR for those sectors only, the disk and the bridge keep working"
br_failing() {
	vhost_blk_load || return
	local nb=/sys/kernel/config/nullb/brfail
	mountpoint -q /sys/kernel/config || mount -t configfs configfs /sys/kernel/config || return
	if [[ ! -d $nb ]]; then
		mkdir $nb || fail "cannot create a null_blk through configfs" || return
		echo 64 >$nb/size && echo 1 >$nb/memory_backed && echo 2 >$nb/submit_queues &&
			echo "+100000-100007" >$nb/badblocks && echo 1 >$nb/power ||
			fail "cannot configure the null_blk" || return
		udevadm settle 2>/dev/null || true
	fi
	[[ -b /dev/brfail ]] || fail "no /dev/brfail" || return
	br_start br-fail --backend /dev/brfail --queues 2 || return
	vub --bad-sector 100000 --scenario failing || return
	br_stop
}

# Second-level guests: the host's QEMU boots our guest kernel inside this
# guest (TCG inside TCG) with a 2-queue vhost-user-blk disk on the bridge.
# Their root is the archive vm/initramfs.sh made on the host, read from this
# guest's memory: booted from the host's root instead, they read every file
# through two 9p layers and took minutes to start fio. Each one's run
# directory (console.log, output, qemu.log, status, dmesg, fio's output,
# vm.sh's output in vm.out, the bridge's log and counters) is nested/NAME in
# this boot's run directory, which the host keeps.
BR_NEST=/run/vstor/nested
BR_INITRAMFS=${BUILD:-$TOP/build}/initramfs/nested-${KBASE:-6.12}-guest.cpio
# Limits of the steps, in seconds: 3 to 4 times the longest each took in
# four runs on the 2-core build machine (in brackets; FIO and END with 8 MiB
# per job then, 2 MiB now), so that a slower or busier host passes and a
# hang fails its step, with the logs. br_nested needs at most their sum
# (21 min). On the debug kernel every limit is multiplied as the tests'
# timeouts are (VSTOR_TIMEOUT_SCALE, 3): the first-level guest's QEMU, its
# vhost-user messages and vhost-blk's path all run on a KASAN kernel, and
# in the 2026-12-04 debug run the second-level guest's fio verify was still
# going after 360 s.
br_scale=${VSTOR_TIMEOUT_SCALE:-1}
BR_T_UP=$((450 * br_scale))       # vm.sh started -> the guest's init loaded virtio_blk, "ready" (75-129 s)
BR_T_FIO=$((360 * br_scale))      # "go" -> fio verify done in the guest, "done" (52-91 s)
BR_T_RECONNECT=$((60 * br_scale)) # restarted bridge up -> QEMU runs the device on it again (1 s)
BR_T_END=$((240 * br_scale))      # "go2" -> the guest read the data back, "verified" (32-52 s)
BR_T_LOAD=$((120 * br_scale))     # "verified" -> 500 more requests through vhost-blk (15-31 s)
BR_T_GONE=$((30 * br_scale))      # QEMU SIGKILLed -> vm.sh done, the bridge noticed (1 s each)

# br_inner NAME MODE CHARDEV-OPTS TIMEOUT: boot a second-level guest in the
# background running tests/guest/inner-blk.sh MODE with a 2-queue
# vhost-user-blk disk on the bridge at BR_SOCK (CHARDEV-OPTS appended to
# its chardev), killed after TIMEOUT s; sets BR_VDIR (its run directory,
# BR_NEST/NAME) and BR_VPID (vm.sh's pid).
br_inner() {
	BR_VDIR=$BR_NEST/$1
	rm -rf "$BR_VDIR"
	mkdir -p "$BR_VDIR"
	"$TOP/vm/vm.sh" --keep "$BR_VDIR" --initramfs "$BR_INITRAMFS" --minimal --cpus 2 --mem 512M \
		--shared-mem --no-disk --timeout "$4" \
		--qemu -chardev --qemu "socket,id=vb0,path=$BR_SOCK$3" \
		--qemu -device --qemu "vhost-user-blk-pci,chardev=vb0,num-queues=2" \
		-- "$TOP/tests/guest/inner-blk.sh" "$2" >"$BR_VDIR/vm.out" 2>&1 &
	BR_VPID=$!
}

# br_step STEP LIMIT COMMAND...: run COMMAND every 0.2 s until it succeeds,
# for up to LIMIT s, and note how long STEP took. Fails naming STEP when
# the time is up, when the second-level guest ends first (unless BR_VPID is
# empty), or at once when COMMAND returns 2 (it printed why).
br_step() {
	local step=$1 limit=$2 t0=$SECONDS rc sampled=$SECONDS
	shift 2
	while :; do
		if [[ -n $BR_VPID ]] && ((SECONDS - sampled >= 10)); then
			br_sample
			sampled=$SECONDS
		fi
		"$@"
		rc=$?
		((rc == 0)) && break
		((rc == 2)) && { fail "$step"; return; }
		if [[ -n $BR_VPID ]] && ! kill -0 "$BR_VPID" 2>/dev/null; then
			fail "$step: the second-level guest ended after $((SECONDS - t0)) s"
			return
		fi
		((SECONDS - t0 < limit)) || { fail "$step: not done after $limit s"; return; }
		sleep 0.2
	done
	note "$step: $((SECONDS - t0)) s (limit $limit s)"
}

# Conditions for br_step.
br_have() { [[ -e $BR_VDIR/$1 ]]; }
br_gone() { ! kill -0 "$1" 2>/dev/null; }
br_running() { # the bridge's kernel device runs (QEMU connected, driver up)
	br_stats || return 2
	[[ $(br_get running) == 1 ]]
}
br_loaded() { # br_loaded N: more than N + 500 requests on the vrings
	br_stats || return 2
	(($(br_vring 0 requests) + $(br_vring 1 requests) > $1 + 500))
}

# br_sample: one line of BR_VDIR/timeline.txt, every 10 s of a step with
# the second-level guest running: this guest's uptime and load, the CPU
# time (ticks) of the second-level guest's QEMU and of the bridge, and the
# last time stamp in the second-level guest's console (which also stands
# still while that guest prints nothing, as during fio). QEMU's ticks
# standing still is QEMU blocked; a boot whose console creeps while they
# grow is a guest running slowly (in one run under a loaded host, 382 s
# to "ready" where 93 s is usual).
br_sample() {
	local qpid ticks=- bticks=-
	qpid=$(pgrep -f "^qemu-system-x86_64 .*path=$BR_SOCK" | head -n 1)
	[[ -n $qpid ]] && ticks=$(sed 's/.*) //' "/proc/$qpid/stat" 2>/dev/null | awk '{ print $12 + $13 }')
	bticks=$(sed 's/.*) //' "/proc/$BR_PID/stat" 2>/dev/null | awk '{ print $12 + $13 }')
	echo "up $(cut -d' ' -f1 /proc/uptime) load $(cut -d' ' -f1-3 /proc/loadavg)" \
		"qemu ${ticks:--} bridge ${bticks:--}" \
		"console $(grep -o '^\[ *[0-9]*\.[0-9]*\]' "$BR_VDIR/console.log" 2>/dev/null | tail -n 1)" \
		>>"$BR_VDIR/timeline.txt"
}

# br_inner_diag: what a stuck or slow second-level guest was doing, in
# BR_VDIR/diag.txt and on the output: this guest's load and busiest
# processes, each thread of the second-level guest's QEMU (state, kernel
# wait channel, CPU time: a thread asleep in a unix socket read, often the
# vCPU that started the device, with the others waiting for the global
# lock, is QEMU waiting for a vhost-user reply), whether QEMU's monitor
# answers (it needs that lock), the bridge's state and last messages, the
# timeline br_sample kept, and the kernel problems of both guests.
br_inner_diag() {
	local qpid t req=$BR_VDIR/qmp/diag.req i
	qpid=$(pgrep -f "^qemu-system-x86_64 .*path=$BR_SOCK" | head -n 1)
	{
		echo "load: $(cat /proc/loadavg)"
		echo "busiest processes (CPU time):"
		ps -eo pid,stat,time,comm --sort=-time | head -n 8 | sed 's/^/  /'
		if [[ -n $qpid ]]; then
			echo "QEMU $qpid threads (name, state, utime+stime ticks, wait channel):"
			for t in /proc/"$qpid"/task/*; do
				# stat's fields after the name, which may hold spaces:
				# state, then utime and stime 11 and 12 fields on.
				printf '  %-16s %-12s %s\n' "$(cat "$t/comm")" \
					"$(sed 's/.*) //' "$t/stat" | awk '{ print $1, $12 + $13 }')" \
					"$(cat "$t/wchan" 2>/dev/null)"
			done 2>/dev/null
			echo '{"execute": "query-status"}' >"$req.tmp" && mv "$req.tmp" "$req"
			for ((i = 0; i < 200; i++)); do
				[[ -e ${req%.req}.resp ]] && break
				sleep 0.2
			done
			echo "QEMU's monitor (query-status): $(cat "${req%.req}.resp" 2>/dev/null ||
				echo "no answer in 40 s: its main loop is blocked")"
		else
			echo "no QEMU for $BR_SOCK"
		fi
		echo "the bridge ($BR_PID): state $(sed 's/.*) //' "/proc/$BR_PID/stat" 2>/dev/null |
			awk '{ print $1 }'), wait channel $(cat "/proc/$BR_PID/wchan" 2>/dev/null)"
		echo "the bridge's log, last lines:"
		tail -n 15 "$BR_LOG" 2>/dev/null | sed 's/^/  /'
		echo "every 10 s ($BR_VDIR/timeline.txt), the last minutes:"
		tail -n 12 "$BR_VDIR/timeline.txt" 2>/dev/null | sed 's/^/  /'
		echo "this guest's kernel problems:"
		dmesg | grep -E -A 3 "$KLOG_BAD|rcu_.* kthread" | head -n 12 | sed 's/^/  /' | grep . || echo "  none"
		echo "the second-level guest's first kernel problem:"
		grep -m 1 -E -B 4 -A 30 "$KLOG_BAD|rcu_.* kthread" "$BR_VDIR/console.log" | sed 's/^/  /' |
			grep . || echo "  none"
	} 2>&1 | tee "$BR_VDIR/diag.txt"
}

# br_inner_end RC: after a test with a second-level guest: stop the guest
# if it still runs (vm.sh stops QEMU on SIGTERM and keeps the logs), keep
# the bridge's log with them, and on failure show the end of its console
# and output, say where they are and stop the bridge. Returns RC.
br_inner_end() {
	# A failed step with the second-level guest still running: look at it
	# before stopping it.
	(($1)) && [[ -n ${BR_VPID:-} ]] && kill -0 "$BR_VPID" 2>/dev/null && br_inner_diag
	if [[ -n ${BR_VPID:-} ]] && kill -0 "$BR_VPID" 2>/dev/null; then
		kill -TERM "$BR_VPID"
		wait "$BR_VPID"
	fi
	BR_VPID=""
	[[ -n ${BR_VDIR:-} && -d $BR_VDIR ]] || return "$1"
	cp "$BR_LOG" "$BR_VDIR/bridge.log" 2>/dev/null
	(($1)) || return 0
	echo "second-level guest console, last lines:"
	tail -n 12 "$BR_VDIR/console.log" 2>/dev/null | sed 's/^/  /'
	echo "vm.sh and the second-level guest's output, last lines:"
	tail -n 12 "$BR_VDIR/vm.out" 2>/dev/null | sed 's/^/  /'
	echo "logs of the second-level guest: $BR_VDIR, on the host $(cat /run/vstor/hostpath 2>/dev/null ||
		echo "this boot's run directory")/${BR_VDIR#/run/vstor/}"
	if kill -0 "$BR_PID" 2>/dev/null; then
		kill -TERM "$BR_PID"
		wait "$BR_PID"
	fi
	return "$1"
}

desc_br_nested="QEMU (vhost-user-blk-pci, 2 queues) boots a second-level guest on the bridge: fio verify passes on both queues, the I/O moves vhost-blk's counters and not the bridge's messages or CPU time; the bridge restarts, QEMU reconnects and the data reads back intact; then QEMU is SIGKILLed mid-I/O: the bridge drains, survives, and serves a new connection"
br_nested() {
	local rc=0
	br_nested_run || rc=1
	br_inner_end $rc
}
br_nested_run() {
	vhost_blk_load || return
	# --verbose: the bridge logs each vhost-user message, so that a stuck
	# start shows the last one QEMU sent (br_inner_diag).
	br_start br-nested --backend /dev/ram0 --queues 2 --verbose || return
	local d before after
	# QEMU 9.2 renamed the chardev's reconnect (seconds) to reconnect-ms;
	# 11.1 no longer takes the old name, 7.2 does not know the new one.
	local qv reconnect=,reconnect=1
	qv=$(qemu_version) || return
	((qv < 902)) || reconnect=,reconnect-ms=1000
	br_inner br-nested verify "$reconnect" \
		$((BR_T_UP + BR_T_FIO + BR_T_RECONNECT + BR_T_END + BR_T_LOAD + BR_T_GONE + 60))
	d=$BR_VDIR before=$BR_VDIR/stats-before after=$BR_VDIR/stats-after
	br_step "boot: QEMU start to the second-level guest's init with virtio_blk loaded" \
		$BR_T_UP br_have ready || return
	br_stats || return
	cp "$BR_STATS" "$before"
	: >"$d/go"
	local t_fio=$SECONDS
	br_step "fio verify in the second-level guest" $BR_T_FIO br_have "done" || return
	t_fio=$((SECONDS - t_fio))
	br_stats || return
	cp "$BR_STATS" "$after"
	[[ $(cat "$d/done") == 0 ]] || fail "fio verify failed in the second-level guest" || return
	# Restart the bridge under the running VMM: SIGTERM drains, QEMU
	# (reconnecting after 1 s) connects to the new one and starts the
	# device again.
	cp "$BR_LOG" "$d/bridge-first.log"
	br_stop || return
	br_start br-nested --backend /dev/ram0 --queues 2 --verbose || return
	br_step "reconnect: QEMU runs the device on the restarted bridge" \
		$BR_T_RECONNECT br_running || return
	: >"$d/go2"
	br_step "read back after the reconnect" $BR_T_END br_have verified || return
	sed 's/^/  /' "$d/vm.out" | grep -v '^  \[' | tail -n 20
	[[ $(cat "$d/verified") == 0 ]] || fail "the data did not read back intact after the reconnect" || return

	local q req0 req1 wb m0 m1 c0 c1 limit
	for q in 0 1; do
		req0=$(br_vring $q requests "$before")
		req1=$(br_vring $q requests "$after")
		wb=$(($(br_vring $q write_bytes "$after") - $(br_vring $q write_bytes "$before")))
		note "vring $q: $((req1 - req0)) requests, $((wb >> 10)) KiB written through vhost-blk during fio, worker $(br_vring $q worker "$after")"
		# 512 4 KiB writes and as many verify reads per job and queue.
		((req1 - req0 >= 1024)) || fail "vring $q served $((req1 - req0)) requests, want >= 1024" || return
		((wb >= 2 << 20)) || fail "vring $q wrote $wb bytes, want >= 2 MiB" || return
	done
	[[ $(br_vring 0 worker "$after") != "$(br_vring 1 worker "$after")" ]] ||
		fail "both vrings on one worker with --workers per-queue" || return
	m0=$(br_get messages "$before") m1=$(br_get messages "$after")
	c0=$(br_get cpu_us "$before") c1=$(br_get cpu_us "$after")
	note "bridge during fio: $((m1 - m0)) vhost-user messages, $(((c1 - c0) / 1000)) ms of CPU in its main thread"
	expect_eq "vhost-user messages during the I/O" $((m1 - m0)) 0 || return
	# Stats writes and timers: about 50 ms in the 40-60 s the window lasts
	# on the guest kernel, 56 ms in 207 s on the debug kernel; the data
	# path would cost seconds. So 50 ms, or 1 ms per second of the window.
	limit=$((t_fio > 50 ? t_fio : 50))
	((c1 - c0 < limit * 1000)) ||
		fail "the bridge's main thread used $(((c1 - c0) / 1000)) ms during the I/O ($t_fio s), limit $limit ms" || return
	br_nested_kill
}

# br_nested_kill: the second-level guest writes at random after its read back;
# SIGKILL its QEMU mid-I/O. The bridge must drain, survive, and serve a new
# front end.
br_nested_kill() {
	local qpid vpid n0
	br_stats || return
	n0=$(($(br_vring 0 requests) + $(br_vring 1 requests)))
	br_step "load: 500 requests through vhost-blk" $BR_T_LOAD br_loaded "$n0" || return
	qpid=$(pgrep -f "^qemu-system-x86_64 .*path=$BR_SOCK") || { fail "no QEMU for $BR_SOCK"; return; }
	note "killing QEMU (pid $qpid) with $(br_vring 0 inflight)+$(br_vring 1 inflight) requests in flight after $(($(br_vring 0 requests) + $(br_vring 1 requests)))"
	kill -9 "$qpid"
	# BR_VPID stays set for br_inner_end if vm.sh outlives the step, but
	# not during it: here the guest's end is what the step waits for.
	vpid=$BR_VPID
	BR_VPID="" br_step "QEMU gone" $BR_T_GONE br_gone "$vpid" || return
	wait "$vpid"
	BR_VPID=""
	# vm.sh checks a guest's kernel log only when the guest powers off.
	if grep -Eq "$KLOG_BAD" "$BR_VDIR/console.log"; then
		grep -E -B2 -A20 "$KLOG_BAD" "$BR_VDIR/console.log" | head -n 40
		fail "the second-level guest's kernel reported a problem"
		return
	fi
	br_step "the bridge notices the VMM's death" $BR_T_GONE grep -q "connection closed" "$BR_LOG" || return
	kill -0 "$BR_PID" 2>/dev/null || fail "the bridge died with its VMM" || return
	br_stats || return
	expect_eq "kernel device after the disconnect (running)" "$(br_get running)" 0 || return
	expect_eq "requests in flight" "$(($(br_vring 0 inflight) + $(br_vring 1 inflight)))" 0 || return
	# Reconnect: a new front end gets a working device.
	vub --scenario io || return
	br_stop
}

desc_br_unload="after all of the above, vhost_blk unloads (no device or backend reference leaked)"
br_unload() {
	mountpoint -q $BR_MNT && umount $BR_MNT
	[[ -d /sys/kernel/config/nullb/brfail ]] && echo 0 >/sys/kernel/config/nullb/brfail/power &&
		rmdir /sys/kernel/config/nullb/brfail
	pgrep -f "^$BRIDGE " && { fail "a bridge is still running"; return; }
	vmodprobe -r vhost_blk || fail "cannot unload vhost_blk"
}

TESTS=(br_cli br_statsfile br_sandbox br_io br_busy_poll br_disconnect br_malformed br_readonly br_file br_failing br_nested br_unload)
