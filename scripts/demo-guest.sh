#!/usr/bin/env bash
# The guest half of `make demo` (scripts/demo.sh boots the guest and runs
# this in it): five short sections, each measured here and now.
#
# The boot: 2 vCPUs, virtio_blk.num_poll_queues=1, a sparse-file disk
# (serial vstor0) and a QEMU null-co disk (vstor1) of two queues each, a
# virtio-fs device "demo" with two request queues served by tools/vufsd on
# the host (its counters in /run/vstor/fs-demo.stats), a brd RAM disk
# /dev/ram0 and the vhost_blk module.
#
#   scripts/demo-guest.sh [RUNTIME]     RUNTIME: seconds per fio or
#                                       vhost-blk run (default 3)
#
# Besides what it prints it leaves, for the host, one summary line per
# section in /run/vstor/summary, "N MS NAME" per section (its number, time
# and short name) in /run/vstor/timings and the guest's uptime at the start
# in /run/vstor/uptime. The first step that does not work ends it with a
# non-zero status and a "demo: FAILED in section N" line; a section's table
# is printed only once all of its numbers are in.
#
# Under TCG every fork and exec costs tens of milliseconds (whole seconds on
# a busy host), so the helpers here read sysfs, /proc/interrupts and the
# tools' output with bash builtins instead of cat, awk and sed, and one
# python reads all of a section's fio results.
set -Eeuo pipefail
shopt -s inherit_errexit
TOP=$(cd "${0%/*}/.." && pwd)
# shellcheck source=SCRIPTDIR/lib.sh
. "$TOP/scripts/lib.sh"

rt=${1:-3}
RUN=/run/vstor
FIO=$BUILD/fio/fio
TOOLS=$BUILD/tools
STATSFILE=$TOP/tools/statsfile.py
FS_TAG=demo
FS_MNT=/tmp/demo-fs
FS_STATS=$RUN/fs-$FS_TAG.stats
SUMMARY=$RUN/summary
TIMINGS=$RUN/timings
: >"$SUMMARY"
: >"$TIMINGS"
rm -f /tmp/demo-failed

# ---- failing loudly ----

where="start-up"
# The first failure reports itself; the callers it unwinds through stay
# quiet (the marker file), so a failure prints one message.
failed() {
	if [[ ! -e /tmp/demo-failed ]]; then
		: >/tmp/demo-failed
		printf '\ndemo: FAILED in %s: "%s" exited %d (%s line %d)\n' \
			"$where" "$3" "$1" "${0##*/}" "$2" >&2
	fi
	exit "$1"
}
trap 'failed $? $LINENO "$BASH_COMMAND"' ERR

# bad MESSAGE: a check failed.
bad() {
	if [[ ! -e /tmp/demo-failed ]]; then
		: >/tmp/demo-failed
		printf '\ndemo: FAILED in %s: %s\n' "$where" "$*" >&2
	fi
	exit 1
}

# ---- fork-free helpers: each leaves its result in REPLY ----

# rd FILE: FILE's first line.
rd() {
	REPLY=""
	IFS= read -r <"$1" || [[ -n $REPLY ]] || bad "cannot read $1"
}

now_us() { REPLY=${EPOCHREALTIME/./}; }

# dec NUM DEN DIGITS: NUM / DEN (integers) as a decimal with DIGITS (1-3)
# places, rounded.
dec() {
	local scale=$((10 ** $3)) q
	q=$((($1 * scale + $2 / 2) / $2))
	printf -v REPLY "%d.%0${3}d" $((q / scale)) $((q % scale))
}

