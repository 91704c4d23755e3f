# insncount (tools/insncount), the QEMU TCG plugin that counts guest
# instructions, on the host: QEMU boots its calibration image (calib.elf,
# loops of known length between markers) with the plugin loaded, and the
# counts must be exact; its arguments and ranges files are checked, with a
# clear message for each thing wrong. The guest suite insns checks it on
# Linux: user and kernel split, ranges, idle vCPUs, repeatability.
# shellcheck shell=bash disable=SC2034 # TESTS, desc_*, SUITE_*: read by the runner

SUITE_ORDER=12
SUITE_NEEDS=(plugin)
SUITE_TIMEOUT=120
TESTS=(calib calib_smp4 reload_ranges reload_missing reload_bad bad_args)

PLUGIN=$BUILD/tools/insncount.so
CALIB=$BUILD/tools/calib.elf
IC_WORK=$BUILD/insncount-check

# calib_run DIR SMP [PLUGIN-ARGS]: boot calib.elf with the plugin writing
# DIR/out.json; QEMU's stderr in DIR/qemu.err. Returns QEMU's status (33 is
# the image's own exit, through isa-debug-exit; QEMU's errors are 1).
calib_run() {
	local dir=$1 smp=$2 args=${3:-}
	mkdir -p "$dir"
	rm -f "$dir/out.json"
	timeout 60 qemu-system-x86_64 -M pc -accel tcg,thread=multi -smp "$smp" -m 64 \
		-display none -nodefaults -no-reboot -serial none \
		-device isa-debug-exit,iobase=0xf4,iosize=4 -kernel "$CALIB" \
		-plugin "$PLUGIN,out=$dir/out.json$args" 2>"$dir/qemu.err"
}

