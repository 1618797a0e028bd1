/*
 * simt_fiber.c: fibers for the SIMT runtime.
 *
 * - Stacks come from a pool that maps them in chunks, each stack with a PROT_NONE guard page
 *   below it, so an overflow faults instead of corrupting a neighbour.
 * - The switch is a few lines of assembly on x86-64: it saves the callee-saved registers, MXCSR
 *   and the x87 control word on the old stack and swaps stack pointers (about 10 ns, where
 *   glibc's swapcontext makes a sigprocmask system call on every switch). Elsewhere, when
 *   control-flow protection is on (a shadow stack would reject the handmade return), or with
 *   -DSIMT_FIBER_UCONTEXT, ucontext does the work.
 * - Under AddressSanitizer every switch is announced with __sanitizer_start_switch_fiber and
 *   __sanitizer_finish_switch_fiber, and a stack is unpoisoned before it is reused or unmapped,
 *   so ASan knows which stack is live and drops the stale redzones of finished fibers.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "simt.h"

#if defined(__x86_64__) && !defined(__CET__) && !defined(SIMT_FIBER_UCONTEXT)
#define FIBER_ASM 1
#else
#define FIBER_ASM 0
#include <ucontext.h>
#endif

#if defined(__SANITIZE_ADDRESS__)
#define FIBER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FIBER_ASAN 1
#endif
#endif
#ifndef FIBER_ASAN
#define FIBER_ASAN 0
#endif
#if FIBER_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define DEFAULT_STACK ((size_t)256 << 10)
#else
#define DEFAULT_STACK ((size_t)64 << 10)
#endif
#define MAX_STACK ((size_t)64 << 20)

struct SimtFiber {
#if FIBER_ASM
    void *sp;
#else
    ucontext_t uc;
#endif
    void (*body)(void *);
    void *arg;
    SimtFiber *link;
    /* ASan: the stack's bounds, the fake stack while switched out, and who switched here last
     * (the switch reports that one's bounds, the only way to learn an OS thread's stack). */
    const void *bottom;
    size_t size;
    void *fake;
    SimtFiber *from;
};

/* ---- stack pool --------------------------------------------------------------------------- */

typedef struct Chunk {
    char *base;
    size_t len;
} Chunk;

struct SimtStackPool {
    size_t stack; /* usable bytes of one stack, a page multiple */
    size_t page;
    Chunk *chunk;
    int nchunk, capchunk;
    void **free;
    int nfree, capfree;
    int total;
};

SimtStackPool *simt_stacks_create(size_t stack_bytes)
{
    SimtStackPool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    long page = sysconf(_SC_PAGESIZE);
    p->page = page > 0 ? (size_t)page : 4096;
    size_t want = stack_bytes ? stack_bytes : DEFAULT_STACK;
    if (want > MAX_STACK)
        want = MAX_STACK;
    if (want < 4 * p->page)
        want = 4 * p->page;
    p->stack = (want + p->page - 1) / p->page * p->page;
    return p;
}

void simt_stacks_destroy(SimtStackPool *p)
{
    if (!p)
        return;
    for (int i = 0; i < p->nchunk; i++) {
#if FIBER_ASAN
        /* Only the stacks, not the guard pages, can carry poison. */
        size_t slot = p->page + p->stack;
        for (size_t off = 0; off < p->chunk[i].len; off += slot)
            ASAN_UNPOISON_MEMORY_REGION(p->chunk[i].base + off + p->page, p->stack);
#endif
        munmap(p->chunk[i].base, p->chunk[i].len);
    }
    free(p->chunk);
    free(p->free);
    free(p);
}

