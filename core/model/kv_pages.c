/* The pages under a sequence's K/V.
 *
 * The K/V lives in its own anonymous mapping, so untouched positions cost
 * no memory. A page first written inside a decode step would fault there,
 * one 4 KiB page at a time, in the token's path: a step writes head_dim
 * values into every K/V run, so every sixteenth token or so (head_dim 64,
 * f32) it faulted a fresh page in each of the model's runs. On a 2-vCPU
 * guest such a fault took ~11 us (100 MiB touched page by page: 277-343
 * ms; populated by madvise(MADV_POPULATE_WRITE) in 64 KiB calls: 24 ms, in
 * one call: 12-19 ms), and qwen2-0.5b's RoPE and K/V writes took ~240 us
 * of each decoded token against ~110 us with the pages already there. So
 * the forward pass populates each run a stretch ahead, one such call per
 * run. */
#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

#include "model/model_internal.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/* Bytes of each K/V run populated ahead of the last position asked for:
 * sixteen pages per call, so the call's own cost stays small beside the
 * faults it saves. */
#define KV_AHEAD_BYTES ((size_t)64 << 10)

static size_t page_size(void)
{
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

/* Plain 4 KiB pages, not huge ones: on the 2-vCPU guest with
 * MADV_HUGEPAGE a step's K/V stores took 0.6-0.8 us a layer instead of
 * 2.4-3.4 (each store a page walk), but qwen2-0.5b Q4_0 decoded only
 * 0-1.3% faster (40 bursts alternated between two sequences), while every
 * run would take 2 MiB at its first token: 192 MiB for each sequence of
 * that model at 8192 positions, however short. */
unsigned char *tw_seq_kv_map(size_t bytes, size_t *mapped)
{
    size_t page = page_size();
    *mapped = 0;
    if (bytes == 0 || bytes > SIZE_MAX - page)
        return NULL;
    size_t len = (bytes + page - 1) / page * page;
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    *mapped = len;
    return p;
}

void tw_seq_kv_unmap(unsigned char *kv, size_t mapped)
{
    if (kv)
        (void)munmap(kv, mapped);
}

void tw_seq_kv_prepare(tw_seq *s, size_t end)
{
    if (!s->kv || s->kv_lazy || end <= s->kv_ready)
        return;
    const tw_mconfig *c = &s->model->cfg;
    const size_t row = (size_t)c->head_dim * tw_kv_elem(s->model);
    const size_t page = page_size();
    size_t ahead = KV_AHEAD_BYTES / row;
    size_t to = end + (ahead ? ahead : 1);
    if (to > s->cap)
        to = s->cap;
    const uintptr_t base = (uintptr_t)s->kv, limit = base + s->kv_bytes;
    for (uint32_t l = 0; l < s->model->n_attn_layers; l++) {
        for (int which = 0; which < 2; which++) {
            for (uint32_t h = 0; h < c->n_kv_heads; h++) {
                uintptr_t run = (uintptr_t)tw_seq_kv(s, l, which, h);
                uintptr_t lo = (run + s->kv_ready * row) / page * page;
                uintptr_t hi = (run + to * row + page - 1) / page * page;
                if (hi > limit)
                    hi = limit;
                if (hi > lo && madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE) != 0) {
                    /* EINVAL: a kernel before 5.14, so never again for this
                     * sequence. Anything else (ENOMEM under a cgroup limit, a
                     * signal) leaves kv_ready where it was: the writes fault
                     * the pages in as they would without this, and a later
                     * step tries again. */
                    s->kv_lazy = errno == EINVAL;
                    return;
                }
            }
        }
    }
    s->kv_ready = to;
}
