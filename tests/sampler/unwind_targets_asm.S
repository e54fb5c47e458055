/*
 * unwind_targets_asm.S - hand-written assembly for the unwind validator
 * (unwind_targets.h). Runs in the validator's forked child.
 *
 * targets_run_no_cfi: calls no_cfi_frame three times. no_cfi_frame keeps a
 * frame pointer but has no CFI at all (like much hand-written assembly and
 * JIT code): the walker falls back to one frame-pointer step there, right
 * in its body, wrong in its prologue and epilogue (documented).
 */
        .text
        .globl  targets_run_no_cfi
        .type   targets_run_no_cfi, @function
targets_run_no_cfi:
        .cfi_startproc
        push    %rbx
        .cfi_def_cfa_offset 16
        .cfi_offset %rbx, -16
        mov     $3, %ebx
1:      mov     %rbx, %rdi
        call    no_cfi_frame
        dec     %ebx
        jnz     1b
        pop     %rbx
        .cfi_def_cfa_offset 8
        ret
        .cfi_endproc
        .size   targets_run_no_cfi, .-targets_run_no_cfi

/* No .cfi_startproc: no FDE covers this function. */
        .type   no_cfi_frame, @function
no_cfi_frame:
        push    %rbp
        mov     %rsp, %rbp
        call    cfi_leaf
        pop     %rbp
        ret
        .size   no_cfi_frame, .-no_cfi_frame

        .type   cfi_leaf, @function
cfi_leaf:
        .cfi_startproc
        lea     1(%rdi), %rax
        imul    %rax, %rax
        ret
        .cfi_endproc
        .size   cfi_leaf, .-cfi_leaf
        .section .note.GNU-stack,"",@progbits
