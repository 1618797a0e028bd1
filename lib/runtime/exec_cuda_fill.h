/* exec_cuda_fill.h: the fills before a kernel in one launch (exec_cuda_fill.c). */
#ifndef ASTITCH_EXEC_CUDA_FILL_H
#define ASTITCH_EXEC_CUDA_FILL_H

#include "cuda_driver.h"
#include "runtime.h"

/* Whether a kernel of p may need more than one fill (exec_kernel_fills, before merging). */
bool exec_cuda_fill_needed(const astitch_plan *p);
/* ptx with the kernel that takes several fills at once appended, to be loaded as one module
 * (malloc'd; NULL when out of memory). */
char *exec_cuda_fill_append(const char *ptx);
/* That kernel from mod, loaded from such PTX; false (with an error recorded on ctx) when mod
 * lacks it. */
bool exec_cuda_fill_get(astitch_context *ctx, CudaModule *mod, CudaKernel *kernel);
/* Queues fills [0, n) on st: one memset when n is 1 or kernel is NULL (then one per fill),
 * else launches of kernel taking up to eight at once. */
astitch_status exec_cuda_fill(astitch_context *ctx, const CudaDevice *dev,
                              const CudaKernel *kernel, const ExecFill *fills, int n, CUstream st);

#endif
