#!/usr/bin/env bash
# In a guest: fio rounds on virtio-blk disks that watch for a job that never
# finishes, the way the IRQ-path completion batching of Linux 6.3 hung
# (every request completed by the device, nothing in flight, fio stuck).
#
#   batch_rounds.sh [options] DISK...
#     --rounds N        rounds (default 20)
#     --runtime S       seconds of I/O per round (default 3)
#     --slack S         seconds without progress after the runtime before
#                       a round counts as hung (default 30): no disk
#                       completes a request and no fio job process uses
#                       CPU (polled rounds: no completion, as a polling
#                       job spins) while one is still alive. A slow
#                       kernel (the debug one) makes progress all along;
#                       the hang did not. A round still running 10 x S
#                       after its runtime fails as too slow.
#     --qd N            iodepth per job (default 128)
#     --jobs N          jobs per disk, each pinned to a CPU of its own in
#                       turn (default: the number of CPUs)
#     --engines "E..."  fio engines (default "libaio io_uring")
#     --affinity "A..." rq_affinity values (default "1 0 2")
#     --sched "S..."    I/O schedulers (default "none mq-deadline"); the
#                       rounds go through every combination of the three:
#                       the engine changes every round, the scheduler
#                       after each engine, rq_affinity after each pair
#     --hipri 0|1       polled I/O (io_uring rounds only; default 0)
#     --rw MODE         fio rw (default randread)
#     --out DIR         where the rounds' output and hang dumps go
#                       (default /tmp/batch-rounds)
#
# Each round prints one line: "round N: ENGINE affinity=A sched=S IOPS ...
# ok" or "... HUNG after S s" (S counted from the round's start). On a hang
# it dumps every hardware context's state, dispatch list, busy and tags
# (debugfs) and the disks' inflight counts into OUT/hang-N/, then writes
# "run" to each disk's debugfs state (blk_mq_run_hw_queues()) and says
# whether that let the round finish: if it does, the requests fio waited
# for were sitting on a dispatch list that nobody ran. An unrecovered hang
# ends the rounds. The last line is "rounds R, hangs H (recovered by a
# queue run: K)"; the exit status is 0 only if nothing hung.
set -uo pipefail

rounds=20 runtime=3 slack=30 qd=128 jobs=$(nproc) engines="libaio io_uring"
affinity="1 0 2" sched="none mq-deadline" hipri=0 rw=randread out=/tmp/batch-rounds
while (($#)); do
	case $1 in
	--rounds) rounds=$2 ;;
	--runtime) runtime=$2 ;;
	--slack) slack=$2 ;;
	--qd) qd=$2 ;;
	--jobs) jobs=$2 ;;
	--engines) engines=$2 ;;
	--affinity) affinity=$2 ;;
	--sched) sched=$2 ;;
	--hipri) hipri=$2 ;;
	--rw) rw=$2 ;;
	--out) out=$2 ;;
	--) shift; break ;;
	-*) echo "batch_rounds.sh: unknown option $1" >&2; exit 2 ;;
	*) break ;;
	esac
	shift 2
