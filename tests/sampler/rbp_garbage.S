/*
 * rbp_garbage.S - rbp_garbage_loop(volatile int *stop, uintptr_t stack_hint):
 * spins with rbp holding a new pseudo-random value every iteration, half of
 * them pointing into the thread's own stack near `stack_hint`, so a sampler
 * that trusts rbp as a frame pointer walks garbage. Deliberately has no CFI
 * (like much hand-written assembly). rbp is restored before returning.
 * rbp_garbage_loop_end marks the end of its code.
 */
        .text
        .globl  rbp_garbage_loop
        .type   rbp_garbage_loop, @function
rbp_garbage_loop:
        push    %rbp
        push    %rbx
        movabs  $0x9E3779B97F4A7C15, %rax   /* xorshift state */
1:
        mov     %rax, %rbx                  /* xorshift64 */
        shl     $13, %rbx
        xor     %rbx, %rax
        mov     %rax, %rbx
        shr     $7, %rbx
        xor     %rbx, %rax
        mov     %rax, %rbx
        shl     $17, %rbx
        xor     %rbx, %rax
        mov     %rax, %rbp                  /* random 64-bit garbage */
        test    $1, %al
        jz      2f
        mov     %rax, %rbp                  /* or a random address near the stack */
        and     $0x3fff, %rbp
        sub     $0x2000, %rbp
        add     %rsi, %rbp
2:
        mov     (%rdi), %ecx
        test    %ecx, %ecx
        jz      1b
        pop     %rbx
        pop     %rbp
        ret
        .globl  rbp_garbage_loop_end        /* where the function ends, for the test */
rbp_garbage_loop_end:
        .size   rbp_garbage_loop, .-rbp_garbage_loop
        .section .note.GNU-stack,"",@progbits
