// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * insncount: a QEMU TCG plugin that counts the guest instructions each vCPU
 * executes, split into the low and the high half of the address space
 * ("user" and "kernel", as x86-64 Linux lays them out) and, within the
 * kernel, into named address ranges (a module's text, the functions of a
 * subsystem). Each time the guest executes a marker instruction the plugin
 * appends a snapshot of every counter to its output file, so a benchmark in
 * the guest brackets the work it measures with two markers and divides the
 * difference by the I/Os it did.
 *
 * Counting is per translation block (TB): when QEMU translates a block the
 * plugin learns how many instructions it holds and where it starts, and
 * each time the block runs that count is added to the executing vCPU's
 * counters. With plugin API 2 and later (QEMU 9 and later) the add is an inline
 * TCG op on a per-vCPU scoreboard row: no call. API 1 (QEMU 7.2) has only
 * inline adds to one shared counter, which vCPU threads running at once
 * would race on, so there a callback per block adds to the vCPU's own row.
 * Named ranges are looked up when a kernel block runs, not when it is
 * translated, because module addresses are only known once the guest has
 * loaded them and the ranges can be (re)loaded at any time: with a ranges=
 * argument, every kernel block makes a call (API 1 makes one anyway), with
 * or without a table loaded.
 *
 * What a count is: the instructions of every block entered. A block that
 * faults part way is counted whole; after the fault, execution restarts at
 * the faulting instruction in a new block, so the instructions from the
 * fault to the end of the first block count twice. Instructions are not
 * cycles: no caches, no branch prediction, nothing QEMU does outside the
 * guest (device emulation) is counted.
 *
 * The marker is `nopl 0x5653NNNN(%rax)` (bytes 0f 1f 80 NN NN 53 56), a
 * seven-byte no-op with a displacement no compiler emits; NNNN is the
 * marker's id. Id 0xffff does not snapshot: it (re)loads the ranges file.
 * The snapshot counts the instructions up to and including the marker.
 *
 * Arguments (-plugin insncount.so,ARG=VAL,...):
 *   out=PATH      the snapshot file (required); created or truncated
 *   ranges=PATH   the ranges file: lines "START END NAME", START and END
 *                 hexadecimal guest addresses (END excluded) in the top
 *                 2^54 bytes of the address space (where kernel text and
 *                 modules are), NAME up to 31 characters of
 *                 [A-Za-z0-9_.-]; several lines may share a NAME; at most
 *                 32 names over the plugin's life. Read at start if it
 *                 exists and at each id 0xffff marker; it must be a
 *                 regular file, not a symbolic link (the guest can write
 *                 where it lies).
 *                 A line "@ADDR NAME" makes NAME an entry counter instead:
 *                 how many times a block starting at ADDR ran, that is
 *                 how many times execution came to ADDR by a call or a
 *                 jump (a function's calls, if nothing in it jumps back
 *                 to its first instruction). An ADDR inside a block
 *                 counts nothing. A NAME counts ranges or entries, not
 *                 both.
 *
 * Snapshot lines are JSON, one object per marker and one at exit:
 *   {"seq":S,"id":I,"vcpu":V,"user":[u0,u1,..],"kernel":[k0,k1,..],
 *    "ranges":{"NAME":[n0,n1,..],..},"entries":{"NAME":[e0,e1,..],..}}
 * with one element per vCPU started so far; id -1 and vcpu -1 at exit.
 * A reload writes {"seq":S,"id":65535,"vcpu":V,"loaded":N} or
 * {...,"error":"why"}. A snapshot counts a marker's whole block up to the
 * marker for "user" and "kernel", but the ranges count the whole block:
 * markers belong outside named ranges.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <qemu-plugin.h>

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

#if QEMU_PLUGIN_VERSION >= 2
#define INLINE_PER_VCPU 1
#else
#define INLINE_PER_VCPU 0
#endif

#define MAX_GROUPS 32
#define NAME_MAX_LEN 31
#define MARK_MAGIC 0x5653u
#define MARK_RELOAD 0xffffu
/* A TB holds at most 512 instructions (TCG_MAX_INSNS). */
#define TB_INSNS_BITS 10
/* A ranges file bigger than this is refused. */
#define RANGES_MAX_BYTES (16u << 20)

