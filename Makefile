# Entry points; the work is done by scripts/, tests/ and bench/.
.PHONY: all setup prepare refresh kernel debug-kernel tools fio check demo test test-debug bench-poll bench-pt bench-vhost bench-bridge bench-virtiofs clean help

help:
	@echo "make demo        build the patched guest, boot it, report poll queues at work (main job)"
	@echo "make test        the whole test run (what .ci/run does); FLAVOR=debug for the debug kernel"
	@echo "make test-debug  the guest suites on the debug (KASAN, lockdep) kernel"
	@echo "make prepare     unpack linux-source-6.12 into build/linux and apply kernel/patches"
	@echo "make refresh     export build/linux commits back into kernel/patches"
	@echo "make kernel      build the guest kernel (debug-kernel: the debug flavour)"
	@echo "make fio         fio 3.33 with virtio-blk passthrough (cmd_type=vblk) in build/fio/fio"
	@echo "make check       checkpatch --strict and a build at every patch"
	@echo "make bench-poll  polled vs interrupt-driven virtio-blk benchmark"
	@echo "make bench-pt    virtio-blk passthrough vs block device, beside NVMe ng vs block device"
	@echo "make bench-vhost vhost-blk vs io_uring on the same device, by queue depth, queues and workers"
	@echo "make bench-bridge a nested guest's disk: vhost-user-blk bridge + vhost-blk vs QEMU virtio-blk vs qemu-storage-daemon"
	@echo "make bench-virtiofs virtio-fs: vufsd with 1 and N request queues vs QEMU's virtiofsd"

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

bench-poll: kernel
	bench/poll.sh

bench-pt: kernel tools fio
	bench/pt.sh

bench-vhost: kernel tools
	bench/vhost.sh

bench-bridge: kernel tools
	bench/bridge.sh

bench-virtiofs: kernel tools
	bench/virtiofs.sh

clean:
	rm -rf build/obj-* build/tools build/vm build/logs
