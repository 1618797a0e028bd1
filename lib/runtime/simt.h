/*
 * simt.h: the host SIMT runtime, private to libastitch. It runs GPU-style kernels on the CPU.
 *
 *   simt.c        launch: argument checks, waves of blocks, the scheduler, deadlock reports
 *   simt_prims.c  the primitives kernels call (astitch_simt_*), and the table host kernels
 *                 bind them through (simt_host_primitives)
 *   simt_fiber.c  fibers: stack pool with guard pages, context switch, ASan annotations
 *   simt_redzone.c  redzones: guard bytes around and between the memory a kernel may touch
 *
 * Execution model. A launch runs a kernel (an ordinary C-ABI function returning void, called
 * through libffi with its real argument list) once per GPU thread: grid x block threads, 1-D.
 * Each GPU thread is a fiber. All fibers of a launch run cooperatively on the calling OS thread;
 * a fiber gives up the CPU only at a barrier or warp shuffle, so kernels must never spin-wait on
 * memory written by other threads (use astitch_simt_grid_barrier, not a software barrier).
 *
 * - A plain launch runs its blocks one after another (a wave of one block); a block's fibers run
 *   round-robin. Blocks are independent, as on a GPU without co-residency guarantees.
 * - A cooperative launch (SimtLaunch.cooperative) keeps every block of the grid live at once (a
 *   wave of the whole grid), which astitch_simt_grid_barrier needs; calling it in a plain
 *   launch is a kernel error, as a grid sync is on CUDA without a cooperative launch. A
 *   cooperative launch holds at most SIMT_MAX_LIVE_THREADS threads: every live fiber owns a stack
 *   with a guard page (two kernel mappings each, and vm.max_map_count is 65530 by default).
 * - A barrier that cannot complete is an error, never a hang: when no fiber can run and some
 *   still wait, the launch fails with a message such as
 *   "kernel 'k' block 3: block barrier reached by 10 of 64 threads (54 exited)".
 * - Warps are 32 consecutive threads of a block; the last warp of a block may be partial. A warp
 *   shuffle is a warp barrier: every live lane of the warp must reach it.
 * - Shared memory: shared_bytes per block (static plus dynamic), 64-byte aligned, filled with
 *   0xff bytes (NaN as f32, -1 as i32) at block start, since a GPU does not clear it either.
 *   With SimtLaunch.shared_redzones, the bytes of a block's shared memory that the kernel may
 *   not touch, and SIMT_REDZONE bytes either side of it, are guards (simt_redzone.c), checked
 *   when the block's wave ends: a guard overwritten fails the launch with a kernel error.
 * - A failure (astitch_simt_trap, deadlock) ends the whole launch; fibers still blocked are
 *   abandoned (their stacks are unmapped; kernels own no resources).
 * - Each fiber has a small stack (SimtLaunch.stack_bytes) above a guard page: a kernel that
 *   overflows it dies of SIGSEGV, which cannot be turned into a status.
 *
 * Thread safety: the runtime keeps the running launch in a thread-local variable (the
 * primitives take no context argument, as the JIT calls them from kernel code), so separate OS
 * threads may run separate launches. A kernel must not start a launch.
 */
#ifndef ASTITCH_SIMT_H
#define ASTITCH_SIMT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ffi.h>

#include "astitch/astitch.h"
#include "codegen/compile.h"

#define SIMT_WARP_SIZE 32
#define SIMT_MAX_BLOCK 1024              /* threads per block */
#define SIMT_MAX_LIVE_THREADS 16384      /* threads of a cooperative launch */
#define SIMT_MAX_SHARED ((size_t)256 << 10)   /* shared bytes per block */
#define SIMT_MAX_SHARED_TOTAL ((size_t)256 << 20) /* shared bytes of all live blocks */
#define SIMT_MAX_ARGS 256
#define SIMT_SHARED_ALIGN 64
#define SIMT_REDZONE 64                  /* guard bytes before and after a redzoned region */
#define SIMT_REDZONE_BYTE 0xa5           /* the value every guard byte holds */

/* A byte range [offset, offset + bytes) of a region that a kernel may touch, named for reports
 * ("SHARED buffer of node 3 'max.1'"). */
typedef struct SimtRange {
    int64_t offset, bytes;
    const char *name;
} SimtRange;

/* A region of `bytes` bytes of which a kernel may touch only the ranges used[0 .. nused)
 * (ascending by offset, overlapping or not; clipped to the region). Every other byte of the
 * region and the SIMT_REDZONE bytes either side of it are its guards. */
typedef struct SimtRedzones {
    const SimtRange *used;
    int nused;
    int64_t bytes;
} SimtRedzones;

