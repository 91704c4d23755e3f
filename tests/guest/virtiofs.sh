# virtio-fs with several request queues, served by vufsd (tools/vufsd).
# The boot (tests/run.sh) starts one vufsd per device on the host through
# vm/vm.sh --virtiofs: tags fs1, fs2 and fs4 with 1, 2 and 4 request
# queues, on a 4-CPU guest; fsa, fsn and fsw serve fs1's directory again
# with --cache always, --cache never and --writeback, and vfd is the
# release's virtiofsd, for comparison (vm.sh: the Rust one on Debian 13,
# QEMU 7.2's C one on Debian 12). fs2 and vfd have POSIX ACLs. Each vufsd's counters are in
# /run/vstor/fs-TAG.stats and its shared directory is /run/vstor/fs-TAG,
# which this guest also sees over 9p: the host's own view of the files.
# shellcheck shell=bash disable=SC2034 # TESTS, desc_*, SUITE_*: read by the runner

# The guest this suite boots (vm/vm.sh options) and what it needs built.
SUITE_VM=(--cpus 4 --no-disk --virtiofs "tag=fs1,queues=1" --virtiofs "tag=fs2,queues=2,acl"
	--virtiofs "tag=fs4,queues=4,threads=2"
	--virtiofs "tag=fsa,cache=always,dir=fs-fs1" --virtiofs "tag=fsn,cache=never,dir=fs-fs1"
	--virtiofs "tag=fsw,writeback,dir=fs-fs1" --virtiofs "tag=vfd,daemon=virtiofsd,acl")
SUITE_NEEDS=(kernel tools)
SUITE_ORDER=80

VF=/tmp/vf
VF_TAGS=(fs1 fs2 fs4)

# vf_queues TAG: the request queues the boot gave TAG (from its stats file).
vf_queues() { echo $(($(stat_get "/run/vstor/fs-$1.stats" queues) - 1)); }

vf_mount() {
	mkdir -p "$VF/$1"
	mountpoint -q "$VF/$1" && return 0
	mount -t virtiofs "$1" "$VF/$1" || fail "cannot mount virtiofs $1"
}