/* Counter slots of a vCPU's row. */
enum { SLOT_USER, SLOT_KERNEL, SLOT_GROUP0 };
#define NSLOTS (SLOT_GROUP0 + MAX_GROUPS)

struct row {
	uint64_t slot[NSLOTS];
	/* Keep rows of different vCPUs on different cache lines. */
	uint64_t pad[8 - NSLOTS % 8];
};

struct range {
	uint64_t start, end;
	unsigned int group;
};

/* The ranges, sorted, and the entry addresses, sorted (in range.start). */
struct range_table {
	size_t n, nentries;
	struct range *entry;
	struct range r[];
};

static const char *out_path, *ranges_path;
static FILE *out;
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t seq;

/* Group names only ever get added, so a group's slot keeps its meaning. */
static char group_name[MAX_GROUPS][NAME_MAX_LEN + 1];
static unsigned char group_is_entry[MAX_GROUPS];
static unsigned int ngroups;
static _Atomic(struct range_table *) ranges;

#if INLINE_PER_VCPU
static struct qemu_plugin_scoreboard *board;

static qemu_plugin_u64 slot_entry(unsigned int slot)
{
	return (qemu_plugin_u64){ board, slot * sizeof(uint64_t) };
}

static uint64_t *vcpu_row(unsigned int vcpu)
{
	return ((struct row *)qemu_plugin_scoreboard_find(board, vcpu))->slot;
}
#else
static struct row *rows;
static unsigned int max_vcpus;

static uint64_t *vcpu_row(unsigned int vcpu)
{
	return rows[vcpu].slot;
}
#endif

/*
 * The vCPUs whose rows exist: counted as each one initialises, which QEMU
 * reports after it has grown the scoreboard for it (its vCPU count goes up
 * before).
 */
static atomic_uint vcpus_up;

static void vcpu_init(qemu_plugin_id_t id, unsigned int vcpu)
{
	unsigned int n = atomic_load(&vcpus_up);

	while (n < vcpu + 1 && !atomic_compare_exchange_weak(&vcpus_up, &n, vcpu + 1))
		;
}

static int is_kernel(uint64_t vaddr)
{
	return vaddr >> 63;
}

/*
 * A kernel block's address and length go in the callback's pointer: the low
 * 54 bits of the address. The upper 10 are all ones in the top 2^54 bytes,
 * which hold the kernel's text and modules with 4- and 5-level paging
 * alike. Ranges must lie there too; blocks elsewhere are not looked up.
 */
#define VADDR_BITS 54
#define VADDR_MASK ((UINT64_C(1) << VADDR_BITS) - 1)
#define RANGES_LOW (~VADDR_MASK)

static uint64_t pack_tb(uint64_t vaddr, size_t n)
{
	return (vaddr & VADDR_MASK) << TB_INSNS_BITS | n;
}

/* The group of the range of R[0..N) (sorted, disjoint) holding VADDR, or MAX_GROUPS. */
static unsigned int find_in(const struct range *r, size_t n, uint64_t vaddr)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (vaddr < r[mid].start)
			hi = mid;
		else if (vaddr >= r[mid].end)
			lo = mid + 1;
		else
			return r[mid].group;
	}
	return MAX_GROUPS;
}

/* A kernel block ran: its ranges group, and with API 1 its kernel count. */
static void kernel_tb_exec(unsigned int vcpu, void *udata)
{
	uint64_t packed = (uintptr_t)udata;
	uint64_t n = packed & ((1u << TB_INSNS_BITS) - 1);
	uint64_t vaddr = packed >> TB_INSNS_BITS | ~VADDR_MASK;
	struct range_table *t = atomic_load_explicit(&ranges, memory_order_acquire);
	uint64_t *row = vcpu_row(vcpu);
	unsigned int g;

	if (!INLINE_PER_VCPU)
		row[SLOT_KERNEL] += n;
	if (t) {
		g = find_in(t->r, t->n, vaddr);
		if (g < MAX_GROUPS)
			row[SLOT_GROUP0 + g] += n;
		/* An entry is the range [ADDR, ADDR + 1): a block starting there. */
		g = find_in(t->entry, t->nentries, vaddr);
		if (g < MAX_GROUPS)
			row[SLOT_GROUP0 + g]++;
	}
}

