# The runner checks itself: it runs tests/run.sh on the self-test suites in
# tests/selftest (tests that pass, fail, skip, time out, exit early, warn in
# the kernel log, panic the guest, or never print a plan) and checks that
# every one is counted, numbered against the plan, and judged right; and
# that the plan can be made on a bare Debian, before anything is installed.
# shellcheck shell=bash disable=SC2034 # TESTS, desc_*, SUITE_*: read by the runner

SUITE_ORDER=40
SUITE_NEEDS=(kernel)
TESTS=(host_outcomes selection plan_bare_system build_step_failure stale_int3_rule guest_warning_timeout
	guest_panic guest_no_plan guest_stale_int3)
timeout_guest_warning_timeout=600
timeout_guest_panic=600
timeout_guest_no_plan=600
timeout_guest_stale_int3=600

# selftest OUT ARGS...: tests/run.sh on the self-test suites; its output in
# OUT, its exit status returned.
selftest() {
	local out=$1
	shift
	VSTOR_SUITE_DIRS=$TOP/tests/selftest/host:$TOP/tests/selftest/guest \
		"$TOP/tests/run.sh" ${VSTOR_FLAVOR:+$([[ $VSTOR_FLAVOR == debug ]] && echo --debug)} \
		"$@" >"$out" 2>&1
}

# expect_lines OUT REGEX...: every REGEX matches a line of OUT.
expect_lines() {
	local out=$1 re
	shift
	for re in "$@"; do
		grep -Eq -- "$re" "$out" || { cat "$out"; fail "no line matching '$re'"; return; }
	done
}

desc_host_outcomes="pass, fail, skip, timeout and an early exit are each counted once, against a plan of 5"
host_outcomes() {
	local out=/tmp/vstor-selftest-host.out
	selftest $out fake && { cat $out; fail "the run passed with failing tests"; return; }
	expect_lines $out '^1\.\.5$' '^ok 1 fake:passes$' '^not ok 2 fake:fails # exit 1' \
		'^ok 3 fake:skips # SKIP no such hardware here$' \
		'^not ok 4 fake:sleeps_past_timeout # timed out after 2 s' \
		'^not ok 5 fake:exits_early # exit 1' '^1 passed, 3 failed, 1 skipped$' || return
	expect_eq "last line" "$(tail -n 1 $out)" "1 passed, 3 failed, 1 skipped"
}

desc_selection="SUITE:TEST runs one test; an unknown suite or test is an error that runs nothing"
selection() {
	local out=/tmp/vstor-selftest-sel.out
	selftest $out fake:passes || { cat $out; fail "fake:passes failed"; return; }
	expect_lines $out '^1\.\.1$' '^ok 1 fake:passes$' '^1 passed, 0 failed, 0 skipped$' || return
	selftest $out nosuch && { fail "an unknown suite was accepted"; return; }
	expect_lines $out "no suite 'nosuch'" || return
	selftest $out fake:nosuch && { fail "an unknown test was accepted"; return; }
	expect_lines $out "suite fake has no test 'nosuch'" || return
	selftest $out --list fake || { cat $out; fail "--list fake failed"; return; }
	expect_lines $out '^  fake:sleeps_past_timeout +outlives its 2 s timeout$' '^5 tests$'
}

desc_plan_bare_system="the plan is the same with only a minimal Debian's programs installed (it is made before build:deps installs anything)"
plan_bare_system() {
	local d=/tmp/vstor-selftest-bare out=/tmp/vstor-selftest-bare.out
	rm -rf $d && mkdir -p $d/real-bin $d/real-sbin $d/bin $d/sbin $d/empty || return
	"$TOP/tests/run.sh" --list >$out.full 2>&1 || { cat $out.full; fail "--list failed"; return; }
	unshare --mount --propagation private bash -c "$(declare -f bare_list); bare_list $d $TOP" >$out 2>&1 ||
		{ cat $out; fail "--list failed on the minimal system"; return; }
	diff -u $out.full $out || fail "the plan differs on the minimal system"
}

# bare_list DIR TOP: in a mount namespace of its own, hide every program
# but those of the packages mmdebstrap --variant=minbase installs (the
# Essential packages, apt, what they depend on, and awk), then list the
# plan.
bare_list() {
	local d=$1 top=$2 pkg f sub
	local -a roots
	set -e
	mount --bind /usr/bin "$d/real-bin"
	mount --bind /usr/sbin "$d/real-sbin"
	mapfile -t roots < <(dpkg-query -W -f '${Package} ${Essential}\n' | awk '$2 == "yes" { print $1 }')
	roots+=(apt "$(dpkg -S "$(readlink -f /usr/bin/awk)" | cut -d: -f1)")
	for pkg in $(apt-cache depends --recurse --installed --no-recommends --no-suggests \
		--no-conflicts --no-breaks --no-replaces --no-enhances "${roots[@]}" | grep -v '^[ <]' | sort -u); do
		while IFS= read -r f; do
			case $f in
			/usr/bin/* | /bin/*) sub=bin ;;
			*) sub=sbin ;;
			esac
			[[ -f $d/real-$sub/${f##*/} ]] && ln -sf "$d/real-$sub/${f##*/}" "$d/$sub/"
		done < <(dpkg -L "$pkg" 2>/dev/null | grep -E '^(/usr)?/s?bin/[^/]+$')
	done
	# alternatives (awk) that lead to a kept program
	for f in "$d"/real-bin/*; do
		[[ $(readlink "$f") == /etc/alternatives/* && -e $d/bin/$(basename "$(readlink -f "$f")") ]] &&
			ln -sf "$f" "$d/bin/"
	done
	mount --bind "$d/empty" /usr/local
	"$d/real-bin/mount" --bind "$d/bin" /usr/bin
	"$d/real-bin/mount" --bind "$d/sbin" /usr/sbin
	[[ -x /usr/bin/bash && -x /usr/bin/awk && ! -e /usr/bin/git && ! -e /usr/bin/python3 ]] ||
		{ echo "the minimal system is not what it should be (bash and awk, no git, no python3)"; return 1; }
	cd "$top"
	env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin tests/run.sh --list
}

desc_guest_warning_timeout="in a guest: a kernel warning fails a passing test, a test past its timeout is killed and fails, the next test runs"
guest_warning_timeout() {
	local out=/tmp/vstor-selftest-warn.out
	selftest $out warn && { cat $out; fail "the run passed"; return; }
	expect_lines $out '^1\.\.4$' '^not ok 1 warn:kernel_warning$' \
		'^not ok 2 warn:sleeps_past_timeout # timed out after [0-9]+ s' \
		'^ok 3 warn:passes$' '^ok 4 warn:boot$' '^2 passed, 2 failed, 0 skipped$'
}

desc_guest_panic="a guest that panics mid-test: that test fails, the later one is counted as not run, the boot fails"
guest_panic() {
	local out=/tmp/vstor-selftest-panic.out
	selftest $out panic && { cat $out; fail "the run passed"; return; }
	expect_lines $out '^1\.\.3$' '^not ok 1 panic:panics # the guest died during panic:panics' \
		'^not ok 2 panic:never_runs # the guest died during panic:panics' \
		'^not ok 3 panic:boot # ' '^0 passed, 3 failed, 0 skipped$'
}

desc_guest_no_plan="a guest suite that bails out before its plan: its tests still count, as failures"
guest_no_plan() {
	local out=/tmp/vstor-selftest-noplan.out
	selftest $out noplan && { cat $out; fail "the run passed"; return; }
	expect_lines $out '^1\.\.3$' '^not ok 1 noplan:first # ' '^not ok 2 noplan:second # ' \
		'^not ok 3 noplan:boot # ' '^0 passed, 3 failed, 0 skipped$'
}

desc_build_step_failure="a failed build step stops only the steps and suites that stand on it; the rest run and count"
build_step_failure() {
	local out=/tmp/vstor-selftest-steps.out
	VSTOR_SUITE_DIRS=$TOP/tests/selftest/steps/host VSTOR_SELFTEST_FAIL=kernel \
		"$TOP/tests/run.sh" steps usekernel usetools usefio useinitramfs >$out 2>&1 &&
		{ cat $out; fail "the run passed with a failed step"; return; }
	expect_lines $out '^1\.\.11$' '^ok 2 steps:tree$' '^not ok 4 steps:kernel # exit 1' \
		'^ok 5 steps:tools$' '^ok 6 steps:fio$' '^not ok 7 steps:initramfs # not run: steps:kernel failed$' \
		'^ok 8 usefio:passes$' '^not ok 9 useinitramfs:passes # not run: steps:kernel failed$' \
		'^not ok 10 usekernel:passes # not run: steps:kernel failed$' '^ok 11 usetools:passes$' \
		'^7 passed, 4 failed, 0 skipped$' || return
	VSTOR_SUITE_DIRS=$TOP/tests/selftest/steps/host VSTOR_SELFTEST_FAIL=deps \
		"$TOP/tests/run.sh" steps usetools usefio >$out 2>&1 &&
		{ cat $out; fail "the run passed with a failed step"; return; }
	expect_lines $out '^not ok 1 steps:deps # exit 1' '^not ok 2 steps:tree # not run: steps:deps failed$' \
		'^not ok 9 usetools:passes # not run: steps:deps failed$' '^0 passed, 9 failed, 0 skipped$'
}

desc_stale_int3_rule="a second boot only for an INT3 oops in boot whose code dump has no INT3 left: not for a live INT3, an oops in a test, or another report first"
stale_int3_rule() {
	local real=$TOP/tests/selftest/klog/stale-int3.log d=/tmp/vstor-selftest-int3
	rm -rf $d && mkdir -p $d || return
	# A real one: QEMU 7.2, the 7.3.4 guest, "clocksource: Switched to
	# clocksource tsc" and a timer interrupt on the other vCPU.
	stale_int3 "$real" || { fail "the recorded stale INT3 was not recognised"; return; }
	# The INT3 still in memory: a breakpoint nobody claimed, not a stale one.
	sed -E 's/ 0f <1f> 44 / cc <1f> 44 /' "$real" >$d/live.log
	expect_eq "a live INT3" "$(stale_int3 $d/live.log && echo retry || echo no)" no || return
	# The same oops once a test has begun: that test's failure, no retry.
	{ echo "[    1.500000] vstor-test: start 1 x:y"; cat "$real"; } >$d/intest.log
	expect_eq "an oops during a test" "$(stale_int3 $d/intest.log && echo retry || echo no)" no || return
	# Another report before it: that one counts, no retry.
	{ echo "[    1.500000] WARNING: CPU: 0 PID: 1 at kernel/x.c:1 f+0x0/0x10"; cat "$real"; } >$d/warn.log
	expect_eq "a warning first" "$(stale_int3 $d/warn.log && echo retry || echo no)" no || return
	# Not an int3 oops at all.
	sed 's/Oops: int3: /Oops: general protection fault: /' "$real" >$d/gp.log
	expect_eq "another oops" "$(stale_int3 $d/gp.log && echo retry || echo no)" no || return
	expect_eq "no log" "$(stale_int3 $d/none.log && echo retry || echo no)" no
}

desc_guest_stale_int3="a guest that dies of a stale INT3 before its first test is booted once more; its tests count from the second guest, and the first guest's logs stay"
guest_stale_int3() {
	local out=/tmp/vstor-selftest-int3.out keep
	selftest $out int3once || { cat $out; fail "the run failed"; return; }
	expect_lines $out '^1\.\.2$' '^# boot retried: the first guest died in boot of an INT3' \
		'^ok 1 int3once:passes$' '^ok 2 int3once:boot$' \
		'^# guests booted twice after a stale INT3: int3once$' '^2 passed, 0 failed, 0 skipped$' || return
	keep=$(sed -nE 's|^# boot retried: .*see (.*)/console\.log\)$|\1|p' $out)
	if [[ -z $keep ]] || ! grep -q "Oops: int3: " "$keep/console.log"; then
		fail "the first guest's console log was not kept (${keep:-no path})"
	fi
}

