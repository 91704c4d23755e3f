# Runner self-test: the first guest dies in boot, before its first test,
# the way QEMU 7.2's TCG kills one 7.3 guest in about 40: an "Oops: int3"
# whose code dump no longer has the INT3 (tests/run.sh, stale_int3). The
# host must boot a second guest, keep the first one's run directory as
# .boot1, and count the tests of the second. The oops is written to the
# kernel log by hand and the crash is sysrq's; nothing here patches code.
# shellcheck shell=bash disable=SC2034 # TESTS, desc_*, SUITE_*: read by the runner

SUITE_VM=(--cpus 1 --no-disk --modules "")
SUITE_NEEDS=(kernel)
TESTS=(passes)

# Only in the guest (the host reads this file too), only in the first boot:
# the runner has moved that boot's run directory to .boot1 before the second.
if [[ " $(cat /proc/cmdline 2>/dev/null) " == *" vstor.kbase="* ]] &&
	! compgen -G "$BUILD/logs/int3once.boot1" >/dev/null &&
	! compgen -G "$BUILD/logs/*/int3once.boot1" >/dev/null; then
	{
		echo "Oops: int3: 0000 [#1] SMP"
		echo "RIP: 0010:ktime_get+0x2f/0xd0"
		echo "Code: 48 8b 05 4a bc da 00 66 <90> 0f 01 f9 66 90 48 c1 e2 20"
	} >/dev/kmsg
	echo c >/proc/sysrq-trigger
	sleep 30
fi

desc_passes="passes, in the second guest"
passes() { true; }
