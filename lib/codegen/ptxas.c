/* ptxas.c: assembles PTX with the toolkit's ptxas and reads what `ptxas -v` says about each
 * kernel. This checks generated code on machines without a GPU: it assembles, stays within its
 * register bound, does not spill. The runtime also compiles modules ahead with it
 * (ptxas_assemble: whole-program, as the driver's JIT compiles, in a process of its own). */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "codegen.h"
#include "ir/config.h"
#include "ir/ir.h"

extern char **environ;

static char *executable(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (!p)
        return NULL;
    snprintf(p, n, "%s/%s", dir, name);
    if (access(p, X_OK) == 0)
        return p;
    free(p);
    return NULL;
}

char *ptxas_find(void)
{
    char *bin = executable(cuda_toolkit_path(), "bin/ptxas");
    const char *path = config_search_path();
    if (bin || !path)
        return bin;
    char *dirs = graph_strdup(path), *save = NULL;
    for (char *d = dirs ? strtok_r(dirs, ":", &save) : NULL; d && !bin;
         d = strtok_r(NULL, ":", &save))
        bin = executable(*d ? d : ".", "ptxas");
    free(dirs);
    return bin;
}

static PtxasKernel *kernel_entry(PtxasReport *r, const char *name, size_t len, int *cap)
{
    for (int i = 0; i < r->nkernel; i++)
        if (strlen(r->kernel[i].name) == len && strncmp(r->kernel[i].name, name, len) == 0)
            return &r->kernel[i];
    if (r->nkernel == *cap) {
        int ncap = *cap ? 2 * *cap : 8;
        PtxasKernel *k = realloc(r->kernel, sizeof *k * (size_t)ncap);
        if (!k)
            return NULL;
        r->kernel = k;
        *cap = ncap;
    }
    PtxasKernel *k = &r->kernel[r->nkernel++];
    memset(k, 0, sizeof *k);
    snprintf(k->name, sizeof k->name, "%.*s", (int)len, name);
    return k;
}

/* The name after `key` in line, quoted or up to the end of the line. */
static const char *name_after(const char *line, const char *key, size_t *len)
{
    const char *p = strstr(line, key);
    if (!p)
        return NULL;
    p += strlen(key);
    if (*p == '\'') {
        const char *q = strchr(++p, '\'');
        *len = q ? (size_t)(q - p) : strcspn(p, "\n");
    } else {
        *len = strcspn(p, " \n");
    }
    return p;
}

/* The number before `unit` in line (e.g. "256 bytes smem"), or 0. */
static int number_before(const char *line, const char *unit)
{
    const char *p = strstr(line, unit);
    if (!p)
        return 0;
    while (p > line && p[-1] == ' ')
        p--;
    while (p > line && p[-1] >= '0' && p[-1] <= '9')
        p--;
    return atoi(p);
}

bool ptxas_parse(const char *log, PtxasReport *r)
{
    int cap = r->nkernel;
    PtxasKernel *entry = NULL, *props = NULL;
    for (const char *line = log; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t n = end ? (size_t)(end - line) : strlen(line);
        char buf[512];
        snprintf(buf, sizeof buf, "%.*s", (int)n, line);
        const char *name;
        size_t len;
        if ((name = name_after(buf, "Compiling entry function ", &len))) {
            if (!(entry = kernel_entry(r, name, len, &cap)))
                return false;
            props = entry;
        } else if ((name = name_after(buf, "Function properties for ", &len))) {
            /* non-entry functions have properties too; only entries are reported */
            props = NULL;
            for (int i = 0; i < r->nkernel; i++)
                if (strlen(r->kernel[i].name) == len && strncmp(r->kernel[i].name, name, len) == 0)
                    props = &r->kernel[i];
        } else if (strstr(buf, "bytes stack frame") && props) {
            props->stack_bytes = number_before(buf, "bytes stack frame");
            props->spill_store_bytes = number_before(buf, "bytes spill stores");
            props->spill_load_bytes = number_before(buf, "bytes spill loads");
        } else if (strstr(buf, "Used ") && strstr(buf, " registers") && entry) {
            entry->registers = number_before(buf, " registers");
            entry->shared_bytes = number_before(buf, " bytes smem");
        }
        line = end ? end + 1 : NULL;
    }
    return true;
}

const PtxasKernel *ptxas_kernel(const PtxasReport *r, const char *name)
{
    for (int i = 0; r && i < r->nkernel; i++)
        if (strcmp(r->kernel[i].name, name) == 0)
            return &r->kernel[i];
    return NULL;
}

void ptxas_report_free(PtxasReport *r)
{
    if (!r)
        return;
    free(r->kernel);
    free(r->log);
    memset(r, 0, sizeof *r);
}

/* Writes all n bytes of p to fd. */
static bool write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

