/* test_ptx_pressure.c: ptx_live_registers on small PTX kernels whose live registers are counted
 * by hand: 64-bit registers count two and predicates none, a register live into a loop stays
 * live to its end, an inline scope `{ .reg ...; ... }` is an instruction, kernels are found by
 * their exact name. (ptx_raise_bounds on the suite's kernels, against ptxas: test_ptxas.c.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "codegen/codegen.h"

static const char *module =
    ".version 8.0\n"
    ".target sm_90\n"
    ".address_size 64\n"
    "\n"
    /* live at `add %f4`: %rd1 (2) + %f1 %f2 %f3 %f4 = 6 */
    ".visible .entry line(\n"
    "\t.param .u64 line_param_0\n"
    ")\n"
    ".maxntid 256, 1, 1\n"
    ".maxnreg 40\n"
    "{\n"
    "\t.reg .pred \t%p<2>;\n"
    "\t.reg .f32 \t%f<5>;\n"
    "\t.reg .b64 \t%rd<3>;\n"
    "\n"
    "\tld.param.u64 \t%rd1, [line_param_0];\n"
    "\tld.global.f32 \t%f1, [%rd1];\n"
    "\tld.global.f32 \t%f2, [%rd1+4];\n"
    "\tld.global.f32 \t%f3, [%rd1+8];\n"
    "\tadd.f32 \t%f4, %f1, %f2;\n"
    "\tadd.f32 \t%f4, %f4, %f3;\n"
    "\tsetp.gt.f32 \t%p1, %f4, 0f00000000;\n"
    "\tst.global.f32 \t[%rd1], %f4;\n"
    "\tret;\n"
    "\n}\n"
    "\n"
    /* %f1 is last read at the loop's head but read again each iteration: live to the branch.
     * At the cvt: %rd1 (2) + %f1 %f3 %r1 %f2 = 6 (5 without the loop rule). */
    ".visible .entry loop(\n"
    "\t.param .u64 loop_param_0\n"
    ")\n"
    "{\n"
    "\t.reg .pred \t%p<2>;\n"
    "\t.reg .b32 \t%r<2>;\n"
    "\t.reg .f32 \t%f<4>;\n"
    "\t.reg .b64 \t%rd<2>;\n"
    "\n"
    "\tld.param.u64 \t%rd1, [loop_param_0];\n"
    "\tmov.f32 \t%f1, 0f3F800000;\n"
    "\tmov.f32 \t%f3, 0f00000000;\n"
    "\tmov.u32 \t%r1, 0;\n"
    "$L__BB1_1:\n"
    "\tfma.rn.f32 \t%f3, %f1, %f1, %f3;\n"
    "\tadd.s32 \t%r1, %r1, 1;\n"
    "\tcvt.rn.f32.u32 \t%f2, %r1;\n"
    "\tadd.f32 \t%f3, %f3, %f2;\n"
    "\tsetp.lt.u32 \t%p1, %r1, 16;\n"
    "\t@%p1 bra \t$L__BB1_1;\n"
    "\tst.global.f32 \t[%rd1], %f3;\n"
    "\tret;\n"
    "\n}\n"
    "\n"
    /* %r2 is read and %rs2 written only inside the inline scope: at it, %rd1 (2) + %r1 %r2
     * %rs1 %rs2 = 6 (4 if the scope were not an instruction) */
    ".visible .entry line2(\n"
    "\t.param .u64 line2_param_0\n"
    ")\n"
    "{\n"
    "\t.reg .b16 \t%rs<3>;\n"
    "\t.reg .b32 \t%r<3>;\n"
    "\t.reg .b64 \t%rd<2>;\n"
    "\n"
    "\tld.param.u64 \t%rd1, [line2_param_0];\n"
    "\tld.global.u32 \t%r1, [%rd1];\n"
    "\tld.global.u32 \t%r2, [%rd1+4];\n"
    "\tmov.u16 \t%rs1, 7;\n"
    "\t{ .reg .b16 tmp; mov.b32 {tmp, %rs2}, %r2; }\n"
    "\tadd.s32 \t%r1, %r1, 1;\n"
    "\tst.global.u32 \t[%rd1], %r1;\n"
    "\tst.global.u16 \t[%rd1+4], %rs1;\n"
    "\tst.global.u16 \t[%rd1+6], %rs2;\n"
    "\tret;\n"
    "\n}\n";

static void test_counted_by_hand(void **state)
{
    (void)state;
    assert_int_equal(ptx_live_registers(module, "line"), 6);
    assert_int_equal(ptx_live_registers(module, "loop"), 6);
    assert_int_equal(ptx_live_registers(module, "line2"), 6);
}

static void test_missing(void **state)
{
    (void)state;
    assert_int_equal(ptx_live_registers(module, "lin"), -1);
    assert_int_equal(ptx_live_registers(module, "line3"), -1);
    assert_int_equal(ptx_live_registers(NULL, "line"), -1);
    assert_int_equal(ptx_live_registers(module, NULL), -1);
    assert_int_equal(ptx_live_registers(".visible .entry cut(\n{\n\tret;\n", "cut"), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counted_by_hand),
        cmocka_unit_test(test_missing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
