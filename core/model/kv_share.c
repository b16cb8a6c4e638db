/* A sequence's K/V rows kept in, and mapped from, a file: the prefix
 * cache's shared pages (tw/seq_state.h).
 *
 * The file holds a stretch of rows run by run: run r (tw_seq_kv_read()'s
 * order, layer by layer, K then V, kv head by kv head) at base + r *
 * run_span. Mapping a stretch puts the file's pages into the sequence's
 * own K/V mapping, MAP_PRIVATE and MAP_FIXED, one mmap per run: every
 * sequence restored from the same prefix then reads the same physical
 * pages, and a write into one of them (a reused sequence overwriting its
 * rows) copies that page for the writer alone. The file's owner must not
 * change or free those pages while a sequence reads them: the sequence
 * holds a lease (tw_kv_lease) and gives it back once its rows are its own
 * again (reset, import, free), after swapping its whole K/V for fresh
 * anonymous memory. */
#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tw/seq_state.h"

#include "model/model_internal.h"

/* Each mapped run may split a K/V mapping's one VMA into three; a process
 * may hold vm.max_map_count of them (65530 by default). Mapping stops
 * (restores copy instead) once the process's sequences hold this many
 * mapped runs, far below the limit, so an mmap is never the one to meet it
 * (a failed MAP_FIXED mmap could leave a hole behind). */
#define MAX_MAPPED_RUNS 16384
static atomic_size_t mapped_runs;

static size_t page_bytes(void)
{
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

size_t tw_seq_kv_runs(const tw_model *model)
{
    if (!model || !model->n_attn_layers)
        return 0;
    return (size_t)model->n_attn_layers * 2 * model->cfg.n_kv_heads;
}

static size_t row_bytes(const tw_seq *s)
{
    return (size_t)s->model->cfg.head_dim * tw_kv_elem(s->model);
}

static unsigned char *run_ptr(const tw_seq *s, size_t r)
{
    return s->kv + r * s->kv_rows * row_bytes(s);
}

static tw_status check_range(const tw_seq *s, size_t pos, size_t n, int fd, const char *what,
                             tw_err *err)
{
    if (!s || fd < 0)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "%s: NULL sequence or no file", what);
    if (!s->kv)
        return tw_errorf(err, TW_FAILED_PRECONDITION, "%s: the model has no K/V", what);
    if (pos > s->cap || n > s->cap - pos)
        return tw_errorf(err, TW_OUT_OF_RANGE, "%s: [%zu, +%zu) beyond the capacity %zu", what,
                         pos, n, s->cap);
    return TW_OK;
}

tw_status tw_seq_kv_store_file(const tw_seq *seq, size_t pos, size_t n, int fd, uint64_t base,
                               uint64_t run_span, tw_err *err)
{
    tw_status st = check_range(seq, pos, n, fd, "kv store", err);
    if (st != TW_OK)
        return st;
    if (pos + n > seq->len)
        return tw_errorf(err, TW_OUT_OF_RANGE, "kv store: [%zu, +%zu) beyond the length %zu", pos,
                         n, seq->len);
    const size_t bytes = n * row_bytes(seq), runs = tw_seq_kv_runs(seq->model);
    for (size_t r = 0; r < runs; r++) {
        const unsigned char *src = run_ptr(seq, r) + pos * row_bytes(seq);
        for (size_t done = 0; done < bytes;) {
            ssize_t w = pwrite(fd, src + done, bytes - done, (off_t)(base + r * run_span + done));
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "kv store: cannot write %zu bytes: %s",
                                 bytes, w < 0 ? strerror(errno) : "no progress");
            done += (size_t)w;
        }
    }
    return TW_OK;
}

/* Rows [pos, pos + n) of run r read from the file into the sequence. */
static tw_status load_run(tw_seq *s, size_t r, size_t pos, size_t n, int fd, uint64_t off,
                          tw_err *err)
{
    const size_t bytes = n * row_bytes(s);
    unsigned char *dst = run_ptr(s, r) + pos * row_bytes(s);
    for (size_t done = 0; done < bytes;) {
        ssize_t got = pread(fd, dst + done, bytes - done, (off_t)(off + done));
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return tw_errorf(err, TW_DATA_LOSS, "kv load: cannot read %zu bytes: %s", bytes,
                             got < 0 ? strerror(errno) : "the file ends early");
        done += (size_t)got;
    }
    return TW_OK;
}

static void stamp_rows(tw_seq *s, size_t pos, size_t n)
{
    /* snapshots that relied on the rows replaced here are gone, as after
     * tw_seq_kv_write() */
    for (size_t i = 0; i < n; i++)
        s->stamp[pos + i] = ++s->clock;
}

