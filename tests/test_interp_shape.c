/*
 * test_interp_shape.c: sources, data movement, reductions and dot in the reference interpreter,
 * each checked against index arithmetic written out in the test.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "interp_check.h"

/* ---- sources ------------------------------------------------------------------------------- */

static void test_iota_and_constants(void **state)
{
    Fx f;
    fx_open(&f);
    int64_t d3[] = {3, 4, 5}, d2[] = {4, 3}, dh[] = {2, 3000}, d1 = 5, dc[] = {2, 3}, dd[] = {2, 2};
    output(&f, astitch_iota(f.g, ASTITCH_I32, 3, d3, 1));
    output(&f, astitch_iota(f.g, ASTITCH_F32, 2, d2, 0));
    output(&f, astitch_iota(f.g, ASTITCH_F16, 2, dh, 1));
    output(&f, astitch_iota(f.g, ASTITCH_I64, 1, &d1, 0));
    output(&f, astitch_constant(f.g, ASTITCH_F32, 2, dc, (const double[]){1.5}, 1));
    output(&f, astitch_constant(f.g, ASTITCH_I32, 2, dd, (const double[]){1, -2, 3, -4}, 4));
    int64_t d4 = 4, d3b = 3;
    output(&f, astitch_constant(f.g, ASTITCH_F16, 1, &d4, (const double[]){0.1, 65504, -0.0, 1e-7},
                                4));
    output(&f, astitch_constant(f.g, ASTITCH_BOOL, 1, &d3b, (const double[]){1, 0, 1}, 3));
    output(&f, astitch_constant(f.g, ASTITCH_I64, 0, NULL, (const double[]){-5}, 1));
    output(&f, astitch_constant(f.g, ASTITCH_F32, 1, &d4, (const double[]){0.1, -1e30, 3, NAN}, 4));
    int32_t a[60], b_want_i[4] = {1, -2, 3, -4};
    float b[12], e[6], j[4];
    uint16_t c[6000], h[4];
    int64_t d[5], k0;
    int32_t ci[4];
    uint8_t bo[3];
    run(&f, NULL, (void *[]){a, b, c, d, e, ci, h, bo, &k0, j});
    for (int i = 0; i < 3; i++)
        for (int jj = 0; jj < 4; jj++)
            for (int k = 0; k < 5; k++)
                assert_int_equal(a[(i * 4 + jj) * 5 + k], jj);
    for (int i = 0; i < 4; i++)
        for (int jj = 0; jj < 3; jj++)
            assert_true(b[i * 3 + jj] == (float)i);
    for (int i = 0; i < 2; i++)
        for (int jj = 0; jj < 3000; jj++)
            if (c[i * 3000 + jj] != to_f16(jj))
                fail_msg("f16 iota at %d: got 0x%04x, want 0x%04x", jj, c[i * 3000 + jj],
                         to_f16(jj));
    for (int i = 0; i < 5; i++)
        assert_int_equal(d[i], i);
    for (int i = 0; i < 6; i++)
        assert_true(e[i] == 1.5f);
    for (int i = 0; i < 4; i++)
        assert_int_equal(ci[i], b_want_i[i]);
    const uint16_t hw[] = {to_f16(0.1), 0x7bff, 0x8000, 0x0002};
    for (int i = 0; i < 4; i++)
        assert_int_equal(h[i], hw[i]);
    assert_int_equal(bo[0], 1);
    assert_int_equal(bo[1], 0);
    assert_int_equal(bo[2], 1);
    assert_int_equal(k0, -5);
    expect_f32("f32 constant", 4, j, (const double[]){0.1, -1e30, 3, NAN}, 0);
    fx_close(&f);
}

/* ---- data movement ------------------------------------------------------------------------- */

static void test_broadcast_in_dim(void **state)
{
    Fx f;
    fx_open(&f);
    int64_t xd[] = {3, 1, 2}, od[] = {4, 3, 5, 2}, xm[] = {1, 2, 3};
    int64_t yd[] = {3, 2}, pd[] = {2, 4, 3}, ym[] = {2, 0};
    int64_t sd[] = {2, 3};
    astitch_node x = param(&f, ASTITCH_F32, 3, xd), y = param(&f, ASTITCH_F32, 2, yd);
    astitch_node s = param(&f, ASTITCH_I64, 0, NULL);
    output(&f, astitch_broadcast_in_dim(f.g, x, 4, od, xm));
    output(&f, astitch_broadcast_in_dim(f.g, y, 3, pd, ym));
    output(&f, astitch_broadcast_in_dim(f.g, s, 2, sd, NULL));
    float *xv = rand_floats(6, -100, 100), *yv = rand_floats(6, -100, 100);
    int64_t sv = (int64_t)next64();
    float g1[120], g2[24];
    int64_t g3[6];
    run(&f, (const void *[]){xv, yv, &sv}, (void *[]){g1, g2, g3});
    double w1[120], w2[24];
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 3; b++)
            for (int c = 0; c < 5; c++)
                for (int d = 0; d < 2; d++)
                    w1[((a * 3 + b) * 5 + c) * 2 + d] = xv[b * 2 + d];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 4; j++)
            for (int k = 0; k < 3; k++)
                w2[(i * 4 + j) * 3 + k] = yv[k * 2 + i];
    expect_f32("broadcast [3,1,2]->[4,3,5,2]", 120, g1, w1, 0);
    expect_f32("broadcast [3,2]->[2,4,3] dims {2,0}", 24, g2, w2, 0);
    for (int i = 0; i < 6; i++)
        assert_int_equal(g3[i], sv);
    free(xv);
    free(yv);
    fx_close(&f);
}

