/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the sandboxes of vufsd (tools/vufsd/sandbox.c) and vhost-blk-bridge
 * (tools/vhost-blk-bridge/sandbox.c) share: making a directory the root of
 * the process's mount namespace, and cutting its capabilities.
 * Header-only; the includer provides logmsg().
 */
#ifndef SANDBOX_COMMON_H
#define SANDBOX_COMMON_H

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <unistd.h>
#include <linux/capability.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

void logmsg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Make dir the root of this mount namespace and detach the old one. */
static inline int sandbox_pivot_into(const char *dir)
{
	int oldroot, newroot;

	if (mount(dir, dir, NULL, MS_BIND | MS_REC, NULL)) {
		logmsg("sandbox: bind-mounting %s: %m", dir);
		return -1;
	}
	oldroot = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	newroot = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (oldroot < 0 || newroot < 0) {
		logmsg("sandbox: %s: %m", dir);
		return -1;
	}
	/*
	 * pivot_root(".", ".") stacks the old root on top of the new one;
	 * detaching "." from the old root's side then leaves only dir.
	 */
	if (fchdir(newroot) || syscall(SYS_pivot_root, ".", ".")) {
		logmsg("sandbox: pivot_root into %s: %m", dir);
		return -1;
	}
	if (fchdir(oldroot) || umount2(".", MNT_DETACH) || fchdir(newroot) ||
	    chroot(".") || chdir("/")) {
		logmsg("sandbox: detaching the old root: %m");
		return -1;
	}
	close(oldroot);
	close(newroot);
	return 0;
}

/*
 * Keep only the capabilities in keep (a mask of CAP_* bits): effective,
 * permitted and bounding set, nothing inheritable or ambient, and set
 * no_new_privs.
 */
static inline int sandbox_keep_caps(uint64_t keep)
{
	struct __user_cap_header_struct hdr = {
		.version = _LINUX_CAPABILITY_VERSION_3,
	};
	struct __user_cap_data_struct data[2] = { { 0 } };
	int cap;

	for (cap = 0; cap <= 63; cap++) {
		if (keep & (1ULL << cap))
			continue;
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) && errno != EINVAL) {
			logmsg("sandbox: dropping capability %d from the bounding set: %m",
			       cap);
			return -1;
		}
	}
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) &&
	    errno != EINVAL)
		return -1;
	data[0].effective = data[0].permitted = (uint32_t)keep;
	data[1].effective = data[1].permitted = (uint32_t)(keep >> 32);
	if (syscall(SYS_capset, &hdr, data)) {
		logmsg("sandbox: capset: %m");
		return -1;
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) {
		logmsg("sandbox: no_new_privs: %m");
		return -1;
	}
	return 0;
}

#endif
