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
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/random.h>
#include <sys/stat.h>

/* A regular file of this process's effective user, with one name. */
static inline bool own_file(const struct stat *st)
{
	return S_ISREG(st->st_mode) && st->st_nlink == 1 &&
	       st->st_uid == geteuid();
}

/*
 * A directory on the way to a file we write: it must be root's or ours,
 * and nobody else may write to it unless it is sticky (then nobody else
 * can replace or remove what we make there).
 */
static inline bool own_dir(const struct stat *st)
{
	return S_ISDIR(st->st_mode) &&
	       (st->st_uid == 0 || st->st_uid == geteuid()) &&
	       (!(st->st_mode & (S_IWGRP | S_IWOTH)) || st->st_mode & S_ISVTX);
}

/*
 * Open path's directory component by component, following no link and
 * checking each with own_dir(); its last name goes to name. A descriptor
 * (O_PATH) or -1 with errno: ELOOP or ENOTDIR for a link on the way, EPERM
 * for a directory others could change under us.
 */
static inline int own_dir_open(const char *path, char *name, size_t size)
{
	char buf[PATH_MAX], *p = buf, *slash;
	struct stat st;
	int fd, next;

	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	fd = open(buf[0] == '/' ? "/" : ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	while (fd >= 0) {
		if (fstat(fd, &st) || !own_dir(&st)) {
			close(fd);
			errno = EPERM;
			return -1;
		}
		while (*p == '/')
			p++;
		slash = strchr(p, '/');
		if (!slash)
			break;
		*slash = '\0';
		next = openat(fd, p, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(fd);
		fd = next;
		p = slash + 1;
	}
	if (fd < 0)
		return -1;
	if (!*p || !strcmp(p, ".") || !strcmp(p, "..") ||
	    snprintf(name, size, "%s", p) >= (int)size) {
		close(fd);
		errno = EINVAL;
		return -1;
	}
	return fd;
}

/*
 * Open path for writing in place, creating it (mode 0644) if missing,
 * through own_dir_open(): ELOOP if it is a symbolic link, EPERM if it
 * exists but is not our own file. What exists is checked before it is
 * opened (a FIFO or a device is never opened), and its directory lets
 * nobody else swap it in between.
 */
static inline int own_file_open(const char *path)
{
	char name[NAME_MAX + 1];
	struct stat st, now;
	int dirfd, fd, err;

	dirfd = own_dir_open(path, name, sizeof(name));
	if (dirfd < 0)
		return -1;
	if (!fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW)) {
		if (!own_file(&st)) {
			close(dirfd);
			errno = S_ISLNK(st.st_mode) ? ELOOP : EPERM;
			return -1;
		}
		fd = openat(dirfd, name, O_WRONLY | O_NOFOLLOW | O_NONBLOCK |
			    O_CLOEXEC);
		if (fd >= 0 && (fstat(fd, &now) || now.st_ino != st.st_ino ||
				now.st_dev != st.st_dev || !own_file(&now))) {
			close(fd);
			fd = -1;
			errno = EPERM;
		}
	} else {
		fd = errno == ENOENT ?
		     openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL |
			    O_NOFOLLOW | O_CLOEXEC, 0644) : -1;
	}
	err = errno;
	close(dirfd);
	errno = err;
	return fd;
}

/* Where own_file_replace() writes: the directory and the name in it. */
struct own_path {
	int dirfd;
	char name[NAME_MAX + 1];
};

/* Split path into its directory (own_dir_open()) and last name. */
static inline int own_path_init(struct own_path *p, const char *path)
{
	p->dirfd = own_dir_open(path, p->name, sizeof(p->name));
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
	unsigned int tries;
	uint64_t r = 0;
	struct stat st;
	ssize_t n;
	int fd = -1, err;

	if (!fstatat(p->dirfd, p->name, &st, AT_SYMLINK_NOFOLLOW) &&
	    !own_file(&st)) {
		errno = EPERM;
		return -1;
	}
	/* A name nobody can guess, so nobody can take it first. */
	for (tries = 0; fd < 0 && tries < 8; tries++) {
		if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != sizeof(r))
			r ^= (uint64_t)getpid() << 32 ^ seq ^ tries;
		snprintf(tmp, sizeof(tmp), ".%.200s.%016" PRIx64, p->name, r);
		fd = openat(p->dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL |
			    O_NOFOLLOW | O_CLOEXEC, 0644);
		if (fd < 0 && errno != EEXIST)
			break;
	}
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