static void test_reshape(void **state)
{
    Fx f;
    fx_open(&f);
    int64_t xd[] = {2, 3, 4}, rd[] = {4, 6}, one[] = {1, 1};
    astitch_node x = param(&f, ASTITCH_I32, 3, xd), s = param(&f, ASTITCH_F32, 0, NULL);
    astitch_node r = astitch_reshape(f.g, x, 2, rd);
    output(&f, r);
    int64_t n = 24;
    output(&f, astitch_reshape(f.g, r, 1, &n));
    output(&f, astitch_reshape(f.g, s, 2, one));
    int32_t xv[24], g1[24], g2[24];
    int64_t want[24];
    for (int k = 0; k < 24; k++)
        want[k] = xv[k] = (int32_t)rand_of(ASTITCH_I32);
    float sv = rand_float(-5, 5), g3;
    run(&f, (const void *[]){xv, &sv}, (void *[]){g1, g2, &g3});
    expect_ints("reshape [2,3,4]->[4,6]", 24, ASTITCH_I32, g1, want);
    expect_ints("reshape [4,6]->[24]", 24, ASTITCH_I32, g2, want);
    assert_true(g3 == sv);
    fx_close(&f);
}

static void test_transpose(void **state)
{
    Fx f;
    fx_open(&f);
    int64_t d3[] = {2, 3, 4}, p3[] = {2, 0, 1}, d4[] = {2, 3, 4, 5}, p4[] = {3, 1, 0, 2};
    astitch_node x = param(&f, ASTITCH_F32, 3, d3), y = param(&f, ASTITCH_F32, 4, d4);
    output(&f, astitch_transpose(f.g, x, p3));
    output(&f, astitch_transpose(f.g, y, p4));
    float *xv = rand_floats(24, -100, 100), *yv = rand_floats(120, -100, 100);
    float g1[24], g2[120];
    run(&f, (const void *[]){xv, yv}, (void *[]){g1, g2});
    double w1[24], w2[120];
    /* output [4,2,3]: out[a][b][c] = x[b][c][a] */
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 2; b++)
            for (int c = 0; c < 3; c++)
                w1[(a * 2 + b) * 3 + c] = xv[(b * 3 + c) * 4 + a];
    /* output [5,3,2,4]: out[a][b][c][d] = y[c][b][d][a] */
    for (int a = 0; a < 5; a++)
        for (int b = 0; b < 3; b++)
            for (int c = 0; c < 2; c++)
                for (int d = 0; d < 4; d++)
                    w2[((a * 3 + b) * 2 + c) * 4 + d] = yv[((c * 3 + b) * 4 + d) * 5 + a];
    expect_f32("transpose rank 3", 24, g1, w1, 0);
    expect_f32("transpose rank 4", 120, g2, w2, 0);
    free(xv);
    free(yv);
    fx_close(&f);
}

static void test_slice(void **state)
{
    Fx f;
    fx_open(&f);
    int64_t d2[] = {7, 9}, s2[] = {1, 2}, l2[] = {7, 9}, t2[] = {2, 3};
    int64_t d3[] = {5, 6, 7}, s3[] = {0, 1, 2}, l3[] = {5, 6, 7}, t3[] = {3, 2, 4};
    int64_t s4[] = {1, 0, 3}, l4[] = {3, 6, 5};
    astitch_node x = param(&f, ASTITCH_F32, 2, d2), y = param(&f, ASTITCH_F32, 3, d3);
    output(&f, astitch_slice(f.g, x, s2, l2, t2));
    output(&f, astitch_slice(f.g, y, s3, l3, t3));
    output(&f, astitch_slice(f.g, y, s4, l4, NULL));
    float *xv = rand_floats(63, -100, 100), *yv = rand_floats(210, -100, 100);
    float g1[9], g2[12], g3[24];
    run(&f, (const void *[]){xv, yv}, (void *[]){g1, g2, g3});
    double w1[9], w2[12], w3[24];
    int k = 0;
    for (int i = 1; i < 7; i += 2)
        for (int j = 2; j < 9; j += 3)
            w1[k++] = xv[i * 9 + j];
    assert_int_equal(k, 9);
    k = 0;
    for (int i = 0; i < 5; i += 3)
        for (int j = 1; j < 6; j += 2)
            for (int l = 2; l < 7; l += 4)
                w2[k++] = yv[(i * 6 + j) * 7 + l];
    assert_int_equal(k, 12);
    k = 0;
    for (int i = 1; i < 3; i++)
        for (int j = 0; j < 6; j++)
            for (int l = 3; l < 5; l++)
                w3[k++] = yv[(i * 6 + j) * 7 + l];
    assert_int_equal(k, 24);
    expect_f32("slice strides {2,3}", 9, g1, w1, 0);
    expect_f32("slice strides {3,2,4}", 12, g2, w2, 0);
    expect_f32("slice without strides", 24, g3, w3, 0);
    free(xv);
    free(yv);
    fx_close(&f);
}

