# Shared by the fio benchmarks (bench/poll.sh, bench/pt.sh): options
#   [--cpus N] [--runtime S] [--reps N] [--qd "1 16"] [--flavor guest|debug]
# parsed into cpus, runtime, reps, qd and flavor, whose defaults the caller
# sets before calling bench_opts "$@".
# shellcheck shell=bash
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"

bench_opts() {
	while (($#)); do
		case $1 in
		--cpus) cpus=$2; shift 2 ;;
		--runtime) runtime=$2; shift 2 ;;
		--reps) reps=$2; shift 2 ;;
		--qd) qd=$2; shift 2 ;;
		--flavor) flavor=$2; shift 2 ;;
		*) die "unknown option $1" ;;
		esac
	done
}
