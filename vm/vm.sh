#!/usr/bin/env bash
# Boot a built guest kernel with the host's root shared read-only over 9p,
# run one command in it and return that command's exit status.
#
#   vm/vm.sh [options] [--] command [args...]
#
#   --flavor guest|debug   kernel to boot (default guest)
#   --kernel PATH          boot this bzImage instead
#   --cpus N               vCPUs (default 2)
#   --mem SIZE             guest RAM (default 2G)
#   --disk SPEC            add a virtio-blk disk; repeatable. SPEC is
#                          file[:size=1G,queues=2,aio=io_uring] (sparse file)
#                          or null[:size=1G,queues=2] (QEMU null-co, reads
#                          return zeroes) or same:of=K (no new backend: disk
#                          K's block node, e.g. virtio-blk and NVMe on one
#                          file). Default: one file disk. Also: ro
#                          (read-only), bus=nvme (an emulated NVMe
#                          controller instead of virtio-blk), iothread
#                          (virtio-blk only: the device runs in an I/O
#                          thread of its own, iotK, not in QEMU's main loop;
#                          its block node cannot be shared with same:),
#                          qsize=N (virtio-blk virtqueue size, QEMU's
#                          queue-size; default 256), noindirect (virtio-blk
#                          without indirect descriptors: each request then
#                          takes three or more ring entries, and a ring
#                          fills before the disk's tags run out),
#                          errsector=S (file disks: QEMU's blkdebug fails
#                          every read and write that touches 512-byte
#                          sector S with EIO; the device reports IOERR),
#                          err=OP:ERRNO:SECTOR:MODE (file disks, repeatable:
#                          blkdebug fails OP (read, write or flush) with
#                          ERRNO (eio or enospc), for reads and writes only
#                          those that touch 512-byte sector SECTOR (flush:
#                          write -), MODE once or always; errsector=S is
#                          err=read:eio:S:always,err=write:eio:S:always),
#                          werror=ACTION and rerror=ACTION (virtio-blk: what
#                          QEMU does with a failed write or read: report,
#                          stop, enospc (stop on ENOSPC, report the rest:
#                          QEMU's default for writes) or ignore),
#                          logwrites (file disks: QEMU's blklogwrites
#                          records every completed write and flush in
#                          RUNDIR/diskK.log, dm-log-writes' format, for
#                          tests/tools/replay_log.py; the device offers no
#                          discard or write-zeroes, which QEMU 7.2's
#                          blklogwrites cannot log safely),
#                          pcibridge (virtio-blk: the device sits alone
#                          behind a PCI-PCI bridge of its own, so the guest
#                          can reset it by a secondary bus reset, e.g.
#                          echo 1 >/sys/bus/pci/devices/D/reset).
#   --no-disk              no virtio-blk disk at all
#   --pin                  pin QEMU's threads once it runs: vCPU k on host
#                          CPU k (modulo the host's CPUs), every other thread
#                          (main loop, I/O threads, workers) on the host CPUs
#                          above the vCPUs', or, if the vCPUs take them all,
#                          on all but vCPU 0's, so that a guest process on
#                          vCPU 0 has a host CPU to itself; the pinning is
#                          written to RUNDIR/pin.txt
#   --qemu ARG             extra QEMU argument; repeatable
#   --shared-mem           guest RAM in a shared memfd, as vhost-user devices
#                          (vhost-user-blk-pci, vhost-user-fs-pci) need
#   --virtiofs SPEC        add a virtio-fs device served by a daemon started on
#                          the host; repeatable; implies --shared-mem. SPEC is
#                          tag=T[,queues=N,daemon=vufsd|virtiofsd,poll=US,
#                          threads=K,dir=PATH,cache=auto|always|never,
#                          writeback,acl,killpriv,bin=PATH]. The daemon serves DIR (default
#                          RUNDIR/fs-T, created; a relative DIR is under
#                          RUNDIR, so dir=fs-U shares tag U's directory) on
#                          RUNDIR/fs-T.sock; vufsd
#                          writes its counters to RUNDIR/fs-T.stats (the guest
#                          reads them as /run/vstor/fs-T.stats) and logs to
#                          RUNDIR/fs-T.log (killpriv: virtiofsd with
#                          -o killpriv_v2; acl: POSIX ACLs, vufsd
#                          --posix-acl, virtiofsd -o posix_acl; bin: another
#                          vufsd binary, e.g. an older one to compare).
#                          daemon=virtiofsd is the release's: the Rust
#                          virtiofsd (Debian 13's package virtiofsd,
#                          /usr/libexec/virtiofsd; threads=K: its
#                          --thread-pool-size, default 0, no pool) if
#                          installed, else QEMU 7.2's C one
#                          (/usr/lib/qemu/virtiofsd, Debian 12); one request
#                          queue either way. After the guest powers off each
#                          daemon gets SIGTERM; one that does not exit 0 fails
#                          the run (exit 126 when the command succeeded).
#   --insncount            load the insncount TCG plugin (scripts/build-plugin.sh,
#                          tools/insncount): it counts the guest's instructions
#                          per vCPU, user and kernel, and per named range of
#                          RUNDIR/insncount.ranges, and appends a snapshot to
#                          RUNDIR/insncount.json (/run/vstor/insncount.json in
#                          the guest) at each marker the guest's insnmark
#                          executes. TCG only; refused when the plugin was
#                          built for another QEMU version.
#   --append ARGS          extra kernel command line
#   --modules "M..."       modules to load at boot (default virtio_blk; ""
#                          for none); their options come from --append
#   --timeout SECS         kill the VM after this long (default 1800)
#   --keep DIR             use DIR as run directory and keep it
#   --initramfs FILE       the guest's root is the cpio archive FILE (made by
#                          vm/initramfs.sh, for second-level guests) instead
#                          of the host's root: unpacked once into a directory
#                          in /tmp (memory, in a first-level guest) that is
#                          shared read-only over 9p as the root (the guest
#                          kernel has no CONFIG_BLK_DEV_INITRD for -initrd).
#                          Refused when a file that went into FILE has
#                          changed since (vm/initramfs.sh --check). The
#                          command runs in the caller's directory if FILE has
#                          it, else in /.
#   --minimal              fewer emulated devices and less probing, for
#                          second-level guests (TCG inside TCG, where each
#                          costs seconds): QEMU's -nodefaults (no NIC, VGA,
#                          floppy, CD-ROM or parallel port), one serial port,
#                          PCI interrupts routed from the BIOS's table
#                          (pci=noacpi) rather than by running ACPI code.
#
# The run directory (shared with the guest read-write as /run/vstor) holds
# console.log, output, dmesg and status, qemu.log and qemu.cmd, and hostpath
# (its own path, for messages in the guest). SIGTERM or SIGINT stops QEMU
# and ends the run as a guest that did not finish. The guest can have the
# host send QMP commands to QEMU (device_del vdisk1, device_add ...): it
# drops a JSON command in qmp/NAME.req and gets QEMU's reply in
# qmp/NAME.resp (see host_qmp in tests/guest/lib.sh). Disks are devices
# vdisk0, vdisk1, ... on block nodes d0, d1, ... A kernel log with a
# WARNING, BUG, Oops, KASAN, UBSAN or lockdep report makes the run fail
# (exit 125 when the command itself succeeded), as does a guest that never
# reported a status.
set -euo pipefail
. "$(dirname "$0")/../scripts/lib.sh"

