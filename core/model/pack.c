/* Weights repacked at load for the integer kernels: every Q8_0, Q4_0,
 * Q5_0, Q5_1, Q4_K, Q5_K and Q6_K matrix is copied into tw_pack_rows'
 * layout (eight rows side by side, see tw/kernels.h), which the kernels
 * multiply 1.2-2.9x faster per activation row than plain rows (Q5_1
 * 3-6x). The packed copies share one anonymous mapping, offered huge
 * pages like the file's weights. The pages of the packed matrices'
 * originals are given back, so the weights are not held twice: a private
 * copy (huge pages) frees them, a file mapping drops them (a later read
 * faults them in from the file again). An embedding table tied to the
 * output matrix gathers its rows from the packed copy
 * (tw_dequant_packed_row), so its original goes too. One of its own is read
 * a row per token: from a private copy it moves to a view of the file's page
 * cache (tw_gguf_file_view), so it no longer holds anonymous memory (~280
 * MiB for a 128K-token vocabulary of 4096 columns at 4.5 bits); the rows
 * read come in as clean file pages, with the kernel's fault-around, which
 * it can drop under pressure. From a file mapping it already is one. The
 * model's fingerprint, which samples the originals, is taken first. */
#include <unistd.h>
#include <sys/mman.h>

#include "tw/kernels.h"
#include "tw/log.h"

#include "model/wsource.h"

#include "model/model_internal.h"

typedef bool (*mat_visit)(tw_mat *mat, void *ctx);

/* Every matrix the forward pass multiplies with; false when visit stops. */
static bool each_mat(tw_model *m, mat_visit visit, void *ctx)
{
    if (!visit(&m->lm_head, ctx))
        return false;
    for (uint32_t l = 0; l < m->cfg.n_layers; l++) {
        tw_layer *L = &m->layers[l];
        tw_mat *mats[] = {&L->wq,      &L->wk,       &L->wv,     &L->wo,       &L->in_qkv,
                          &L->in_z,    &L->in_b,     &L->in_a,   &L->out_proj, &L->gate,
                          &L->up,      &L->down,     &L->router, &L->sh_gate,  &L->sh_up,
                          &L->sh_down, &L->sh_router};
        for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++)
            if (!visit(mats[i], ctx))
                return false;
        for (uint32_t e = 0; L->exp_gate && e < m->cfg.n_experts; e++)
            if (!visit(&L->exp_gate[e], ctx) || !visit(&L->exp_up[e], ctx) ||
                !visit(&L->exp_down[e], ctx))
                return false;
    }
    return true;
}

static size_t packed_bytes(const tw_mat *mat)
{
    return (mat->rows * mat->row_bytes + 63) & ~(size_t)63;
}

static bool packable(const tw_mat *mat)
{
    return mat->w && mat->rows && tw_pack_type(mat->type) != mat->type &&
           tw_type_row_bytes(mat->type, mat->cols) == mat->row_bytes;
}

static bool count_mat(tw_mat *mat, void *ctx)
{
    size_t *total = ctx;
    if (packable(mat))
        *total += packed_bytes(mat);
    return true;
}

typedef struct pack_ctx {
    uint8_t *next;
    size_t n;
    const uint8_t *keep, *keep_end; /* the embedding table's, kept */
    size_t released;
} pack_ctx;

/* Gives back the whole pages of [p, p + len) that hold no byte of the
 * kept range. */
static void release_pages(pack_ctx *c, const uint8_t *p, size_t len)
{
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = ((uintptr_t)p + page - 1) & ~(page - 1);
    uintptr_t hi = ((uintptr_t)p + len) & ~(page - 1);
    const uintptr_t k0 = (uintptr_t)c->keep & ~(page - 1);
    const uintptr_t k1 = ((uintptr_t)c->keep_end + page - 1) & ~(page - 1);
    if (k0 < hi && k1 > lo) { /* overlaps the kept range: keep that side */
        if (k0 > lo)
            hi = k0;
        else
            lo = k1;
    }
    if (hi > lo && madvise((void *)lo, hi - lo, MADV_DONTNEED) == 0)
        c->released += hi - lo;
}

