# Entry points; the work is done by scripts/, tests/ and bench/.
.PHONY: all setup prepare refresh kernel debug-kernel tools fio check demo test test-debug bench clean help

help:
	@echo "make demo        build the patched guest, boot it, report poll queues at work (main job)"
	@echo "make test        the whole test run (what .ci/run does); FLAVOR=debug for the debug kernel"
	@echo "make test-debug  the guest suites on the debug (KASAN, lockdep) kernel"
	@echo "make prepare     unpack linux-source-6.12 into build/linux and apply kernel/patches"
	@echo "make refresh     export build/linux commits back into kernel/patches"
	@echo "make kernel      build the guest kernel (debug-kernel: the debug flavour)"
	@echo "make fio         fio 3.33 with virtio-blk passthrough (cmd_type=vblk) in build/fio/fio"
	@echo "make check       checkpatch --strict and a build at every patch"
	@echo "make bench       every benchmark (poll repoll pt vhost bridge virtiofs), about 45 min;"
	@echo "                 B=\"poll pt\" runs some, ARGS=\"--runtime 2 --reps 1\" passes options"
	@echo "                 (bench/run.sh --help); results in build/results/latest/report.md"

all: kernel tools

setup:
	scripts/setup.sh

prepare: setup
	scripts/prepare.sh

refresh:
	scripts/refresh.sh

kernel: prepare
	scripts/build-kernel.sh guest

debug-kernel: prepare
	scripts/build-kernel.sh debug

tools:
	$(MAKE) -C tests/tools OUT=$(CURDIR)/build/tools

fio:
	scripts/build-fio.sh

check: kernel
	scripts/check-series.sh all

demo:
	scripts/demo.sh

# make test FLAVOR=debug runs the same tests on the debug kernel.
FLAVOR ?= guest
test:
	tests/run.sh $(if $(filter debug,$(FLAVOR)),--debug)

test-debug:
	tests/run.sh --debug --quick

# make bench B="poll pt" ARGS="--runtime 2 --reps 1": bench/run.sh ARGS B
# (all benchmarks when B is empty). fio is built only when pt runs.
B ?=
ARGS ?=
bench: kernel tools $(if $(or $(filter pt,$(B)),$(if $(strip $(B)),,all)),fio)
	bench/run.sh $(ARGS) $(B)

clean:
	rm -rf build/obj-* build/tools build/vm build/logs
