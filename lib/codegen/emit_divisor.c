/* emit_divisor.c: divisions that share a divisor take its reciprocal once. A softmax divides
 * each of a lane's elements by one row sum; each division (astitch_fdiv_f32: div.full.f32 on
 * NVPTX) is a sequence the driver's JIT expands at every site, about 0.3 ms of compile apiece.
 * Where two or more divisions of a function divide by the same value computed in the kernel
 * (not a constant), that divisor d gets, right after its definition,
 *
 *     s = 2^-64 if |d| > 2^126, 2^64 if |d| < 2^-126 (zero and subnormals), else 1
 *     r = astitch_rcp_f32(d * s)
 *
 * and each a / d becomes (a * r) * s. d * s is exact and normal (or zero, infinite, NaN); r is
 * its reciprocal within half an ulp and a little (NVPTX: the hardware's and one Newton step;
 * host: IEEE 1 / x), and a * r one rounding more: within 1.5 ulp of the quotient over the
 * whole range (div.full.f32: 2). Scaling by s is exact but where the quotient is subnormal
 * (one more rounding there); a * r cannot overflow where the quotient does not (it is the
 * quotient times 1/s, and 1/s > 1 only for a divisor above 2^126, whose quotients stay below
 * 4). Zeros, infinities, NaN and signs come out as IEEE division's (test divide-shared).
 * A division by a constant stays a division (emit_ops.c makes the exact ones products). */
#define ASTITCH_EMIT_INTERNAL
#include <stdlib.h>

#include "codegen.h"

typedef struct DivSite {
    LLVMValueRef call;    /* call of astitch_fdiv_f32 */
    LLVMValueRef divisor; /* its second operand */
    LLVMValueRef fn;      /* the function it is in */
} DivSite;

static bool same_divisor(const DivSite *a, const DivSite *b)
{
    return a->fn == b->fn && a->divisor == b->divisor;
}

static LLVMValueRef site_fn(LLVMValueRef call)
{
    return LLVMGetBasicBlockParent(LLVMGetInstructionParent(call));
}

/* Whether the n sites of one divisor are worth its reciprocal: a divisor computed in the
 * kernel, two sites or more. (One division becomes one reciprocal and two products, no
 * cheaper to compile or to run.) */
static bool worth_reciprocal(const DivSite *s, size_t n)
{
    if (LLVMIsAConstant(s->divisor))
        return false; /* a division by a constant stays one (test divide-const) */
    return n >= 2;
}

/* Positions b where a value computed from d dominates every use of d: after d's definition
 * (after the block's phis for a phi), or at the top of the function's entry for an
 * argument. */
static void position_after(LLVMBuilderRef b, LLVMValueRef d, LLVMValueRef fn)
{
    LLVMValueRef at;
    if (LLVMIsAInstruction(d)) {
        at = LLVMGetNextInstruction(d);
        while (at && LLVMIsAPHINode(at))
            at = LLVMGetNextInstruction(at);
        LLVMPositionBuilder(b, LLVMGetInstructionParent(d), at);
    } else {
        LLVMBasicBlockRef entry = LLVMGetEntryBasicBlock(fn);
        at = LLVMGetFirstInstruction(entry);
        LLVMPositionBuilder(b, entry, at);
    }
}

/* Replaces the n division sites s of one divisor by products with its scaled reciprocal. A
 * replaced division that is itself the divisor of sites in all[0 .. nall) (a / (b / c)) is
 * replaced there too, as LLVM replaces it in their operands. */
static void share_reciprocal(LLVMBuilderRef b, LLVMModuleRef m, const DivSite *s, size_t n,
                             DivSite *all, size_t nall)
{
    LLVMValueRef d = s->divisor;
    LLVMTypeRef f32 = LLVMTypeOf(d);
    position_after(b, d, s->fn);
    LLVMValueRef mag = llvm_fabs_f32(b, m, d);
    LLVMValueRef big = LLVMBuildFCmp(b, LLVMRealOGT, mag, LLVMConstReal(f32, 0x1p126), "");
    LLVMValueRef tiny = LLVMBuildFCmp(b, LLVMRealOLT, mag, LLVMConstReal(f32, 0x1p-126), "");
    LLVMValueRef scale =
        LLVMBuildSelect(b, big, LLVMConstReal(f32, 0x1p-64),
                        LLVMBuildSelect(b, tiny, LLVMConstReal(f32, 0x1p64),
                                        LLVMConstReal(f32, 1), ""), "");
    LLVMValueRef r = prim_call(b, m, PRIM_RCP_F32,
                               (LLVMValueRef[]){LLVMBuildFMul(b, d, scale, "")}, 1);
    for (size_t i = 0; i < n; i++) {
        LLVMPositionBuilderBefore(b, s[i].call);
        LLVMValueRef call = s[i].call;
        LLVMValueRef q = LLVMBuildFMul(b, LLVMBuildFMul(b, LLVMGetOperand(call, 0), r, ""),
                                       scale, "");
        LLVMReplaceAllUsesWith(call, q);
        LLVMInstructionEraseFromParent(call);
        for (size_t j = 0; j < nall; j++)
            if (all[j].divisor == call)
                all[j].divisor = q;
    }
}

astitch_status emit_share_divisors(astitch_context *ctx, LLVMModuleRef m)
{
    LLVMValueRef fdiv = LLVMGetNamedFunction(m, prim_name(PRIM_FDIV_F32));
    if (!fdiv)
        return ASTITCH_OK;
    size_t n = 0, cap = 0;
    DivSite *site = NULL;
    for (LLVMUseRef u = LLVMGetFirstUse(fdiv); u; u = LLVMGetNextUse(u)) {
        LLVMValueRef call = LLVMGetUser(u);
        if (!LLVMIsACallInst(call) || LLVMGetCalledValue(call) != fdiv)
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            DivSite *grown = realloc(site, cap * sizeof *site);
            if (!grown) {
                free(site);
                return ctx_fail(ctx, ASTITCH_ERR_MEMORY, "out of memory sharing divisors");
            }
            site = grown;
        }
        site[n++] = (DivSite){call, LLVMGetOperand(call, 1), site_fn(call)};
    }
    /* Groups in the order of their first site, so the module is the same in every process
     * (addresses would order them differently). A module has a few hundred divisions at most. */
    LLVMBuilderRef b = LLVMCreateBuilderInContext(LLVMGetModuleContext(m));
    for (size_t i = 0; i < n; i++) {
        size_t k = i + 1;
        for (size_t j = i + 1; j < n; j++)
            if (same_divisor(&site[i], &site[j])) {
                DivSite t = site[k];
                site[k++] = site[j];
                site[j] = t;
            }
        if (worth_reciprocal(&site[i], k - i))
            share_reciprocal(b, m, &site[i], k - i, site, n);
        i = k - 1; /* the group is site[i .. k) */
    }
    LLVMDisposeBuilder(b);
    free(site);
    return ASTITCH_OK;
}
