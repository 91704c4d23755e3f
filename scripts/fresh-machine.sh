#!/usr/bin/env bash
# Prove that the README's two commands work on a fresh Debian 12 (or, with
# --release trixie, Debian 13) machine: build a throwaway root of that
# release with mmdebstrap --variant=minbase (apt sources as on a standard
# install: RELEASE, RELEASE-updates and RELEASE-security, main, no deb-src), make it a mount point of its own
# (a private bind mount on itself), bind /proc and /sys into it, give
# it a /dev of its own (the few device nodes a Debian system and QEMU use,
# so that nothing run in the root can change the host's), copy
# /etc/resolv.conf and /etc/hosts, clone this
# repository at a commit into /root/vstor there, and run in a chroot
# `bash .ci/run` (what CI runs: make test) and `make demo`, cold, then both
# again, warm. Each run is timed and logged; a table sums up.
#
# As root on a Debian host (12 here; mmdebstrap builds either release). Host side effects: installs mmdebstrap when
# missing; the root (181 MB bare, 1.5 GB after setup.sh and build-fio.sh,
# several GB after the runs) and the logs, both under /var/tmp by default.
# Everything mounted under the root is unmounted on exit, failure and
# Ctrl-C included, and nothing is deleted while anything is still mounted
# there. Documentation/workflow.md, "Proving a fresh machine", has more.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
. "$(dirname "$0")/lib.sh"

usage() {
	cat <<EOF
usage: $0 [options]
  --release NAME    bookworm (Debian 12, the default) or trixie (Debian 13)
  --root DIR        the throwaway root (default /var/tmp/vstor-fresh-NAME); a
                    non-empty DIR is refused unless --reuse
  --reuse           use the root DIR made by an earlier run (the clone is
                    moved to the commit, build/ is kept)
  --commit REV      the commit to test (default HEAD of $TOP)
  --logs DIR        where the logs go (default /var/tmp/vstor-fresh-logs/DATE)
  --only NAMES      run only these commands, comma-separated: test, demo
                    (or the names given with --cmd)
  --cold, --warm    run only the first (cold) or only the second (warm)
                    round; --warm needs --reuse
  --cmd NAME=CMD    run CMD (bash, in the clone) instead of the default
                    commands; may be repeated, e.g.
                    --cmd setup=scripts/setup.sh --cmd fio=scripts/build-fio.sh
  --quiet           output to the logs only, not to the terminal too
  --keep            keep the root afterwards (the default), unmounted
  --delete          delete the root afterwards, whatever the results
  --remove          only unmount what is left under the root and delete it
Commands: test = bash .ci/run, demo = make demo (installing make first
when missing, as the README says). Rounds: cold (first run in
the root) then warm (the same again, same clone: packages, build/ and ccache
warm). Exits non-zero if any command failed.
EOF
}

RELEASE=bookworm
ROOT=""
LOGS=/var/tmp/vstor-fresh-logs/$(date +%Y%m%d-%H%M%S)
COMMIT=HEAD
REUSE=0 DELETE=0 REMOVE_ONLY=0 QUIET=0
ONLY=""
ROUNDS=(cold warm)
CMD_NAMES=(test demo)
# demo as the README says: on a system without make (a minimal one),
# install it first; .ci/run does the same for test.
CMD_LINES=("bash .ci/run"
	"command -v make >/dev/null || { apt-get update -q && apt-get install -y -q make; }; make demo")
custom=0
MARK=.vstor-fresh-root            # marks a root this script made
CLONE=/root/vstor                 # the clone, inside the root

while (($#)); do
	case $1 in
	--root) ROOT=${2:?--root needs a directory}; shift ;;
	--release)
		RELEASE=${2:?--release needs bookworm or trixie}
		[[ $RELEASE == bookworm || $RELEASE == trixie ]] ||
			die "--release $RELEASE: bookworm or trixie"
		shift ;;
	--reuse) REUSE=1 ;;
	--commit) COMMIT=${2:?--commit needs a revision}; shift ;;
	--logs) LOGS=${2:?--logs needs a directory}; shift ;;
	--only) ONLY=${2:?--only needs names}; shift ;;
	--cold) ROUNDS=(cold) ;;
	--warm) ROUNDS=(warm) ;;
	--cmd)
		[[ ${2:-} == ?*=?* ]] || die "--cmd needs NAME=COMMAND"
		if ((!custom)); then CMD_NAMES=() CMD_LINES=() custom=1; fi
		CMD_NAMES+=("${2%%=*}") CMD_LINES+=("${2#*=}")
		shift ;;
	--quiet) QUIET=1 ;;
	--keep) DELETE=0 ;;
	--delete) DELETE=1 ;;
	--remove) REMOVE_ONLY=1 ;;
	-h | --help) usage; exit 0 ;;
	*) usage >&2; die "unknown option: $1" ;;
	esac
	shift