#if !INLINE_PER_VCPU
static void user_tb_exec(unsigned int vcpu, void *udata)
{
	rows[vcpu].slot[SLOT_USER] += (uintptr_t)udata;
}

/* A kernel block outside the ranges' part of the address space. */
static void kernel_tb_exec_plain(unsigned int vcpu, void *udata)
{
	rows[vcpu].slot[SLOT_KERNEL] += (uintptr_t)udata;
}
#endif

static int valid_name(const char *s)
{
	size_t i;

	for (i = 0; s[i]; i++)
		if (!(s[i] >= 'a' && s[i] <= 'z') && !(s[i] >= 'A' && s[i] <= 'Z') &&
		    !(s[i] >= '0' && s[i] <= '9') && s[i] != '_' && s[i] != '.' &&
		    s[i] != '-')
			return 0;
	return i > 0 && i <= NAME_MAX_LEN;
}

/*
 * The slot of NAME, added if new; -1 when all are taken, -2 when NAME
 * counted the other kind (ranges or entries) before. Under out_lock.
 */
static int group_of(const char *name, int is_entry)
{
	unsigned int g;

	for (g = 0; g < ngroups; g++)
		if (!strcmp(group_name[g], name))
			return group_is_entry[g] == is_entry ? (int)g : -2;
	if (ngroups == MAX_GROUPS)
		return -1;
	strcpy(group_name[ngroups], name);
	group_is_entry[ngroups] = is_entry;
	return ngroups++;
}

static int cmp_range(const void *a, const void *b)
{
	const struct range *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/* Why the last publish_ranges() or reload failed. Under out_lock. */
static char load_error[320];

static void __attribute__((format(printf, 1, 2))) set_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(load_error, sizeof(load_error), fmt, ap);
	va_end(ap);
}

/* A parsed ranges file: its table, with slots into its own names. */
struct parsed {
	struct range_table *t;
	unsigned int nnames;
	char names[MAX_GROUPS][NAME_MAX_LEN + 1];
	unsigned char is_entry[MAX_GROUPS];
	char error[256];
};

static void free_table(struct range_table *t)
{
	if (t)
		free(t->entry);
	free(t);
}

/* Append R to the array *A of *N elements and capacity *CAP. */
static int push_range(struct range **a, size_t *n, size_t *cap, struct range r)
{
	if (*n == *cap) {
		size_t c = *cap ? 2 * *cap : 64;
		struct range *bigger = realloc(*a, c * sizeof(**a));

		if (!bigger)
			return -1;
		*a = bigger;
		*cap = c;
	}
	(*a)[(*n)++] = r;
	return 0;
}

static void __attribute__((format(printf, 2, 3))) parse_error(struct parsed *p, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(p->error, sizeof(p->error), fmt, ap);
	va_end(ap);
}

/*
 * Read and check the ranges file, without holding any lock: the guest can
 * write the directory it lies in, so it is opened without following a
 * link and without blocking on a FIFO, and must be a regular file of at
 * most RANGES_MAX_BYTES. Returns 0, or -1 with p->error set.
 */
