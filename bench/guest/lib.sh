# Helpers for the benchmarks' guest scripts (bench/guest/*.sh), on top of
# the test helpers (fio_json, fio_field, disk_by_serial, ...). Results go to
# the run directory the host keeps, /run/vstor in the guest (on the host
# build/results/RUN/logs/BENCH): CSV files with a header line, the fio JSON
# output of every run in fio/, and info.txt, the lines about the set-up that
# the report quotes.
# shellcheck shell=bash
. "$TOP/tests/guest/lib.sh"
OUT=/run/vstor
: >"$OUT/info.txt"

# info LINE...: print a line about the set-up and keep it for the report.
info() {
	echo "$*"
	echo "$*" >>"$OUT/info.txt"
}

# csv_open FILE HEADER: start FILE in OUT with its header line (column names,
# units in the names: iops, lat_mean_us, ...), and print the header.
csv_open() {
	echo "$2" >"$OUT/$1"
	echo "$2"
}

# csv_row FILE ROW: append a row to FILE in OUT and print it.
csv_row() {
	echo "$2" >>"$OUT/$1"
	echo "$2"
}

# keep_file FILE DIR/NAME: keep FILE as OUT/DIR/NAME; prints DIR/NAME, the
# path the CSV rows give.
keep_file() {
	mkdir -p "$OUT/${2%/*}"
	cp "$1" "$OUT/$2"
	echo "$2"
}