flavor=guest kernel="" cpus=2 mem=2G timeout=1800 append="" rundir="" initramfs=""
minimal=0 insncount=0
modules=virtio_blk
disks=() extra=() nodisk=0 sharedmem=0 vfs=() pin=0
while (($#)); do
	case $1 in
	--flavor) flavor=$2; shift 2 ;;
	--kernel) kernel=$2; shift 2 ;;
	--cpus) cpus=$2; shift 2 ;;
	--mem) mem=$2; shift 2 ;;
	--disk) disks+=("$2"); shift 2 ;;
	--no-disk) nodisk=1; shift ;;
	--pin) pin=1; shift ;;
	--qemu) extra+=("$2"); shift 2 ;;
	--shared-mem) sharedmem=1; shift ;;
	--virtiofs) vfs+=("$2"); sharedmem=1; shift 2 ;;
	--append) append+=" $2"; shift 2 ;;
	--modules) modules=$2; shift 2 ;;
	--timeout) timeout=$2; shift 2 ;;
	--keep) rundir=$2; shift 2 ;;
	--initramfs) initramfs=$2; shift 2 ;;
	--minimal) minimal=1; shift ;;
	--insncount) insncount=1; shift ;;
	--) shift; break ;;
	-*) die "unknown option $1 (see the header of $0)" ;;
	*) break ;;
	esac
