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
while IFS= read -r _f; do
	case $_f in
	*.sh) TESTS+=("$_f") ;;
	*.py | *.c | *.h | *.md | *.patch | *.config | *.txt | *.json | Makefile | */Makefile) ;;
	*) [[ $(head -c 64 "$TOP/$_f" 2>/dev/null) =~ ^\#!\ ?/(usr/)?bin/(env\ )?(ba)?sh ]] && TESTS+=("$_f") ;;
	esac
done < <(cd "$TOP" && find . \( -path ./.git -o -path ./build -o -path ./out -o -name __pycache__ \) -prune \
	-o -type f ! -name '*.o' -printf '%P\n' | LC_ALL=C sort)
unset _f

suite_run() {
	[[ -f $TOP/$1 ]] || fail "no $1" || return
	(cd "$TOP" && shellcheck "$1")
}
