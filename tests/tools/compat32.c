// SPDX-License-Identifier: GPL-2.0
/*
 * compat32: what a 32-bit program gets from the virtio-blk character device.
 * Built as a freestanding i386 executable (no 32-bit libc needed: system
 * calls through int $0x80), run on a 64-bit kernel with IA32 emulation.
 *
 *   compat32 DEV
 *
 * Checks that the node takes nothing from a 32-bit caller: the
 * VIRTBLK_IOC_GET_INFO ioctl fails with ENOTTY (no compat_ioctl) and io_uring
 * passthrough commands from a 32-bit ring with EOPNOTSUPP. Prints one line per check; exits 0 when
 * all pass.
 */
#include <linux/io_uring.h>
#include <linux/virtio_blk_cmd.h>

#define SYS_exit		1
#define SYS_write		4
#define SYS_open		5
#define SYS_ioctl		54
#define SYS_mmap2		192
#define SYS_io_uring_setup	425
#define SYS_io_uring_enter	426

#define ENOTTY			25
#define EOPNOTSUPP		95

static long arg6;

static long sys6(long n, long a, long b, long c, long d, long e)
{
	long r;

	/* %ebp carries the sixth argument; it is saved around the call. */
	/* arg6 is a global: its address does not depend on %esp or %ebp. */
	__asm__ volatile("push %%ebp\n\t"
			 "mov %7, %%ebp\n\t"
			 "int $0x80\n\t"
			 "pop %%ebp"
			 : "=a"(r)
			 : "a"(n), "b"(a), "c"(b), "d"(c), "S"(d), "D"(e),
			   "m"(arg6)
			 : "memory");
	return r;
}

static long sys3(long n, long a, long b, long c)
{
	return sys6(n, a, b, c, 0, 0);
}

static unsigned int len(const char *s)
{
	unsigned int n = 0;

	while (s[n])
		n++;
	return n;
}

static void say(const char *s)
{
	sys3(SYS_write, 1, (long)s, len(s));
}

static void say_num(long v)
{
	char buf[16], *p = buf + sizeof(buf) - 1;
	int neg = v < 0;

	*p = 0;
	if (neg)
		v = -v;
	do {
		*--p = '0' + v % 10;
		v /= 10;
	} while (v);
	if (neg)
		*--p = '-';
	say(p);
}

static void *map(int fd, unsigned long size, unsigned long off)
{
	arg6 = off >> 12;	/* mmap2 takes the offset in pages */
	return (void *)sys6(SYS_mmap2, 0, size, 3 /* RW */, 1 /* SHARED */,
			    fd);
}

static void zero(void *p, unsigned int n)
{
	char *c = p;

	while (n--)
		*c++ = 0;
}

/* Send one passthrough command on a 32-bit ring; return cqe->res. */
static long uring_cmd(int ring, struct io_uring_params *p, char *sq,
		      char *cq, char *sqes, int fd, unsigned int op,
		      void *buf, unsigned int buflen)
{
	unsigned int *tail = (unsigned int *)(sq + p->sq_off.tail);
	unsigned int *array = (unsigned int *)(sq + p->sq_off.array);
	unsigned int mask = *(unsigned int *)(sq + p->sq_off.ring_mask);
	unsigned int *chead = (unsigned int *)(cq + p->cq_off.head);
	unsigned int cmask = *(unsigned int *)(cq + p->cq_off.ring_mask);
	struct io_uring_sqe *sqe = (struct io_uring_sqe *)sqes;
	struct io_uring_cqe *cqe;
	struct virtblk_uring_cmd *cmd = (struct virtblk_uring_cmd *)sqe->cmd;
	long ret;

	zero(sqe, 128);
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = fd;
	sqe->cmd_op = op;
	cmd->addr = (unsigned long)buf;
	cmd->len = buflen;
	array[*tail & mask] = 0;
	__atomic_store_n(tail, *tail + 1, __ATOMIC_RELEASE);

	arg6 = 0;
	ret = sys6(SYS_io_uring_enter, ring, 1, 1, IORING_ENTER_GETEVENTS, 0);
	if (ret < 0)
		return ret;
	cqe = (struct io_uring_cqe *)(cq + p->cq_off.cqes) +
	      (*chead & cmask);
	ret = cqe->res;
	__atomic_store_n(chead, *chead + 1, __ATOMIC_RELEASE);
	return ret;
}

static int check(const char *what, long got, long want)
{
	say(what);
	say(": ");
	say_num(got);
	if (got == want) {
		say(" ok\n");
		return 0;
	}
	say(" want ");
	say_num(want);
	say("\n");
	return 1;
}

static int run(const char *dev)
{
	static struct virtblk_info info;
	static char data[4096] __attribute__((aligned(4096)));
	struct io_uring_params p;
	char *sq, *cq, *sqes;
	int fd, ring, bad = 0;

	fd = sys3(SYS_open, (long)dev, 2 /* O_RDWR */, 0);
	if (fd < 0)
		return check("open", fd, 0);

	bad += check("ioctl GET_INFO", sys3(SYS_ioctl, fd, VIRTBLK_IOC_GET_INFO,
					     (long)&info), -ENOTTY);

	zero(&p, sizeof(p));
	p.flags = IORING_SETUP_SQE128;
	arg6 = 0;
	ring = sys6(SYS_io_uring_setup, 4, (long)&p, 0, 0, 0);
	if (ring < 0)
		return check("io_uring_setup", ring, 0);
	sq = map(ring, p.sq_off.array + p.sq_entries * 4, IORING_OFF_SQ_RING);
	cq = map(ring, p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe),
		 IORING_OFF_CQ_RING);
	sqes = map(ring, p.sq_entries * 128, IORING_OFF_SQES);
	if ((unsigned long)sq > -4096UL || (unsigned long)cq > -4096UL ||
	    (unsigned long)sqes > -4096UL)
		return check("mmap", -1, 0);

	bad += check("uring_cmd GET_INFO", uring_cmd(ring, &p, sq, cq, sqes, fd,
			VIRTBLK_U_CMD_GET_INFO, &info, sizeof(info)), -EOPNOTSUPP);
	bad += check("uring_cmd READ", uring_cmd(ring, &p, sq, cq, sqes, fd,
			VIRTBLK_U_CMD_READ, data, sizeof(data)), -EOPNOTSUPP);
	return bad;
}

void __attribute__((used)) start_c(long *sp)
{
	int argc = (int)sp[0];
	char **argv = (char **)(sp + 1);

	if (argc != 2) {
		say("usage: compat32 DEV\n");
		sys3(SYS_exit, 2, 0, 0);
	}
	sys3(SYS_exit, run(argv[1]) ? 1 : 0, 0, 0);
}

/* The kernel starts us with argc at (%esp); keep the stack 16-byte aligned. */
__asm__(".globl _start\n"
	"_start:\n\t"
	"mov %esp, %eax\n\t"
	"and $-16, %esp\n\t"
	"sub $12, %esp\n\t"
	"push %eax\n\t"
	"call start_c\n\t"
	"hlt\n");
