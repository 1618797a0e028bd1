/* cubin_jobs.c: compiles started ahead on worker threads, by nvJitLink or a ptxas process,
 * found again by their PTX text (nvjitlink.h). One list under one mutex holds the jobs; a take
 * copies a finished job's cubin (two forms of a search may have the same module). A job leaves
 * the list when its owner (the thread that started it, or the one it was started for) ends its
 * jobs: freed then if its compile is over, else by its own (detached) thread when it is. An
 * exit handler waits for the compiles still running, so that none is inside nvJitLink (or
 * waits on ptxas) while the process tears the library down. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nvjitlink.h"

/* At most this many jobs live at once, so a caller that never ends them holds this many
 * threads at most. */
enum { MAX_JOBS = 16 };

typedef struct CubinJob {
    struct CubinJob *next;
    pthread_t thread, owner; /* owner: the thread whose cubin_jobs_end_mine ends it */
    char *ptx;
    uint64_t hash;
    int sm;
    CubinCompiler by;
    bool done, ok;
    bool orphan; /* ended while compiling: its thread frees it */
    int takers;  /* takes under way, waiting or copying */
    long takes;  /* takes made */
    Cubin cubin; /* when done and ok */
} CubinJob;

static struct {
    pthread_mutex_t lock;
    pthread_cond_t changed; /* a job finished, or a take of one ended */
    CubinJob *list;
    int n;       /* jobs in the list */
    int running; /* compiles not over, orphans included */
    CubinJobStats stats;
} jobs = {.lock = PTHREAD_MUTEX_INITIALIZER, .changed = PTHREAD_COND_INITIALIZER};

static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

void cubin_jobs_wait_running(void)
{
    pthread_mutex_lock(&jobs.lock);
    while (jobs.running > 0)
        pthread_cond_wait(&jobs.changed, &jobs.lock);
    pthread_mutex_unlock(&jobs.lock);
}

/* At exit: every compile over (registered after nvJitLink was opened, so it runs before the
 * library's own exit handlers). */
static void register_exit(void) { atexit(cubin_jobs_wait_running); }

static void destroy(CubinJob *j)
{
    cubin_free(&j->cubin);
    free(j->ptx);
    free(j);
}

static uint64_t hash_of(const char *s)
{
    uint64_t h = 0xcbf29ce484222325u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3u;
    return h;
}

static void *run(void *arg)
{
    CubinJob *j = arg;
    char why[256];
    Cubin c;
    bool ok = j->by == CUBIN_BY_PTXAS ? ptxas_jit_compile(j->ptx, j->sm, &c, why, sizeof why)
                                      : nvjitlink_compile(j->ptx, j->sm, &c, why, sizeof why);
    pthread_mutex_lock(&jobs.lock);
    j->cubin = c;
    j->ok = ok;
    j->done = true;
    jobs.running--;
    bool orphan = j->orphan;
    pthread_cond_broadcast(&jobs.changed);
    pthread_mutex_unlock(&jobs.lock);
    if (orphan)
        destroy(j);
    return NULL;
}

/* The job of this text, sm and compiler, under the lock, or NULL. */
static CubinJob *find(const char *ptx, uint64_t h, int sm, CubinCompiler by)
{
    for (CubinJob *j = jobs.list; j; j = j->next)
        if (j->hash == h && j->sm == sm && j->by == by && strcmp(j->ptx, ptx) == 0)
            return j;
    return NULL;
}

void cubin_job_start(const char *ptx, int sm, CubinCompiler by)
{
    cubin_job_start_for(ptx, sm, by, pthread_self());
}

void cubin_job_start_for(const char *ptx, int sm, CubinCompiler by, pthread_t owner)
{
    if (!ptx || !(by == CUBIN_BY_PTXAS ? ptxas_jit_path() : nvjitlink_path()))
        return;
    uint64_t h = hash_of(ptx);
    size_t n = strlen(ptx) + 1;
    CubinJob *j = calloc(1, sizeof *j);
    if (!j || !(j->ptx = malloc(n))) {
        free(j);
        return;
    }
    memcpy(j->ptx, ptx, n);
    j->hash = h;
    j->sm = sm;
    j->by = by;
    j->owner = owner;
    pthread_once(&exit_once, register_exit);
    pthread_attr_t attr;
    bool start = pthread_attr_init(&attr) == 0;
    if (start)
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_mutex_lock(&jobs.lock);
    start = start && jobs.n < MAX_JOBS && !find(ptx, h, sm, by) &&
            pthread_create(&j->thread, &attr, run, j) == 0;
    if (start) {
        j->next = jobs.list;
        jobs.list = j;
        jobs.n++;
        jobs.running++;
        jobs.stats.started++;
    }
    pthread_mutex_unlock(&jobs.lock);
    pthread_attr_destroy(&attr);
    if (!start) {
        free(j->ptx);
        free(j);
    }
}

bool cubin_job_take(const char *ptx, int sm, CubinCompiler by, Cubin *out)
{
    *out = (Cubin){0};
    if (!ptx)
        return false;
    uint64_t h = hash_of(ptx);
    pthread_mutex_lock(&jobs.lock);
    CubinJob *j = find(ptx, h, sm, by);
    bool ok = false;
    if (j) {
        j->takers++;
        while (!j->done)
            pthread_cond_wait(&jobs.changed, &jobs.lock);
        ok = j->ok;
        pthread_mutex_unlock(&jobs.lock);
        /* the job stays while takers > 0, and its cubin is not written after done */
        const Cubin *c = &j->cubin;
        size_t nlog = ok ? strlen(c->log) + 1 : 0;
        if (ok && (out->image = malloc(c->size ? c->size : 1)) && (out->log = malloc(nlog))) {
            memcpy(out->image, c->image, c->size);
            memcpy(out->log, c->log, nlog);
            out->size = c->size;
        } else if (ok) {
            cubin_free(out);
            ok = false;
        }
        pthread_mutex_lock(&jobs.lock);
        j->takers--;
        j->takes += ok;
        jobs.stats.taken += ok;
        pthread_cond_broadcast(&jobs.changed);
    }
    pthread_mutex_unlock(&jobs.lock);
    return ok;
}

void cubin_jobs_end_mine(void)
{
    pthread_t me = pthread_self();
    CubinJob *free_now = NULL;
    pthread_mutex_lock(&jobs.lock);
    for (CubinJob **at = &jobs.list; *at;) {
        CubinJob *j = *at;
        if (!pthread_equal(j->owner, me)) {
            at = &j->next;
            continue;
        }
        *at = j->next; /* no take finds it from now on */
        jobs.n--;
        while (j->takers > 0) /* takes found it before: they end once it is done */
            pthread_cond_wait(&jobs.changed, &jobs.lock);
        jobs.stats.untaken += j->takes == 0;
        if (j->done) {
            j->next = free_now;
            free_now = j;
        } else
            j->orphan = true;
        at = &jobs.list; /* the list may have changed while waiting */
    }
    pthread_mutex_unlock(&jobs.lock);
    while (free_now) {
        CubinJob *next = free_now->next;
        destroy(free_now);
        free_now = next;
    }
}

CubinJobStats cubin_job_stats(void)
{
    pthread_mutex_lock(&jobs.lock);
    CubinJobStats s = jobs.stats;
    s.live = jobs.n;
    pthread_mutex_unlock(&jobs.lock);
    return s;
}