typedef struct SimtLaunch {
    void (*fn)(void);       /* the kernel; its real type is void (T0, T1, ...) */
    ffi_type **arg_types;   /* nargs argument types */
    void **arg_values;      /* nargs pointers to the argument values, as for ffi_call */
    int nargs;
    int32_t grid;           /* blocks, >= 1 */
    int32_t block;          /* threads per block, 1..SIMT_MAX_BLOCK */
    size_t shared_bytes;    /* shared memory per block, <= SIMT_MAX_SHARED */
    bool cooperative;       /* keep all blocks live: needed by astitch_simt_grid_barrier */
    size_t stack_bytes;     /* fiber stack size; 0 for the default (64 KiB, 256 KiB on ASan) */
    const char *name;       /* kernel name for messages; may be NULL */
    const SimtRedzones *shared_redzones; /* the ranges of a block's shared memory the kernel
                                          * may touch (bytes: shared_bytes); NULL: no redzones */
} SimtLaunch;

/* simt.c */
/* Runs l->fn over l->grid x l->block threads and returns when all have finished. Returns
 * ASTITCH_ERR_ARGUMENT for a bad launch (sizes, limits, argument types libffi rejects),
 * ASTITCH_ERR_MEMORY when stacks or shared memory cannot be had, ASTITCH_ERR_DEVICE for a kernel
 * error (astitch_simt_trap, a barrier or shuffle that cannot complete, a grid barrier in a plain
 * launch); the message is recorded on ctx. Memory the kernel wrote before a failure stays
 * written. Must not be called from inside a kernel. */
astitch_status simt_launch(astitch_context *ctx, const SimtLaunch *l);

/* simt_prims.c: the primitives, C linkage, for kernels. Calling any of them outside a launch is
 * a bug in the caller and aborts. Indices are those of CUDA's threadIdx.x, blockIdx.x,
 * blockDim.x and gridDim.x. */
int32_t astitch_simt_thread_idx_x(void);
int32_t astitch_simt_block_idx_x(void);
int32_t astitch_simt_block_dim_x(void);
int32_t astitch_simt_grid_dim_x(void);
/* bar.sync: waits until every thread of the block has arrived. */
void astitch_simt_barrier(void);
/* Waits until every thread of the grid has arrived; cooperative launches only. Memory written
 * before it by any thread is visible to every thread after it. */
void astitch_simt_grid_barrier(void);
/* shfl.sync over the whole warp. Each returns the value v of the source lane: lane + delta
 * (down), lane ^ mask (xor), lane & 31 (idx); where that lane does not exist (past lane 31 or
 * past the end of a partial warp) the caller's own v. Every live lane of the warp must call. */
float astitch_simt_shfl_down_f32(float v, int32_t delta);
float astitch_simt_shfl_xor_f32(float v, int32_t mask);
float astitch_simt_shfl_idx_f32(float v, int32_t lane);
int32_t astitch_simt_shfl_down_i32(int32_t v, int32_t delta);
int32_t astitch_simt_shfl_xor_i32(int32_t v, int32_t mask);
int32_t astitch_simt_shfl_idx_i32(int32_t v, int32_t lane);
/* Atomics on global (or shared) memory; each returns the old value. cas stores desired when
 * *p == expected. */
float astitch_simt_atomic_add_f32(float *p, float v);
int32_t astitch_simt_atomic_add_i32(int32_t *p, int32_t v);
int32_t astitch_simt_atomic_cas_i32(int32_t *p, int32_t expected, int32_t desired);
uint32_t astitch_simt_atomic_cas_u32(uint32_t *p, uint32_t expected, uint32_t desired);
int32_t astitch_simt_atomic_exch_i32(int32_t *p, int32_t v);
uint32_t astitch_simt_atomic_exch_u32(uint32_t *p, uint32_t v);
/* Ordered as llvm.maximum/minimum: NaN wins, -0 < +0; return the old value. */
float astitch_simt_atomic_max_f32(float *p, float v);
float astitch_simt_atomic_min_f32(float *p, float v);
/* Base of this block's shared memory (shared_bytes of the launch, 64-byte aligned). */
void *astitch_simt_shared(void);
/* Ends the launch with a kernel error: "kernel 'k' block B thread T: trap: msg". */
_Noreturn void astitch_simt_trap(const char *msg);

/* simt_redzone.c: guards are bytes of value SIMT_REDZONE_BYTE; a kernel that writes one
 * wrote outside the ranges it may touch. A region at base is addressable from
 * base - SIMT_REDZONE to base + z->bytes + SIMT_REDZONE. */
/* Sets every guard byte of the region z at base. */
void simt_redzone_fill(char *base, const SimtRedzones *z);
/* The first guard byte of the region z at base that no longer holds SIMT_REDZONE_BYTE, as an
 * offset from base (negative before it), into *bad; false when every guard holds. */
bool simt_redzone_check(const char *base, const SimtRedzones *z, int64_t *bad);
/* Writes into buf where offset `bad` lies among z's ranges, for a report: "4 bytes past the
 * end of SCRATCH buffer of node 5 'exp.1' (bytes [0, 4000))", or "inside ... (bytes [a, b)),
 * past the region's end" for a range the region does not hold. */
void simt_redzone_explain(const SimtRedzones *z, int64_t bad, char *buf, size_t len);