# vf_sysfs TAG: the device's directory under /sys/fs/virtiofs.
vf_sysfs() {
	local d
	for d in /sys/fs/virtiofs/*/; do
		[[ $(cat "$d/tag" 2>/dev/null) == "$1" ]] && { echo "${d%/}"; return 0; }
	done
	return 1
}

# vf_sync TAG: wait for the daemon to write its counters twice, so they
# cover every request that completed before the call.
vf_sync() {
	local f=/run/vstor/fs-$1.stats seq i
	seq=$(stat_get "$f" seq) || return
	for ((i = 0; i < 200; i++)); do
		(($(stat_get "$f" seq) >= seq + 2)) && return 0
		sleep 0.05
	done
	fail "vufsd for $1 stopped updating $f"
}

# vf_counter TAG VQ FIELD: one per-vring counter.
vf_counter() { stat_get "/run/vstor/fs-$1.stats" "vq.$2.$3"; }

# vf_snapshot TAG: "requests bytes_in bytes_out" of each vring, one per line,
# from one reading of the counters (each stat_get starts Python, which
# takes most of a second under TCG).
vf_snapshot() {
	vf_sync "$1" || return 1
	local all
	all=$(stat_get "/run/vstor/fs-$1.stats") || return
	awk -F= '{ v[$1] = $2 }
		END {
			if (!("queues" in v)) { print "no queues in the counters" > "/dev/stderr"; exit 1 }
			for (q = 0; q < v["queues"]; q++) {
				for (i = 1; i <= 3; i++) {
					k = "vq." q "." (i == 1 ? "requests" : i == 2 ? "bytes_in" : "bytes_out")
					if (!(k in v)) { print "no " k " in the counters" > "/dev/stderr"; exit 1 }
				}
				print v["vq." q ".requests"], v["vq." q ".bytes_in"], v["vq." q ".bytes_out"]
			}
		}' <<<"$all"
}

# vf_queue_of TAG CPU: the request queue (sysfs mqs index, = daemon vring)
# whose cpu_list has CPU.
vf_queue_of() {
	local sys q
	sys=$(vf_sysfs "$1") || return 1
	for q in "$sys"/mqs/*; do
		[[ $(cat "$q/name") == requests.* ]] || continue
		[[ " $(cpu_list_expand "$(cat "$q/cpu_list")") " == *" $2 "* ]] && { basename "$q"; return 0; }
	done
	return 1
}

desc_vf_mount="devices with 1, 2 and 4 request queues mount; each shows hiprio plus N request queues in sysfs, its daemon counts the connection, and files written on either side are seen on the other"
vf_mount_all() {
	local tag sys n want q names
	for tag in "${VF_TAGS[@]}"; do
		vf_mount "$tag" || return 1
		sys=$(vf_sysfs "$tag") || { fail "$tag: not in /sys/fs/virtiofs"; return 1; }
		n=$(vf_queues "$tag")
		want="hiprio"
		for ((q = 0; q < n; q++)); do want+=" requests.$q"; done
		names=$(for q in $(find "$sys/mqs" -mindepth 1 -maxdepth 1 -printf '%f\n' | sort -n); do
			cat "$sys/mqs/$q/name"
		done | xargs)
		expect_eq "$tag queues in sysfs" "$names" "$want" || return 1
		expect_eq "$tag connected" "$(stat_get "/run/vstor/fs-$tag.stats" connected)" 1 || return 1
		echo "from the host side" >"/run/vstor/fs-$tag/host.txt"
		expect_eq "$tag host file" "$(cat "$VF/$tag/host.txt")" "from the host side" || return 1
		echo "from the guest" >"$VF/$tag/guest.txt"
		sync "$VF/$tag/guest.txt"
		expect_eq "$tag guest file on the host" "$(cat "/run/vstor/fs-$tag/guest.txt")" "from the guest" || return 1
		note "$tag: $names"
	done
}

desc_vf_cpu_list="each device's cpu_list: hiprio lists every CPU; the request queues split the CPUs evenly with each CPU on exactly one queue; each request queue's list equals the affinity of its MSI-X vector"
vf_cpu_list() {
	local tag sys q n cpus all seen lists min max cpu_arr
	all=$(seq 0 $(($(nproc) - 1)) | xargs)
	for tag in "${VF_TAGS[@]}"; do
		sys=$(vf_sysfs "$tag") || return 1
		n=$(vf_queues "$tag")
		expect_eq "$tag hiprio cpu_list" "$(cpu_list_expand "$(cat "$sys/mqs/0/cpu_list")")" "$all" || return 1
		seen="" lists="" min=999 max=0
		for ((q = 1; q <= n; q++)); do
			cpus=$(cpu_list_expand "$(cat "$sys/mqs/$q/cpu_list")")
			seen+=" $cpus"
			lists+=" [$cpus]"
			read -ra cpu_arr <<<"$cpus"
			((${#cpu_arr[@]} < min)) && min=${#cpu_arr[@]}
			((${#cpu_arr[@]} > max)) && max=${#cpu_arr[@]}
		done
		expect_eq "$tag CPUs over the request queues" "$(tr ' ' '\n' <<<"$seen" | grep . | sort -n | xargs)" "$all" || return 1
		((max - min <= 1)) || { fail "$tag: uneven split$lists"; return 1; }
		note "$tag: hiprio [$all], request queues$lists"
	done
	vf_irq_affinity
}

# Every request queue's cpu_list equals the affinity of its interrupt:
# virtio-pci gives each request queue an MSI-X vector spread over the CPUs,
# and virtio_fs maps CPUs to queues from those affinities.
vf_irq_affinity() {
	local tag sys q n vdev
	for tag in "${VF_TAGS[@]}"; do
		sys=$(vf_sysfs "$tag") || return 1
		n=$(vf_queues "$tag")
		# /sys/fs/virtiofs/K belongs to virtio device virtioK.
		vdev=virtio$(basename "$sys")
		[[ -e /sys/bus/virtio/devices/$vdev ]] || { fail "$tag: no virtio device $vdev"; return 1; }
		for ((q = 1; q <= n; q++)); do
			expect_irq_cpus "$tag queue $q" "$sys/mqs/$q/cpu_list" "$vdev-requests.$((q - 1))" || return 1
		done
	done
}

desc_vf_pinned="I/O pinned to each CPU arrives, by vufsd's per-queue counters, on the request queue that CPU maps to (fs2 and fs4; 16 O_DIRECT reads and 16 writes of 64 KiB)"
vf_pinned() {
	local tag cpu q before after i line other
	for tag in fs2 fs4; do
		dd if=/dev/urandom of="$VF/$tag/pinned" bs=1M count=1 status=none || return 1
		sync
		for ((cpu = 0; cpu < $(nproc); cpu++)); do
			q=$(vf_queue_of "$tag" "$cpu") || { fail "$tag: CPU $cpu is on no queue"; return 1; }
			mapfile -t before < <(vf_snapshot "$tag")
			taskset -c "$cpu" dd if="$VF/$tag/pinned" of=/dev/null bs=64k count=16 iflag=direct status=none || return 1
			taskset -c "$cpu" dd if=/dev/zero of="$VF/$tag/pinned-$cpu" bs=64k count=16 oflag=direct status=none || return 1
			mapfile -t after < <(vf_snapshot "$tag")
			other=0
			for ((i = 1; i < ${#after[@]}; i++)); do
				read -r r0 i0 o0 <<<"${before[$i]}"
				read -r r1 i1 o1 <<<"${after[$i]}"
				line="vq $i: +$((r1 - r0)) requests, +$((i1 - i0)) bytes in, +$((o1 - o0)) bytes out"
				if ((i == q)); then
					note "$tag CPU $cpu -> $line (mapped)"
					((o1 - o0 >= 16 * 65536)) || { fail "$tag CPU $cpu: queue $q returned $((o1 - o0)) bytes, want the 1 MiB read"; return 1; }
					((i1 - i0 >= 16 * 65536)) || { fail "$tag CPU $cpu: queue $q took $((i1 - i0)) bytes, want the 1 MiB written"; return 1; }
				else
					other=$((other + i1 - i0 + o1 - o0))
				fi
			done
			((other < 65536)) || { fail "$tag CPU $cpu: $other bytes went through queues other than $q"; return 1; }
		done
		rm -f "$VF/$tag"/pinned*
	done
}

desc_vf_fio_verify="fio crc32c verify on fs4, one job pinned per CPU (random 4k-256k writes, then reads back): data intact, and every request queue carried data"
vf_fio_verify() {
	local before after i n
	n=$(nproc)
	mkdir -p "$VF/fs4/fio"
	mapfile -t before < <(vf_snapshot fs4)
	fio_json /tmp/vf-fio.json --name=vfverify --directory="$VF/fs4/fio" \
		--numjobs="$n" --cpus_allowed="0-$((n - 1))" --cpus_allowed_policy=split \
		--rw=randwrite --bsrange=4k-256k --size=16M --direct=1 \
		--ioengine=psync --verify=crc32c --verify_fatal=1 --group_reporting || return 1
	mapfile -t after < <(vf_snapshot fs4)
	for ((i = 1; i < ${#after[@]}; i++)); do
		read -r r0 i0 o0 <<<"${before[$i]}"
		read -r r1 i1 o1 <<<"${after[$i]}"
		note "fs4 vq $i: +$((r1 - r0)) requests, +$((i1 - i0)) bytes in, +$((o1 - o0)) bytes out"
		((i1 - i0 >= 8 << 20 && o1 - o0 >= 8 << 20)) ||
			{ fail "queue $i carried less than 8 MiB each way during the verify"; return 1; }
	done
	rm -rf "$VF/fs4/fio"
}

desc_vf_ops="file operations through the guest kernel match the host's view of the directory (over 9p): create, append, rename and rename over, hard and symbolic links, chmod, truncate, fallocate, SEEK_DATA/SEEK_HOLE, xattrs, suid/sgid dropped by an unprivileged write or truncate and kept by root's, 2000-entry readdir, statfs, unlink and rmdir"
vf_ops() {
	local m=$VF/fs2/ops h=/run/vstor/fs-fs2/ops i
	rm -rf "$m"
	mkdir -p "$m/d" "$m/e" || return 1
	printf 'one\n' >"$m/f" && printf 'two\n' >>"$m/f"
	expect_eq "append (host)" "$(cat "$h/f")" $'one\ntwo' || return 1
	mv "$m/f" "$m/d/g" && echo other >"$m/o" && mv "$m/o" "$m/d/g" || return 1
	expect_eq "rename over (host)" "$(cat "$h/d/g")" other || return 1
	[[ ! -e $h/f && ! -e $h/o ]] || { fail "renamed names still on the host"; return 1; }
	ln "$m/d/g" "$m/hard" && ln -s d/g "$m/soft" || return 1
	expect_eq "link count (host)" "$(stat -c %h "$h/d/g")" 2 || return 1
	expect_eq "symlink text (host)" "$(readlink "$h/soft")" d/g || return 1
	expect_eq "read through the symlink" "$(cat "$m/soft")" other || return 1
	chmod 0640 "$m/hard" || return 1
	expect_eq "chmod (host)" "$(stat -c %a "$h/d/g")" 640 || return 1
	truncate -s 3 "$m/d/g" || return 1
	expect_eq "truncate (host)" "$(stat -c %s "$h/d/g")" 3 || return 1
	fallocate -l 1M "$m/falloc" || return 1
	expect_eq "fallocate size (host)" "$(stat -c %s "$h/falloc")" 1048576 || return 1
	/usr/bin/python3 - "$m/sparse" <<'PY' || return 1
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
os.pwrite(fd, b"x" * 4096, 1 << 20)
data = os.lseek(fd, 0, os.SEEK_DATA)
hole = os.lseek(fd, 1 << 20, os.SEEK_HOLE)
assert data == 1 << 20, f"SEEK_DATA found {data}"
assert hole == (1 << 20) + 4096, f"SEEK_HOLE found {hole}"
os.setxattr(sys.argv[1], "user.vstor", b"value")
assert os.getxattr(sys.argv[1], "user.vstor") == b"value"
assert "user.vstor" in os.listxattr(sys.argv[1])
os.removexattr(sys.argv[1], "user.vstor")
assert "user.vstor" not in os.listxattr(sys.argv[1])
PY
	# suid/sgid: a writer without CAP_FSETID drops them (write, truncate),
	# root keeps them; vufsd does this for the guest (HANDLE_KILLPRIV_V2).
	/usr/bin/python3 - "$m/setid" "$h/setid" <<'PY' || return 1
import os, sys
f, host = sys.argv[1], sys.argv[2]
fd = os.open(f, os.O_RDWR | os.O_CREAT, 0o644)
os.close(fd)
def as_nobody(fn):
    pid = os.fork()
    if pid == 0:
        try:
            os.setgid(65534)
            os.setuid(65534)
            fn()
            os._exit(0)
        except BaseException as e:
            print("child:", e)
            os._exit(1)
    assert os.waitpid(pid, 0)[1] == 0, "the unprivileged writer failed"
def write():
    fd = os.open(f, os.O_WRONLY)
    os.write(fd, b"x")
    os.close(fd)
for what, fn in (("write", write), ("truncate", lambda: os.truncate(f, 0))):
    os.chmod(f, 0o6777)
    with open(f, "ab") as w:
        w.write(b"root")
    assert os.stat(f).st_mode & 0o7777 == 0o6777, f"root's write dropped the bits"
    as_nobody(fn)
    for p in (f, host):
        mode = os.stat(p).st_mode & 0o7777
        assert mode == 0o777, f"{what} by nobody: {p} has mode {mode:o}"
PY
	for ((i = 0; i < 2000; i++)); do : >"$m/e/n$i"; done
	expect_eq "readdir count" "$(find "$m/e" -mindepth 1 -maxdepth 1 | wc -l)" 2000 || return 1
	expect_eq "readdir names" "$(find "$m/e" -mindepth 1 -maxdepth 1 -printf '%f\n' | sort | md5sum)" \
		"$(find "$h/e" -mindepth 1 -maxdepth 1 -printf '%f\n' | sort | md5sum)" || return 1
	# 9p reports bigger blocks; the file system's size in MiB is the same.
	expect_eq "statfs size (MiB)" "$(($(stat -f -c '%b * %S' "$m") >> 20))" "$(($(stat -f -c '%b * %S' "$h") >> 20))" || return 1
	rm "$m/hard" "$m/soft" && rm -r "$m/e" || return 1
	[[ ! -e $h/e && ! -e $h/hard ]] || { fail "removed names still on the host"; return 1; }
	rm -rf "$m"
	[[ ! -e $h ]] || fail "rm -rf left $h on the host"
}

desc_vf_creds="names made by guest user 1000 belong to it on the host; in a mode 770 directory of group 2000 it can create, mkdir, mkfifo and symlink only while 2000 is one of its supplementary groups (FUSE_CREATE_SUPP_GROUP), and in a setgid one the new file takes the directory's group"
vf_creds() {
	local m=$VF/fs2/creds h=/run/vstor/fs-fs2/creds u=(setpriv --reuid 1000 --regid 1000)
	rm -rf "$m"
	mkdir -p "$m/grp" "$m/sgid" || return 1
	chown 0:2000 "$m/grp" "$m/sgid" && chmod 0770 "$m/grp" && chmod 2770 "$m/sgid" || return 1
	"${u[@]}" --clear-groups touch "$m/grp/nogroup" 2>/dev/null &&
		{ fail "user 1000 without group 2000 created a file in a mode 770 directory of group 2000"; return 1; }
	"${u[@]}" --groups 2000 sh -c "echo x >'$m/grp/f' && mkdir '$m/grp/d' && mkfifo '$m/grp/p' && ln -s f '$m/grp/l' && echo y >'$m/sgid/f'" ||
		{ fail "user 1000 with supplementary group 2000 was refused (the host did not take the group)"; return 1; }
	expect_eq "file owner (host)" "$(stat -c %u:%g "$h/grp/f")" 1000:1000 || return 1
	expect_eq "directory owner (host)" "$(stat -c %u:%g "$h/grp/d")" 1000:1000 || return 1
	expect_eq "fifo owner and type (host)" "$(stat -c %u:%g:%F "$h/grp/p")" "1000:1000:fifo" || return 1
	expect_eq "symlink owner (host)" "$(stat -c %u:%g "$h/grp/l")" 1000:1000 || return 1
	expect_eq "file in the setgid directory (host)" "$(stat -c %u:%g "$h/sgid/f")" 1000:2000 || return 1
	rm -rf "$m"
}

desc_vf_cache="one directory through four devices (vufsd --cache auto, always, never, and auto with --writeback): after a file is read through each and rewritten through another, never reads the new data at once, always still returns what it cached until the guest drops its caches, auto sees it within its 1 s; a shared writable mapping works with never (DIRECT_IO_ALLOW_MMAP); small appends through the writeback device reach the host by fsync"
vf_cache() {
	local t f h=/run/vstor/fs-fs1/cache i
	for t in fsa fsn fsw; do vf_mount "$t" || return 1; done
	rm -rf "$VF/fs1/cache"
	mkdir "$VF/fs1/cache" && echo old-data >"$VF/fs1/cache/f" || return 1
	for t in fs1 fsa fsn; do
		expect_eq "first read through $t" "$(cat "$VF/$t/cache/f")" old-data || return 1
	done
	# Rewritten through another device (fsw): the others are not told.
	echo new-data >"$VF/fsw/cache/f" && sync "$VF/fsw/cache/f" || return 1
	expect_eq "host after the rewrite" "$(cat "$h/f")" new-data || return 1
	expect_eq "never: read at once" "$(cat "$VF/fsn/cache/f")" new-data || return 1
	expect_eq "always: still the cached data" "$(cat "$VF/fsa/cache/f")" old-data || return 1
	sleep 1.5
	expect_eq "auto: after its 1 s timeout" "$(cat "$VF/fs1/cache/f")" new-data || return 1
	expect_eq "always: a day's timeout" "$(cat "$VF/fsa/cache/f")" old-data || return 1
	echo 3 >/proc/sys/vm/drop_caches
	expect_eq "always: after drop_caches" "$(cat "$VF/fsa/cache/f")" new-data || return 1
	/usr/bin/python3 - "$VF/fsn/cache/m" <<'PY' || { fail "shared writable mmap on the never device"; return 1; }
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
os.ftruncate(fd, 4096)
m = mmap.mmap(fd, 4096, mmap.MAP_SHARED)
m[:5] = b"mmap!"
m.flush()
m.close()
assert os.pread(fd, 5, 0) == b"mmap!"
PY
	expect_eq "never: mapped write on the host" "$(head -c 5 "$h/m")" "mmap!" || return 1
	for ((i = 0; i < 100; i++)); do printf '%03d' "$i" >>"$VF/fsw/cache/w" || return 1; done
	sync "$VF/fsw/cache/w" || return 1
	expect_eq "writeback: 100 appends on the host" "$(stat -c %s "$h/w"):$(head -c 6 "$h/w")" 300:000001 || return 1
	rm -rf "$VF/fs1/cache"
	for t in fsa fsn fsw; do umount "$VF/$t" || return 1; done
}

desc_vf_posix="tests/tools/posix_conf.py (ownership and mode of new files, setgid directories, errnos, suid/sgid clearing, timestamps, rename and link edge cases, open files, sticky directories, access checks, POSIX ACLs; as root and as users 1000 and 2000) passes on the guest's tmpfs, and on vufsd (fs2) but for the known FUSE protocol difference listed in Documentation/vufsd.md; virtiofsd (vfd: the Rust one on Debian 13, QEMU 7.2's C one on Debian 12; also with ACLs) is run beside it and its counts reported"
# What FUSE itself cannot give (Documentation/vufsd.md, "Conformance").
VF_POSIX_KNOWN=(--known "setid: write by another user, setgid without group execute")
vf_posix() {
	local t out rc fs2=0
	for t in tmpfs fs2 vfd; do
		rc=0
		if [[ $t == tmpfs ]]; then
			out=$(/usr/bin/python3 "$TOP/tests/tools/posix_conf.py" --summary --other-fs /run /tmp/posix 2>&1) || rc=$?
		else
			vf_mount "$t" || return 1
			rm -rf "$VF/$t/posix"
			out=$(/usr/bin/python3 "$TOP/tests/tools/posix_conf.py" --summary --other-fs /tmp \
				"${VF_POSIX_KNOWN[@]}" "$VF/$t/posix" 2>&1) || rc=$?
		fi
		printf '%s\n' "$out" | sed "s/^/$t: /"
		note "$t: $(tail -n 1 <<<"$out")"
		case $t in
		tmpfs) ((rc == 0)) || { fail "the guest's own tmpfs does not give what posix_conf.py expects"; return 1; } ;;
		fs2) fs2=$rc ;;
		esac
	done
	umount "$VF/vfd"
	((fs2 == 0)) || fail "vufsd differs from the guest's local file system (fs2 above)"
}

desc_vf_dbench="dbench (Debian's, its client.txt load) with one client per CPU on fs4 for 10 s: every operation succeeds"
vf_dbench() {
	local out
	command -v dbench >/dev/null || { echo "dbench is not installed"; return 4; }
	mkdir -p "$VF/fs4/dbench"
	if ! out=$(dbench -D "$VF/fs4/dbench" -t 10 "$(nproc)" 2>&1); then
		printf '%s\n' "$out" | tail -n 20
		fail "dbench failed"
		return 1
	fi
	printf '%s\n' "$out" | grep -E "^ Operation|^ *[A-Z][a-zA-Z]+ +[0-9]+ |^Throughput" | head -n 20
	printf '%s\n' "$out" | grep -q "^Throughput" || { fail "dbench printed no throughput"; return 1; }
	rm -rf "$VF/fs4/dbench"
}

desc_vf_stress="stress-ng filesystem stressors (dir, dentry, rename, link, symlink, hdd with verify, fallocate, readahead) on fs2 for 8 s: no failures"
vf_stress() {
	local out
	command -v stress-ng >/dev/null || { echo "stress-ng is not installed"; return 4; }
	mkdir -p "$VF/fs2/stress"
	if ! out=$(cd "$VF/fs2/stress" && stress-ng --temp-path . --timeout 8s --verify \
		--dir 1 --dentry 1 --rename 1 --link 1 --symlink 1 --hdd 1 \
		--hdd-bytes 8M --fallocate 1 --readahead 1 --readahead-bytes 8M \
		--metrics-brief 2>&1); then
		printf '%s\n' "$out" | tail -n 30
		fail "stress-ng failed"
		return 1
	fi
	printf '%s\n' "$out" | grep -vE "setting to|dispatching|metrc: .*stressor" | sed 's/^stress-ng: [a-z]*: *\[[0-9]*\] //' | tail -n 14
	printf '%s\n' "$out" | grep -q "successful run completed" || { fail "stress-ng did not report a successful run"; return 1; }
	rm -rf "$VF/fs2/stress"
}

desc_vf_umount="after every test, unmounting releases all the guest's inodes and open files in vufsd (DESTROY); malformed requests stayed 0 throughout; a remount sees the data"
vf_umount() {
	local tag inodes handles mal
	for tag in "${VF_TAGS[@]}"; do
		echo "kept $tag" >"$VF/$tag/kept"
		umount "$VF/$tag" || { fail "cannot unmount $tag"; return 1; }
		vf_sync "$tag" || return 1
		inodes=$(stat_get "/run/vstor/fs-$tag.stats" inodes) || return
		handles=$(stat_get "/run/vstor/fs-$tag.stats" handles) || return
		mal=$(stat_get "/run/vstor/fs-$tag.stats" "vq.*.malformed") || return
		note "$tag after umount: $inodes inodes, $handles open files, $mal malformed"
		expect_eq "$tag inodes after umount" "$inodes" 1 || return 1
		expect_eq "$tag open files after umount" "$handles" 0 || return 1
		expect_eq "$tag malformed requests" "$mal" 0 || return 1
		vf_mount "$tag" || return 1
		expect_eq "$tag data after remount" "$(cat "$VF/$tag/kept")" "kept $tag" || return 1
		umount "$VF/$tag"
	done
}

TESTS=(vf_mount_all vf_cpu_list vf_pinned vf_fio_verify vf_ops vf_creds vf_cache vf_posix vf_dbench vf_stress vf_umount)
desc_vf_mount_all=$desc_vf_mount
