/*
 * bench_cuda.h: the few CUDA driver calls the benchmark makes itself (device buffers, copies,
 * events, a stream, CUDA graphs, the copy-bandwidth reference). libcuda is opened with dlopen,
 * never linked, as in lib/runtime, so astitch-bench starts (and says there is nothing to
 * measure) on machines without a driver. Everything runs in device 0's primary context, the one libastitch uses, so
 * the buffers and the stream made here are valid in astitch_execute_device.
 *
 * Threads: one BenchCuda per thread.
 */
#ifndef ASTITCH_BENCH_CUDA_H
#define ASTITCH_BENCH_CUDA_H

#include <stddef.h>
#include <stdint.h>

typedef struct BenchCuda BenchCuda;

typedef struct BenchCudaInfo {
    char name[256];
    int driver_version;   /* 13000 for CUDA 13.0 */
    int cc_major, cc_minor;
    int sm_count;
    size_t l2_bytes;
    size_t total_memory;
} BenchCudaInfo;

/* Opens libcuda ($ASTITCH_LIBCUDA or libcuda.so.1), device 0 and its primary context, made
 * current on this thread, and a non-blocking stream. Returns NULL with the reason in err
 * ("no CUDA driver: ...") when any of that fails. */
BenchCuda *bench_cuda_open(char *err, size_t errlen);
void bench_cuda_close(BenchCuda *c); /* accepts NULL */
const BenchCudaInfo *bench_cuda_info(const BenchCuda *c);
/* The stream the benchmark queues its runs on (a CUstream). */
void *bench_cuda_stream(const BenchCuda *c);
/* The message of the last failed call ("cuMemAlloc(1024 bytes): CUDA_ERROR_OUT_OF_MEMORY"). */
const char *bench_cuda_error(const BenchCuda *c);

/* Each returns 0 on success, -1 on failure (message in bench_cuda_error). */
int bench_cuda_alloc(BenchCuda *c, size_t bytes, uint64_t *out); /* 0 bytes: 256 allocated */
void bench_cuda_free(BenchCuda *c, uint64_t p);                  /* accepts 0 */
int bench_cuda_mem_free(BenchCuda *c, size_t *free_bytes);
/* Queued on the benchmark's stream (src must stay valid until the stream is synchronized). */
int bench_cuda_upload(BenchCuda *c, uint64_t dst, const void *src, size_t bytes);
/* Waits for the stream's earlier work, then copies; dst is written on return. */
int bench_cuda_download(BenchCuda *c, void *dst, uint64_t src, size_t bytes);
/* Queued on the benchmark's stream. */
int bench_cuda_copy(BenchCuda *c, uint64_t dst, uint64_t src, size_t bytes);
int bench_cuda_fill(BenchCuda *c, uint64_t dst, uint8_t byte, size_t bytes);
int bench_cuda_sync(BenchCuda *c);

/* n events (timing enabled); record event i on the stream; after a sync, the milliseconds
 * between events i and j. */
int bench_cuda_events(BenchCuda *c, int n);
int bench_cuda_record(BenchCuda *c, int i);
int bench_cuda_elapsed(BenchCuda *c, int i, int j, double *ms);

/* CUDA graphs of the work queued on the benchmark's stream: begin starts a capture (global
 * mode); end ends it and instantiates what was captured into *graph (NULL on failure; the
 * capture is over either way). A launch queues one replay on the stream. */
int bench_cuda_capture_begin(BenchCuda *c);
int bench_cuda_capture_end(BenchCuda *c, void **graph);
int bench_cuda_graph_launch(BenchCuda *c, void *graph);
void bench_cuda_graph_destroy(BenchCuda *c, void *graph); /* accepts NULL */

/* The device-to-device copy bandwidth in GB/s (1e9 bytes), bytes read plus bytes written over
 * the median time of `reps` copies of `bytes` bytes with cuMemcpyDtoDAsync. */
int bench_cuda_copy_bandwidth(BenchCuda *c, size_t bytes, int reps, double *gbps);

#endif
