# Debian's shellcheck over every shell script of the repository, one test
# per script, with the settings in .shellcheckrc: no finding of any
# severity may remain; a deliberate exception carries a disable directive
# with its reason on the line above.
# shellcheck shell=bash disable=SC2034 # TESTS, desc_*, SUITE_*: read by the runner

SUITE_ORDER=5
SUITE_NEEDS=(deps)
SUITE_TIMEOUT=120

# Every file of the work tree outside what .gitignore ignores that is a
# shell script: *.sh, or a bash or sh shebang. Listed with find, not git:
# the plan is made before the build step that installs git.
TESTS=()
_other=()
while IFS= read -r _f; do
	case $_f in
	*.sh) TESTS+=("$_f") ;;
	*.py | *.c | *.h | *.md | *.patch | *.config | *.txt | *.json | Makefile | */Makefile) ;;
	*) _other+=("$_f") ;;
	esac
done < <(cd "$TOP" && find . \( -path ./.git -o -path ./build -o -path ./out -o -name __pycache__ \) -prune \
	-o -type f ! -name '*.o' -printf '%P\n' | LC_ALL=C sort)
# The others whose first line is a bash or sh shebang: one awk for all of
# them (every test loads this file again, so a process per file added
# most of the suite's time after shellcheck's own).
if ((${#_other[@]})); then
	mapfile -t -O "${#TESTS[@]}" TESTS < <(cd "$TOP" && awk 'FNR == 1 { if ($0 ~ /^#! ?\/(usr\/)?bin\/(env )?(ba)?sh/) print FILENAME; nextfile }' "${_other[@]}" 2>/dev/null)
	mapfile -t TESTS < <(printf '%s\n' "${TESTS[@]}" | LC_ALL=C sort)
fi
unset _f _other

# One shellcheck over every script, made by the first test that needs it
# and kept under a key of the scripts' contents (and .shellcheckrc): each
# test then reports its own file's findings. One run instead of 84 saves
# most of the suite's minute (shellcheck's start and the files every
# script sources, parsed once instead of once per script).
suite_run() {
	[[ -f $TOP/$1 ]] || fail "no $1" || return
	local dir=$BUILD/logs/shellcheck key all rc=0
	mkdir -p "$dir"
	key=$(cd "$TOP" && cat .shellcheckrc "${TESTS[@]}" | sha256sum | cut -c1-16)
	all=$dir/all-$key.gcc
	(
		flock 9
		[[ -f $all ]] && exit 0
		(cd "$TOP" && shellcheck -f gcc "${TESTS[@]}") >"$all.tmp" 2>&1 || rc=$?
		# 1: findings, listed; anything else: shellcheck itself failed.
		((rc <= 1)) || { cat "$all.tmp"; exit 1; }
		mv "$all.tmp" "$all"
	) 9>"$dir/.lock" || fail "shellcheck over every script failed" || return
	local mine
	mine=$(awk -v f="$1:" 'index($0, f) == 1' "$all")
	[[ -z $mine ]] || { printf '%s\n' "$mine"; fail "shellcheck has findings in $1"; }
}