/* Maps n more stacks and puts them on the free list; false when out of memory. */
static bool stacks_grow(SimtStackPool *p, int n)
{
    if (p->nchunk == p->capchunk) {
        int cap = p->capchunk ? 2 * p->capchunk : 16;
        Chunk *c = realloc(p->chunk, (size_t)cap * sizeof *c);
        if (!c)
            return false;
        p->chunk = c;
        p->capchunk = cap;
    }
    if (p->total + n > p->capfree) {
        int cap = p->total + n;
        void **f = realloc(p->free, (size_t)cap * sizeof *f);
        if (!f)
            return false;
        p->free = f;
        p->capfree = cap;
    }
    size_t slot = p->page + p->stack;
    size_t len = slot * (size_t)n;
    char *base = mmap(NULL, len, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (base == MAP_FAILED)
        return false;
    for (int i = 0; i < n; i++) {
        if (mprotect(base + (size_t)i * slot, p->page, PROT_NONE) != 0) {
            munmap(base, len);
            return false;
        }
    }
    p->chunk[p->nchunk++] = (Chunk){base, len};
    for (int i = n - 1; i >= 0; i--)
        p->free[p->nfree++] = base + (size_t)i * slot + p->page;
    p->total += n;
    return true;
}

void *simt_stack_get(SimtStackPool *p, size_t *size)
{
    if (p->nfree == 0) {
        int n = p->total < 4 ? 4 : p->total > 64 ? 64 : p->total;
        if (!stacks_grow(p, n))
            return NULL;
    }
    *size = p->stack;
    return p->free[--p->nfree];
}

void simt_stack_put(SimtStackPool *p, void *stack) { p->free[p->nfree++] = stack; }

/* ---- context switch ----------------------------------------------------------------------- */

#if FIBER_ASM
/* Saves the callee-saved state on the current stack, stores the stack pointer in *save, and
 * continues from the state saved at next. The saved frame, from the lowest address: MXCSR (4
 * bytes), x87 control word (2), padding (2), r15, r14, r13, r12, rbx, rbp, return address. */
void simt_fiber_swap_x86(void **save, void *next);
/* First code of a fresh fiber: calls r13(r12) on an aligned stack; r13 never returns. */
void simt_fiber_start_x86(void);
__asm__(".text\n"
        ".p2align 4\n"
        ".globl simt_fiber_swap_x86\n"
        ".hidden simt_fiber_swap_x86\n"
        ".type simt_fiber_swap_x86,@function\n"
        "simt_fiber_swap_x86:\n"
        "    pushq %rbp\n"
        "    pushq %rbx\n"
        "    pushq %r12\n"
        "    pushq %r13\n"
        "    pushq %r14\n"
        "    pushq %r15\n"
        "    subq $8, %rsp\n"
        "    stmxcsr (%rsp)\n"
        "    fnstcw 4(%rsp)\n"
        "    movq %rsp, (%rdi)\n"
        "    movq %rsi, %rsp\n"
        "    ldmxcsr (%rsp)\n"
        "    fldcw 4(%rsp)\n"
        "    addq $8, %rsp\n"
        "    popq %r15\n"
        "    popq %r14\n"
        "    popq %r13\n"
        "    popq %r12\n"
        "    popq %rbx\n"
        "    popq %rbp\n"
        "    ret\n"
        ".size simt_fiber_swap_x86, .-simt_fiber_swap_x86\n"
        ".p2align 4\n"
        ".globl simt_fiber_start_x86\n"
        ".hidden simt_fiber_start_x86\n"
        ".type simt_fiber_start_x86,@function\n"
        "simt_fiber_start_x86:\n"
        "    .cfi_startproc\n"
        "    .cfi_undefined rip\n"
        "    movq %r12, %rdi\n"
        "    andq $-16, %rsp\n"
        "    callq *%r13\n"
        "    ud2\n"
        "    .cfi_endproc\n"
        ".size simt_fiber_start_x86, .-simt_fiber_start_x86\n");
#endif

/* Runs on the fiber just switched to: completes the ASan handover and records the bounds of
 * the stack that was left. */
static void fiber_arrived(SimtFiber *self)
{
#if FIBER_ASAN
    const void *bottom;
    size_t size;
    __sanitizer_finish_switch_fiber(self->fake, &bottom, &size);
    if (self->from) {
        self->from->bottom = bottom;
        self->from->size = size;
    }
#else
    (void)self;
#endif
}

_Noreturn static void fiber_entry(SimtFiber *f)
{
    fiber_arrived(f);
    f->body(f->arg);
    simt_fiber_exit(f, f->link);
}

#if !FIBER_ASM
/* makecontext passes int arguments only: the record's address comes in two halves. */
static void fiber_entry_uc(unsigned hi, unsigned lo)
{
    fiber_entry((SimtFiber *)(((uintptr_t)hi << 32) | (uintptr_t)lo));
}
#endif

SimtFiber *simt_fiber_alloc(void) { return calloc(1, sizeof(SimtFiber)); }

void simt_fiber_free(SimtFiber *f) { free(f); }

SimtFiber *simt_fiber_make(void *stack, size_t size, void (*body)(void *), void *arg,
                           SimtFiber *link)
{
#if FIBER_ASAN
    ASAN_UNPOISON_MEMORY_REGION(stack, size);
#endif
    uintptr_t hi = (uintptr_t)stack + size;
    SimtFiber *f = (SimtFiber *)((hi - sizeof(SimtFiber)) & ~(uintptr_t)63);
    memset(f, 0, sizeof *f);
    f->body = body;
    f->arg = arg;
    f->link = link;
    f->bottom = stack;
    f->size = (size_t)((uintptr_t)f - (uintptr_t)stack);
#if FIBER_ASM
    uint64_t *sp = (uint64_t *)((uintptr_t)f & ~(uintptr_t)15) - 8;
    uint32_t mxcsr;
    uint16_t fpcw;
    __asm__ volatile("stmxcsr %0" : "=m"(mxcsr));
    __asm__ volatile("fnstcw %0" : "=m"(fpcw));
    sp[0] = (uint64_t)mxcsr | (uint64_t)fpcw << 32;
    sp[1] = 0;                                     /* r15 */
    sp[2] = 0;                                     /* r14 */
    sp[3] = (uint64_t)(uintptr_t)fiber_entry;      /* r13 */
    sp[4] = (uint64_t)(uintptr_t)f;                /* r12 */
    sp[5] = 0;                                     /* rbx */
    sp[6] = 0;                                     /* rbp: the outermost frame */
    sp[7] = (uint64_t)(uintptr_t)simt_fiber_start_x86;
    f->sp = sp;
#else
    getcontext(&f->uc);
    f->uc.uc_stack.ss_sp = stack;
    f->uc.uc_stack.ss_size = f->size;
    f->uc.uc_link = NULL;
    uintptr_t a = (uintptr_t)f;
    makecontext(&f->uc, (void (*)(void))fiber_entry_uc, 2, (unsigned)(a >> 32), (unsigned)a);
#endif
    return f;
}

void simt_fiber_switch(SimtFiber *from, SimtFiber *to)
{
    to->from = from;
#if FIBER_ASAN
    __sanitizer_start_switch_fiber(&from->fake, to->bottom, to->size);
#endif
#if FIBER_ASM
    simt_fiber_swap_x86(&from->sp, to->sp);
#else
    swapcontext(&from->uc, &to->uc);
#endif
    fiber_arrived(from);
}

_Noreturn void simt_fiber_exit(SimtFiber *from, SimtFiber *to)
{
    to->from = from;
#if FIBER_ASAN
    /* A NULL save slot tells ASan this fiber is gone, so it frees its fake stack. */
    __sanitizer_start_switch_fiber(NULL, to->bottom, to->size);
#endif
#if FIBER_ASM
    simt_fiber_swap_x86(&from->sp, to->sp);
#else
    setcontext(&to->uc);
#endif
    abort(); /* never resumed */
}
