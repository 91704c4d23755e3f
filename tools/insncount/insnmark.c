// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * insnmark: execute insncount's marker instruction in the guest, so that
 * the plugin (tools/insncount/insncount.c) writes a snapshot of its
 * counters.
 *
 *   insnmark ID                 marker ID (0 to 65534)
 *   insnmark --reload           marker 65535: the plugin reloads its ranges
 *   insnmark --loop N ID1 ID2   marker ID1, N rounds of a 4-instruction
 *                               loop, marker ID2: between the two snapshots
 *                               this vCPU runs exactly 4 * N + 2 user
 *                               instructions of this process (the mov that
 *                               sets the count, the loop, and the second
 *                               marker), and whatever else the scheduler
 *                               puts on it
 *   insnmark --seq ID [MS ID]... marker ID, then for each pair: sleep MS
 *                               milliseconds, marker ID. One process for a
 *                               whole window, so no program starts inside
 *                               it (its exec would count there)
 *
 * The marker's id is part of the instruction (nopl 0x5653NNNN(%rax)), so
 * the code is written into a page of its own and then run.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static unsigned char *put_marker(unsigned char *p, unsigned int id)
{
	static const unsigned char nopl[3] = { 0x0f, 0x1f, 0x80 };

	memcpy(p, nopl, sizeof(nopl));
	p[3] = id & 0xff;
	p[4] = id >> 8;
	p[5] = 0x53;
	p[6] = 0x56;
	return p + 7;
}

static unsigned long number(const char *s, unsigned long max, const char *what)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 0);
	if (errno || end == s || *end || s[0] == '-' || v > max) {
		fprintf(stderr, "insnmark: %s '%s': want 0 to %lu\n", what, s, max);
		exit(2);
	}
	return v;
}

/* A writable page for code, or NULL (said why). */
static unsigned char *code_page(void)
{
	void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		perror("insnmark: mmap");
		return NULL;
	}
	return p;
}

/* Make the code page executable (and no longer writable); 0 or -1. */
static int seal(unsigned char *code)
{
	if (mprotect(code, 4096, PROT_READ | PROT_EXEC)) {
		perror("insnmark: mprotect");
		return -1;
	}
	return 0;
}

/* --seq ID [MS ID]...: each marker is a function of 8 bytes in one page. */
static int seq(int argc, char **argv)
{
	unsigned char *code;
	int i, k = argc / 2;

	/* argv: --seq ID [MS ID]...: an even count. */
	if (argc < 2 || argc % 2 || k > 4096 / 8) {
		fprintf(stderr, "usage: insnmark --seq ID [MS ID]...\n");
		return 2;
	}
	code = code_page();
	if (!code)
		return 1;
	for (i = 0; i < k; i++)
		*put_marker(code + 8 * i, number(argv[1 + 2 * i], 0xfffe, "id")) = 0xc3;
	if (seal(code))
		return 1;
	for (i = 0; i < k; i++) {
		if (i) {
			unsigned long ms = number(argv[2 * i], 86400000, "milliseconds");
			struct timespec ts = { ms / 1000, ms % 1000 * 1000000 };

			while (nanosleep(&ts, &ts) && errno == EINTR)
				;
		}
		((void (*)(void))(code + 8 * i))();
	}
	return 0;
}

int main(int argc, char **argv)
{
	unsigned char *code, *p;
	unsigned long n = 0;
	unsigned int id1, id2 = 0;
	int loop = 0;

	if (argc >= 2 && !strcmp(argv[1], "--seq"))
		return seq(argc - 1, argv + 1);
	if (argc == 2 && !strcmp(argv[1], "--reload")) {
		id1 = 0xffff;
	} else if (argc == 2 && argv[1][0] != '-') {
		id1 = number(argv[1], 0xfffe, "id");
	} else if (argc == 5 && !strcmp(argv[1], "--loop")) {
		loop = 1;
		n = number(argv[2], UINT32_MAX, "rounds");
		id1 = number(argv[3], 0xfffe, "id");
		id2 = number(argv[4], 0xfffe, "id");
		if (!n) {
			fprintf(stderr, "insnmark: --loop needs at least 1 round\n");
			return 2;
		}
	} else {
		fprintf(stderr, "usage: insnmark ID | --reload | --loop N ID1 ID2 | --seq ID [MS ID]...\n");
		return 2;
	}
	code = code_page();
	if (!code)
		return 1;
	p = put_marker(code, id1);
	if (loop) {
		*p++ = 0xb9;			/* mov $n, %ecx */
		memcpy(p, &(uint32_t){ n }, 4);
		p += 4;
		*p++ = 0x90;			/* 1: nop */
		*p++ = 0x90;			/* nop */
		*p++ = 0xff;			/* dec %ecx */
		*p++ = 0xc9;
		*p++ = 0x75;			/* jnz 1b */
		*p++ = 0xfa;
		p = put_marker(p, id2);
	}
	*p = 0xc3;				/* ret */
	if (seal(code))
		return 1;
	((void (*)(void))code)();
	return 0;
}