# calib_ranges FILE: ranges "a" and "b" over calib.elf's calib_a and
# calib_b, at their -2 GiB alias, where the image runs them; entry counters
# "ea" and "eb" at their first instruction, "emid" at calib_a's second,
# which no block starts at.
calib_ranges() {
	local a a_end b b_end
	read -r a a_end b b_end < <(nm "$CALIB" | awk '
		{ v[$3] = $1 }
		END { print v["calib_a"], v["calib_a_end"], v["calib_b"], v["calib_b_end"] }')
	[[ -n $b_end ]] || fail "no calib_a/calib_b symbols in $CALIB" || return
	printf '%x %x a\n%x %x b\n@%x ea\n@%x eb\n@%x emid\n' \
		$((0xffffffff80000000 + 0x$a)) $((0xffffffff80000000 + 0x$a_end)) \
		$((0xffffffff80000000 + 0x$b)) $((0xffffffff80000000 + 0x$b_end)) \
		$((0xffffffff80000000 + 0x$a)) $((0xffffffff80000000 + 0x$b)) \
		$((0xffffffff80000000 + 0x$a + 1)) >"$1"
}

# calib_check DIR SMP [RANGES]: the counts in DIR/out.json are the image's,
# exactly; with RANGES=1 so are those of ranges a and b and of the entry
# counters (calib_a's first block runs once per round: the call, then the
# loop's jumps back to it).
calib_check() {
	/usr/bin/python3 - "$1/out.json" "$2" "${3:-0}" <<'EOF'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
smp, ranges = int(sys.argv[2]), sys.argv[3] == "1"
marks = [r for r in recs if 1 <= r["id"] <= 7]
ids = [r["id"] for r in marks]
if ids != [1, 2, 3, 4, 5, 6, 7]:
    sys.exit(f"FAIL: markers {ids} in {sys.argv[1]}, want 1 to 7")
if recs[-1]["id"] != -1:
    sys.exit("FAIL: no exit record last")
for r in marks:
    if r["vcpu"] != 0 or len(r["user"]) != smp or len(r["kernel"]) != smp:
        sys.exit(f"FAIL: record {r}: want vcpu 0 and {smp} vCPUs")
m = {r["id"]: r for r in marks}
def delta(a, b, key, v=0, rng=None, kind="ranges"):
    if rng:
        return m[b][kind][rng][v] - m[a][kind][rng][v]
    return m[b][key][v] - m[a][key][v]
for a, n in ((1, 1000), (2, 1000000), (3, 10000000)):
    got, want = delta(a, a + 1, "user"), 4 * n + 2
    if got != want:
        sys.exit(f"FAIL: 32-bit, markers {a}..{a + 1}: {got} instructions, want {want}")
    if delta(a, a + 1, "kernel"):
        sys.exit(f"FAIL: 32-bit, markers {a}..{a + 1}: kernel instructions at low addresses")
    print(f"32-bit, markers {a}..{a + 1}: {got} user instructions, exactly 4 * {n} + 2")
for a, n, rng in ((5, 2000000, "a"), (6, 3000000, "b")):
    got, want = delta(a, a + 1, "kernel"), 4 * n + 4
    if got != want or delta(a, a + 1, "user"):
        sys.exit(f"FAIL: 64-bit at -2 GiB, markers {a}..{a + 1}: {got} kernel instructions "
                 f"(want {want}) and {delta(a, a + 1, 'user')} user (want 0)")
    print(f"64-bit at -2 GiB, markers {a}..{a + 1}: {got} kernel instructions, exactly 4 * {n} + 4")
    if ranges:
        other = "b" if rng == "a" else "a"
        got, want = delta(a, a + 1, None, rng=rng), 4 * n + 1
        if got != want or delta(a, a + 1, None, rng=other):
            sys.exit(f"FAIL: markers {a}..{a + 1}: range {rng} {got} (want {want}), "
                     f"range {other} {delta(a, a + 1, None, rng=other)} (want 0)")
        print(f"  of which {got} in range {rng}, exactly 4 * {n} + 1, none in range {other}")
        got = {e: delta(a, a + 1, None, rng=e, kind="entries") for e in ("ea", "eb", "emid")}
        want = {"ea": n if rng == "a" else 0, "eb": n if rng == "b" else 0, "emid": 0}
        if got != want:
            sys.exit(f"FAIL: markers {a}..{a + 1}: entry counts {got}, want {want}")
        print(f"  entries: {got}, exactly {n} rounds of calib_{rng}'s first block")
for v in range(1, smp):
    if m[7]["user"][v] != m[1]["user"][v] or m[7]["kernel"][v] != m[1]["kernel"][v]:
        sys.exit(f"FAIL: vCPU {v}, waiting for a start-up IPI, ran instructions between the markers")
print(f"vCPUs 1..{smp - 1} ran nothing between the markers (firmware probe: {m[1]['user'][1:]})")
EOF
}

# calib_ok DIR SMP [PLUGIN-ARGS [RANGES]]: calib_run, the image's own exit
# status, and calib_check.
calib_ok() {
	local rc=0
	calib_run "$1" "$2" "${3:-}" || rc=$?
	expect_eq "QEMU status (33: the image's own exit)" "$rc" 33 || { cat "$1/qemu.err"; return 1; }
	calib_check "$1" "$2" "${4:-0}"
}

desc_calib="calibration image, 2 vCPUs: loops counted exactly between markers, 32-bit at low addresses (user) and 64-bit at -2 GiB (kernel); none on the waiting vCPU"
calib() { calib_ok "$IC_WORK/calib" 2; }

desc_calib_smp4="the same with 4 vCPUs: three waiting vCPUs stay at their count"
calib_smp4() { calib_ok "$IC_WORK/calib4" 4; }

# reload_record DIR: the reload marker's record, as JSON.
reload_record() {
	grep '"id":65535' "$1/out.json" || fail "no reload record in $1/out.json"
}

desc_reload_ranges="ranges over two functions of the image and entry counters at their starts, loaded at start and at the reload marker: each range counts exactly its own loop, each entry its rounds, an address inside a block nothing"
reload_ranges() {
	local d=$IC_WORK/ranges rec
	mkdir -p "$d"
	calib_ranges "$d/ranges" || return
	calib_ok "$d" 2 ",ranges=$d/ranges" 1 || return
	rec=$(reload_record "$d") || return
	grep -q '"loaded":5}' <<<"$rec" || fail "reload record: $rec, want loaded 5 (2 ranges, 3 entries)"
}

desc_reload_missing="the reload marker without a ranges file, without ranges=, or on a FIFO or a symbolic link: an error record (valid JSON whatever the path), counting goes on"
reload_missing() {
	local d=$IC_WORK/missing rc=0 rec odd f
	mkdir -p "$d"
	# A name with a quote and a backslash: the error record must stay JSON.
	odd=$d/'no"such\file'
	rm -f "$odd"
	calib_run "$d" 2 ",ranges=$odd" || rc=$?
	expect_eq "QEMU status" "$rc" 33 || { cat "$d/qemu.err"; return 1; }
	rec=$(reload_record "$d") || return
	/usr/bin/python3 -c 'import json, sys; r = json.loads(sys.argv[1]); sys.exit(r["error"] != "cannot open %s: No such file or directory" % sys.argv[2])' \
		"$rec" "$odd" || fail "reload record: $rec" || return
	calib_check "$d" 2 || return
	rc=0
	calib_run "$d" 2 || rc=$?
	expect_eq "QEMU status" "$rc" 33 || return
	rec=$(reload_record "$d") || return
	grep -qF '"error":"no ranges=PATH argument"' <<<"$rec" || fail "reload record: $rec" || return
	# A FIFO would block a vCPU for ever; a link could name any host file.
	rm -f "$d/fifo" "$d/link"
	mkfifo "$d/fifo"
	calib_ranges "$d/target" || return
	ln -s target "$d/link"
	for f in fifo link; do
		rc=0
		calib_run "$d" 1 ",ranges=$d/$f" || rc=$?
		[[ $rc == 1 ]] || fail "QEMU started with a ranges file that is a $f (status $rc)" || return
		grep -qF "insncount: " "$d/qemu.err" || fail "$f: $(cat "$d/qemu.err")" || return
		note "$f: $(head -n 1 "$d/qemu.err")"
	done
}

desc_reload_bad="malformed ranges files (fields, order, names, trailing words, overlaps, user-half addresses, a name for ranges and entries, an entry twice, 33 names, a NUL byte; a long comment is one line): QEMU refuses to start, insncount names the line"
reload_bad() {
	local d=$IC_WORK/bad rc i
	mkdir -p "$d"
	local -a cases=(
		'ffffffff81000000 ffffffff81001000'
		'ffffffff81001000 ffffffff81000000 backwards'
		'ffffffff81000000 ffffffff81001000 bad/name'
		'ffffffff81000000 ffffffff81001000 a_name_that_is_far_too_long_for_it'
		'zz 10 hex'
		$'ffffffff81000000 ffffffff81002000 a\nffffffff81001000 ffffffff81003000 b'
		'ffffffff81000000 ffffffff81001000 core junk'
		'7f0000000000 7f0000001000 user_half'
		$'# a comment longer than a line buffer: '"$(printf 'x%.0s' $(seq 300))"$'\nffffffff81000000 ffffffff81001000 core\nffffffff81000000 ffffffff81001000 core'
		$'@ffffffff81000000 x\nffffffff81000000 ffffffff81001000 x'
		$'@ffffffff81000000 e\n@ffffffff81000000 f'
		'@7f0000000000 user_half'
		'@ffffffff81000000 e junk'
		'@ffffffff81000000'
	)
	local -a want=(
		'ranges:1: want START END NAME'
		'ranges:1: want START END NAME'
		'ranges:1: want START END NAME'
		'ranges:1: want START END NAME'
		'ranges:1: want START END NAME'
		'ranges: ranges overlap at 0xffffffff81001000'
		'ranges:1: want START END NAME'
		'ranges:1: 0x7f0000000000 is below 0xffc0000000000000, where no range is counted'
		'ranges: ranges overlap at 0xffffffff81000000'
		'ranges:2: x counts both ranges and entries'
		'ranges: entry 0xffffffff81000000 given twice'
		'ranges:1: 0x7f0000000000 is below 0xffc0000000000000, where no range is counted'
		'ranges:1: want START END NAME or @ADDR NAME'
		'ranges:1: want START END NAME or @ADDR NAME'
	)
	for i in "${!cases[@]}"; do
		printf '%s\n' "${cases[$i]}" >"$d/ranges"
		rc=0
		calib_run "$d" 1 ",ranges=$d/ranges" || rc=$?
		[[ $rc == 1 ]] || fail "case $i: QEMU started with ranges '${cases[$i]}'" || return
		grep -qF "insncount: $d/${want[$i]}" "$d/qemu.err" ||
			fail "case $i: no 'insncount: $d/${want[$i]}' in: $(cat "$d/qemu.err")" || return
	done
	# 33 names: one more than there are counters for.
	for i in $(seq 0 32); do
		printf 'ffffffff8%07x ffffffff8%07x n%d\n' $((i * 16)) $((i * 16 + 16)) "$i"
	done >"$d/ranges"
	rc=0
	calib_run "$d" 1 ",ranges=$d/ranges" || rc=$?
	[[ $rc == 1 ]] || fail "QEMU started with 33 names" || return
	grep -qF "ranges:33: more than 32 names" "$d/qemu.err" ||
		fail "33 names: $(cat "$d/qemu.err")" || return
	printf 'ffffffff81000000 ffffffff81001000 co\0re\n' >"$d/ranges"
	rc=0
	calib_run "$d" 1 ",ranges=$d/ranges" || rc=$?
	[[ $rc == 1 ]] || fail "QEMU started with a NUL byte in the ranges" || return
	grep -qF "ranges:1: a NUL byte" "$d/qemu.err" || fail "NUL: $(cat "$d/qemu.err")"
}

desc_bad_args="unknown argument, no out=, an out= that cannot be created: QEMU refuses to start, insncount says why"
bad_args() {
	local d=$IC_WORK/args rc
	mkdir -p "$d"
	rc=0
	timeout 60 qemu-system-x86_64 -M pc -accel tcg -display none -nodefaults -kernel "$CALIB" \
		-device isa-debug-exit,iobase=0xf4,iosize=4 \
		-plugin "$PLUGIN,out=$d/o.json,colour=blue" 2>"$d/err" || rc=$?
	[[ $rc == 1 ]] || fail "started with colour=blue" || return
	grep -qF "insncount: unknown argument 'colour=blue'" "$d/err" || fail "$(cat "$d/err")" || return
	rc=0
	timeout 60 qemu-system-x86_64 -M pc -accel tcg -display none -nodefaults -kernel "$CALIB" \
		-device isa-debug-exit,iobase=0xf4,iosize=4 -plugin "$PLUGIN" 2>"$d/err" || rc=$?
	[[ $rc == 1 ]] || fail "started without out=" || return
	grep -qF "insncount: out=PATH is required" "$d/err" || fail "$(cat "$d/err")" || return
	rc=0
	timeout 60 qemu-system-x86_64 -M pc -accel tcg -display none -nodefaults -kernel "$CALIB" \
		-device isa-debug-exit,iobase=0xf4,iosize=4 \
		-plugin "$PLUGIN,out=$d/no/such/dir/o.json" 2>"$d/err" || rc=$?
	[[ $rc == 1 ]] || fail "started with an out= in a missing directory" || return
	grep -qF "insncount: cannot create $d/no/such/dir/o.json: No such file or directory" "$d/err" ||
		fail "$(cat "$d/err")"
}
