# Entry points; the work is done by scripts/, tests/, bench/ and vm/.
# `make help` lists them. Everything builds into build/ (ignored by git).
.PHONY: help setup prepare refresh kernel debug-kernel tools plugin fio check robot cover demo test test-debug bench clean

help:
	@echo "make demo          the main job: build, boot the patched guest, show each feature at work (~5 min warm)"
	@echo "make test          every test (what .ci/run runs); T=\"SUITE[:TEST] mainline/SUITE ...\" runs some, FLAVOR=debug on the debug kernel"
	@echo "make test-debug    the guest suites on the debug (KASAN, lockdep) kernel"
	@echo "make bench         every benchmark (about 140 min), report in build/results/latest/report.md;"
	@echo "                   B=\"poll pt\" runs some, ARGS=\"--runtime 2 --reps 1\" passes options"
	@echo "make setup         install the Debian packages the project needs (root; apt-get)"
	@echo "make prepare       unpack the base into its tree and apply its series (KBASE=6.12: build/linux, kernel/6.12;"
	@echo "                   KBASE=mainline: linux-source-7.3 into build/linux-mainline, kernel/mainline)"
	@echo "make refresh       export the tree's commits back into kernel/KBASE"
	@echo "make kernel        build the guest kernel (build/obj-guest); debug-kernel: the debug flavour"
	@echo "make debug-kernel  build the debug kernel (build/obj-debug)"
	@echo "make tools         build vufsd, vhost-blk-bridge and the test programs into build/tools"
	@echo "make plugin        insncount, the QEMU plugin that counts guest instructions, for the installed QEMU (build/tools)"
	@echo "make fio           fio 3.33 with virtio-blk passthrough (cmd_type=vblk) into build/fio/fio"
	@echo "make check         checkpatch --strict on every patch, a build and sparse at every patch"
	@echo "make robot         what the build robots would say: the series' directories built W=1 at each group's end in"
	@echo "                   13 configurations (x86_64 y/m/no COMPAT, i386, arm64, clang, allmodconfig, each option off);"
	@echo "                   R=\"i386 clang\" G=\"virtio-blk\" pick some (scripts/robot.sh --list); not in make test: run it"
	@echo "                   before posting (about an hour per base, cold, on 2 cores); report in build/logs/robot/KBASE"
	@echo "make cover         the series as postable groups (one per kernel/cover/KBASE template) with cover letters, in build/cover"
	@echo "make clean         remove build outputs (keeps build/linux, build/results and fio; removes build/robot)"
	@echo "tests/run.sh --list shows every test; Documentation/writing-tests.md explains them"

setup:
	scripts/setup.sh

# FORCE=1: prepare recreates build/linux whatever it holds; refresh exports
# a tree that was not made from kernel/patches as they are now.
prepare: setup
	scripts/prepare.sh $(if $(filter-out 0,$(FORCE)),--force)

refresh:
	scripts/refresh.sh $(if $(filter-out 0,$(FORCE)),--force)

kernel: prepare
	scripts/build-kernel.sh guest

debug-kernel: prepare
	scripts/build-kernel.sh debug

# The daemons need nothing but libc; the test programs need the series'
# uapi headers from the prepared tree. WERROR=1 makes warnings errors.
# KBASE=mainline|6.12 (scripts/lib.sh) picks the kernel tree; the default is 6.12.
KBASE ?= 6.12
KTREE := $(CURDIR)/build/$(if $(filter mainline,$(KBASE)),linux-mainline,linux)
tools: prepare
	$(MAKE) -s -C tests/tools OUT=$(CURDIR)/build/tools KSRC=$(KTREE)
	$(MAKE) -s -C tools/vufsd OUT=$(CURDIR)/build/tools WERROR=$(WERROR)
	$(MAKE) -s -C tools/vhost-blk-bridge OUT=$(CURDIR)/build/tools WERROR=$(WERROR) \
		UAPI=$(CURDIR)/build/tools/include

plugin: setup
	scripts/build-plugin.sh

fio: setup
	scripts/build-fio.sh

check: kernel
	scripts/check-series.sh all

# make robot KBASE=mainline R="i386 clang" G="virtio-blk": scripts/robot.sh
# (every configuration and group when empty). Not part of make test.
R ?=
G ?=
robot: prepare
	scripts/robot.sh $(if $(strip $(R)),--config "$(R)") $(if $(strip $(G)),--group "$(G)")

cover: prepare
	scripts/cover-letters.sh

demo:
	scripts/demo.sh

# make test T="poll vufsd:ops" runs some tests; FLAVOR=debug boots the debug kernel.
FLAVOR ?= guest
T ?=
test:
	tests/run.sh $(if $(filter debug,$(FLAVOR)),--debug) $(T)

test-debug:
	tests/run.sh --debug guest

# make bench B="poll pt" ARGS="--runtime 2 --reps 1": bench/run.sh ARGS B
# (all benchmarks when B is empty). fio is built only when pt, ptcpu or
# bridge runs; the insncount plugin always (the I/O benchmarks count guest
# instructions per I/O unless ARGS has --insns 0).
B ?=
ARGS ?=
bench: kernel tools $(if $(or $(filter pt ptcpu bridge,$(B)),$(if $(strip $(B)),,all)),fio) plugin
	bench/run.sh $(ARGS) $(B)

clean:
	rm -rf build/obj-* build/tools build/vm build/logs build/robot