static int parse_ranges(struct parsed *p, int must_exist)
{
	size_t n = 0, cap = 0, ne = 0, ecap = 0, linecap = 0, i;
	struct range *r = NULL, *e = NULL;
	unsigned long lineno = 0;
	char *line = NULL, name[NAME_MAX_LEN + 2];
	struct stat st;
	ssize_t len;
	FILE *f;
	int fd;

	memset(p, 0, sizeof(*p));
	fd = open(ranges_path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT && !must_exist)
			return 0;
		parse_error(p, "cannot open %s: %s", ranges_path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size > RANGES_MAX_BYTES) {
		parse_error(p, "%s: not a regular file of at most %u bytes", ranges_path,
			    RANGES_MAX_BYTES);
		close(fd);
		return -1;
	}
	f = fdopen(fd, "r");
	if (!f) {
		parse_error(p, "%s: %s", ranges_path, strerror(errno));
		close(fd);
		return -1;
	}
	while ((len = getline(&line, &linecap, f)) > 0) {
		uint64_t s, end = 0;
		unsigned int g;
		int used = -1, entry = line[0] == '@';

		lineno++;
		if (strlen(line) != (size_t)len) {
			parse_error(p, "%s:%lu: a NUL byte", ranges_path, lineno);
			goto bad;
		}
		if (line[0] == '#' || line[0] == '\n')
			continue;
		if (entry ? sscanf(line + 1, "%" SCNx64 " %32s %n", &s, name, &used) != 2 :
			    sscanf(line, "%" SCNx64 " %" SCNx64 " %32s %n", &s, &end, name, &used) != 3)
			used = -1;
		if (used < 0 || line[used + entry] || !valid_name(name) || (!entry && s >= end)) {
			parse_error(p, "%s:%lu: want START END NAME or @ADDR NAME (hexadecimal, START < END, NAME of at most 31 of [A-Za-z0-9_.-])",
				    ranges_path, lineno);
			goto bad;
		}
		if (s < RANGES_LOW) {
			parse_error(p, "%s:%lu: %#" PRIx64 " is below %#" PRIx64 ", where no range is counted",
				    ranges_path, lineno, s, RANGES_LOW);
			goto bad;
		}
		for (g = 0; g < p->nnames && strcmp(p->names[g], name); g++)
			;
		if (g == p->nnames) {
			if (g == MAX_GROUPS) {
				parse_error(p, "%s:%lu: more than %d names", ranges_path, lineno, MAX_GROUPS);
				goto bad;
			}
			strcpy(p->names[p->nnames], name);
			p->is_entry[p->nnames++] = entry;
		} else if (p->is_entry[g] != entry) {
			parse_error(p, "%s:%lu: %s counts both ranges and entries", ranges_path,
				    lineno, name);
			goto bad;
		}
		if (entry ? push_range(&e, &ne, &ecap, (struct range){ s, s + 1, g }) :
			    push_range(&r, &n, &cap, (struct range){ s, end, g }))
			goto oom;
	}
	if (ferror(f)) {
		parse_error(p, "%s: %s", ranges_path, strerror(errno));
		goto bad;
	}
	fclose(f);
	free(line);
	f = NULL;
	line = NULL;
	qsort(r, n, sizeof(*r), cmp_range);
	for (i = 1; i < n; i++)
		if (r[i].start < r[i - 1].end) {
			parse_error(p, "%s: ranges overlap at %#" PRIx64, ranges_path, r[i].start);
			goto bad;
		}
	qsort(e, ne, sizeof(*e), cmp_range);
	for (i = 1; i < ne; i++)
		if (e[i].start == e[i - 1].start) {
			parse_error(p, "%s: entry %#" PRIx64 " given twice", ranges_path, e[i].start);
			goto bad;
		}
	p->t = malloc(sizeof(*p->t) + n * sizeof(p->t->r[0]));
	if (!p->t)
		goto oom;
	p->t->n = n;
	if (n)
		memcpy(p->t->r, r, n * sizeof(*r));
	p->t->nentries = ne;
	p->t->entry = e;
	free(r);
	return 0;
oom:
	parse_error(p, "%s: out of memory at line %lu", ranges_path, lineno);
bad:
	if (f)
		fclose(f);
	free(line);
	free(r);
	free(e);
	return -1;
}

/*
 * Give a parsed table the plugin's slots for its names and publish it.
 * Under out_lock. The old table is left allocated: a vCPU may still be
 * searching it, and reloads are rare. Returns the number of ranges and
 * entries, or -1 with the reason in load_error; the old table then stays.
 */
static long publish_ranges(struct parsed *p)
{
	unsigned int old_ngroups = ngroups, slot[MAX_GROUPS], g;
	size_t i;
	int k;

	if (!p->t) {
		set_error("%s", p->error);
		return -1;
	}
	for (g = 0; g < p->nnames; g++) {
		k = group_of(p->names[g], p->is_entry[g]);
		if (k < 0) {
			/* Names only this file brought in go again. */
			ngroups = old_ngroups;
			if (k == -1)
				set_error("%s: more than %d names since QEMU started", ranges_path,
					  MAX_GROUPS);
			else
				set_error("%s: %s counted %s before", ranges_path, p->names[g],
					  p->is_entry[g] ? "ranges" : "entries");
			free_table(p->t);
			return -1;
		}
		slot[g] = k;
	}
	for (i = 0; i < p->t->n; i++)
		p->t->r[i].group = slot[p->t->r[i].group];
	for (i = 0; i < p->t->nentries; i++)
		p->t->entry[i].group = slot[p->t->entry[i].group];
	atomic_store_explicit(&ranges, p->t, memory_order_release);
	return p->t->n + p->t->nentries;
}