tw_status tw_seq_kv_load_file(tw_seq *seq, size_t pos, size_t n, int fd, uint64_t base,
                              uint64_t run_span, tw_err *err)
{
    tw_status st = check_range(seq, pos, n, fd, "kv load", err);
    if (st != TW_OK)
        return st;
    tw_seq_kv_prepare(seq, pos + n);
    const size_t runs = tw_seq_kv_runs(seq->model);
    for (size_t r = 0; r < runs && st == TW_OK; r++)
        st = load_run(seq, r, pos, n, fd, base + r * run_span, err);
    if (st == TW_OK)
        stamp_rows(seq, pos, n);
    return st;
}

bool tw_seq_kv_mappable(const tw_seq *seq, size_t pos, size_t n)
{
    if (!seq || !seq->kv || n == 0)
        return false;
    const size_t page = page_bytes(), row = row_bytes(seq);
    return (seq->kv_rows * row) % page == 0 && (pos * row) % page == 0 && (n * row) % page == 0;
}

tw_status tw_seq_kv_map_file(tw_seq *seq, size_t pos, size_t n, int fd, uint64_t base,
                             uint64_t run_span, tw_err *err)
{
    tw_status st = check_range(seq, pos, n, fd, "kv map", err);
    if (st != TW_OK)
        return st;
    const size_t page = page_bytes(), runs = tw_seq_kv_runs(seq->model);
    if (!tw_seq_kv_mappable(seq, pos, n) || base % page || run_span % page)
        return tw_errorf(err, TW_FAILED_PRECONDITION,
                         "kv map: rows [%zu, +%zu) do not fall on whole pages", pos, n);
    size_t held = atomic_fetch_add(&mapped_runs, runs);
    if (held + runs > MAX_MAPPED_RUNS) {
        atomic_fetch_sub(&mapped_runs, runs);
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED,
                         "kv map: the process already maps %zu K/V runs", held);
    }
    seq->kv_mapped_runs += runs;
    const size_t bytes = n * row_bytes(seq);
    for (size_t r = 0; r < runs; r++) {
        unsigned char *at = run_ptr(seq, r) + pos * row_bytes(seq);
        void *p = mmap(at, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED, fd,
                       (off_t)(base + r * run_span));
        if (p == MAP_FAILED) {
            /* the rows of this run come from the file by copy instead, into
             * anonymous pages put back where the mapping failed */
            int e = errno;
            p = mmap(at, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
                     -1, 0);
            /* ABORTED, not a reason to copy instead: the run's range may be
             * unmapped now, so only a reset (fresh K/V) makes it whole */
            if (p == MAP_FAILED)
                return tw_errorf(err, TW_ABORTED,
                                 "kv map: %s, and no memory: %s; reset the sequence", strerror(e),
                                 strerror(errno));
            st = load_run(seq, r, pos, n, fd, base + r * run_span, err);
            if (st != TW_OK)
                return st;
        }
    }
    stamp_rows(seq, pos, n);
    /* The mapped pages are there for reading; populating them for writing
     * would copy every one. Nor are they populated for reading: with
     * MADV_POPULATE_READ a 2048-token restore of qwen2-0.5b took 2.4-3.3 ms
     * instead of 0.3-0.4 and saved the first step less than that, whose
     * reads fault the file's pages in sixteen at a time (fault-around). */
    if (seq->kv_ready < pos + n)
        seq->kv_ready = pos + n;
    return TW_OK;
}

void tw_seq_kv_hold(tw_seq *seq, tw_kv_lease *lease)
{
    if (!seq || !lease)
        return;
    lease->next = seq->leases;
    seq->leases = lease;
}

static void release_leases(tw_seq *s)
{
    for (tw_kv_lease *l = s->leases, *next; l; l = next) {
        next = l->next;
        l->next = NULL;
        l->release(l);
    }
    s->leases = NULL;
}

void tw_seq_kv_unshare(tw_seq *s)
{
    if (!s || (!s->kv_mapped_runs && !s->leases))
        return;
    if (s->kv_mapped_runs) {
        /* fresh anonymous memory swapped in whole: nothing of the file is
         * left in the K/V, and if either call fails the old mapping, and the
         * leases with it, stay as they were */
        void *fresh = mmap(NULL, s->kv_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                           -1, 0);
        if (fresh == MAP_FAILED)
            return;
        if (mremap(fresh, s->kv_bytes, s->kv_bytes, MREMAP_MAYMOVE | MREMAP_FIXED, s->kv) ==
            MAP_FAILED) {
            munmap(fresh, s->kv_bytes);
            return;
        }
        atomic_fetch_sub(&mapped_runs, s->kv_mapped_runs);
        s->kv_mapped_runs = 0;
        s->kv_ready = 0;
    }
    release_leases(s);
}

void tw_seq_kv_drop_shared(tw_seq *s)
{
    if (!s)
        return;
    if (s->kv_mapped_runs)
        atomic_fetch_sub(&mapped_runs, s->kv_mapped_runs);
    s->kv_mapped_runs = 0;
    release_leases(s);
}
