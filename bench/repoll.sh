#!/usr/bin/env bash
# Benchmark: cost of changing a disk's number of poll queues at runtime.
#   bench/repoll.sh [--cpus N] [--queues N] [--changes N]
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"
cpus=2 queues=2 changes=10 flavor=guest
while (($#)); do
	case $1 in
	--cpus) cpus=$2; shift 2 ;;
	--queues) queues=$2; shift 2 ;;
	--changes) changes=$2; shift 2 ;;
	--flavor) flavor=$2; shift 2 ;;
	*) die "unknown option $1" ;;
	esac
done
exec "$TOP/vm/vm.sh" --flavor "$flavor" --cpus "$cpus" \
	--disk "file:queues=$queues" -- "$TOP/bench/guest/repoll.sh" "$changes"