/* A stride past the operand's extent takes one element along its axis, whatever its size (2^62:
 * the interpreter once multiplied it by the axis's stride, an overflow that UBSan reports). */
static void test_slice_huge_stride(void **state)
{
    Fx f;
    fx_open(&f);
    int64_t d[] = {4, 6}, s[] = {1, 2}, l[] = {4, 6}, t[] = {(int64_t)1 << 62, 3};
    astitch_node x = param(&f, ASTITCH_F32, 2, d);
    output(&f, astitch_slice(f.g, x, s, l, t));
    float *xv = rand_floats(24, -100, 100), got[2];
    run(&f, (const void *[]){xv}, (void *[]){got});
    double want[2] = {xv[1 * 6 + 2], xv[1 * 6 + 5]};
    expect_f32("slice stride 2^62", 2, got, want, 0);
    free(xv);
    fx_close(&f);
}

static void test_concatenate(void **state)
{
    Fx f;
    fx_open(&f);
    int64_t da[] = {2, 3, 4}, db[] = {2, 1, 4}, dc[] = {2, 5, 4}, di = 3;
    astitch_node a = param(&f, ASTITCH_F32, 3, da), b = param(&f, ASTITCH_F32, 3, db);
    astitch_node c = param(&f, ASTITCH_F32, 3, dc), v = param(&f, ASTITCH_I64, 1, &di);
    output(&f, astitch_concatenate(f.g, 3, (const astitch_node[]){a, b, c}, 1));
    output(&f, astitch_concatenate(f.g, 3, (const astitch_node[]){v, v, v}, 0));
    float *av = rand_floats(24, -100, 100), *bv = rand_floats(8, -100, 100);
    float *cv = rand_floats(40, -100, 100);
    int64_t vv[3] = {(int64_t)next64(), (int64_t)next64(), (int64_t)next64()}, g2[9], w2[9];
    float g1[72];
    run(&f, (const void *[]){av, bv, cv, vv}, (void *[]){g1, g2});
    double w1[72];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 9; j++)
            for (int k = 0; k < 4; k++)
                w1[(i * 9 + j) * 4 + k] = j < 3   ? av[(i * 3 + j) * 4 + k]
                                          : j < 4 ? bv[i * 4 + k]
                                                  : cv[(i * 5 + j - 4) * 4 + k];
    for (int k = 0; k < 9; k++)
        w2[k] = vv[k % 3];
    expect_f32("concatenate axis 1", 72, g1, w1, 0);
    expect_ints("concatenate axis 0", 9, ASTITCH_I64, g2, w2);
    free(av);
    free(bv);
    free(cv);
    fx_close(&f);
}