/* S as a JSON string's contents. */
static void json_chars(FILE *f, const char *s)
{
	for (; *s; s++) {
		unsigned char c = *s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20 || c == 0x7f)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
}

static void write_snapshot(long id, long vcpu, unsigned int cls, uint64_t after)
{
	static const char *const cls_name[2] = { "user", "kernel" };
	unsigned int n = atomic_load(&vcpus_up), v, g, c;

	pthread_mutex_lock(&out_lock);
	if (!out) {
		pthread_mutex_unlock(&out_lock);
		return;
	}
	fprintf(out, "{\"seq\":%" PRIu64 ",\"id\":%ld,\"vcpu\":%ld", ++seq, id, vcpu);
	for (c = 0; c < 2; c++) {
		fprintf(out, ",\"%s\":[", cls_name[c]);
		for (v = 0; v < n; v++) {
			uint64_t x = vcpu_row(v)[c == 0 ? SLOT_USER : SLOT_KERNEL];

			/* The marker's block was counted whole at its start. */
			if ((long)v == vcpu && c == cls)
				x -= after;
			fprintf(out, "%s%" PRIu64, v ? "," : "", x);
		}
		fputc(']', out);
	}
	for (c = 0; c < 2; c++) {
		int first = 1;

		fprintf(out, ",\"%s\":{", c ? "entries" : "ranges");
		for (g = 0; g < ngroups; g++) {
			if (group_is_entry[g] != c)
				continue;
			fprintf(out, "%s\"%s\":[", first ? "" : ",", group_name[g]);
			first = 0;
			for (v = 0; v < n; v++)
				fprintf(out, "%s%" PRIu64, v ? "," : "", vcpu_row(v)[SLOT_GROUP0 + g]);
			fputc(']', out);
		}
		fputc('}', out);
	}
	fputs("}\n", out);
	fflush(out);
	pthread_mutex_unlock(&out_lock);
}

/* Marker udata: id (16 bits), class (1), instructions after it in its TB. */
static void mark_exec(unsigned int vcpu, void *udata)
{
	uint64_t m = (uintptr_t)udata;
	unsigned int id = m & 0xffff, cls = m >> 16 & 1;
	uint64_t after = m >> 17;
	struct parsed *p;
	long n = -1;

	if (id != MARK_RELOAD) {
		write_snapshot(id, vcpu, cls, after);
		return;
	}
	/* Read the file first, then take the lock only to publish. */
	p = malloc(sizeof(*p));
	if (!p)
		return;
	if (ranges_path)
		parse_ranges(p, 1);
	pthread_mutex_lock(&out_lock);
	if (!ranges_path)
		set_error("no ranges=PATH argument");
	else
		n = publish_ranges(p);
	/* A reload's result goes to the output, where the guest's tools look. */
	if (out) {
		fprintf(out, "{\"seq\":%" PRIu64 ",\"id\":%u,\"vcpu\":%u,", ++seq, id, vcpu);
		if (n >= 0) {
			fprintf(out, "\"loaded\":%ld}\n", n);
		} else {
			fputs("\"error\":\"", out);
			json_chars(out, load_error);
			fputs("\"}\n", out);
		}
		fflush(out);
	}
	pthread_mutex_unlock(&out_lock);
	free(p);
}

static int is_marker(struct qemu_plugin_insn *insn, unsigned int *id)
{
	uint8_t b[7];

	if (qemu_plugin_insn_size(insn) != sizeof(b))
		return 0;
#if QEMU_PLUGIN_VERSION >= 3
	if (qemu_plugin_insn_data(insn, b, sizeof(b)) != sizeof(b))
		return 0;
#else
	memcpy(b, qemu_plugin_insn_data(insn), sizeof(b));
#endif
	if (b[0] != 0x0f || b[1] != 0x1f || b[2] != 0x80 ||
	    (b[5] | b[6] << 8) != MARK_MAGIC)
		return 0;
	*id = b[3] | b[4] << 8;
	return 1;
}

