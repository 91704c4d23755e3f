# The build steps every other suite stands on: Debian packages, the kernel
# tree, the guest kernel, the tools, the insncount plugin and fio. The
# runner runs the ones the chosen suites need (their SUITE_NEEDS) first; a
# failure (SUITE_FATAL) stops the steps and suites that stand on it, on its
# base, and nothing else (tests/run.sh, STEP_DEPS).
# shellcheck shell=bash disable=SC2034 # TESTS, desc_*, SUITE_*: read by the runner

SUITE_ORDER=0
SUITE_FATAL=1
TESTS=(deps tree roundtrip kernel tools plugin fio initramfs)

desc_deps="Debian packages installed (scripts/setup.sh)"
timeout_deps=1800
deps() { "$TOP/scripts/setup.sh"; }

desc_tree="the kernel tree (build/linux, build/linux-mainline) is the Debian base with the series applied (scripts/prepare.sh)"
timeout_tree=900
tree() { "$TOP/scripts/prepare.sh"; }

desc_roundtrip="prepare + refresh round trip changes nothing (scripts/refresh.sh --check)"
roundtrip() { "$TOP/scripts/refresh.sh" --check; }

desc_kernel="the kernel builds with every config fragment line applied (scripts/build-kernel.sh)"
timeout_kernel=3600
kernel() { "$TOP/scripts/build-kernel.sh" "${VSTOR_FLAVOR:-guest}"; }

desc_tools="the daemons (tools/) and test programs (tests/tools) build with -Werror (make tools)"
timeout_tools=600
tools() { make -s -C "$TOP" tools WERROR=1; }

desc_plugin="the insncount QEMU plugin builds against the plugin API of the installed QEMU, fetched from Debian's qemu source (scripts/build-plugin.sh)"
timeout_plugin=600
plugin() { "$TOP/scripts/build-plugin.sh"; }

desc_fio="fio with cmd_type=vblk builds: Debian's fio 3.33 source + tools/fio (scripts/build-fio.sh)"
timeout_fio=1800
fio() { "$TOP/scripts/build-fio.sh"; }

desc_initramfs="the root of second-level guests builds from the guest kernel's modules, fio and the host's programs (vm/initramfs.sh)"
initramfs() { "$TOP/vm/initramfs.sh" --flavor guest; }