# tenths X: X ("980.4", one decimal place, or an integer) in tenths.
tenths() {
	if [[ $1 == *.* ]]; then
		REPLY=$((10#${1%.*} * 10 + 10#${1#*.}))
	else
		REPLY=$((10#$1 * 10))
	fi
}

# ratio A B: A / B to two places (A and B as tenths takes them).
ratio() {
	local a
	tenths "$1"
	a=$REPLY
	tenths "$2"
	dec "$a" "$REPLY" 2
}

# fields TEXT: the key=value words of TEXT into the associative FIELDS.
declare -A FIELDS
fields() {
	local w
	FIELDS=()
	for w in $1; do
		if [[ $w == *=* ]]; then FIELDS[${w%%=*}]=${w#*=}; fi
	done
}

# disk_of SERIAL: the virtio-blk disk (vda, ...) with this serial.
disk_of() {
	local s
	for s in /sys/block/vd*; do
		rd "$s/serial"
		if [[ $REPLY == "$1" ]]; then
			REPLY=${s##*/}
			return 0
		fi
	done
	bad "no virtio-blk disk with serial $1"
}

# virtio_of DISK: the virtio device (virtio2, ...) behind a disk.
virtio_of() {
	local v
	for v in /sys/bus/virtio/devices/virtio*; do
		if [[ -e $v/block/$1 ]]; then
			REPLY=${v##*/}
			return 0
		fi
	done
	bad "no virtio device for $1"
}

# hctx_types DISK: the disk's hctx types, in hctx order.
hctx_types() {
	local n=0 out=()
	while [[ -e /sys/kernel/debug/block/$1/hctx$n/type ]]; do
		rd "/sys/kernel/debug/block/$1/hctx$n/type"
		out+=("$REPLY")
		n=$((n + 1))
	done
	REPLY=${out[*]}
}

# irq_count REGEX: interrupts taken so far by the IRQ lines whose name
# matches REGEX, over all CPUs.
irq_count() {
	local f i n=0
	while read -ra f; do
		[[ ${f[0]} == *: && ${f[-1]} =~ $1 ]] || continue
		for ((i = 1; i <= ncpu; i++)); do
			n=$((n + f[i]))
		done
	done </proc/interrupts
	REPLY=$n
}

# irq_lines VIRTIO-DEV: the names of the device's IRQ lines.
irq_lines() {
	local f out=()
	while read -ra f; do
		if [[ ${f[0]} == *: && ${f[-1]} == "$1"-* ]]; then out+=("${f[-1]}"); fi
	done </proc/interrupts
	REPLY=${out[*]}
}

# cpu_list LIST: a CPU list ("0-2, 5") as "0 1 2 5".
cpu_list() {
	local part a out=()
	for part in ${1//,/ }; do
		[[ $part =~ ^([0-9]+)(-([0-9]+))?$ ]] || bad "cannot read the CPU list '$1'"
		for ((a = BASH_REMATCH[1]; a <= ${BASH_REMATCH[3]:-${BASH_REMATCH[1]}}; a++)); do
			out+=("$a")
		done
	done
	REPLY=${out[*]}
}

# ---- sections ----

sec_n=0 sec_title="" sec_t0=0

# section NAME TITLE BY-HAND: close the previous section, open the next.
section() {
	sec_end
	sec_n=$((sec_n + 1)) sec_title=$1
	where="section $sec_n ($1)"
	printf '\n== %d/5 %s\n   by hand: %s\n\n' "$sec_n" "$2" "$3"
	now_us
	sec_t0=$REPLY
}

# sec_end: the kernel has logged nothing bad so far; record the section's
# time.
sec_end() {
	((sec_n)) || return 0
	local log
	log=$(dmesg)
	if [[ $log =~ $KLOG_BAD ]]; then
		grep -E -B2 -A20 "$KLOG_BAD" <<<"$log" | head -n 60 >&2
		bad "the kernel logged a problem (above)"
	fi
	now_us
	echo "$sec_n $(((REPLY - sec_t0) / 1000)) $sec_title" >>"$TIMINGS"
}

summary() { echo "$*" >>"$SUMMARY"; }

# ---- fio ----

# fio_run LABEL FILE QD HIPRI ENGINE-ARGS...: one RUNTIME-second 4k random
# read run into /tmp/demo-LABEL.json, no ramp, so that the interrupts
# counted around it (irqs[LABEL]: the request queues of virtio device $vn,
# from /proc/interrupts) and its I/O count cover the same time.
declare -A irqs iops lat ipio
fio_run() {
	local label=$1 file=$2 qd=$3 hipri=$4 before
	shift 4
	irq_count "^$vn-req"
	before=$REPLY
	if ! "$FIO" --output-format=json --output="/tmp/demo-$label.json" \
		--name=demo --filename="$file" "$@" --hipri="$hipri" --rw=randread \
		--bs=4k --iodepth="$qd" --time_based --runtime="$rt" --size=1G \
		>"/tmp/demo-$label.log" 2>&1; then
		cat "/tmp/demo-$label.log" >&2
		bad "fio on $file failed (above)"
	fi
	irq_count "^$vn-req"
	irqs[$label]=$((REPLY - before))
}

# fio_read LABEL...: iops, lat (mean, us) and ipio (interrupts per I/O) of
# each run, from all of the runs' JSON by one python.
fio_read() {
	local args=() label out a b c
	for label; do
		args+=("$label" "${irqs[$label]}")
	done
	out=$(/usr/bin/python3 -S - "${args[@]}" <<'PY'
import json, sys
a = sys.argv[1:]
for label, irqs in zip(a[0::2], a[1::2]):
    r = json.load(open("/tmp/demo-%s.json" % label))["jobs"][0]["read"]
    n = r["total_ios"]
    print(label, int(r["iops"]), "%.1f" % (r["lat_ns"]["mean"] / 1000),
          "%.3f" % (int(irqs) / n) if n else "-")
PY
)
	while read -r label a b c; do
		[[ $c != - ]] || bad "fio run $label did no I/O"
		iops[$label]=$a lat[$label]=$b ipio[$label]=$c
	done <<<"$out"
}

# ==== start ====

read -r up _ </proc/uptime
echo "$up" >"$RUN/uptime"
ncpu=$(nproc)
disk_of vstor0
df=$REPLY
disk_of vstor1
dn=$REPLY
accel=TCG
klog=$(dmesg)
[[ $klog != *"Hypervisor detected: KVM"* ]] || accel=KVM

# ==== 1: poll queues ====

section "poll queues" "poll queues: the guest booted with virtio_blk.num_poll_queues=1; /sys/block/$df/num_poll_queues changes one disk's split at runtime" \
	"cat /sys/kernel/debug/block/$df/hctx*/type /sys/block/$df/queue/io_poll; echo 0 >/sys/block/$df/num_poll_queues"

rd /sys/module/virtio_blk/parameters/num_poll_queues
param=$REPLY
rows=()
for pair in "$df file" "$dn null-co"; do
	read -r d backend <<<"$pair"
	virtio_of "$d"
	v=$REPLY
	hctx_types "$d"
	types=$REPLY
	[[ $types == "default poll" ]] || bad "$d: hctx types [$types], want [default poll]"
	rd "/sys/block/$d/num_poll_queues"
	npq=$REPLY
	rd "/sys/block/$d/queue/io_poll"
	iop=$REPLY
	irq_lines "$v"
	lines=$REPLY
	printf -v row '%-5s %-8s %-8s %-17s %-7s %-8s %s' "$d" "$backend" "$v" "[$types]" "$npq" "$iop" "$lines"
	rows+=("$row")
done
attr=/sys/block/$df/num_poll_queues
virtio_of "$df"
vf=$REPLY
changes=()
ch_ms=()
for n in 0 1; do
	rd "$attr"
	from=$REPLY
	now_us
	t0=$REPLY
	printf '%s' "$n" >"$attr"
	now_us
	t1=$REPLY
	rd "$attr"
	[[ $REPLY == "$n" ]] || bad "$attr reads $REPLY after writing $n"
	hctx_types "$df"
	types=$REPLY
	want_types="default poll"
	((n)) || want_types="default default"
	[[ $types == "$want_types" ]] || bad "$df: hctx types [$types] at $n poll queues, want [$want_types]"
	dec $((t1 - t0)) 1000 1
	ms=$REPLY
	ch_ms+=("$ms")
	rd "/sys/block/$df/queue/io_poll"
	iop=$REPLY
	irq_lines "$vf"
	printf -v row '%-8s %7s   %-17s %-7s %s' "$from -> $n" "$ms" "[$types]" "$iop" "$REPLY"
	changes+=("$row")
done
echo "virtio_blk num_poll_queues=$param, $ncpu vCPUs ($accel), guest up $up s"
printf '%-5s %-8s %-8s %-17s %-7s %-8s %s\n' disk backend device "hctx types" "poll q" io_poll "IRQ lines"
printf '%s\n' "${rows[@]}"
echo
echo "echo N >$attr, timed around the write:"
printf '%-8s %7s   %-17s %-7s %s\n' change ms "hctx types after" io_poll "IRQ lines after"
printf '%s\n' "${changes[@]}"
echo "(a poll queue has no IRQ line: its completions are reaped by polling)"
summary "poll queues: both disks probed as [default poll] (num_poll_queues=1); $df switched 1->0->1 at runtime in ${ch_ms[0]} and ${ch_ms[1]} ms"

# ==== 2: hipri vs plain ====

virtio_of "$dn"
vn=$REPLY
section "hipri" "fio io_uring 4k random reads on /dev/$dn (null-co: no host I/O), plain (interrupts) vs hipri (polled on the poll queue), QD1 and QD16, $rt s each" \
	"fio --name=r --filename=/dev/$dn --ioengine=io_uring --direct=1 --rw=randread --bs=4k --iodepth=16 --hipri=1 --time_based --runtime=$rt"

labels=()
for qd in 1 16; do
	for hipri in 0 1; do
		fio_run "qd$qd-h$hipri" "/dev/$dn" "$qd" "$hipri" --ioengine=io_uring --direct=1
		labels+=("qd$qd-h$hipri")
	done
done
fio_read "${labels[@]}"
rows=()
x=()
for qd in 1 16; do
	p=qd$qd-h0 h=qd$qd-h1
	ratio "${iops[$h]}" "${iops[$p]}"
	x[qd]=$REPLY
	ratio "${lat[$h]}" "${lat[$p]}"
	lx=$REPLY
	printf -v row '%3d  %-6s %9d %9.1f %7d %9.3f' "$qd" plain "${iops[$p]}" "${lat[$p]}" "${irqs[$p]}" "${ipio[$p]}"
	rows+=("$row")
	printf -v row '%3d  %-6s %9d %9.1f %7d %9.3f  IOPS x%s, mean lat x%s' "$qd" hipri "${iops[$h]}" \
		"${lat[$h]}" "${irqs[$h]}" "${ipio[$h]}" "${x[qd]}" "$lx"
	rows+=("$row")
done
echo "$("$FIO" --version) (build/fio/fio) io_uring 4k random reads on /dev/$dn, $rt s each; irqs: interrupts of $vn's request queues during the run"
printf '%3s  %-6s %9s %9s %7s %9s  %s\n' QD mode IOPS "mean us" irqs irq/IO "hipri/plain"
printf '%s\n' "${rows[@]}"
if [[ $accel == TCG ]]; then
	echo "(TCG: every interrupt is emulated in software, and a polling vCPU competes with QEMU's I/O thread"
	echo " for the host's cores; compare ratios within one run; make bench has longer runs)"
fi
summary "hipri vs plain, io_uring 4k random reads on $dn: IOPS x${x[1]} at QD1, x${x[16]} at QD16; interrupts per I/O ${ipio[qd1-h0]} -> ${ipio[qd1-h1]} at QD1, ${ipio[qd16-h0]} -> ${ipio[qd16-h1]} at QD16"

# ==== 3: passthrough ====

section "passthrough" "io_uring passthrough: /dev/vblk/$dn (fio io_uring_cmd, cmd_type=vblk) beside /dev/$dn (io_uring), QD1, interrupt-driven and polled; GET_INFO" \
	"build/fio/fio --name=pt --filename=/dev/vblk/$dn --ioengine=io_uring_cmd --cmd_type=vblk --rw=randread --bs=4k --iodepth=1 --hipri=1; build/tools/vblk_pt -v /dev/vblk/$dn info"

[[ -c /dev/vblk/$dn ]] || bad "/dev/vblk/$dn is not a character device"
out=$("$TOOLS/vblk_pt" -v "/dev/vblk/$dn" info)
fields "${out%%$'\n'*}"
declare -A info=()
for k in ops flags capacity lbs max_segments nr_poll_queues; do
	[[ -n ${FIELDS[$k]:-} ]] || bad "GET_INFO gave no $k: $out"
	info[$k]=${FIELDS[$k]}
done
names=(get-info read write readv writev flush discard write-zeroes get-id)
opnames=()
for i in "${!names[@]}"; do
	if ((info[ops] & (1 << i))); then opnames+=("${names[i]}"); fi
done
fnames=()
for f in "0 read-only" "1 write-cache" "2 poll"; do
	read -r bit name <<<"$f"
	if ((info[flags] & (1 << bit))); then fnames+=("$name"); fi
done
labels=()
for hipri in 0 1; do
	fio_run "bdev-h$hipri" "/dev/$dn" 1 "$hipri" --ioengine=io_uring --direct=1
	fio_run "pt-h$hipri" "/dev/vblk/$dn" 1 "$hipri" --ioengine=io_uring_cmd --cmd_type=vblk
	labels+=("bdev-h$hipri" "pt-h$hipri")
done
fio_read "${labels[@]}"
rows=()
x=()
for hipri in 0 1; do
	mode=irq
	((hipri == 0)) || mode=poll
	b=bdev-h$hipri p=pt-h$hipri
	ratio "${iops[$p]}" "${iops[$b]}"
	x[hipri]=$REPLY
	ratio "${lat[$p]}" "${lat[$b]}"
	lx=$REPLY
	printf -v row '%-15s %-13s %-5s %9d %9.1f %9.3f' "/dev/$dn" io_uring "$mode" "${iops[$b]}" "${lat[$b]}" "${ipio[$b]}"
	rows+=("$row")
	printf -v row '%-15s %-13s %-5s %9d %9.1f %9.3f  IOPS x%s, mean lat x%s' "/dev/vblk/$dn" io_uring_cmd "$mode" \
		"${iops[$p]}" "${lat[$p]}" "${ipio[$p]}" "${x[hipri]}" "$lx"
	rows+=("$row")
done
echo "GET_INFO on /dev/vblk/$dn (uring_cmd): capacity ${info[capacity]} sectors of ${info[lbs]} bytes, max_segments ${info[max_segments]}, nr_poll_queues ${info[nr_poll_queues]}"
echo "  commands (ops ${info[ops]}): ${opnames[*]}"
echo "  flags (${info[flags]}): ${fnames[*]:-none}"
echo
echo "$("$FIO" --version) (build/fio/fio) 4k random reads at QD1, $rt s each:"
printf '%-15s %-13s %-5s %9s %9s %9s  %s\n' path engine mode IOPS "mean us" irq/IO "passthrough/block device"
printf '%s\n' "${rows[@]}"
summary "passthrough /dev/vblk/$dn vs /dev/$dn at QD1: IOPS x${x[0]} interrupt-driven, x${x[1]} polled (${ipio[pt-h1]} interrupts per I/O polled); GET_INFO: ${#opnames[@]} commands, flags ${fnames[*]:-none}"

# ==== 4: virtio-fs ====

# fs_stats KEY...: vufsd's counters by name (tools/statsfile.py), one per
# line, from a stats file the daemon wrote after this call (its seq moved
# on by two), so they cover every request completed before the call. The
# daemon rewrites the file in place: a read that catches it half written
# is tried again.
fs_stats() {
	local i line seq0="" out
	for ((i = 0; i < 100; i++)); do
		line=""
		IFS= read -r line <"$FS_STATS" || true
		if [[ $line =~ ^seq\ ([0-9]+)$ ]]; then
			if [[ -z $seq0 ]]; then
				seq0=${BASH_REMATCH[1]}
			elif ((BASH_REMATCH[1] >= seq0 + 2)) &&
				out=$(/usr/bin/python3 -S "$STATSFILE" "$FS_STATS" "$@" 2>&1); then
				printf '%s\n' "$out"
				return 0
			fi
		fi
		sleep 0.2
	done
	bad "cannot read vufsd's counters in $FS_STATS: ${out:-its seq did not move on from ${seq0:-nothing}}"
}

section "virtio-fs" "virtio-fs: the share \"$FS_TAG\" served by tools/vufsd with 2 request queues; each queue's CPUs; fio with a job pinned per vCPU; requests per queue by the daemon's counters" \
	"vm/vm.sh --virtiofs tag=$FS_TAG,queues=2 -- bash; mount -t virtiofs $FS_TAG /mnt; cat /sys/fs/virtiofs/*/mqs/*/cpu_list; tools/statsfile.py /run/vstor/fs-$FS_TAG.stats 'vq.*.requests'"

mkdir -p "$FS_MNT"
mount -t virtiofs "$FS_TAG" "$FS_MNT"
sys=""
for s in /sys/fs/virtiofs/*; do
	rd "$s/tag"
	if [[ $REPLY == "$FS_TAG" ]]; then sys=$s; fi
done
[[ -n $sys ]] || bad "no /sys/fs/virtiofs entry with tag $FS_TAG"
keys=(vq.0.requests vq.1.requests vq.2.requests vq.0.bytes_out vq.1.bytes_out vq.2.bytes_out)
common=(--name=demo --directory="$FS_MNT" --numjobs="$ncpu" --rw=randread --bs=4k
	--size=16M --direct=1 --ioengine=psync)
# Lay the files out first, so that the counted run is reads alone.
"$FIO" "${common[@]}" --create_only=1 >/tmp/demo-fs-lay.log 2>&1 ||
	{ cat /tmp/demo-fs-lay.log >&2; bad "fio could not lay out its files on $FS_MNT (above)"; }
out=$(fs_stats queues "${keys[@]}")
mapfile -t before <<<"$out"
nvq=${before[0]}
((nvq == 3)) || bad "vufsd serves $nvq vrings, want 3 (hiprio + 2 request queues)"
before=("${before[@]:1}")
"$FIO" "${common[@]}" --cpus_allowed="0-$((ncpu - 1))" --cpus_allowed_policy=split \
	--time_based --runtime="$rt" --output-format=json --output=/tmp/demo-fs.json \
	>/tmp/demo-fs.log 2>&1 || { cat /tmp/demo-fs.log >&2; bad "fio on $FS_MNT failed (above)"; }
out=$(fs_stats "${keys[@]}")
mapfile -t after <<<"$out"
qname=() qcpus=()
for ((q = 0; q < nvq; q++)); do
	[[ -d $sys/mqs/$q ]] || bad "no $sys/mqs/$q"
	rd "$sys/mqs/$q/name"
	qname[q]=$REPLY
	rd "$sys/mqs/$q/cpu_list"
	qcpus[q]=$REPLY
done
# Job k runs on CPU k (cpus_allowed_policy=split): "reads IOPS" per job.
out=$(/usr/bin/python3 -S -c '
import json, sys
for j in json.load(open(sys.argv[1]))["jobs"]:
    print(j["read"]["total_ios"], int(j["read"]["iops"]))' /tmp/demo-fs.json)
mapfile -t jobs <<<"$out"
((${#jobs[@]} == ncpu)) || bad "fio reported ${#jobs[@]} jobs, want $ncpu"
rows=()
spread=()
for ((q = 0; q < nvq; q++)); do
	req=$((after[q] - before[q]))
	dec $((after[q + 3] - before[q + 3])) 1048576 1
	mib=$REPLY
	who=() jios=""
	if ((q > 0)); then
		jios=0
		cpu_list "${qcpus[q]}"
		for c in $REPLY; do
			read -r ios jiops <<<"${jobs[c]}"
			who+=("job $c on CPU $c ($jiops IOPS)")
			jios=$((jios + ios))
		done
		((req > 0)) || bad "request queue ${qname[q]} (vq $q) got no requests"
		spread+=("${qname[q]} (CPU ${qcpus[q]}) $req requests")
	fi
	printf -v row '%-11s %-6s %-6s %9d %12s %9s  %s' "${qname[q]}" "${qcpus[q]}" "vq $q" "$req" "$mib" "$jios" "${who[*]}"
	rows+=("$row")
done
umount "$FS_MNT"
echo "fio psync 4k random reads, O_DIRECT, $ncpu jobs (one pinned per vCPU), $rt s; vufsd's counters before and after:"
printf '%-11s %-6s %-6s %9s %12s %9s  %s\n' queue CPUs daemon requests "MiB to guest" "fio reads" "fio jobs on those CPUs"
printf '%s\n' "${rows[@]}"
echo "(a request queue's requests are its jobs' reads plus a few file operations)"
printf -v sp '%s, ' "${spread[@]}"
summary "virtio-fs on vufsd with 2 request queues, a fio job pinned per vCPU: ${sp%, }"

# ==== 5: vhost-blk ====

section "vhost-blk" "vhost-blk: /dev/vhost-blk serves /dev/ram0 (brd) to vhost_blk_test, a userspace virtio-blk driver; 2 queues on 2 vhost workers, QD16 each, $rt s" \
	"modprobe vhost_blk; build/tools/vhost_blk_test --backend /dev/ram0 --mode bench --rw randread --queues 2 --workers 2 --qd 16 --time $rt"

[[ -c /dev/vhost-blk ]] || bad "no /dev/vhost-blk (the boot loads vhost_blk)"
[[ -b /dev/ram0 ]] || bad "no /dev/ram0 (brd.rd_nr=1 on the kernel command line)"
if ! out=$("$TOOLS/vhost_blk_test" --backend /dev/ram0 --mode bench --rw randread \
	--bs 4096 --queues 2 --workers 2 --qd 16 --time "$rt" 2>&1); then
	printf '%s\n' "$out" >&2
	bad "vhost_blk_test --mode bench failed (above)"
fi
declare -A vb=()
vr=()
while IFS= read -r line; do
	case $line in
	"vhost-blk bench: "*) fields "$line" ;;
	"vring "*" requests "*) vr+=("$line") ;;
	esac
done <<<"$out"
for k in ios iops secs lat_avg_us lat_p99_us; do
	[[ -n ${FIELDS[$k]:-} ]] || bad "no $k in vhost_blk_test's result: $out"
	vb[$k]=${FIELDS[$k]}
done
((vb[ios] > 0)) || bad "vhost_blk_test did no I/O: $out"
((${#vr[@]} == 2)) || bad "want the counters of 2 vrings, got: $out"
rows=()
sum=0
vreq=()
for l in "${vr[@]}"; do
	read -r _ i _ req _ err _ kicks _ worker <<<"$l"
	((req > 0)) || bad "vring $i served no requests"
	((err == 0)) || bad "vring $i counted $err errors"
	sum=$((sum + req))
	vreq+=("$req")
	printf -v row '%-6s %-7s %10d %8d %7d' "$i" "$worker" "$req" "$kicks" "$err"
	rows+=("$row")
done
((sum >= vb[ios])) || bad "the vrings counted $sum requests, the driver completed ${vb[ios]}"
rd /sys/block/ram0/size
echo "/dev/vhost-blk: $(stat -c '%F, mode %a' /dev/vhost-blk); backend /dev/ram0, $((REPLY / 2048)) MiB"
echo "vhost_blk_test: ${vb[ios]} reads in ${vb[secs]} s: ${vb[iops]} IOPS, mean ${vb[lat_avg_us]} us, p99 ${vb[lat_p99_us]} us"
echo "vhost-blk's own per-vring counters (the device's fdinfo):"
printf '%-6s %-7s %10s %8s %7s\n' vring worker requests kicks errors
printf '%s\n' "${rows[@]}"
summary "vhost-blk serving /dev/ram0: ${vb[iops]} IOPS, 4k random reads at QD16 on 2 vrings (${vreq[0]} and ${vreq[1]} requests by the device's counters)"

sec_end
where="the end"