static void tb_trans(qemu_plugin_id_t pid, struct qemu_plugin_tb *tb)
{
	size_t n = qemu_plugin_tb_n_insns(tb), i;
	uint64_t vaddr = qemu_plugin_tb_vaddr(tb);
	unsigned int cls = is_kernel(vaddr), id;

#if INLINE_PER_VCPU
	qemu_plugin_register_vcpu_tb_exec_inline_per_vcpu(tb, QEMU_PLUGIN_INLINE_ADD_U64,
		slot_entry(cls ? SLOT_KERNEL : SLOT_USER), n);
	if (cls && ranges_path && vaddr >= RANGES_LOW)
		qemu_plugin_register_vcpu_tb_exec_cb(tb, kernel_tb_exec, QEMU_PLUGIN_CB_NO_REGS,
			(void *)(uintptr_t)pack_tb(vaddr, n));
#else
	if (cls && vaddr >= RANGES_LOW)
		qemu_plugin_register_vcpu_tb_exec_cb(tb, kernel_tb_exec, QEMU_PLUGIN_CB_NO_REGS,
			(void *)(uintptr_t)pack_tb(vaddr, n));
	else if (cls)
		qemu_plugin_register_vcpu_tb_exec_cb(tb, kernel_tb_exec_plain, QEMU_PLUGIN_CB_NO_REGS,
			(void *)(uintptr_t)n);
	else
		qemu_plugin_register_vcpu_tb_exec_cb(tb, user_tb_exec, QEMU_PLUGIN_CB_NO_REGS,
			(void *)(uintptr_t)n);
#endif
	for (i = 0; i < n; i++) {
		struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);

		if (!is_marker(insn, &id))
			continue;
		qemu_plugin_register_vcpu_insn_exec_cb(insn, mark_exec, QEMU_PLUGIN_CB_NO_REGS,
			(void *)(uintptr_t)((uint64_t)(n - 1 - i) << 17 | cls << 16 | id));
	}
}

static void at_exit(qemu_plugin_id_t pid, void *udata)
{
	write_snapshot(-1, -1, 0, 0);
	pthread_mutex_lock(&out_lock);
	fclose(out);
	out = NULL;
	pthread_mutex_unlock(&out_lock);
}

/*
 * QEMU writes a plugin's qemu_plugin_outs() text only with -d plugin, and
 * says no more than "could not install" when the install fails: the reason
 * goes to stderr, which ends up in the VMM's log.
 */
static int install_error(const char *fmt, ...)
{
	va_list ap;

	fputs("insncount: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return -1;
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
					   int argc, char **argv)
{
	int i;

	for (i = 0; i < argc; i++) {
		if (!strncmp(argv[i], "out=", 4))
			out_path = argv[i] + 4;
		else if (!strncmp(argv[i], "ranges=", 7))
			ranges_path = argv[i] + 7;
		else
			return install_error("unknown argument '%s' (takes out=PATH and ranges=PATH)",
					     argv[i]);
	}
	if (!info->system_emulation || strcmp(info->target_name, "x86_64"))
		return install_error("counts x86_64 system emulation only, not %s%s",
				     info->target_name,
				     info->system_emulation ? "" : " user mode");
	if (!out_path || !*out_path)
		return install_error("out=PATH is required");
	if (ranges_path && !*ranges_path)
		return install_error("ranges= names no file");
	if (ranges_path) {
		static struct parsed p;

		if (parse_ranges(&p, 0))
			return install_error("%s", p.error);
		if (p.t && publish_ranges(&p) < 0)
			return install_error("%s", load_error);
	}
#if INLINE_PER_VCPU
	board = qemu_plugin_scoreboard_new(sizeof(struct row));
#else
	max_vcpus = info->system.max_vcpus;
	rows = aligned_alloc(64, max_vcpus * sizeof(*rows));
	if (!rows)
		return install_error("out of memory");
	memset(rows, 0, max_vcpus * sizeof(*rows));
#endif
	out = fopen(out_path, "we");
	if (!out)
		return install_error("cannot create %s: %s", out_path, strerror(errno));
	qemu_plugin_register_vcpu_init_cb(id, vcpu_init);
	qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
	qemu_plugin_register_atexit_cb(id, at_exit, NULL);
	return 0;
}