/* The primitives as host kernels call them (compile_host), every field set; constant. */
const HostPrimitives *simt_host_primitives(void);

/* ---- internals shared by the simt files -------------------------------------------------- */

typedef struct SimtFiber SimtFiber;
typedef struct SimtStackPool SimtStackPool;

typedef enum SimtThreadState { SIMT_NEW, SIMT_READY, SIMT_WAIT, SIMT_DONE } SimtThreadState;
typedef enum SimtWaitKind { SIMT_WAIT_NONE, SIMT_WAIT_BLOCK, SIMT_WAIT_WARP, SIMT_WAIT_GRID }
    SimtWaitKind;

typedef struct SimtThread {
    SimtFiber *fiber;    /* NULL until started; the record lives on its stack */
    void *stack;
    int32_t tid, block;  /* threadIdx.x, blockIdx.x */
    int32_t slot;        /* index in the wave's thread array */
    uint32_t shfl_phase; /* shuffles done: picks the warp's value buffer */
    uint8_t state;       /* SimtThreadState */
    uint8_t wait;        /* SimtWaitKind while SIMT_WAIT */
} SimtThread;

/* A barrier of `expected` threads; the first expected - 1 arrivals wait in waiter[]. */
typedef struct SimtBarrier {
    int32_t arrived;
    int32_t expected;
    int32_t *waiter;
} SimtBarrier;

typedef struct SimtWarp {
    SimtBarrier bar;     /* expected = lanes of this warp */
    int32_t waiter[SIMT_WARP_SIZE];
    uint32_t value[2][SIMT_WARP_SIZE]; /* published shuffle operands, by phase parity */
} SimtWarp;

/* One launch in progress. A wave is the set of blocks live at once: one block, or the whole
 * grid of a cooperative launch. */
typedef struct SimtExec {
    const SimtLaunch *l;
    const char *name;
    ffi_cif cif;
    SimtFiber *sched;        /* the launching OS thread's context */
    SimtStackPool *stacks;
    int32_t wave_blocks;
    int32_t first_block;     /* blockIdx.x of the wave's first block */
    int32_t nthreads;        /* threads of a wave */
    int32_t warps;           /* warps per block */
    SimtThread *thread;      /* nthreads */
    SimtBarrier *bar_block;  /* wave_blocks */
    SimtWarp *warp;          /* wave_blocks * warps */
    SimtBarrier bar_grid;
    int32_t *waiters;        /* waiter storage of the block and grid barriers */
    int32_t *queue;          /* ring of thread slots ready to run */
    int32_t qhead, qlen;
    char *shared;            /* wave_blocks * shared_stride bytes */
    char *shared_alloc;      /* shared, less SIMT_REDZONE bytes before it under redzones */
    size_t shared_stride;
    SimtThread *cur;         /* the running thread */
    int32_t done;            /* threads of the wave that returned */
    bool failed;
    astitch_status status;
    char error[768];
} SimtExec;

/* The launch running on this OS thread, NULL outside launches. Thread-local because the
 * primitives are called from kernel code without a context argument. */
extern _Thread_local SimtExec *simt_current;

/* simt.c */
/* The running thread arrives at barrier b (kind says which, for deadlock reports): it returns
 * once b's expected threads have all arrived. */
void simt_arrive(SimtExec *x, SimtBarrier *b, SimtWaitKind kind);
/* Ends the launch with a kernel error "kernel 'k' block B thread T: <message>". */
_Noreturn void simt_fail(SimtExec *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* simt_fiber.c */

/* A pool of fiber stacks of stack_bytes each (0: the default), each with a PROT_NONE guard page
 * below it, mapped in chunks as needed and unmapped together. NULL when out of memory. */
SimtStackPool *simt_stacks_create(size_t stack_bytes);
void simt_stacks_destroy(SimtStackPool *p); /* accepts NULL; stacks in use are dropped too */
/* Returns the lowest usable address of a free stack of pool p (its size is *size), or NULL
 * when no memory could be mapped. */
void *simt_stack_get(SimtStackPool *p, size_t *size);
void simt_stack_put(SimtStackPool *p, void *stack);

/* Allocates the record of the calling OS thread's own context, a fiber to switch back to; free
 * it with simt_fiber_free (accepts NULL). */
SimtFiber *simt_fiber_alloc(void);
void simt_fiber_free(SimtFiber *f);
/* Prepares a fiber that runs body(arg) on [stack, stack + size) and returns it; the record lives
 * at the top of the stack, so it is gone when the stack is reused. When body returns, the fiber
 * switches to link for good. */
SimtFiber *simt_fiber_make(void *stack, size_t size, void (*body)(void *), void *arg,
                           SimtFiber *link);
/* Saves the running context into from and resumes to. Returns when some fiber switches back
 * to from. */
void simt_fiber_switch(SimtFiber *from, SimtFiber *to);
/* Leaves from for good (its stack may be reused) and resumes to. */
_Noreturn void simt_fiber_exit(SimtFiber *from, SimtFiber *to);

#endif