static void test_gather(void **state)
{
    Fx f;
    fx_open(&f);
    int64_t td[] = {5, 3}, id[] = {2, 4}, t2d[] = {4, 2}, t3 = 6, i3 = 7;
    astitch_node t = param(&f, ASTITCH_F32, 2, td), ix = param(&f, ASTITCH_I32, 2, id);
    astitch_node t2 = param(&f, ASTITCH_F32, 2, t2d), ix2 = param(&f, ASTITCH_I64, 0, NULL);
    astitch_node t3n = param(&f, ASTITCH_I32, 1, &t3), ix3 = param(&f, ASTITCH_I64, 1, &i3);
    output(&f, astitch_gather(f.g, t, ix));
    output(&f, astitch_gather(f.g, t2, ix2));
    output(&f, astitch_gather(f.g, t3n, ix3));
    float *tv = rand_floats(15, -100, 100), *t2v = rand_floats(8, -100, 100);
    int32_t iv[8], t3v[6], g3[7];
    int64_t i2v = rand_int(0, 3), i3v[7] = {-1, 0, 5, 6, INT64_MIN, INT64_MAX, 2}, w3[7];
    for (int k = 0; k < 8; k++)
        iv[k] = k < 2 ? (k ? INT32_MAX : INT32_MIN) : (int32_t)rand_int(-3, 8);
    for (int k = 0; k < 6; k++)
        t3v[k] = (int32_t)rand_of(ASTITCH_I32);
    float g1[24], g2[2];
    run(&f, (const void *[]){tv, iv, t2v, &i2v, t3v, i3v}, (void *[]){g1, g2, g3});
    double w1[24], w2[2];
    for (int k = 0; k < 8; k++) {
        int r = iv[k] < 0 ? 0 : iv[k] > 4 ? 4 : iv[k];
        for (int c = 0; c < 3; c++)
            w1[k * 3 + c] = tv[r * 3 + c];
    }
    for (int c = 0; c < 2; c++)
        w2[c] = t2v[i2v * 2 + c];
    for (int k = 0; k < 7; k++)
        w3[k] = t3v[i3v[k] < 0 ? 0 : i3v[k] > 5 ? 5 : i3v[k]];
    expect_f32("gather clamped", 24, g1, w1, 0);
    expect_f32("gather rank-0 index", 2, g2, w2, 0);
    expect_ints("gather rank-1 table", 7, ASTITCH_I32, g3, w3);
    free(tv);
    free(t2v);
    fx_close(&f);
}

/* ---- reduce -------------------------------------------------------------------------------- */

static void test_reduce_float(void **state)
{
    Fx f;
    fx_open(&f);
    int64_t d3[] = {3, 4, 5}, d4[] = {2, 3, 4, 5}, p3[] = {2, 3, 4};
    int64_t a02[] = {0, 2}, a1[] = {1}, a2[] = {2}, a012[] = {0, 1, 2}, a13[] = {3, 1};
    astitch_node x = param(&f, ASTITCH_F32, 3, d3), y = param(&f, ASTITCH_F32, 4, d4);
    astitch_node p = param(&f, ASTITCH_F32, 3, p3);
    output(&f, astitch_reduce(f.g, ASTITCH_REDUCE_SUM, x, 2, a02));
    output(&f, astitch_reduce(f.g, ASTITCH_REDUCE_MAX, x, 1, a1));
    output(&f, astitch_reduce(f.g, ASTITCH_REDUCE_MIN, x, 2, a02));
    output(&f, astitch_reduce(f.g, ASTITCH_REDUCE_PROD, p, 1, a2));
    output(&f, astitch_reduce(f.g, ASTITCH_REDUCE_SUM, p, 3, a012));
    output(&f, astitch_reduce(f.g, ASTITCH_REDUCE_SUM, y, 2, a13));
    output(&f, astitch_reduce(f.g, ASTITCH_REDUCE_SUM, y, 0, NULL));
    float *xv = rand_floats(60, -100, 100), *yv = rand_floats(120, -100, 100);
    float *pv = rand_floats(24, 0.5, 1.5);
    xv[(2 * 4 + 1) * 5 + 3] = NAN; /* poisons max[2][3], min[1] */
    yv[7] = -0.0f;
    float g_sum[4], g_max[15], g_min[4], g_prod[6], g_all, g_nc[8], g_id[120];
    run(&f, (const void *[]){xv, yv, pv},
        (void *[]){g_sum, g_max, g_min, g_prod, &g_all, g_nc, g_id});
    double w_sum[4], w_max[15], w_min[4], w_prod[6], w_all = 0, w_nc[8] = {0}, w_id[120];
    for (int j = 0; j < 4; j++) {
        w_sum[j] = 0;
        w_min[j] = INFINITY;
        for (int i = 0; i < 3; i++)
            for (int k = 0; k < 5; k++) {
                double v = xv[(i * 4 + j) * 5 + k];
                w_sum[j] += v;
                w_min[j] = isnan(v) || isnan(w_min[j]) ? NAN : v < w_min[j] ? v : w_min[j];
            }
    }
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 5; k++) {
            w_max[i * 5 + k] = -INFINITY;
            for (int j = 0; j < 4; j++) {
                double v = xv[(i * 4 + j) * 5 + k], m = w_max[i * 5 + k];
                w_max[i * 5 + k] = isnan(v) || isnan(m) ? NAN : v > m ? v : m;
            }
        }
    for (int i = 0; i < 6; i++) {
        w_prod[i] = 1;
        for (int k = 0; k < 4; k++) {
            w_prod[i] *= pv[i * 4 + k];
            w_all += pv[i * 4 + k];
        }
    }
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 3; b++)
            for (int c = 0; c < 4; c++)
                for (int d = 0; d < 5; d++)
                    w_nc[a * 4 + c] += yv[((a * 3 + b) * 4 + c) * 5 + d];
    for (int k = 0; k < 120; k++)
        w_id[k] = yv[k];
    expect_f32("sum axes {0,2}", 4, g_sum, w_sum, 2.4e-7);
    expect_f32("max axis 1 (NaN propagates)", 15, g_max, w_max, 0);
    assert_true(isnan(g_max[2 * 5 + 3]));
    expect_f32("min axes {0,2} (NaN propagates)", 4, g_min, w_min, 0);
    assert_true(isnan(g_min[1]));
    expect_f32("prod axis 2", 6, g_prod, w_prod, 2.4e-7);
    expect_f32("sum of all axes to rank 0", 1, &g_all, &w_all, 2.4e-7);
    expect_f32("sum axes {1,3} of rank 4", 8, g_nc, w_nc, 2.4e-7);
    expect_f32("sum over no axes is a copy (-0 kept)", 120, g_id, w_id, 0);
    free(xv);
    free(yv);
    free(pv);
    fx_close(&f);
}