done
(($#)) || die "no command given"
kernel=${kernel:-$(kobj "$flavor")/arch/x86/boot/bzImage}
[[ -r $kernel ]] || die "no kernel at $kernel: run scripts/build-kernel.sh $flavor"
((nodisk)) || ((${#disks[@]})) || disks=(file)

# Daemons of --virtiofs devices; stopped however vm.sh ends.
vfs_args=() vfs_pids=() vfs_tags=() vfs_kinds=()
vfs_stop() {
	local k tag rc
	for k in "${!vfs_pids[@]}"; do
		tag=${vfs_tags[$k]}
		kill -TERM "${vfs_pids[$k]}" 2>/dev/null
		rc=0
		if ! timeout 20 tail --pid="${vfs_pids[$k]}" -f /dev/null; then
			echo "vm: virtiofs daemon for $tag ignored SIGTERM for 20 s; killed" >&2
			kill -KILL "${vfs_pids[$k]}" 2>/dev/null
		fi
		wait "${vfs_pids[$k]}" || rc=$?
		echo "$rc" >"$rundir/fs-$tag.rc"
	done
	vfs_pids=()
}

# QEMU's QMP socket lives in a directory of its own: a run directory on 9p
# (a second-level guest's, inside the first-level guest's) cannot hold a
# socket (bind fails with ENXIO).
sockdir=$(mktemp -d "${TMPDIR:-/tmp}/vstor-vm.XXXXXX")
cpid=""
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() { # however vm.sh ends
	vfs_stop
	[[ -z $cpid ]] || kill "$cpid" 2>/dev/null || true
	rm -rf "$sockdir"
}
if [[ -z $rundir ]]; then
	mkdir -p "$BUILD/vm"
	rundir=$(mktemp -d "$BUILD/vm/run.XXXXXX")
	trap 'cleanup; rm -rf "$rundir"' EXIT
else
	trap cleanup EXIT
	mkdir -p "$rundir"
	rm -f "$rundir"/{status,output,dmesg,console.log,modroot,modules,hostpath,insncount.json,insncount.ranges}
fi
rundir=$(cd "$rundir" && pwd)
# Where this run directory is for the machine running vm.sh, so that the
# guest's messages can say where its logs are (a second-level guest's run
# directory lives inside the first-level guest's, /run/vstor/...).
echo "$rundir" >"$rundir/hostpath"

# Modules installed next to the kernel by build-kernel.sh.
modroot=$(cd "$(dirname "$kernel")/../../.." && pwd)/modroot
if [[ -d $modroot/lib/modules ]]; then
	echo "$modroot" >"$rundir/modroot"
	[[ -z $modules ]] || echo "$modules" >"$rundir/modules"
fi

# The root: the host's, or an archive of vm/initramfs.sh. The archive is
# refused if what went into it changed (a stale copy of a test script would
# run silently).
rootdir=/ cdfail="exit 1"
if [[ -n $initramfs ]]; then
	"$TOP/vm/initramfs.sh" --check "$initramfs"
	# Unpacked once per version of the archive; the second-level guests of
	# one first-level boot share it (read-only to them).
	key=$(stat -L -c '%s %Y %i %n' "$initramfs" | sha256sum | cut -c1-16)
	rootdir=${TMPDIR:-/tmp}/vstor-root-$key
	if [[ ! -d $rootdir ]]; then
		tmp=$(mktemp -d "$rootdir.XXXXXX")
		(cd "$tmp" && cpio -i -d -m --quiet --no-absolute-filenames) <"$initramfs" ||
			die "cannot unpack $initramfs"
		mv -T "$tmp" "$rootdir" 2>/dev/null || rm -rf "$tmp"
	fi
	cdfail="cd /"
fi

# The command, run by guest-init.sh from the caller's directory.
{
	echo "cd $(printf '%q' "$PWD") 2>/dev/null || $cdfail"
	printf '%q ' "$@"
	echo
} >"$rundir/cmd"

# Accelerator: KVM only when it is a real hardware KVM (kvm_intel/kvm_amd);
# the paravirtual KVM on our build machines cannot boot a stock kernel.
accel=${VM_ACCEL:-}
if [[ -z $accel ]]; then
	accel=tcg
	if [[ -w /dev/kvm ]] && { [[ -d /sys/module/kvm_intel ]] || [[ -d /sys/module/kvm_amd ]]; } &&
		[[ ! -d /sys/module/kvm_pvm ]]; then
		accel=kvm
	fi
fi
case $accel in
kvm) accel_args=(-accel kvm -cpu host) ;;
tcg) accel_args=(-accel "tcg,thread=multi" -cpu max) ;;
*) die "VM_ACCEL must be kvm or tcg" ;;
esac

# insncount: the plugin must be built for this QEMU's plugin API.
plugin_args=()
if ((insncount)); then
	[[ $accel == tcg ]] || die "--insncount counts under TCG only (VM_ACCEL=$accel)"
	plugin=$BUILD/tools/insncount.so
	[[ -r $plugin && -r $BUILD/tools/insncount.qemu ]] ||
		die "--insncount: no $plugin: run scripts/build-plugin.sh"
	qv=$(qemu-system-x86_64 --version | sed -n '1s/^QEMU emulator version \([0-9.]*\).*/\1/p')
	[[ $(<"$BUILD/tools/insncount.qemu") == "$qv" ]] ||
		die "--insncount: $plugin was built for QEMU $(<"$BUILD/tools/insncount.qemu"), this is QEMU $qv: run scripts/build-plugin.sh"
	plugin_args=(-plugin "$plugin,out=$rundir/insncount.json,ranges=$rundir/insncount.ranges")
fi

disk_args=() iot_disk=()
# blkdebug_rules OP:ERRNO:SECTOR:MODE...: blkdebug's inject-error rules,
# as JSON objects joined by commas.
blkdebug_rules() {
	local r op errno sector mode ev out=""
	for r in "$@"; do
		IFS=: read -r op errno sector mode <<<"$r"
		case $op in
		read) ev=read_aio ;;
		write) ev=write_aio ;;
		flush) ev=flush_to_disk ;;
		*) die "err: OP is read, write or flush, not '$op' in '$r'" ;;
		esac
		case $errno in
		eio) errno=5 ;;
		enospc) errno=28 ;;
		*) die "err: ERRNO is eio or enospc, not '$errno' in '$r'" ;;
		esac
		[[ $mode == once || $mode == always ]] || die "err: MODE is once or always, not '$mode' in '$r'"
		out+="${out:+,}{\"event\":\"$ev\",\"iotype\":\"$op\",\"errno\":$errno,\"once\":$([[ $mode == once ]] && echo true || echo false)"
		if [[ $op == flush ]]; then
			[[ $sector == - ]] || die "err: a flush has no sector: write flush:ERRNO:-:MODE, not '$r'"
		else
			[[ $sector =~ ^[0-9]+$ ]] || die "err: SECTOR is a sector number, not '$sector' in '$r'"
			out+=",\"sector\":$sector"
		fi
		out+="}"
	done
	echo "$out"
}

