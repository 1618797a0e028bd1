/* exec_cuda.h: the CUDA executable's state, shared by exec_cuda.c (runs) and exec_cuda_load.c
 * (loading); nothing outside lib/runtime sees it. */
#ifndef ASTITCH_EXEC_CUDA_H
#define ASTITCH_EXEC_CUDA_H

#include "cublaslt.h"
#include "cuda_driver.h"
#include "runtime.h"

struct ExecCuda {
    CudaDevice *dev;
    CudaModule *mod;        /* whole kernels */
    CudaModule *parts_mod;  /* parts of the kernels that need the fallback, or NULL */
    CudaKernel *kern;       /* per plan kernel */
    int *bound;             /* per plan kernel: the register bound its PTX was loaded with */
    bool *lean;             /* per plan kernel: loaded in its lean form (compile_ptx_lean) */
    bool *as_parts;            /* per plan kernel: runs as parts */
    CudaKernel **part;      /* per plan kernel run as parts: its parts */
    int nkernel;
    CudaWorkspace ws;       /* x's own scratch and counters (none under caller_workspace) */
    CUdeviceptr temps;      /* x's own temporaries (none under caller_workspace) */
    size_t temps_bytes;
    size_t scratch_need;    /* bytes of scratch a run uses */
    ExecDots *dots;         /* the dots on cuBLASLt, or NULL */
    size_t dot_ws_bytes;    /* the cuBLASLt workspace they need */
    CUdeviceptr dot_ws;     /* x's own (none under caller_workspace) */
    struct {                /* the memory the next runs use: x's own or the caller's */
        CUdeviceptr temps, scratch, counters, dot_ws;
    } run;
    bool has_fill;          /* fill holds the kernel that sets several fills at once, in mod */
    CudaKernel fill;        /* (exec_cuda_fill.c), where a kernel has more than one */
    CUdeviceptr *io;        /* staging buffers for astitch_execute: params then outputs */
    int nio;
    bool force_parts;
};

/* exec_cuda_load.c: compiles x's plan to PTX (compile cache) and loads its kernels into c: the
 * whole kernels, with the register feedback, then the parts of those whose grids cannot all be
 * resident (or every kernel with grid barriers under force_parts); sets c->scratch_need. Runs
 * inside cuda_enter. */
astitch_status exec_cuda_load(astitch_executable *x, ExecCuda *c);

#endif
