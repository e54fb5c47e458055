/*
 * long_epilogue.S - two functions that spend most of their instructions in
 * their epilogues, with the CFI GCC emits for them, for test_epilogue.c.
 * Runs on the test's sampled thread.
 *
 * long_epilogue_leave(counter): rbp frame, five callee-saved registers
 * pushed, a one-instruction body, then five pops, `leave` and `ret`. As
 * GCC does, the CFI after `leave` only moves the CFA to rsp + 8: it still
 * says rbp is saved at CFA - 16, a slot now below sp.
 *
 * long_epilogue_pops(counter): no frame pointer, rbp pushed as an ordinary
 * callee-saved register with four others; after `pop %rbp` the CFI says
 * rbp is still at CFA - 16, below sp, for the last pops and the `ret`.
 *
 * A `pause` after every restore keeps the thread in the epilogue most of
 * the time (a sample lands where the thread spends its time). Both mark
 * where their epilogue starts (long_epilogue_*_tail) and where rbp has been
 * restored (long_epilogue_*_restored: the instructions whose rows name a
 * slot below sp) so the test can count the samples taken there.
 */
        .text
        .globl  long_epilogue_leave
        .globl  long_epilogue_leave_tail
        .globl  long_epilogue_leave_restored
        .type   long_epilogue_leave, @function
long_epilogue_leave:
        .cfi_startproc
        push    %rbp
        .cfi_def_cfa_offset 16
        .cfi_offset %rbp, -16
        mov     %rsp, %rbp
        .cfi_def_cfa_register %rbp
        push    %rbx
        push    %r12
        push    %r13
        push    %r14
        push    %r15
        .cfi_offset %rbx, -24
        .cfi_offset %r12, -32
        .cfi_offset %r13, -40
        .cfi_offset %r14, -48
        .cfi_offset %r15, -56
        incq    (%rdi)
long_epilogue_leave_tail:
        pop     %r15
        pause
        pop     %r14
        pause
        pop     %r13
        pause
        pop     %r12
        pause
        pop     %rbx
        pause
        leave
        .cfi_def_cfa %rsp, 8
long_epilogue_leave_restored:
        pause
        ret
        .cfi_endproc
        .size   long_epilogue_leave, .-long_epilogue_leave

        .globl  long_epilogue_pops
        .globl  long_epilogue_pops_tail
        .globl  long_epilogue_pops_restored
        .type   long_epilogue_pops, @function
long_epilogue_pops:
        .cfi_startproc
        push    %r15
        .cfi_def_cfa_offset 16
        .cfi_offset %r15, -16
        push    %r14
        .cfi_def_cfa_offset 24
        .cfi_offset %r14, -24
        push    %rbp
        .cfi_def_cfa_offset 32
        .cfi_offset %rbp, -32
        push    %r13
        .cfi_def_cfa_offset 40
        .cfi_offset %r13, -40
        push    %rbx
        .cfi_def_cfa_offset 48
        .cfi_offset %rbx, -48
        mov     %rdi, %rbp          /* rbp as a general register */
        incq    (%rbp)
long_epilogue_pops_tail:
        pop     %rbx
        .cfi_def_cfa_offset 40
        pause
        pop     %r13
        .cfi_def_cfa_offset 32
        pause
        pop     %rbp
        .cfi_def_cfa_offset 24
long_epilogue_pops_restored:
        pause
        pop     %r14
        .cfi_def_cfa_offset 16
        pause
        pop     %r15
        .cfi_def_cfa_offset 8
        pause
        ret
        .cfi_endproc
        .size   long_epilogue_pops, .-long_epilogue_pops
        .section .note.GNU-stack,"",@progbits
