# Runner self-test: stand-in build steps, under the real steps' names (the
# runner knows what each stands on, tests/run.sh STEP_DEPS). Each passes,
# unless VSTOR_SELFTEST_FAIL names it. Nothing is built.
# shellcheck shell=bash disable=SC2034 # TESTS, desc_*, SUITE_*: read by the runner

SUITE_ORDER=0
SUITE_FATAL=1
TESTS=(deps tree roundtrip kernel tools fio initramfs)

# step NAME: fails if VSTOR_SELFTEST_FAIL names NAME.
step() {
	[[ " ${VSTOR_SELFTEST_FAIL:-} " != *" $1 "* ]] || fail "made to fail (VSTOR_SELFTEST_FAIL)"
}
deps() { step deps; }
tree() { step tree; }
roundtrip() { step roundtrip; }
kernel() { step kernel; }
tools() { step tools; }
fio() { step fio; }
initramfs() { step initramfs; }