/* First pass: every packed copy is written while all originals are still
 * there (two matrices could share source rows). */
static bool pack_mat(tw_mat *mat, void *ctx)
{
    pack_ctx *p = ctx;
    if (!packable(mat))
        return true;
    if (!tw_pack_rows(mat->type, mat->w, mat->rows, mat->cols, p->next))
        return false;
    p->next += packed_bytes(mat);
    return true;
}

/* Second pass: each matrix moves to its copy, its original's pages go. */
static bool use_packed(tw_mat *mat, void *ctx)
{
    pack_ctx *p = ctx;
    if (!packable(mat))
        return true;
    release_pages(p, mat->w, mat->rows * mat->row_bytes);
    mat->w = p->next;
    mat->type = tw_pack_type(mat->type);
    p->next += packed_bytes(mat);
    p->n++;
    return true;
}

/* Moves an embedding table of its own from the private copy to a view of
 * the file, where that can be had; else it stays (and the log says why). */
static void embed_to_file(tw_model *m, pack_ctx *p)
{
    const size_t bytes = m->embed.rows * m->embed.row_bytes;
    tw_err err;
    if (tw_wsource_file_view(m->src, m->embed.w, bytes, &m->embed_view, &err) != TW_OK) {
        tw_info("the embedding table (%.1f MiB) stays in memory: %s", (double)bytes / 1048576.0,
                err.msg);
        return;
    }
    release_pages(p, m->embed.w, bytes);
    m->embed.w = m->embed_view.data;
    m->info.embed_from_file = true;
    tw_info("the embedding table (%.1f MiB) is read from the file's page cache, a row at a "
            "time",
            (double)bytes / 1048576.0);
}

tw_status tw_model_pack_weights(tw_model *m, tw_err *err)
{
    size_t total = 0;
    each_mat(m, count_mat, &total);
    const bool tied = m->embed.w == m->lm_head.w && m->embed.type == m->lm_head.type &&
                      m->embed.rows == m->lm_head.rows && m->embed.cols == m->lm_head.cols &&
                      packable(&m->lm_head);
    const bool own_embed = m->embed.w && m->embed.w != m->lm_head.w && m->info.huge_pages;
    if (total == 0 && !own_embed)
        return TW_OK;
    char fp[65];
    tw_status st;
    if ((st = tw_model_fingerprint(m, fp, err)))
        return st;
    pack_ctx p = {0};
    if (own_embed)
        embed_to_file(m, &p);
    if (total == 0)
        return TW_OK;
    void *mem = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "packing weights: cannot map %.1f MiB",
                         (double)total / 1048576.0);
    (void)madvise(mem, total, MADV_HUGEPAGE);
    m->packed = mem;
    m->packed_len = total;
    p.next = mem;
    if (!tied && !m->embed_view.data) {
        p.keep = m->embed.w;
        p.keep_end = m->embed.w + m->embed.rows * m->embed.row_bytes;
    }
    if (!each_mat(m, pack_mat, &p))
        return tw_errorf(err, TW_INTERNAL, "packing weights: a matrix does not fit its type");
    p.next = mem;
    each_mat(m, use_packed, &p);
    if (tied)
        m->embed = m->lm_head;
    (void)mprotect(mem, total, PROT_READ);
    tw_info("packed %zu matrices (%.1f MiB) eight rows to a group for the integer "
            "kernels; %.1f MiB of the file's copy given back",
            p.n, (double)total / 1048576.0, (double)p.released / 1048576.0);
    return TW_OK;
}

void tw_model_unpack_weights(tw_model *m)
{
    if (m->packed)
        munmap(m->packed, m->packed_len);
    m->packed = NULL;
    m->packed_len = 0;
    tw_file_view_release(&m->embed_view);
}
