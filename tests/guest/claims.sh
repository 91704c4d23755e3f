# Claim blocks of the crash suite (tests/host/crash.sh), which
# tests/tools/replay_log.py reads back from the disk's write log. Sourced
# by tests/guest/crash-workload.sh and, in a second-level guest, by
# tests/guest/inner-blk.sh (so it is in vm/initramfs.sh's archive).
# shellcheck shell=bash

# claim_mark DEV BLOCK JSON: write "VSTORMARK1 JSON" and a newline, padded
# with zeros, to 4 KiB block BLOCK of /dev/DEV, with O_DIRECT and no flush
# of its own: the claim is written only after what it claims is durable.
claim_mark() {
	printf 'VSTORMARK1 %s\n' "$3" |
		dd of="/dev/$1" bs=4096 seek="$2" count=1 oflag=direct conv=sync,notrunc status=none
}
