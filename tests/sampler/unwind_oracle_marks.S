/*
 * unwind_oracle_marks.S - oracle_begin and oracle_end (unwind_oracle.h):
 * the validator's child stops at oracle_begin's int3 (sp then points at its
 * return address) and the parent stops stepping when the child reaches
 * oracle_end. Runs in the validator's child.
 */
        .text
        .globl  oracle_begin
        .type   oracle_begin, @function
oracle_begin:
        .cfi_startproc
        int3
        ret
        .cfi_endproc
        .size   oracle_begin, .-oracle_begin

        .globl  oracle_end
        .type   oracle_end, @function
oracle_end:
        .cfi_startproc
        ret
        .cfi_endproc
        .size   oracle_end, .-oracle_end
        .section .note.GNU-stack,"",@progbits