done
(($#)) || { echo "batch_rounds.sh: no disk given" >&2; exit 2; }
disks=("$@")
read -ra E <<<"$engines"
read -ra A <<<"$affinity"
read -ra S <<<"$sched"
mkdir -p "$out"
dbg=/sys/kernel/debug/block
[[ -d $dbg ]] || mount -t debugfs none /sys/kernel/debug 2>/dev/null

dump() { # dump DIR: the block layer's view of every disk
	local d h f
	mkdir -p "$1"
	for d in "${disks[@]}"; do
		{
			echo "== $d inflight $(cat "/sys/block/$d/inflight")"
			echo "== $d state: $(cat "$dbg/$d/state" 2>/dev/null)"
			for h in "$dbg/$d"/hctx*; do
				for f in state dispatch busy tags sched_tags dispatch_busy; do
					[[ -e $h/$f ]] || continue
					echo "-- ${h##*/}/$f"
					cat "$h/$f" 2>&1
				done
			done
		} >"$1/$d.txt" 2>&1
	done
	for f in /proc/[0-9]*/comm; do
		[[ $(cat "$f" 2>/dev/null) == fio ]] || continue
		f=${f%/comm}
		{ echo "== ${f##*/}"; cat "$f/wchan" 2>/dev/null; echo; cat "$f/stack" 2>/dev/null; } >>"$1/fio-tasks.txt"
	done
}

# A one-line summary of what the dispatch lists hold, for the round's line.
dispatch_summary() {
	local d h n=0 restart=0
	for d in "${disks[@]}"; do
		for h in "$dbg/$d"/hctx*; do
			# debugfs files have no size: count the lines.
			n=$((n + $(wc -l <"$h/dispatch")))
			grep -q SCHED_RESTART "$h/state" 2>/dev/null && restart=$((restart + 1))
		done
	done
	echo "requests on dispatch lists $n, hctxs with SCHED_RESTART $restart"
}

# progress PID HIPRI: a number that changes while fio (main process PID)
# makes progress: the requests the disks completed and, unless the round
# polls, the CPU ticks of fio's job processes (the main process is left
# out: its helper thread wakes every few hundred ms whatever the jobs do;
# a polling job spins while it waits, so its CPU says nothing). Prints
# nothing once no job process is left.
progress() {
	local d io=0 cpu=0 kid any=0 st line
	for d in "${disks[@]}"; do
		read -ra st <"/sys/block/$d/stat"
		io=$((io + st[0] + st[4]))
	done
	for kid in $(pgrep -P "$1" 2>/dev/null); do
		any=1
		(($2)) && continue
		line=$(cat "/proc/$kid/stat" 2>/dev/null) || continue
		read -ra st <<<"${line##*) }"
		# utime and stime: fields 14 and 15, 12 and 13 after "comm) ".
		cpu=$((cpu + st[11] + st[12]))
	done
	((any)) && echo "$io $cpu"
}

hangs=0 recovered=0 r=0 lost=0
for ((r = 1; r <= rounds; r++)); do
	# Every combination in turn: the engine changes every round, the
	# scheduler every engine cycle, rq_affinity every scheduler cycle.
	i=$((r - 1))
	eng=${E[i % ${#E[@]}]}
	sch=${S[(i / ${#E[@]}) % ${#S[@]}]}
	aff=${A[(i / (${#E[@]} * ${#S[@]})) % ${#A[@]}]}
	for d in "${disks[@]}"; do
		echo "$aff" >"/sys/block/$d/queue/rq_affinity"
		echo "$sch" >"/sys/block/$d/queue/scheduler" 2>/dev/null ||
			echo "round $r: $d has no scheduler $sch" >&2
	done
	args=(--ioengine="$eng" --direct=1 --rw="$rw" --bs=4k --iodepth="$qd"
		--iodepth_batch_submit=16 --iodepth_batch_complete_min=1
		--time_based --runtime="$runtime" --group_reporting
		--output-format=terse --terse-version=3)
	hp="" polled=0
	if ((hipri)) && [[ $eng == io_uring ]]; then args+=(--hipri=1); hp=" hipri" polled=1; fi
	j=0
	for d in "${disks[@]}"; do
		for ((k = 0; k < jobs; k++)); do
			args+=(--name="$d.$k" --filename="/dev/$d" --cpus_allowed=$((j % $(nproc))))
			j=$((j + 1))
		done
	done
	start=$SECONDS
	fio "${args[@]}" >"$out/round-$r.txt" 2>&1 &
	pid=$!
	# Wait while fio runs: past its runtime, until a job process has
	# made no progress for the slack, or the round the hard limit.
	# (Not looked at during the runtime: it takes CPU from fio.)
	last="" moved=$SECONDS stalled=0
	while kill -0 "$pid" 2>/dev/null; do
		if ((SECONDS - start > runtime)); then
			now=$(progress "$pid" "$polled")
			[[ $now != "$last" || -z $now ]] && moved=$SECONDS
			last=$now
			((SECONDS - moved < slack)) || { stalled=1; break; }
			((SECONDS - start < runtime + 10 * slack)) || break
		fi
		sleep 1
	done
	limit=$((SECONDS - start))
	what="$eng$hp affinity=$aff sched=$sch"
	if kill -0 "$pid" 2>/dev/null && ((!stalled)); then
		echo "round $r: $what still making progress after $limit s: too slow"
		dump "$out/slow-$r"
		pkill -KILL -P "$pid"
		kill -KILL "$pid"
		wait "$pid"
		echo "rounds $r, hangs $hangs (recovered by a queue run: $recovered), too slow"
		exit 1
	fi
	if kill -0 "$pid" 2>/dev/null; then
		hangs=$((hangs + 1))
		summary=$(dispatch_summary)
		dump "$out/hang-$r"
		for d in "${disks[@]}"; do echo run >"$dbg/$d/state"; done
		t=$SECONDS
		while kill -0 "$pid" 2>/dev/null && ((SECONDS - t < 20)); do sleep 1; done
		if kill -0 "$pid" 2>/dev/null; then
			echo "round $r: $what HUNG after $limit s ($summary); a queue run did not help: stopping"
			dump "$out/hang-$r-after-run"
			lost=1
			break
		fi
		wait "$pid"
		recovered=$((recovered + 1))
		echo "round $r: $what HUNG after $limit s ($summary); finished $((SECONDS - t)) s after a queue run"
		continue
	fi
	wait "$pid"
	rc=$?
	# terse v3: field 8 is the read IOPS, 49 the write IOPS (group total).
	iops=$(awk -F';' '{ r += $8; w += $49 } END { printf "%d", r + w }' "$out/round-$r.txt")
	if ((rc != 0)); then
		echo "round $r: $what fio exited $rc"
		tail -5 "$out/round-$r.txt"
		echo "rounds $r, hangs $hangs (recovered by a queue run: $recovered), fio failed"
		exit 1
	fi
	echo "round $r: $what $iops IOPS in $((SECONDS - start)) s ok"
done
((lost)) || r=$((r - 1))
echo "rounds $r, hangs $hangs (recovered by a queue run: $recovered)"
((hangs == 0))