# vfs_mount TAG DIR: mount the virtio-fs device TAG on DIR and keep a line
# with its request queues and their CPUs for the report.
vfs_mount() {
	local tag=$1 sys="" d q line
	mkdir -p "$2"
	mount -t virtiofs "$tag" "$2" || return
	for d in /sys/fs/virtiofs/*/; do
		[[ $(cat "$d/tag") == "$tag" ]] && sys=$d
	done
	line=$(printf '== %-9s request queues:' "$tag")
	for q in "$sys"mqs/*; do
		[[ $(cat "$q/name") == requests.* ]] && line+=$(printf ' %s [%s]' "$(cat "$q/name")" "$(cat "$q/cpu_list")")
	done
	info "$line"
}

# nvme_by_serial SERIAL: the NVMe namespace (nvme0n1) with this serial.
nvme_by_serial() {
	local n
	for n in /sys/block/nvme*n*; do
		[[ $(tr -d ' ' <"$n/device/serial") == "$1" ]] && { basename "$n"; return 0; }
	done
	return 1
}

# Guest instructions per I/O (tools/insncount, Documentation/insncount.md).
# A benchmark's guest is booted a second time with the plugin (bench_vm with
# --insns 1, the default): then ic_on is true, and the guest script runs each
# configuration once per repetition as ic_window, counting a window inside
# the running job, and writes NAME-insns.csv instead of NAME.csv. IOPS come
# from the boot without the plugin, which slows TCG (Documentation/insncount.md).
IC_JSON=$OUT/insncount.json
IC_MARK=$TOOLS/insnmark
# The storage stack's code, as named ranges (insnranges.py specs): by
# default the block layer, io_uring, the virtio core and ring, virtio_blk
# and NVMe (core and PCI driver); a script may set IC_STACK to other names
# of IC_SPEC before ic_setup. A path's stack count is their sum: a path
# through one driver counts nothing in the other's.
declare -A IC_SPEC=([block]=dir:block [io_uring]=dir:io_uring [virtio]=dir:drivers/virtio
	[virtio_blk]=mod:virtio_blk [nvme]=dir:drivers/nvme [fuse]=dir:fs/fuse
	[vhost]=mod:vhost [vhost_blk]=mod:vhost_blk [drivers_block]=dir:drivers/block)
IC_STACK=(block io_uring virtio virtio_blk nvme)
IC_EXTRA=()
# Warm-up before a window and the window itself, seconds.
IC_WARM=${IC_WARM:-2} IC_SECS=${IC_SECS:-3}

ic_on() { [[ -e $IC_JSON ]]; }

# ic_syms SYM...: those of the text symbols that /proc/kallsyms lists, comma
# separated.
ic_syms() {
	awk -v want=" $* " '$2 ~ /^[tTwW]$/ && index(want, " " $3 " ") && !seen[$3]++ { printf "%s%s", n++ ? "," : "", $3 }' /proc/kallsyms
}

# ic_setup: load the ranges of IC_STACK, an entry counter
# "reqs" on blk_mq_start_request (each request a blk-mq driver issues, block
# and passthrough alike: the disk's stat counts no passthrough command),
# "irqs" on the interrupt handlers of virtio-blk's and virtio-fs's queues
# and NVMe's (not vring_interrupt, which the 9p root's queue runs too) and
# "polls" on the drivers' poll functions (each look at a poll queue), plus
# the NAME=SPECs of the array IC_EXTRA (insnranges.py), into the plugin;
# fail unless it took them. Call after the modules counted are loaded.
ic_setup() {
	local rec n irqs polls specs=()
	for n in "${IC_STACK[@]}"; do
		specs+=("$n=${IC_SPEC[$n]}")
	done
	# The handlers of the drivers this guest has loaded (virtio_blk is a
	# module).
	irqs=$(ic_syms virtblk_done virtio_fs_vq_done nvme_irq) polls=$(ic_syms virtblk_poll nvme_poll)
	[[ -z $irqs ]] || specs+=("irqs=entry:$irqs")
	[[ -z $polls ]] || specs+=("polls=entry:$polls")
	/usr/bin/python3 "$TOP/tools/insncount/insnranges.py" --obj "$(dirname "$MODROOT")" \
		"$OUT/insncount.ranges" "${specs[@]}" reqs=entry:blk_mq_start_request "${IC_EXTRA[@]}" >/dev/null
	"$IC_MARK" --reload
	rec=$(grep '"id":65535' "$IC_JSON" | tail -n 1 || true)
	[[ $rec == *'"loaded":'[1-9]* ]] || { echo "insncount: the ranges did not load: $rec"; return 1; }
	IC_NEXT=100
	info "insncount: guest instructions per I/O counted over ${IC_SECS}s windows after ${IC_WARM}s of warm-up, in a boot of their own; stack = ${IC_STACK[*]}"
}

# ic_setup_fuse: ic_setup for virtio-fs: the stack is FUSE and virtio-fs
# (fs/fuse) with the virtio core, the I/Os are FUSE requests ended
# ("freqs", fuse_request_end's calls).
ic_setup_fuse() {
	IC_STACK=(fuse virtio)
	IC_EXTRA=(freqs=entry:fuse_request_end)
	ic_setup
}

# ic_window DENOM CMD...: run CMD (a job that runs until stopped, for
# longer than the warm-up and the window) in the background, output in
# /tmp/icw.out; after IC_WARM seconds count IC_SECS seconds between two
# markers, then stop it: SIGINT, which fio and t/io_uring handle (they then
# print their summary, where an error shows), and SIGTERM after 5 s (a
# background job of a script ignores SIGINT unless it sets a handler, as
# vhost_blk_test does not). One insnmark process places a marker 1 s
# before the window and the window's two, so no program starts inside it;
# the job must have done I/O in that second (it is past its start-up) and
# must still run at the window's end. DENOM is the entry counter whose
# count in the window is the I/Os (reqs). Sets IC_ROW to
#   ios,stack_per_io,kernel_per_io,user_per_io,irqs_per_io,polls_per_io
# (the window's I/Os; instructions of the IC_STACK ranges, of the whole
# kernel and of user space, every vCPU, per I/O; interrupts and driver
# polls per I/O, nan where this guest has no such handler); IC_HDR names
# its columns. Fails when CMD failed, stopped early or did no I/O.
# shellcheck disable=SC2034 # read by the guest scripts
IC_HDR=ic_ios,insn_stack_per_io,insn_kernel_per_io,insn_user_per_io,ic_irqs_per_io,ic_polls_per_io
ic_window() {
	local denom=$1 a0=$IC_NEXT a=$((IC_NEXT + 1)) b=$((IC_NEXT + 2))
	shift
	IC_NEXT=$((IC_NEXT + 3))
	ic_start "$@"
	sleep $((IC_WARM - 1))
	"$IC_MARK" --seq "$a0" 1000 "$a" $((IC_SECS * 1000)) "$b"
	ic_stop || return
	ic_count "$denom" "$a0" "$a" "$b" || { cat /tmp/icw.out; return 1; }
}

# ic_start CMD...: run CMD in the background for a window (ic_window),
# output in /tmp/icw.out.
ic_start() {
	"$@" >/tmp/icw.out 2>&1 &
	IC_PID=$!
	IC_CMD=$1
}

# ic_stop: stop the job of ic_start at the end of its window; fail, with its
# output, unless it was still running and had no error.
ic_stop() {
	local k rc=0 alive=0
	kill -0 "$IC_PID" 2>/dev/null && alive=1
	kill -INT "$IC_PID" 2>/dev/null || true
	for ((k = 0; k < 50; k++)); do
		kill -0 "$IC_PID" 2>/dev/null || break
		sleep 0.1
	done
	kill -TERM "$IC_PID" 2>/dev/null || true
	wait "$IC_PID" || rc=$?
	# fio exits 128 on a signal, having written its summary; t/io_uring 0;
	# vhost_blk_test dies of the SIGTERM (143).
	if ((!alive)) || ((rc != 0 && rc != 128 && rc != 143)) ||
		grep -qE 'err= *[1-9]|unexpected ret' /tmp/icw.out; then
		cat /tmp/icw.out
		echo "ic_window: $IC_CMD failed (exit $rc$( ((alive)) || echo ", ended before the window did"))"
		return 1
	fi
}

# ic_count DENOM A0 A B: IC_ROW (see ic_window) for the window between
# markers A and B, whose I/Os are entry counter DENOM's count; A0 is a
# marker 1 s before A. Fails unless the job did I/O between A0 and A and
# between A and B.
ic_count() {
	local denom=$1 a0=$2 a=$3 b=$4 k v st=0 r out
	local -A c=()
	out=$(/usr/bin/python3 "$TOP/tools/insncount/insnstat.py" "$IC_JSON" "$a0" "$a") ||
		{ echo "$out"; return 1; }
	[[ $out == *"entry.$denom="[1-9]* ]] ||
		{ echo "ic_window: no I/O ($denom) in the second before the window: still starting?"; return 1; }
	out=$(/usr/bin/python3 "$TOP/tools/insncount/insnstat.py" "$IC_JSON" "$a" "$b") ||
		{ echo "$out"; return 1; }
	while IFS='=' read -r k v; do
		c[$k]=$v
	done <<<"$out"
	v=${c[entry.$denom]:-0}
	((v > 0)) || { echo "ic_window: no I/O ($denom) in the window"; return 1; }
	for r in "${IC_STACK[@]}"; do
		st=$((st + ${c[range.$r]:-0}))
	done
	# shellcheck disable=SC2034 # read by the guest scripts
	IC_ROW=$(awk -v n="$v" -v s="$st" -v k="${c[kernel]}" -v u="${c[user]}" \
		-v i="${c[entry.irqs]:-nan}" -v p="${c[entry.polls]:-nan}" '
		function per(x, f) { return x == "nan" ? "nan" : sprintf(f, x / n) }
		BEGIN { printf "%d,%.0f,%.0f,%.0f,%s,%s", n, s / n, k / n, u / n, per(i, "%.3f"), per(p, "%.2f") }')
}
