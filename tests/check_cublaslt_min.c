/* check_cublaslt_min.c: every constant of lib/runtime/cublaslt_min.h has the value of the
 * toolkit's cublasLt.h, checked at build time (built only where the header is found). */
#include <cublasLt.h>

#define CUBLASLT_MIN_VALUES_ONLY
#include "runtime/cublaslt_min.h"

#define CHECK(name, value, type) _Static_assert((int)(name) == (value), #name " differs");
CUBLASLT_MIN_VALUES(CHECK)
_Static_assert(sizeof(cublasLtMatmulAlgo_t) == 64, "cublasLtMatmulAlgo_t's size differs");
_Static_assert(sizeof(cublasLtMatmulHeuristicResult_t) == 96,
               "cublasLtMatmulHeuristicResult_t's size differs");