i=0
for spec in "${disks[@]}"; do
	kind=${spec%%:*}
	opts=""
	[[ $spec == *:* ]] && opts=${spec#*:}
	size=1G queues=2 aio=io_uring ro=off bus=virtio same="" iothread="" qsize="" noindirect="" logwrites=""
	pcibridge=""
	errs=() werror="" rerror=""
	IFS=, read -ra kv <<<"$opts"
	for o in "${kv[@]}"; do
		case $o in
		size=*) size=${o#size=} ;;
		queues=*) queues=${o#queues=} ;;
		aio=*) aio=${o#aio=} ;;
		ro) ro=on ;;
		bus=virtio | bus=nvme) bus=${o#bus=} ;;
		of=*) same=${o#of=} ;;
		iothread) iothread=iot$i ;;
		qsize=*) qsize=${o#qsize=} ;;
		noindirect) noindirect=1 ;;
		errsector=*)
			[[ ${o#errsector=} =~ ^[0-9]+$ ]] || die "errsector takes a sector number, not '${o#errsector=}'"
			errs+=("read:eio:${o#errsector=}:always" "write:eio:${o#errsector=}:always")
			;;
		err=*) errs+=("${o#err=}") ;;
		werror=report | werror=stop | werror=enospc | werror=ignore) werror=${o#werror=} ;;
		rerror=report | rerror=stop | rerror=ignore) rerror=${o#rerror=} ;;
		logwrites) logwrites=1 ;;
		pcibridge) pcibridge=1 ;;
		*) die "unknown disk option '$o' in '$spec'" ;;
		esac
	done
	node=d$i
	if [[ $kind == same ]]; then
		[[ -n $same ]] || die "same needs of=K in '$spec'"
		node=d$same
		# A block node lives in one AioContext: QEMU aborts when a
		# second device would move it into or out of an I/O thread.
		[[ -z $iothread && -z ${iot_disk[$same]:-} ]] ||
			die "a disk with iothread shares its block node with no other: '$spec'"
	fi
	[[ -z $iothread ]] || iot_disk[i]=1
	# Block nodes are -blockdev, not -drive: they outlive device_del, so a
	# test can unplug a disk and plug it back (device_add) with its data.
	case $kind in
	file)
		img=$rundir/disk$i.img
		truncate -s "$size" "$img"
		disk_args+=(-blockdev "driver=file,node-name=f$i,filename=$img,aio=$aio,cache.direct=on,read-only=$ro")
		proto=f$i
		if ((${#errs[@]})); then
			# blkdebug's error rules only come as JSON.
			disk_args+=(-blockdev "{\"driver\":\"blkdebug\",\"node-name\":\"e$i\",\"image\":\"f$i\",\"inject-error\":[$(blkdebug_rules "${errs[@]}")]}")
			proto=e$i
		fi
		if [[ -n $logwrites ]]; then
			: >"$rundir/disk$i.log"
			disk_args+=(-blockdev "driver=file,node-name=l$i,filename=$rundir/disk$i.log,aio=$aio,cache.direct=off")
			disk_args+=(-blockdev "driver=blklogwrites,node-name=w$i,file=$proto,log=l$i,log-sector-size=512")
			proto=w$i
		fi
		disk_args+=(-blockdev "driver=raw,node-name=d$i,file=$proto,read-only=$ro")
		;;
	null)
		if ((${#errs[@]})) || [[ -n $logwrites ]]; then
			die "errsector, err and logwrites need a file disk, in '$spec'"
		fi
		bytes=$(numfmt --from=iec "$size")
		disk_args+=(-blockdev "driver=null-co,node-name=d$i,size=$bytes,read-zeroes=on,read-only=$ro")
		;;
	same) ;;
	*) die "unknown disk kind '$kind' (file or null)" ;;
	esac
	# share-rw: a node may back two devices (same=K).
	if [[ $bus == nvme ]]; then
		# QEMU 7.2's NVMe controller has no iothread property.
		[[ -z $iothread ]] || die "iothread needs a virtio-blk disk, not bus=nvme, in '$spec'"
		[[ -z $qsize$noindirect$werror$rerror$pcibridge ]] ||
			die "qsize, noindirect, werror, rerror and pcibridge need a virtio-blk disk, not bus=nvme, in '$spec'"
		disk_args+=(-device "nvme,id=vdisk$i,drive=$node,serial=vstor$i,share-rw=on")
	else
		dev="virtio-blk-pci,id=vdisk$i,drive=$node,num-queues=$queues,serial=vstor$i,share-rw=on"
		[[ -z $qsize ]] || dev+=",queue-size=$qsize"
		[[ -z $noindirect ]] || dev+=",indirect_desc=off"
		[[ -z $logwrites ]] || dev+=",discard=off,write-zeroes=off"
		[[ -z $werror ]] || dev+=",werror=$werror"
		[[ -z $rerror ]] || dev+=",rerror=$rerror"
		if [[ -n $pcibridge ]]; then
			# chassis_nr: each bridge's slot numbering needs its own.
			disk_args+=(-device "pci-bridge,id=pb$i,chassis_nr=$((i + 1)),shpc=off")
			dev+=",bus=pb$i,addr=1"
		fi
		if [[ -n $iothread ]]; then
			disk_args+=(-object "iothread,id=$iothread")
			dev+=",iothread=$iothread"
		fi
		disk_args+=(-device "$dev")
	fi
	i=$((i + 1))
done

# virtio-fs devices, each with its daemon on the host.
k=0
for spec in "${vfs[@]}"; do
	tag="" queues=1 daemon=vufsd poll=0 threads="" dir="" vdopts=() cache=auto vuopts=() vubin=""
	IFS=, read -ra kv <<<"$spec"
	for o in "${kv[@]}"; do
		case $o in
		tag=*) tag=${o#tag=} ;;
		queues=*) queues=${o#queues=} ;;
		daemon=vufsd | daemon=virtiofsd) daemon=${o#daemon=} ;;
		poll=*) poll=${o#poll=} ;;
		threads=*) threads=${o#threads=} ;;
		dir=*) dir=${o#dir=} ;;
		cache=auto) ;;
		cache=always | cache=never) cache=${o#cache=} vuopts+=(--cache "$cache") ;;
		writeback) vuopts+=(--writeback) vdopts+=(-o writeback) ;;
		acl) vuopts+=(--posix-acl) vdopts+=(-o posix_acl) ;;
		bin=*) vubin=${o#bin=} ;;
		killpriv) vdopts+=(-o killpriv_v2) ;;
		*) die "unknown virtiofs option '$o' in '$spec'" ;;
		esac
	done
	[[ $tag =~ ^[A-Za-z0-9_-]+$ ]] || die "virtiofs needs tag=NAME (letters, digits, - and _): '$spec'"
	dir=${dir:-fs-$tag}
	[[ $dir == /* ]] || dir=$rundir/$dir
	mkdir -p "$dir"
	sock=$rundir/fs-$tag.sock
	rm -f "$sock" "$rundir/fs-$tag.rc" "$rundir/fs-$tag.stats"
	case $daemon in
	vufsd)
		bin=$BUILD/tools/vufsd
		if [[ -n $vubin ]]; then
			bin=$vubin
		else
			make -s -C "$TOP/tools/vufsd" OUT="$BUILD/tools" >&2
		fi
		# --xattr as virtiofsd's -o xattr below (user.* names only).
		"$bin" --socket "$sock" --shared-dir "$dir" --queues "$queues" --xattr \
			"${vuopts[@]}" \
			--busy-poll "$poll" --threads "${threads:-1}" --stats "$rundir/fs-$tag.stats" \
			>"$rundir/fs-$tag.log" 2>&1 &
		;;
	virtiofsd)
		((queues == 1)) || die "virtiofsd serves one request queue, not $queues"
		if [[ -x $RUST_VIRTIOFSD ]]; then
			# The same options by their names there (-o is its old syntax).
			rdopts=()
			for o in "${vdopts[@]}"; do
				[[ $o == -o ]] || rdopts+=("--${o//_/-}")
			done
			"$RUST_VIRTIOFSD" --socket-path="$sock" --shared-dir="$dir" \
				--sandbox=chroot --cache="$cache" --xattr "${rdopts[@]}" \
				--thread-pool-size="${threads:-0}" >"$rundir/fs-$tag.log" 2>&1 &
		elif [[ -x $C_VIRTIOFSD ]]; then
			[[ -z $threads ]] || die "threads=$threads: for vufsd and the Rust virtiofsd"
			# The C one calls cache=never "none".
			"$C_VIRTIOFSD" --socket-path="$sock" -o source="$dir" \
				-o sandbox=chroot -o cache="${cache/#never/none}" -o xattr "${vdopts[@]}" \
				>"$rundir/fs-$tag.log" 2>&1 &
		else
			die "daemon=virtiofsd: neither $RUST_VIRTIOFSD (Debian 13: apt-get install virtiofsd) nor $C_VIRTIOFSD (Debian 12's qemu-system-x86)"
		fi
		;;
	esac
	vfs_pids+=($!)
	vfs_tags+=("$tag")
	vfs_kinds+=("$daemon")
	for _ in $(seq 100); do
		[[ -S $sock ]] && break
		kill -0 $! 2>/dev/null || break
		sleep 0.05
	done
	if [[ ! -S $sock ]]; then
		cat "$rundir/fs-$tag.log" >&2
		vfs_stop
		die "virtiofs $tag: $daemon did not start"
	fi
	vfs_args+=(-chardev "socket,id=fsc$k,path=$sock"
		-device "vhost-user-fs-pci,chardev=fsc$k,tag=$tag,num-request-queues=$queues,queue-size=1024")
	k=$((k + 1))
done

cmdline="console=ttyS0 root=root rootfstype=9p"
cmdline+=" rootflags=trans=virtio,version=9p2000.L,msize=1048576,cache=loose ro"
cmdline+=" init=$TOP/vm/guest-init.sh panic=-1 loglevel=7"
# The guest runs the same base's tools (a nested guest boots this base's kernel).
cmdline+=" vstor.kbase=$KBASE"
minimal_args=()
if ((minimal)); then
	cmdline+=" pci=noacpi 8250.nr_uarts=1"
	minimal_args=(-nodefaults)
fi
# The debug kernel boots with 4-level paging. QEMU's -cpu max offers LA57,
# and 7.3's identify_cpu() zeroes the boot CPU's capability words before it
# reads CPUID again, with alternatives not yet patched: an interrupt in that
# window runs KASAN's checks with pgtable_l5_enabled() false, so
# KASAN_SHADOW_START is the 4-level one and any access to the 5-level direct
# map is reported as a wild-memory-access (Documentation/review-fixes.md,
# "The mainline debug-kernel run"). Nothing tested here depends on the
# paging depth; the guest kernel keeps LA57.
[[ $flavor != debug ]] || cmdline+=" no5lvl"
# Under TCG the guest's TSC follows the host's clock and is the same for
# every vCPU, but the clocksource watchdog compares it with the emulated
# HPET, and a vCPU thread the host deschedules between the two reads looks
# like skew: on a busy host the guest marks the TSC unstable and switches
# to the HPET, whose every read is an emulated MMIO access. Three guests
# of one make test run did so, 15 to 80 s after boot, and their
# time-stamping tests ran up to 3.5 times slower from then on; a benchmark
# would change speed in mid-run.
[[ $accel != tcg ]] || cmdline+=" tsc=reliable"
cmdline+=" rcupdate.rcu_cpu_stall_timeout=60 brd.rd_nr=0 null_blk.nr_devices=0$append"

machine=(-machine pc)
if ((sharedmem)); then
	machine=(-object "memory-backend-memfd,id=mem,size=$mem,share=on"
		-machine "pc,memory-backend=mem")
fi
# debug-threads: QEMU names its threads ("CPU 0/TCG", "IO iot0", ...), so
# that a benchmark can tell the vCPUs' CPU time from the rest.
qemu=(qemu-system-x86_64 -name "vstor,debug-threads=on" "${machine[@]}" "${accel_args[@]}" -smp "$cpus" -m "$mem"
	"${minimal_args[@]}" -display none -no-reboot -monitor none -serial "pipe:$sockdir/console"
	-qmp "unix:$sockdir/qmp.sock,server=on,wait=off"
	-kernel "$kernel" -append "$cmdline"
	-virtfs "local,path=$rootdir,mount_tag=root,security_model=none,readonly=on,multidevs=remap"
	-virtfs "local,path=$rundir,mount_tag=vstor,security_model=none"
	"${disk_args[@]}" "${vfs_args[@]}" "${plugin_args[@]}" "${extra[@]}")
printf '%q ' "${qemu[@]}" >"$rundir/qemu.cmd"

: >"$rundir/output"  # guest-init appends to it
# The serial console reaches console.log through a pipe and a cat: QEMU
# writes each character with its own write(2), with the guest stopped, and
# on 9p (a second-level guest's run directory) each one is a round trip to
# the host (3 ms in a first-level guest under TCG: about a minute of a
# nested boot's 20 KB of kernel log). The cat writes what has piled up.
mkfifo "$sockdir/console.in" "$sockdir/console.out"
: >"$rundir/console.log"
cat "$sockdir/console.out" >>"$rundir/console.log" &
cpid=$!
# pin_qemu (--pin): vCPU k's thread on host CPU k (modulo the CPUs), QEMU's
# other threads on the CPUs above the vCPUs', or, when the vCPUs take them
# all, on every CPU but vCPU 0's. Threads QEMU starts later inherit the
# setting from their creator.
pin_qemu() {
	local tries=0 reply ncpu nv rest tgid k pf
	local -a tids
	while [[ ! -S $sockdir/qmp.sock ]] && ((tries++ < 100)); do
		sleep 0.1
	done
	reply=$(echo '{"execute": "query-cpus-fast"}' | "$TOP/vm/qmp.py" "$sockdir/qmp.sock" 2>&1) || {
		echo "query-cpus-fast: $reply" >"$rundir/pin.txt"
		return 1
	}
	mapfile -t tids < <(python3 -c 'import json, sys
for c in json.load(sys.stdin)["return"]:
    print(c["thread-id"])' <<<"$reply")
	ncpu=$(nproc) nv=${#tids[@]}
	((nv)) || { echo "no vCPU threads in: $reply" >"$rundir/pin.txt"; return 1; }
	tgid=$(awk '/^Tgid:/ { print $2 }' "/proc/${tids[0]}/status")
	# The rest: the CPUs no vCPU has, else all but vCPU 0's (the one a
	# benchmark runs its submitter on), else CPU 0.
	if ((nv < ncpu)); then
		rest=$nv-$((ncpu - 1))
	elif ((ncpu > 1)); then
		rest=1-$((ncpu - 1))
	else
		rest=0
	fi
	exec {pf}>"$rundir/pin.txt"
	taskset -a -p -c "$rest" "$tgid" >/dev/null 2>&$pf || return 1
	echo "qemu $tgid: every thread on host CPUs $rest" >&$pf
	for k in "${!tids[@]}"; do
		taskset -p -c $((k % ncpu)) "${tids[$k]}" >/dev/null 2>&$pf || return 1
		echo "vCPU $k (thread ${tids[$k]}) on host CPU $((k % ncpu))" >&$pf
	done
	exec {pf}>&-
}

rm -rf "$rundir/qmp"
mkdir -p "$rundir/qmp"
timeout --foreground -k 10 "$timeout" "${qemu[@]}" </dev/null >"$rundir/qemu.log" 2>&1 &
qpid=$!
if ((pin)) && ! pin_qemu; then
	echo "vm: --pin failed (see $rundir/pin.txt); stopping QEMU" >&2
	kill -TERM $qpid 2>/dev/null
fi
tail -q -n +1 --pid=$qpid -f "$rundir/output" &
tpid=$!
# Serve the guest's QMP requests while QEMU runs.
(
	while kill -0 $qpid 2>/dev/null; do
		for req in "$rundir"/qmp/*.req; do
			[[ -e $req ]] || continue
			# An error reply is a reply too: pass it on (set -e would
			# otherwise end this loop and leave the guest waiting).
			"$TOP/vm/qmp.py" "$sockdir/qmp.sock" <"$req" >"${req%.req}.tmp" 2>&1 || true
			mv "${req%.req}.tmp" "${req%.req}.resp"
			rm -f "$req"
		done
		sleep 0.2
	done
) &
apid=$!
# SIGTERM/SIGINT (a test giving up on this guest): stop QEMU, then finish
# as usual, so the run directory says what happened.
trap 'kill -TERM $qpid 2>/dev/null' TERM INT
set +e
wait $qpid
qrc=$?
while kill -0 $qpid 2>/dev/null; do
	wait $qpid
	qrc=$?
done
trap - TERM INT
# The cat ends at the pipe's end of file; open and close the pipe for
# writing in case QEMU never opened it (the cat still waits in open(2)).
exec {cw}<>"$sockdir/console.out"
exec {cw}>&-
wait $cpid
wait $tpid 2>/dev/null
wait $apid 2>/dev/null
vfs_stop
set -e

if [[ ! -s $rundir/status ]]; then
	printf 'vm: guest did not finish (qemu exit %d); last console lines:\n' "$qrc" >&2
	tail -n 40 "$rundir/console.log" >&2 || true
	cat "$rundir/qemu.log" >&2 || true
	exit 124
fi
rc=$(cat "$rundir/status")
if grep -Eq "$KLOG_BAD" "$rundir/console.log"; then
	printf 'vm: kernel log reports a problem:\n' >&2
	grep -E -B2 -A20 "$KLOG_BAD" "$rundir/console.log" | head -n 80 >&2
	((rc != 0)) || rc=125
fi
# QEMU's virtiofsd dies of SIGTERM (143); ours must exit 0.
for k in "${!vfs_tags[@]}"; do
	tag=${vfs_tags[$k]}
	drc=$(cat "$rundir/fs-$tag.rc" 2>/dev/null || echo unknown)
	if [[ $drc != 0 && ! (${vfs_kinds[$k]} == virtiofsd && $drc == 143) ]]; then
		printf 'vm: virtiofs daemon for %s exited with %s; its log:\n' "$tag" "$drc" >&2
		tail -n 20 "$rundir/fs-$tag.log" >&2
		((rc != 0)) || rc=126
	fi
done
exit "$rc"