done

[[ $(id -u) -eq 0 ]] || die "run as root (mmdebstrap, mount, chroot)"
ROOT=${ROOT:-/var/tmp/vstor-fresh-$RELEASE}
[[ $ROOT != *[[:space:]*?\[\]\\]* ]] || die "the root's path must not contain blanks or *?[]\\: $ROOT"
ROOT=$(realpath -m -- "$ROOT")
[[ $ROOT == /*/* ]] || die "refusing $ROOT as the root: give a directory at least two levels down"

# Mount points at or under the root, deepest first (octal escapes decoded).
mounts_under() {
	local m
	awk -v r="$ROOT" '$5 == r || index($5, r "/") == 1 { print $5 }' \
		/proc/self/mountinfo | sort -r | while read -r m; do
		printf '%b\n' "$m"
	done
}

# Whether the root is a bind mount of itself (made below): a mount at the
# root whose source is not the top of its file system. A file system
# mounted there by someone else is left alone.
root_is_self_bind() {
	awk -v r="$ROOT" '$5 == r && $4 != "/" { f = 1 } END { exit !f }' \
		/proc/self/mountinfo
}

# Processes whose root directory is the root: what the chroot started.
procs_in_root() {
	find /proc -mindepth 2 -maxdepth 2 -name root \
		\( -lname "$ROOT" -o -lname "$ROOT/*" \) -printf '%h\n' 2>/dev/null |
		sed 's|^/proc/||' | grep -vx -e self -e thread-self || true
}

# Stop what still runs in the root (by process id), then unmount everything
# under it. Returns non-zero if anything stays mounted.
teardown() {
	local pids m i
	pids=$(procs_in_root)
	if [[ -n $pids ]]; then
		log "stopping processes left in the root: ${pids//$'\n'/ }"
		# shellcheck disable=SC2086 # one pid a word
		kill -TERM $pids 2>/dev/null || true
		for i in $(seq 20); do
			pids=$(procs_in_root)
			[[ -z $pids ]] && break
			sleep 0.5
		done
		# shellcheck disable=SC2086
		[[ -z $pids ]] || kill -KILL $pids 2>/dev/null || true
		sleep 0.5
	fi
	while read -r m; do
		[[ -n $m ]] || continue
		[[ $m != "$ROOT" ]] || root_is_self_bind || continue
		umount -- "$m" 2>/dev/null || {
			log "umount $m failed; detaching it (umount -l)"
			umount -l -- "$m" || true
		}
	done < <(mounts_under)
	m=$(mounts_under | grep -vxF -- "$ROOT" || true)
	if [[ -n $m ]]; then
		printf 'error: still mounted under %s:\n%s\n' "$ROOT" "$m" >&2
		return 1
	fi
	return 0
}

# shellcheck disable=SC2317 # called from the EXIT trap
# Delete the root: only one this script made, and only with nothing mounted
# under it (rm -rf through a bound /dev or /proc would wreck the host). rm
# stays on the root's file system as a second guard.
delete_root() {
	[[ -d $ROOT ]] || return 0
	[[ -f $ROOT/$MARK ]] || die "refusing to delete $ROOT: no $MARK in it, so not a root this script made"
	local m
	m=$(mounts_under | grep -vxF -- "$ROOT" || true)
	[[ -z $m ]] || die "refusing to delete $ROOT: still mounted under it: $m"
	log "deleting $ROOT"
	rm -rf --one-file-system -- "$ROOT"
}

cleaned=0
# shellcheck disable=SC2317 # the EXIT trap
cleanup() {
	local st=$?
	trap '' INT TERM HUP
	((cleaned)) && return 0
	cleaned=1
	if [[ -f $ROOT/$MARK ]]; then
		if teardown; then
			if ((DELETE)); then
				delete_root || st=1
			else
				log "the root is kept, unmounted: $ROOT (delete it with $0 --root $ROOT --remove)"
			fi
		else
			log "NOT deleting anything: mounts remain under $ROOT"
			st=1
		fi
	fi
	exit "$st"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

if ((REMOVE_ONLY)); then
	[[ -e $ROOT ]] || { log "$ROOT does not exist: nothing to remove"; exit 0; }
	[[ -f $ROOT/$MARK ]] || die "refusing to remove $ROOT: no $MARK in it, so not a root this script made"
	DELETE=1
	exit 0          # cleanup does it
fi

# Which commands to run.
sel_names=() sel_lines=()
for i in "${!CMD_NAMES[@]}"; do
	if [[ -z $ONLY || ",$ONLY," == *",${CMD_NAMES[$i]},"* ]]; then
		sel_names+=("${CMD_NAMES[$i]}") sel_lines+=("${CMD_LINES[$i]}")
	fi
done
((${#sel_names[@]})) || die "--only $ONLY names none of: ${CMD_NAMES[*]}"
sha=$(git -C "$TOP" rev-parse --verify "$COMMIT^{commit}") || die "no commit $COMMIT in $TOP"

# The root: new, or reused.
if [[ -d $ROOT && -n $(ls -A "$ROOT") ]]; then
	((REUSE)) || die "$ROOT exists and is not empty: --reuse it, pick another --root, or remove it (--remove)"
	[[ -f $ROOT/$MARK ]] || die "$ROOT was not made by this script (no $MARK): refusing to use it"
	[[ " ${ROUNDS[*]} " != *" cold "* ]] ||
		log "note: $ROOT was used before, so the \"cold\" round is not cold"
	teardown || die "cannot unmount what an earlier run left under $ROOT"
	new_root=0
else
	((REUSE)) && die "--reuse: $ROOT holds no root yet"
	[[ ${ROUNDS[*]} != warm ]] || die "--warm needs a root where the commands ran before (--reuse)"
	new_root=1
fi
mkdir -p "$LOGS"
log "logs in $LOGS"

if ((new_root)); then
	if ! command -v mmdebstrap >/dev/null; then
		log "host change: installing mmdebstrap (apt-get install mmdebstrap)"
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends mmdebstrap \
			>"$LOGS/mmdebstrap-install.log" 2>&1 || {
			tail -n 20 "$LOGS/mmdebstrap-install.log" >&2
			die "could not install mmdebstrap"
		}
	fi
	log "creating a $RELEASE minbase root in $ROOT with mmdebstrap (a few minutes; log: $LOGS/mmdebstrap.log)"
	mkdir -p "$ROOT"
	touch "$ROOT/$MARK"
	t0=$EPOCHREALTIME
	mmdebstrap --variant=minbase --skip=check/empty "$RELEASE" "$ROOT" \
		>"$LOGS/mmdebstrap.log" 2>&1 || {
		tail -n 20 "$LOGS/mmdebstrap.log" >&2
		die "mmdebstrap failed (log: $LOGS/mmdebstrap.log)"
	}
	log "mmdebstrap took $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f s", b - a }')"
	# The apt sources of a standard (cloud or container) install.
	rm -f "$ROOT/etc/apt/sources.list" "$ROOT"/etc/apt/sources.list.d/*
	cat >"$ROOT/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: http://deb.debian.org/debian
Suites: $RELEASE $RELEASE-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: $RELEASE-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
fi

# The root a mount point of its own, as a machine's root is: vufsd's
# sandbox (pivot_root, and keeping its mounts from propagating) needs it.
if ! root_is_self_bind; then
	mount --bind "$ROOT" "$ROOT"
	mount --make-private "$ROOT"
fi
log "binding /proc and /sys into $ROOT; a private /dev"
for d in proc sys; do
	mkdir -p "$ROOT/$d"
	mount --bind "/$d" "$ROOT/$d"
	# No propagation either way: what the chroot mounts stays there.
	mount --make-private "$ROOT/$d"
done
# A /dev of the root's own: package scripts run there (some recreate
# /dev/null) then cannot touch the host's nodes, as they could through a
# bind mount.
mkdir -p "$ROOT/dev"
mount -t tmpfs -o mode=755,nosuid vstor-dev "$ROOT/dev"
for node in null:1:3:666 zero:1:5:666 full:1:7:666 random:1:8:666 \
	urandom:1:9:666 tty:5:0:666; do
	IFS=: read -r name major minor mode <<<"$node"
	mknod -m "$mode" "$ROOT/dev/$name" c "$major" "$minor"
done
mkdir -p "$ROOT/dev/pts" "$ROOT/dev/shm"
mount -t devpts -o newinstance,ptmxmode=0666,mode=620 devpts "$ROOT/dev/pts"
ln -s pts/ptmx "$ROOT/dev/ptmx"
mount -t tmpfs -o mode=1777,nosuid,nodev shm "$ROOT/dev/shm"
ln -s /proc/self/fd "$ROOT/dev/fd"
ln -s /proc/self/fd/0 "$ROOT/dev/stdin"
ln -s /proc/self/fd/1 "$ROOT/dev/stdout"
ln -s /proc/self/fd/2 "$ROOT/dev/stderr"
for f in resolv.conf hosts; do
	rm -f "$ROOT/etc/$f"
	cp -L "/etc/$f" "$ROOT/etc/$f"
done

# The clone, made with the host's git (the root has none until setup.sh).
if [[ -d $ROOT$CLONE/.git ]]; then
	log "moving the clone $ROOT$CLONE to $sha"
	git -C "$ROOT$CLONE" fetch -q origin
	git -C "$ROOT$CLONE" cat-file -e "$sha^{commit}" 2>/dev/null ||
		git -C "$ROOT$CLONE" fetch -q origin "$sha"
	git -C "$ROOT$CLONE" checkout -q --detach "$sha"
else
	log "cloning $TOP at $sha into $ROOT$CLONE"
	git clone -q "$TOP" "$ROOT$CLONE"
	# A commit on no branch is fetched by its name.
	git -C "$ROOT$CLONE" cat-file -e "$sha^{commit}" 2>/dev/null ||
		git -C "$ROOT$CLONE" fetch -q origin "$sha"
	git -C "$ROOT$CLONE" checkout -q --detach "$sha"
fi
git -C "$ROOT$CLONE" log -1 --format='==> testing %h %s' >&2

# run_one NAME ROUND CMD: run CMD in the clone in the chroot, with a clean
# environment and no terminal input; log it and note status and time.
res_name=() res_round=() res_st=() res_time=() res_last=() res_log=()
run_one() {
	local name=$1 round=$2 cmd=$3 logf st t0 t secs last
	logf=$LOGS/$(printf '%02d' "${#res_name[@]}")-$name-$round.log
	local shown=${cmd%%$'\n'*}
	[[ $shown == "$cmd" ]] || shown="$shown ..."
	log "$name ($round): $shown   [log: $logf]"
	t0=$EPOCHREALTIME
	# shellcheck disable=SC2016 # expanded by the inner bash
	local run=(chroot "$ROOT" /usr/bin/env -i HOME=/root USER=root LOGNAME=root
		PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
		LANG=C.UTF-8 TERM="${TERM:-dumb}"
		/bin/bash -c 'cd "$1" && eval "$2"' bash "$CLONE" "$cmd")
	set +e
	if ((QUIET)); then
		"${run[@]}" </dev/null >"$logf" 2>&1
		st=$?
	else
		"${run[@]}" </dev/null 2>&1 | tee "$logf"
		st=${PIPESTATUS[0]}
	fi
	set -e
	t=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f", b - a }')
	secs=$(printf '%dm%02ds' $((t / 60)) $((t % 60)))
	# make test's last line is "N passed, N failed, N skipped".
	last=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$logf" | tail -n1 || true)
	[[ -n $last ]] || last=$(grep -v '^[[:space:]]*$' "$logf" | tail -n1 || true)
	res_name+=("$name") res_round+=("$round") res_st+=("$st") res_time+=("$secs")
	res_last+=("${last:0:70}") res_log+=("$logf")
	log "$name ($round): exit $st after $secs"
}

for round in "${ROUNDS[@]}"; do
	for i in "${!sel_names[@]}"; do
		run_one "${sel_names[$i]}" "$round" "${sel_lines[$i]}"
	done
done

failed=0
for st in "${res_st[@]}"; do
	[[ $st == 0 ]] || failed=1
done
{
	echo "fresh-machine check of $(git -C "$TOP" log -1 --format='%h %s' "$sha")"
	echo "root $ROOT, logs $LOGS, $(date -R)"
	printf '%-8s %-5s %5s %9s  %s\n' command round exit wall "last line"
	printf '%s\n' "--------------------------------------------------------------------------------"
	for i in "${!res_name[@]}"; do
		printf '%-8s %-5s %5s %9s  %s\n' "${res_name[$i]}" "${res_round[$i]}" \
			"${res_st[$i]}" "${res_time[$i]}" "${res_last[$i]}"
	done
	echo "disk used by the root: $(du -sxh "$ROOT" | cut -f1)"
} | tee "$LOGS/summary.txt"
((failed)) && log "some commands failed; logs in $LOGS"
exit "$failed"
