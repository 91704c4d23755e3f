/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Files a daemon writes by a path it was given (--stats), often as root in
 * a directory other users may write to: a symbolic link planted there must
 * not be followed, and a file that is not the daemon's own (another
 * user's, a hard link to one, a FIFO or a device) must not be written to
 * or replaced. Both ways of writing such a file are here: in place
 * (own_file_open(), vufsd) and whole, by a rename (own_file_replace(),
 * vhost-blk-bridge). Header-only; errors come back as errno.
 */
#ifndef OWNFILE_H
#define OWNFILE_H

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

/* A regular file of this process's effective user, with one name. */
static inline bool own_file(const struct stat *st)
{
	return S_ISREG(st->st_mode) && st->st_nlink == 1 &&
	       st->st_uid == geteuid();
}

/*
 * Open path for writing in place, creating it (mode 0644) if missing:
 * ELOOP if it is a symbolic link, EPERM if it exists but is not our own
 * file. O_NONBLOCK keeps a planted FIFO from blocking the open.
 */
static inline int own_file_open(const char *path)
{
	struct stat st;
	int fd;

	fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK |
		  O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) || !own_file(&st)) {
		close(fd);
		errno = EPERM;
		return -1;
	}
	return fd;
}

/* Where own_file_replace() writes: the directory and the name in it. */
struct own_path {
	int dirfd;
	char name[NAME_MAX + 1];
};

/* Split path into its directory (opened) and last name. */
static inline int own_path_init(struct own_path *p, const char *path)
{
	const char *slash = strrchr(path, '/');
	char dir[PATH_MAX];

	if (!slash) {
		snprintf(dir, sizeof(dir), ".");
	} else if ((size_t)(slash - path) >= sizeof(dir)) {
		errno = ENAMETOOLONG;
		return -1;
	} else {
		snprintf(dir, sizeof(dir), "%.*s",
			 slash == path ? 1 : (int)(slash - path), path);
	}
	if (snprintf(p->name, sizeof(p->name), "%s", slash ? slash + 1 : path) >=
	    (int)sizeof(p->name) || !p->name[0]) {
		errno = EINVAL;
		return -1;
	}
	p->dirfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	return p->dirfd < 0 ? -1 : 0;
}

/*
 * Replace p's file with len bytes of buf: written to a new file of our
 * own (O_EXCL: nothing planted under its name is opened), then renamed
 * over the name. EPERM, and nothing replaced, if the name holds anything
 * but our own file; a rename never follows a link at its target.
 */
static inline int own_file_replace(const struct own_path *p, const void *buf,
				   size_t len, unsigned long seq)
{
	char tmp[NAME_MAX + 1];
	struct stat st;
	ssize_t n;
	int fd, err;

	if (snprintf(tmp, sizeof(tmp), ".%.200s.%d.%lu", p->name, (int)getpid(),
		     seq) >= (int)sizeof(tmp)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	if (!fstatat(p->dirfd, p->name, &st, AT_SYMLINK_NOFOLLOW) &&
	    !own_file(&st)) {
		errno = EPERM;
		return -1;
	}
	fd = openat(p->dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
		    O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	n = write(fd, buf, len);
	if (n != (ssize_t)len) {
		err = n < 0 ? errno : EIO;
		goto fail;
	}
	if (close(fd)) {
		fd = -1;
		err = errno;
		goto fail;
	}
	if (!renameat(p->dirfd, tmp, p->dirfd, p->name))
		return 0;
	err = errno;
	fd = -1;
fail:
	if (fd >= 0)
		close(fd);
	unlinkat(p->dirfd, tmp, 0);
	errno = err;
	return -1;
}

#endif