/* Reads the whole file behind fd from its start into a malloc'd string. */
static char *read_all(int fd)
{
    struct stat st;
    if (fstat(fd, &st) != 0 || lseek(fd, 0, SEEK_SET) != 0)
        return NULL;
    size_t n = (size_t)st.st_size, got = 0;
    char *s = malloc(n + 1);
    while (s && got < n) {
        ssize_t k = read(fd, s + got, n - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    if (s)
        s[got] = 0;
    return s;
}

/* Runs argv with stdout and stderr into fd; returns the exit status, -1 when it could not run. */
static int spawn_wait(char **argv, int fd)
{
    posix_spawn_file_actions_t fa;
    pid_t pid;
    int status = -1;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fd, 1);
    posix_spawn_file_actions_adddup2(&fa, fd, 2);
    int e = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (e != 0)
        return -1;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Makes a temporary file in TMPDIR named astitch-XXXXXX<suffix>; path gets its name (len
 * bytes). Returns its descriptor, -1 on failure. */
static int temp_file(char *path, size_t len, const char *suffix)
{
    snprintf(path, len, "%s/astitch-XXXXXX%s", config_tmpdir(), suffix);
    return mkstemps(path, (int)strlen(suffix));
}

/* One run of `exe -arch=sm_<sm> -v -o OUT IN`, IN a temporary file holding ptx, the output
 * captured: OUT is a temporary file read back into *cubin (*size bytes, malloc'd; NULL when
 * unreadable) where cubin is given, else /dev/null. *rc: the exit status (-1: not run); *log:
 * the output (malloc'd; NULL when unreadable). False, with nothing to free and errno saying
 * why, when a temporary file could not be made or written. */
static bool run_ptxas(const char *exe, const char *ptx, int sm, int *rc, char **log,
                      void **cubin, size_t *size)
{
    *rc = -1;
    *log = NULL;
    if (cubin) {
        *cubin = NULL;
        *size = 0;
    }
    char in[4096], out[4096] = "/dev/null", out_log[4096], arch[32];
    snprintf(arch, sizeof arch, "-arch=sm_%d", sm);
    int in_fd = temp_file(in, sizeof in, ".ptx");
    int out_fd = in_fd >= 0 && cubin ? temp_file(out, sizeof out, ".cubin") : -1;
    int log_fd = in_fd >= 0 && (out_fd >= 0 || !cubin) ? temp_file(out_log, sizeof out_log, ".log")
                                                        : -1;
    bool made = log_fd >= 0 && write_all(in_fd, ptx, strlen(ptx));
    if (made) {
        char *argv[] = {(char *)exe, arch, "-v", "-o", out, in, NULL};
        *rc = spawn_wait(argv, log_fd);
        *log = read_all(log_fd);
        int cubin_fd = cubin && *rc == 0 ? open(out, O_RDONLY) : -1; /* by name: ptxas may
                                                                        * replace the file */
        struct stat st;
        if (cubin_fd >= 0 && fstat(cubin_fd, &st) == 0 && (*cubin = read_all(cubin_fd)))
            *size = (size_t)st.st_size;
        if (cubin_fd >= 0)
            close(cubin_fd);
    }
    int saved = errno;
    const char *paths[3] = {in, out, out_log};
    int fds[3] = {in_fd, out_fd, log_fd};
    for (int i = 0; i < 3; i++)
        if (fds[i] >= 0) {
            close(fds[i]);
            unlink(paths[i]);
        }
    errno = saved;
    return made;
}

bool ptxas_assemble(const char *exe, const char *ptx, int sm, void **cubin, size_t *size,
                    char **log, char *why, size_t len)
{
    int rc;
    char *text;
    void *bin;
    size_t n;
    if (!run_ptxas(exe, ptx, sm, &rc, &text, &bin, &n)) {
        snprintf(why, len, "temporary file in %s: %s", config_tmpdir(), strerror(errno));
        *cubin = NULL;
        *size = 0;
        *log = NULL;
        return false;
    }
    bool ok = rc == 0 && text && bin && n > 0;
    if (rc < 0)
        snprintf(why, len, "cannot run %s", exe);
    else if (rc != 0)
        snprintf(why, len, "%s failed (exit %d): %s", exe, rc, text ? text : "");
    else if (!ok)
        snprintf(why, len, "%s: cannot read its cubin or output", exe);
    if (!ok) {
        free(bin);
        free(text);
        bin = text = NULL;
        n = 0;
    }
    *cubin = bin;
    *size = n;
    *log = text;
    return ok;
}

astitch_status ptxas_run(astitch_context *ctx, const char *ptx, int sm, PtxasReport *r)
{
    memset(r, 0, sizeof *r);
    char *exe = ptxas_find();
    if (!exe)
        return ctx_fail(ctx, ASTITCH_ERR_UNSUPPORTED, "ptxas: not found in %s/bin nor on PATH",
                        cuda_toolkit_path());
    int rc;
    astitch_status st = ASTITCH_OK;
    if (!run_ptxas(exe, ptx, sm ? sm : 90, &rc, &r->log, NULL, NULL))
        st = ctx_fail(ctx, ASTITCH_ERR_IO, "ptxas: temporary file in %s: %s", config_tmpdir(),
                      strerror(errno));
    else if (rc < 0)
        st = ctx_fail(ctx, ASTITCH_ERR_IO, "ptxas: cannot run %s", exe);
    else if (!r->log)
        st = ctx_fail(ctx, ASTITCH_ERR_IO, "ptxas: cannot read its output");
    else if (rc != 0)
        st = ctx_fail(ctx, ASTITCH_ERR_COMPILE, "ptxas failed (exit %d): %s", rc, r->log);
    else if (!ptxas_parse(r->log, r))
        st = ctx_fail(ctx, ASTITCH_ERR_MEMORY, "ptxas: out of memory");
    free(exe);
    if (st && st != ASTITCH_ERR_COMPILE)
        ptxas_report_free(r);
    return st;
}