static void test_reduce_int_and_bool(void **state)
{
    Fx f;
    fx_open(&f);
    int64_t di[] = {3, 100}, dl[] = {5, 6}, db[] = {4, 6}, a0[] = {0}, a1[] = {1}, a01[] = {0, 1};
    astitch_node x = param(&f, ASTITCH_I32, 2, di), y = param(&f, ASTITCH_I64, 2, dl);
    astitch_node b = param(&f, ASTITCH_BOOL, 2, db);
    output(&f, astitch_reduce(f.g, ASTITCH_REDUCE_SUM, x, 1, a1));
    output(&f, astitch_reduce(f.g, ASTITCH_REDUCE_MAX, x, 1, a1));
    output(&f, astitch_reduce(f.g, ASTITCH_REDUCE_MIN, x, 2, a01));
    output(&f, astitch_reduce(f.g, ASTITCH_REDUCE_PROD, y, 1, a0));
    output(&f, astitch_reduce(f.g, ASTITCH_REDUCE_SUM, y, 2, a01));
    output(&f, astitch_reduce(f.g, ASTITCH_REDUCE_ANY, b, 1, a0));
    output(&f, astitch_reduce(f.g, ASTITCH_REDUCE_ALL, b, 1, a1));
    int32_t xv[300], g_sum[3], g_max[3], g_min;
    int64_t yv[30], g_prod[6], g_lsum;
    uint8_t bv[24], g_any[6], g_all[4];
    for (int k = 0; k < 300; k++)
        xv[k] = (int32_t)rand_int(INT32_MAX / 2, INT32_MAX); /* sums wrap many times */
    xv[150] = INT32_MIN;
    for (int k = 0; k < 30; k++)
        yv[k] = rand_of(ASTITCH_I64);
    for (int k = 0; k < 24; k++)
        bv[k] = next64() % 4 == 0; /* mostly false, so any and all both vary */
    for (int k = 0; k < 6; k++)
        bv[6 + k] = 1;
    run(&f, (const void *[]){xv, yv, bv},
        (void *[]){g_sum, g_max, &g_min, g_prod, &g_lsum, g_any, g_all});
    int64_t w_sum[3], w_max[3], w_min = INT32_MAX, w_prod[6], w_lsum, w_any[6], w_all[4];
    i128 ls = 0;
    for (int i = 0; i < 3; i++) {
        i128 s = 0;
        w_max[i] = INT32_MIN;
        for (int k = 0; k < 100; k++) {
            int32_t v = xv[i * 100 + k];
            s += v;
            w_max[i] = v > w_max[i] ? v : w_max[i];
            w_min = v < w_min ? v : w_min;
        }
        w_sum[i] = wrap(ASTITCH_I32, s);
    }
    for (int j = 0; j < 6; j++) {
        i128 pr = 1;
        for (int i = 0; i < 5; i++)
            pr = wrap(ASTITCH_I64, pr * yv[i * 6 + j]);
        w_prod[j] = (int64_t)pr;
    }
    for (int k = 0; k < 30; k++)
        ls += yv[k];
    w_lsum = wrap(ASTITCH_I64, ls);
    for (int j = 0; j < 6; j++) {
        w_any[j] = 0;
        for (int i = 0; i < 4; i++)
            w_any[j] |= bv[i * 6 + j];
    }
    for (int i = 0; i < 4; i++) {
        w_all[i] = 1;
        for (int j = 0; j < 6; j++)
            w_all[i] &= bv[i * 6 + j];
    }
    expect_ints("i32 sum (wraps)", 3, ASTITCH_I32, g_sum, w_sum);
    expect_ints("i32 max", 3, ASTITCH_I32, g_max, w_max);
    expect_ints("i32 min of all", 1, ASTITCH_I32, &g_min, &w_min);
    expect_ints("i64 prod (wraps)", 6, ASTITCH_I64, g_prod, w_prod);
    expect_ints("i64 sum of all", 1, ASTITCH_I64, &g_lsum, &w_lsum);
    expect_ints("any axis 0", 6, ASTITCH_BOOL, g_any, w_any);
    expect_ints("all axis 1", 4, ASTITCH_BOOL, g_all, w_all);
    fx_close(&f);
}

/* Reducing an extent of 0 gives the identity of each kind. */
static void test_reduce_empty(void **state)
{
    Fx f;
    fx_open(&f);
    int64_t d[] = {0, 3}, a0[] = {0};
    astitch_node x = param(&f, ASTITCH_F32, 2, d), y = param(&f, ASTITCH_I32, 2, d);
    astitch_node b = param(&f, ASTITCH_BOOL, 2, d);
    const astitch_reduce_kind fk[] = {ASTITCH_REDUCE_SUM, ASTITCH_REDUCE_MAX, ASTITCH_REDUCE_MIN,
                                      ASTITCH_REDUCE_PROD};
    for (int k = 0; k < 4; k++)
        output(&f, astitch_reduce(f.g, fk[k], x, 1, a0));
    output(&f, astitch_reduce(f.g, ASTITCH_REDUCE_MAX, y, 1, a0));
    output(&f, astitch_reduce(f.g, ASTITCH_REDUCE_ANY, b, 1, a0));
    output(&f, astitch_reduce(f.g, ASTITCH_REDUCE_ALL, b, 1, a0));
    float g[4][3];
    int32_t gi[3];
    uint8_t ga[3], gl[3];
    float dummy;
    run(&f, (const void *[]){&dummy, &dummy, &dummy}, (void *[]){g[0], g[1], g[2], g[3], gi, ga, gl});
    const double w[4] = {0, -INFINITY, INFINITY, 1};
    for (int k = 0; k < 4; k++)
        expect_f32(astitch_reduce_name(fk[k]), 3, g[k], (const double[]){w[k], w[k], w[k]}, 0);
    expect_ints("empty i32 max", 3, ASTITCH_I32, gi, (const int64_t[]){INT32_MIN, INT32_MIN, INT32_MIN});
    expect_ints("empty any", 3, ASTITCH_BOOL, ga, (const int64_t[]){0, 0, 0});
    expect_ints("empty all", 3, ASTITCH_BOOL, gl, (const int64_t[]){1, 1, 1});
    fx_close(&f);
}

/* A sum or dot is rounded to its dtype before the next op: (1 + 2^-30 [+ 2^-31]) - 1 is 0 in f32,
 * and in f16 (1 + 2^-12) - 1 is 0. */
static void test_contractions_round_to_dtype(void **state)
{
    const astitch_dtype types[] = {ASTITCH_F32, ASTITCH_F16};
    for (int ti = 0; ti < 2; ti++) {
        astitch_dtype t = types[ti];
        Fx f;
        fx_open(&f);
        int64_t d[] = {2, 3}, one = 2, a1[] = {1};
        astitch_node x = param(&f, t, 2, d), w = param(&f, t, 1, &d[1]);
        astitch_node c1 = astitch_constant(f.g, t, 1, &one, (const double[]){1}, 1);
        astitch_dot_dims dd = {.ncontract = 1, .lhs_contract = {1}, .rhs_contract = {0}};
        output(&f, astitch_binary(f.g, ASTITCH_OP_SUB,
                                  astitch_reduce(f.g, ASTITCH_REDUCE_SUM, x, 1, a1), c1));
        output(&f, astitch_binary(f.g, ASTITCH_OP_SUB, astitch_dot(f.g, x, w, &dd), c1));
        double tiny = t == ASTITCH_F32 ? 0x1p-30 : 0x1p-12;
        double xs[6] = {1, tiny, tiny / 2, tiny, 1, 0}, ws[3] = {1, 1, 1};
        float xf[6], wf[3], g1[2], g2[2];
        uint16_t xh[6], wh[3], h1[2], h2[2];
        for (int k = 0; k < 6; k++)
            xf[k] = (float)xs[k], xh[k] = to_f16(xs[k]);
        for (int k = 0; k < 3; k++)
            wf[k] = (float)ws[k], wh[k] = to_f16(ws[k]);
        bool f32 = t == ASTITCH_F32;
        run(&f, (const void *[]){f32 ? (void *)xf : xh, f32 ? (void *)wf : wh},
            (void *[]){f32 ? (void *)g1 : h1, f32 ? (void *)g2 : h2});
        for (int k = 0; k < 2; k++) {
            double s = f32 ? g1[k] : f16_value(h1[k]), p = f32 ? g2[k] : f16_value(h2[k]);
            if (s != 0 || p != 0)
                fail_msg("%s row %d: sum - 1 = %g, dot - 1 = %g, want 0 (rounded before the sub)",
                         astitch_dtype_name(t), k, s, p);
        }
        fx_close(&f);
    }
}

/* ---- dot ----------------------------------------------------------------------------------- */

static astitch_dot_dims dims_of(int nb, const int64_t *lb, const int64_t *rb, int nc,
                                const int64_t *lc, const int64_t *rc)
{
    astitch_dot_dims d = {.nbatch = nb, .ncontract = nc};
    for (int i = 0; i < nb; i++)
        d.lhs_batch[i] = lb[i], d.rhs_batch[i] = rb[i];
    for (int i = 0; i < nc; i++)
        d.lhs_contract[i] = lc[i], d.rhs_contract[i] = rc[i];
    return d;
}

static void test_dot_float(void **state)
{
    Fx f;
    fx_open(&f);
    int64_t l1[] = {3, 4}, r1[] = {4, 5}, l2[] = {2, 3, 4}, r2[] = {2, 4, 5};
    int64_t l3[] = {4, 2, 3}, r3[] = {5, 2, 4}, l4[] = {2, 3, 4}, r4[] = {4, 5, 2};
    int64_t v3 = 3, v4 = 4, z1[] = {2, 0}, z2[] = {0, 3};
    astitch_node a1 = param(&f, ASTITCH_F32, 2, l1), b1 = param(&f, ASTITCH_F32, 2, r1);
    astitch_node a2 = param(&f, ASTITCH_F32, 3, l2), b2 = param(&f, ASTITCH_F32, 3, r2);
    astitch_node a3 = param(&f, ASTITCH_F32, 3, l3), b3 = param(&f, ASTITCH_F32, 3, r3);
    astitch_node a4 = param(&f, ASTITCH_F32, 3, l4), b4 = param(&f, ASTITCH_F32, 3, r4);
    astitch_node a5 = param(&f, ASTITCH_F32, 1, &v3), b5 = param(&f, ASTITCH_F32, 1, &v4);
    astitch_node a6 = param(&f, ASTITCH_F32, 2, z1), b6 = param(&f, ASTITCH_F32, 2, z2);
    astitch_dot_dims d1 = dims_of(0, NULL, NULL, 1, (const int64_t[]){1}, (const int64_t[]){0});
    astitch_dot_dims d2 = dims_of(1, (const int64_t[]){0}, (const int64_t[]){0}, 1,
                                  (const int64_t[]){2}, (const int64_t[]){1});
    astitch_dot_dims d3 = dims_of(1, (const int64_t[]){1}, (const int64_t[]){1}, 1,
                                  (const int64_t[]){0}, (const int64_t[]){2});
    astitch_dot_dims d4 = dims_of(0, NULL, NULL, 2, (const int64_t[]){0, 2},
                                  (const int64_t[]){2, 0});
    astitch_dot_dims d5 = dims_of(0, NULL, NULL, 0, NULL, NULL);
    output(&f, astitch_dot(f.g, a1, b1, &d1));
    output(&f, astitch_dot(f.g, a2, b2, &d2));
    output(&f, astitch_dot(f.g, a3, b3, &d3));
    output(&f, astitch_dot(f.g, a4, b4, &d4));
    output(&f, astitch_dot(f.g, a5, b5, &d5));
    output(&f, astitch_dot(f.g, a6, b6, &d1));
    float *in[10];
    const int64_t sizes[] = {12, 20, 24, 40, 24, 40, 24, 40, 3, 4};
    for (int k = 0; k < 10; k++)
        in[k] = rand_floats(sizes[k], -4, 4);
    in[8][0] = 0.0f; /* 0 * -1.5 is -0, and the element +0 plus it: +0, as a GEMM gives */
    in[9][1] = -1.5f;
    float g1[15], g2[30], g3[30], g4[15], g5[12], g6[6];
    float none;
    run(&f, (const void *[]){in[0], in[1], in[2], in[3], in[4], in[5], in[6], in[7], in[8], in[9],
                             &none, &none},
        (void *[]){g1, g2, g3, g4, g5, g6});
    double w1[15] = {0}, w2[30] = {0}, w3[30] = {0}, w4[15] = {0}, w5[12], w6[6] = {0};
    for (int m = 0; m < 3; m++)
        for (int n = 0; n < 5; n++)
            for (int k = 0; k < 4; k++)
                w1[m * 5 + n] += (double)in[0][m * 4 + k] * in[1][k * 5 + n];
    for (int b = 0; b < 2; b++)
        for (int m = 0; m < 3; m++)
            for (int n = 0; n < 5; n++)
                for (int k = 0; k < 4; k++) {
                    /* [b,m,k] x [b,k,n] */
                    w2[(b * 3 + m) * 5 + n] +=
                        (double)in[2][(b * 3 + m) * 4 + k] * in[3][(b * 4 + k) * 5 + n];
                    /* lhs [k,b,m] x rhs [n,b,k] */
                    w3[(b * 3 + m) * 5 + n] +=
                        (double)in[4][(k * 2 + b) * 3 + m] * in[5][(n * 2 + b) * 4 + k];
                }
    /* lhs [a,m,c] x rhs [c,n,a], contracting a and c */
    for (int m = 0; m < 3; m++)
        for (int n = 0; n < 5; n++)
            for (int a = 0; a < 2; a++)
                for (int c = 0; c < 4; c++)
                    w4[m * 5 + n] += (double)in[6][(a * 3 + m) * 4 + c] * in[7][(c * 5 + n) * 2 + a];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++)
            w5[i * 4 + j] = 0.0 + (double)in[8][i] * in[9][j]; /* +0 plus: never -0 */
    expect_f32("matmul", 15, g1, w1, 2.4e-7);
    expect_f32("batch matmul", 30, g2, w2, 2.4e-7);
    expect_f32("dot with batch and contraction dims in the middle", 30, g3, w3, 2.4e-7);
    expect_f32("dot with two contracting dims", 15, g4, w4, 2.4e-7);
    expect_f32("outer product", 12, g5, w5, 0);
    expect_f32("empty contraction", 6, g6, w6, 0);
    for (int k = 0; k < 10; k++)
        free(in[k]);
    fx_close(&f);
}

static void test_int_and_f16_contractions(void **state)
{
    Fx f;
    fx_open(&f);
    int64_t l[] = {2, 3}, r[] = {3, 2}, hl[] = {4, 8}, hr[] = {8, 3};
    astitch_node a = param(&f, ASTITCH_I32, 2, l), b = param(&f, ASTITCH_I32, 2, r);
    astitch_node ha = param(&f, ASTITCH_F16, 2, hl), hb = param(&f, ASTITCH_F16, 2, hr);
    astitch_dot_dims d = dims_of(0, NULL, NULL, 1, (const int64_t[]){1}, (const int64_t[]){0});
    output(&f, astitch_dot(f.g, a, b, &d));
    output(&f, astitch_dot(f.g, ha, hb, &d));
    output(&f, astitch_reduce(f.g, ASTITCH_REDUCE_SUM, ha, 1, (const int64_t[]){1}));
    int32_t av[6], bv[6], g[4];
    uint16_t hav[32], hbv[24], gh[12], wh[12], gs[4], ws[4];
    for (int k = 0; k < 6; k++)
        av[k] = (int32_t)rand_of(ASTITCH_I32), bv[k] = (int32_t)rand_of(ASTITCH_I32);
    for (int k = 0; k < 32; k++)
        hav[k] = rand_f16();
    for (int k = 0; k < 24; k++)
        hbv[k] = rand_f16();
    run(&f, (const void *[]){av, bv, hav, hbv}, (void *[]){g, gh, gs});
    int64_t w[4];
    for (int m = 0; m < 2; m++)
        for (int n = 0; n < 2; n++) {
            i128 s = 0;
            for (int k = 0; k < 3; k++)
                s += (i128)av[m * 3 + k] * bv[k * 2 + n];
            w[m * 2 + n] = wrap(ASTITCH_I32, s);
        }
    for (int m = 0; m < 4; m++)
        for (int n = 0; n < 3; n++) {
            double s = 0;
            for (int k = 0; k < 8; k++)
                s += f16_value(hav[m * 8 + k]) * f16_value(hbv[k * 3 + n]);
            wh[m * 3 + n] = to_f16(s);
        }
    expect_ints("i32 dot (wraps)", 4, ASTITCH_I32, g, w);
    for (int m = 0; m < 4; m++) {
        double s = 0;
        for (int k = 0; k < 8; k++)
            s += f16_value(hav[m * 8 + k]);
        ws[m] = to_f16(s);
    }
    expect_16("f16 dot", 12, gh, wh, 1, false);
    expect_16("f16 sum", 4, gs, ws, 1, false);
    fx_close(&f);
}

const struct CMUnitTest interp_shape_tests[] = {
    cmocka_unit_test(test_iota_and_constants),
    cmocka_unit_test(test_broadcast_in_dim),
    cmocka_unit_test(test_reshape),
    cmocka_unit_test(test_transpose),
    cmocka_unit_test(test_slice),
    cmocka_unit_test(test_slice_huge_stride),
    cmocka_unit_test(test_concatenate),
    cmocka_unit_test(test_gather),
    cmocka_unit_test(test_reduce_float),
    cmocka_unit_test(test_reduce_int_and_bool),
    cmocka_unit_test(test_reduce_empty),
    cmocka_unit_test(test_contractions_round_to_dtype),
    cmocka_unit_test(test_dot_float),
    cmocka_unit_test(test_int_and_f16_contractions),
};
const size_t interp_shape_ntests = sizeof interp_shape_tests / sizeof interp_shape_tests[0];
