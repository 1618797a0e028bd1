/*
 * The CUDA driver loader without a GPU: a missing library and a fake libcuda (fake_cuda.c,
 * path in ASTITCH_FAKE_CUDA) with no device, no proc-address lookup, zero devices or a missing
 * function all give ASTITCH_ERR_NO_DEVICE with a message that says why; driver results map to
 * the right statuses; the device model is converted faithfully.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "runtime/cuda_driver.h"

/* Opens device 0 with the environment set up by the caller; expects ERR_NO_DEVICE, no device,
 * and a message containing each of the given strings (NULL-terminated). */
static void expect_no_device(astitch_context *ctx, ...)
{
    CudaDevice *dev = (CudaDevice *)1;
    astitch_status st = cuda_device_open(ctx, 0, &dev);
    const char *msg = astitch_last_error(ctx);
    printf("# %s: %s\n", astitch_status_name(st), msg);
    assert_int_equal(st, ASTITCH_ERR_NO_DEVICE);
    assert_null(dev);
    va_list ap;
    va_start(ap, ctx);
    const char *part;
    while ((part = va_arg(ap, const char *)) != NULL) {
        if (!strstr(msg, part))
            print_error("message \"%s\" lacks \"%s\"\n", msg, part);
        assert_non_null(strstr(msg, part));
    }
    va_end(ap);
}

static void test_missing_library(void **state)
{
    astitch_context *ctx = *state;
    setenv("ASTITCH_LIBCUDA", "/nonexistent/libcuda.so.1", 1);
    expect_no_device(ctx, "no CUDA driver", "/nonexistent/libcuda.so.1 not found", NULL);
    CudaDriver d;
    assert_int_equal(cuda_driver_open(ctx, &d), ASTITCH_ERR_NO_DEVICE);
    assert_null(d.lib);
    assert_null(d.Init);
}

/* Points the loader at the fake driver in the given mode; skips where it was not built. */
static void use_fake(const char *mode)
{
    const char *fake = getenv("ASTITCH_FAKE_CUDA");
    if (!fake || !*fake)
        skip();
    setenv("ASTITCH_LIBCUDA", fake, 1);
    setenv("FAKE_CUDA_MODE", mode, 1);
}

static void test_fake_no_device(void **state)
{
    use_fake("noinit");
    expect_no_device(*state, "no CUDA device", "cuInit failed", "CUDA_ERROR_NO_DEVICE",
                     "no CUDA-capable device is detected", NULL);
}

static void test_fake_no_proc_address(void **state)
{
    use_fake("noproc");
    expect_no_device(*state, "no CUDA device", "cuInit failed", "CUDA_ERROR_NO_DEVICE", NULL);
}

static void test_fake_zero_devices(void **state)
{
    use_fake("zero");
    expect_no_device(*state, "no CUDA device", "reports 0 devices", NULL);
}

static void test_fake_old_driver(void **state)
{
    use_fake("old");
    expect_no_device(*state, "CUDA driver 11.8", "too old", "cuLaunchKernelEx", NULL);
}

static void test_status_mapping(void **state)
{
    (void)state;
    assert_int_equal(cuda_status_of(CUDA_SUCCESS), ASTITCH_OK);
    assert_int_equal(cuda_status_of(CUDA_ERROR_OUT_OF_MEMORY), ASTITCH_ERR_MEMORY);
    assert_int_equal(cuda_status_of(CUDA_ERROR_INVALID_PTX), ASTITCH_ERR_COMPILE);
    assert_int_equal(cuda_status_of(CUDA_ERROR_UNSUPPORTED_PTX_VERSION), ASTITCH_ERR_COMPILE);
    assert_int_equal(cuda_status_of(CUDA_ERROR_NO_BINARY_FOR_GPU), ASTITCH_ERR_COMPILE);
    assert_int_equal(cuda_status_of(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE),
                     ASTITCH_ERR_UNSUPPORTED);
    assert_int_equal(cuda_status_of(CUDA_ERROR_NO_DEVICE), ASTITCH_ERR_NO_DEVICE);
    assert_int_equal(cuda_status_of(CUDA_ERROR_INVALID_VALUE), ASTITCH_ERR_DEVICE);
    assert_int_equal(cuda_status_of(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES), ASTITCH_ERR_DEVICE);
}

/* Without the driver's error functions, messages still name the call and the code. */
static void test_fail_message(void **state)
{
    astitch_context *ctx = *state;
    assert_int_equal(cuda_fail(ctx, NULL, CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc of %zu bytes",
                               (size_t)12345),
                     ASTITCH_ERR_MEMORY);
    assert_string_equal(astitch_last_error(ctx), "cuMemAlloc of 12345 bytes: CUDA error 2");
    CudaDriver none;
    memset(&none, 0, sizeof none);
    assert_int_equal(cuda_fail(ctx, &none, CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "launch"),
                     ASTITCH_ERR_DEVICE);
    assert_string_equal(astitch_last_error(ctx), "launch: CUDA error 701");
}

static void test_device_model(void **state)
{
    (void)state;
    CudaDevice dev;
    memset(&dev, 0, sizeof dev);
    CudaDeviceInfo *in = &dev.info;
    snprintf(in->name, sizeof in->name, "%s", "NVIDIA H100 80GB HBM3 with a long marketing suffix");
    in->cc_major = 9;
    in->cc_minor = 0;
    in->sm_count = 132;
    in->warp_size = 32;
    in->max_threads_per_block = 1024;
    in->max_threads_per_sm = 2048;
    in->max_blocks_per_sm = 32;
    in->regs_per_sm = 65536;
    in->regs_per_block = 65536;
    in->shared_per_block = 48 << 10;
    in->shared_per_block_optin = 227 << 10;
    in->shared_per_sm = 228 << 10;
    astitch_device m;
    memset(&m, 0x5a, sizeof m);
    cuda_device_model(&dev, &m);
    assert_int_equal(strlen(m.name), sizeof m.name - 1);
    assert_int_equal(strncmp(m.name, in->name, sizeof m.name - 1), 0);
    assert_int_equal(m.sm_version, 90);
    assert_int_equal(m.sm_count, 132);
    assert_int_equal(m.warp_size, 32);
    assert_int_equal(m.max_threads_per_block, 1024);
    assert_int_equal(m.max_threads_per_sm, 2048);
    assert_int_equal(m.max_blocks_per_sm, 32);
    assert_int_equal(m.regs_per_sm, 65536);
    assert_int_equal(m.max_regs_per_thread, 255);
    assert_int_equal(m.reg_alloc_unit, 8);
    assert_int_equal(m.shared_per_block, 227 << 10);
    assert_int_equal(m.shared_per_sm, 228 << 10);
}

static int setup(void **state)
{
    astitch_context *ctx;
    if (astitch_context_create(&ctx) != ASTITCH_OK)
        return -1;
    *state = ctx;
    return 0;
}

static int teardown(void **state)
{
    astitch_context_destroy(*state);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_missing_library),   cmocka_unit_test(test_fake_no_device),
        cmocka_unit_test(test_fake_no_proc_address), cmocka_unit_test(test_fake_zero_devices),
        cmocka_unit_test(test_fake_old_driver),   cmocka_unit_test(test_status_mapping),
        cmocka_unit_test(test_fail_message),      cmocka_unit_test(test_device_model),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
