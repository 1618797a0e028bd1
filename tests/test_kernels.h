/* test_kernels.h: small kernels built by hand with the LLVM C API through the primitives of
 * prims.h, for the target tests. Each builder returns a new module in context c holding one
 * kernel `void name(ptr, ...)`; the comment gives its arguments and what it computes. */
#ifndef ASTITCH_TEST_KERNELS_H
#define ASTITCH_TEST_KERNELS_H

#include <llvm-c/Core.h>

/* Shared bytes build_block_reduce needs: 32 f32 then 32 i32 slots. */
#define REDUCE_SHARED_BYTES 256

/* vadd(a, b, out): out[i] = a[i] + b[i] for i < n, grid-stride loop. */
LLVMModuleRef build_vector_add(LLVMContextRef c, int n);
/* reduce(in, out, total, maxp, minp, count, claim, seen), one block per row of ncol floats,
 * block size a multiple of 32: out[row] = sum of the row (warp shuffles down, shared memory,
 * block barrier, butterfly shuffles of whole warps); then thread 0 adds out[row] into *total, max/min it into
 * *maxp / *minp, adds the row's count of positive elements (reduced as i32) into *count, and
 * stores into seen[row] what a compare-and-swap of *claim from 0 to row + 1 found there. */
LLVMModuleRef build_block_reduce(LLVMContextRef c, int ncol);
/* phases(in, tmp, out, counter), over exactly T = grid x block threads, g the global index:
 * tmp[g] = in[g]*2 + 1; fence; grid barrier; out[g] = tmp[(g+1) % T] - 0.5*tmp[T-1-g];
 * grid barrier; tmp[g] = out[(g + block) % T]. */
LLVMModuleRef build_grid_phases(LLVMContextRef c);
/* math(x, y, out, out2), i < n, grid-stride: out[i] = __nv_expf(x) + __nv_tanhf(y);
 * out2[i] = (float)__nv_pow((double)(x*x + 0.5f), (double)y). */
LLVMModuleRef build_math(LLVMContextRef c, int n);
/* bad(ptr): a kernel whose entry block has no terminator. */
LLVMModuleRef build_malformed(LLVMContextRef c);
/* calls(out): out[0] = __nv_nosuchf(1.0), a function no target defines. */
LLVMModuleRef build_unresolved(LLVMContextRef c);

#endif
