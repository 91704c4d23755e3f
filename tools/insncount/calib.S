/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * calib: a multiboot image for QEMU's -kernel that checks insncount against
 * instruction counts known by construction. It first executes the reload
 * marker (the plugin reloads its ranges file and says how that went).
 *
 * In 32-bit protected mode, at low addresses (counted as "user"): three
 * loops of 4 instructions (N = 1000, 1,000,000 and 10,000,000 rounds),
 * each between two markers. Between marker K and marker K+1 exactly
 * 4 * N + 2 instructions run (the mov that sets the count, the loop, and
 * the next marker, which a snapshot includes).
 *
 * Then it enters long mode and runs at 0xffffffff80000000 and up, an
 * alias of the low 1 GiB, as a Linux kernel's text lies (counted as
 * "kernel"). Between markers 5 and 6 it calls calib_a, a loop of 4
 * instructions run 2,000,000 times and a ret: 4 * 2000000 + 4 kernel
 * instructions (mov, call, the loop, ret, the marker), of which
 * 4 * 2000000 + 1 in calib_a; between markers 6 and 7 the same with calib_b
 * and 3,000,000 rounds. The host test makes ranges of calib_a and calib_b
 * from this image's symbols.
 *
 * Last it writes 16 to QEMU's isa-debug-exit port: QEMU exits with status
 * 33 (2 * 16 + 1), which no failure of QEMU's own gives. Interrupts are off
 * throughout, and nothing faults. The other vCPUs ran only the firmware's
 * SMP probe before this image started (SeaBIOS wakes them to count them)
 * and wait for a start-up IPI that never comes, so their counts must not
 * change between the markers.
 */
	.macro MARK id
	.byte 0x0f, 0x1f, 0x80		/* nopl disp32(%eax) */
	.short \id, 0x5653
	.endm

	.macro LOOP rounds
	mov $\rounds, %ecx
1:	nop
	nop
	dec %ecx
	jnz 1b
	.endm

	.section .text
	.code32
	.align 4
	/* The multiboot header: magic, flags (none: an ELF image), checksum. */
	.long 0x1badb002, 0, -0x1badb002

	.globl _start
_start:
	cli
	mov $stack_top, %esp
	MARK 0xffff
	MARK 1
	LOOP 1000
	MARK 2
	LOOP 1000000
	MARK 3
	LOOP 10000000
	MARK 4

	/* Page tables: 2 MiB pages mapping the low 1 GiB at 0 and at -2 GiB. */
	mov $pd, %edi
	mov $0x83, %eax			/* present, writable, 2 MiB page */
	mov $512, %ecx
3:	mov %eax, (%edi)
	movl $0, 4(%edi)
	add $0x200000, %eax
	add $8, %edi
	dec %ecx
	jnz 3b
	movl $pd + 3, pdpt_low
	movl $pd + 3, pdpt_high + 510 * 8
	movl $pdpt_low + 3, pml4
	movl $pdpt_high + 3, pml4 + 511 * 8
	mov %cr4, %eax
	or $0x20, %eax			/* PAE */
	mov %eax, %cr4
	mov $pml4, %eax
	mov %eax, %cr3
	mov $0xc0000080, %ecx		/* EFER.LME */
	rdmsr
	or $0x100, %eax
	wrmsr
	mov %cr0, %eax
	or $0x80000001, %eax		/* paging, protection */
	mov %eax, %cr0
	lgdt gdt_ptr
	ljmp $8, $long_mode

	.code64
long_mode:
	/* Over to the -2 GiB alias, stack included. */
	movabs $0xffffffff80000000, %rdx
	add %rdx, %rsp
	mov $high, %eax
	add %rdx, %rax
	jmp *%rax
high:
	MARK 5
	mov $2000000, %ecx
	call calib_a
	MARK 6
	mov $3000000, %ecx
	call calib_b
	MARK 7
	mov $0x10, %al
	outb %al, $0xf4
4:	hlt
	jmp 4b

	.globl calib_a, calib_a_end, calib_b, calib_b_end
	.align 16
calib_a:
	nop
	nop
	dec %ecx
	jnz calib_a
	ret
calib_a_end:
	.align 16
calib_b:
	nop
	nop
	dec %ecx
	jnz calib_b
	ret
calib_b_end:

	.section .data
	.align 8
gdt:
	.quad 0
	.quad 0x00209a0000000000		/* 64-bit code, ring 0 */
gdt_ptr:
	.short gdt_ptr - gdt - 1
	.long gdt
	.align 4096
pml4:	.fill 512, 8, 0
pdpt_low:
	.fill 512, 8, 0
pdpt_high:
	.fill 512, 8, 0
pd:	.fill 512, 8, 0
	.fill 1024, 4, 0
stack_top:
