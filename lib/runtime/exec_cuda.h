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
    char *trial_ptx;        /* a trial of the bound search (x->bound_trial): the PTX loaded */
};

/* exec_cuda_load.c: compiles x's plan to PTX (compile cache) and loads its kernels into c: the
 * whole kernels, with the register feedback, then the parts of those whose grids cannot all be
 * resident (or every kernel with grid barriers under force_parts); sets c->scratch_need. Runs
 * inside cuda_enter. */
astitch_status exec_cuda_load(astitch_executable *x, ExecCuda *c);

/* The bound search (docs/codegen.md, *Variant search*). Whether x (loaded, not itself a trial)
 * is a candidate: its plan's one kernel that holds rows in registers and may relax loaded at
 * its planned bound without spilling, a next bound exists, and the compile cache does not
 * record that the planned bound won before. */
bool exec_cuda_bound_searchable(const astitch_executable *x);
/* Records the search's verdict for the form of `winner`, the executable kept: a trial's PTX
 * replaces the plan's entry in the compile cache, so a later compile loads the raised bound at
 * once; a planned bound that won is recorded as kept (compile_cache_set_bound_kept). */
void exec_cuda_bound_record(const astitch_executable *winner);

#endif
