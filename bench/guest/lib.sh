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
