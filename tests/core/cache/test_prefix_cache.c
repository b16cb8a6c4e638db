/* The in-memory prefix cache on its own: longest-prefix restore, snapshot
 * boundaries on a hybrid model, eviction within the byte budget, and pinned
 * nodes surviving eviction. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>
#include <sys/resource.h>

#include "golden_families.h"
#include "tw/prefix_cache.h"
#include "tw/seq_state.h"

static tw_model *load_kv(const char *name, tw_kv_type kv)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", repo_golden_dir, name);
    tw_model_opts opts = {.max_context = 640, .max_batch = 1, .max_chunk = 64, .kv_type = kv};
    tw_model *m;
    tw_err err;
    if (tw_model_load(path, &opts, &m, &err) != TW_OK)
        fail_msg("load %s: %s", path, err.msg);
    return m;
}

static tw_model *load(const char *name) { return load_kv(name, TW_KV_F32); }

static void prefill(tw_model *m, tw_seq *s, const uint32_t *t, size_t from, size_t to)
{
    tw_err err;
    assert_int_equal(tw_model_forward(m, NULL, s, t + from, to - from, NULL, TW_LOGITS_NONE, &err),
                     TW_OK);
}

/* The same with the nodes' K/V mapped into the sequences (the default on
 * this model: a block fills whole pages of every run) and copied. */
static void restore_and_evict(bool copy_kv)
{
    tw_model *m = load("qwen3_deep");
    size_t per_block = tw_seq_kv_floats_per_token(m) * TW_PREFIX_BLOCK * sizeof(float);
    /* Room for about four blocks. */
    tw_prefix_cache_opts o = {.max_bytes = per_block * 4 + per_block / 2, .copy_kv = copy_kv};
    tw_prefix_cache *c;
    tw_err err;
    assert_int_equal(tw_prefix_cache_create(m, &o, &c, &err), TW_OK);
    assert_true(tw_prefix_cache_maps(c) == !copy_kv);
    uint32_t t[500];
    tw_test_rng rng = {3};
    random_tokens(&rng, t, 500, 256);
    tw_seq *a, *b;
    assert_int_equal(tw_seq_create(m, 0, &a, &err), TW_OK);
    assert_int_equal(tw_seq_create(m, 0, &b, &err), TW_OK);
    prefill(m, a, t, 0, 150);
    size_t cached, got;
    assert_int_equal(tw_prefix_cache_insert(c, a, t, false, &cached, &err), TW_OK);
    assert_int_equal(cached, 128);
    /* Pure attention needs no snapshot. */
    assert_false(tw_prefix_cache_wants_snapshot(c, 128, 150, 0));
    assert_int_equal(tw_prefix_cache_next_stop(c, 0, 150, 150, 0), 150);
    /* Longest prefix, bounded by limit. */
    assert_int_equal(tw_prefix_cache_restore(c, b, t, 400, 400, &got, &err), TW_OK);
    assert_int_equal(got, 128);
    assert_int_equal(tw_seq_len(b), 128);
    assert_int_equal(tw_prefix_cache_restore(c, b, t, 400, 127, &got, &err), TW_OK);
    assert_int_equal(got, 64);
    /* A prompt diverging inside block 1 reuses block 0 only. */
    uint32_t u[400];
    memcpy(u, t, sizeof u); /* the first 400 of t */
    u[100] ^= 1;
    assert_int_equal(tw_prefix_cache_restore(c, b, u, 400, 400, &got, &err), TW_OK);
    assert_int_equal(got, 64);
    /* Restored K/V is exactly what a computed. */
    assert_int_equal(tw_prefix_cache_restore(c, b, t, 400, 400, &got, &err), TW_OK);
    size_t per = tw_seq_kv_floats_per_token(m);
    float *ka = malloc(per * 128 * sizeof(float)), *kb = malloc(per * 128 * sizeof(float));
    assert_int_equal(tw_seq_kv_read(a, 0, 128, ka, &err), TW_OK);
    assert_int_equal(tw_seq_kv_read(b, 0, 128, kb, &err), TW_OK);
    assert_memory_equal(ka, kb, per * 128 * sizeof(float));
    tw_prefix_cache_stats st;
    tw_prefix_cache_get_stats(c, &st);
    assert_int_equal(st.tokens_mapped, copy_kv ? 0 : 128 + 64 + 64 + 128);
    /* b reads the mapped nodes until it lets them go */
    tw_seq_reset(b);

    /* A second prompt of 3 blocks needs room: the budget evicts the least
     * recently used leaf (block 1 of the first prompt), never more than
     * needed, and stays within max_bytes. */
    tw_seq_reset(a);
    prefill(m, a, u + 200, 0, 192);
    assert_int_equal(tw_prefix_cache_insert(c, a, u + 200, false, &cached, &err), TW_OK);
    tw_prefix_cache_get_stats(c, &st);
    assert_true(st.bytes <= o.max_bytes);
    assert_int_equal(st.nodes, 4);
    assert_int_equal(cached, 192);
    assert_int_equal(st.evictions, 1);
    assert_int_equal(tw_prefix_cache_restore(c, b, t, 400, 400, &got, &err), TW_OK);
    assert_int_equal(got, 64);
    tw_seq_reset(b);
    /* A prompt longer than the whole budget caches what fits: its own
     * earlier blocks are ancestors and never evicted under it. */
    tw_seq_reset(a);
    prefill(m, a, t + 100, 0, 384);
    assert_int_equal(tw_prefix_cache_insert(c, a, t + 100, false, &cached, &err), TW_OK);
    tw_prefix_cache_get_stats(c, &st);
    assert_true(st.bytes <= o.max_bytes);
    assert_int_equal(cached, 256);
    assert_int_equal(tw_prefix_cache_restore(c, b, t + 100, 300, 300, &got, &err), TW_OK);
    assert_int_equal(got, 256);
    tw_prefix_cache_get_stats(c, &st);
    assert_int_equal(st.lookups, 6);
    assert_int_equal(st.hits, 6);
    tw_seq_reset(b);
    tw_prefix_cache_clear(c);
    tw_prefix_cache_get_stats(c, &st);
    assert_int_equal(st.nodes, 0);
    assert_int_equal(st.bytes, 0);
    assert_int_equal(tw_prefix_cache_restore(c, b, t, 400, 400, &got, &err), TW_OK);
    assert_int_equal(got, 0);
    assert_int_equal(tw_seq_len(b), 0);
    free(ka);
    free(kb);
    tw_seq_free(a);
    tw_seq_free(b);
    tw_prefix_cache_free(c);
    tw_model_free(m);
}

static void test_attention_restore_and_evict(void **state)
{
    (void)state;
    restore_and_evict(false);
}

static void test_attention_restore_and_evict_copying(void **state)
{
    (void)state;
    restore_and_evict(true);
}

static void test_hybrid_snapshots(void **state)
{
    (void)state;
    tw_model *m = load("qwen3_5_mix");
    tw_prefix_cache_opts o = {.snapshot_every = 4};
    tw_prefix_cache *c;
    tw_err err;
    assert_int_equal(tw_prefix_cache_create(m, &o, &c, &err), TW_OK);
    /* Boundaries: the prompt's last whole block, the mark's block, every 4
     * blocks. */
    assert_true(tw_prefix_cache_wants_snapshot(c, 320, 330, 0));
    assert_true(tw_prefix_cache_wants_snapshot(c, 128, 330, 150));
    assert_true(tw_prefix_cache_wants_snapshot(c, 256, 330, 0));
    assert_false(tw_prefix_cache_wants_snapshot(c, 192, 330, 0));
    assert_false(tw_prefix_cache_wants_snapshot(c, 100, 330, 100));
    assert_int_equal(tw_prefix_cache_next_stop(c, 0, 330, 330, 150), 128);
    assert_int_equal(tw_prefix_cache_next_stop(c, 128, 330, 330, 150), 256);
    assert_int_equal(tw_prefix_cache_next_stop(c, 256, 300, 330, 150), 300);

    uint32_t t[330];
    tw_test_rng rng = {11};
    random_tokens(&rng, t, 330, 256);
    tw_seq *a, *b;
    assert_int_equal(tw_seq_create(m, 0, &a, &err), TW_OK);
    assert_int_equal(tw_seq_create(m, 0, &b, &err), TW_OK);
    /* Prefill paused at 128 (snapshot) then run to 200 (no boundary). */
    prefill(m, a, t, 0, 128);
    assert_int_equal(tw_prefix_cache_insert(c, a, t, true, NULL, &err), TW_OK);
    prefill(m, a, t, 128, 200);
    size_t cached, got;
    assert_int_equal(tw_prefix_cache_insert(c, a, t, false, &cached, &err), TW_OK);
    assert_int_equal(cached, 192);
    /* Blocks up to 192 are cached but only 128 can be resumed from. */
    assert_int_equal(tw_prefix_cache_restore(c, b, t, 330, 329, &got, &err), TW_OK);
    assert_int_equal(got, 128);
    /* Continuing b matches continuing a copy that never left. */
    tw_seq *ref;
    assert_int_equal(tw_seq_create(m, 0, &ref, &err), TW_OK);
    prefill(m, ref, t, 0, 128);
    uint32_t V = tw_model_get_info(m)->vocab_size;
    float *lr = malloc(V * sizeof(float)), *lb = malloc(V * sizeof(float));
    assert_int_equal(tw_model_forward(m, NULL, ref, t + 128, 72, lr, TW_LOGITS_LAST, &err), TW_OK);
    assert_int_equal(tw_model_forward(m, NULL, b, t + 128, 72, lb, TW_LOGITS_LAST, &err), TW_OK);
    assert_memory_equal(lr, lb, V * sizeof(float));
    tw_prefix_cache_stats st;
    tw_prefix_cache_get_stats(c, &st);
    assert_int_equal(st.snapshots, 1);
    assert_int_equal(st.nodes, 3);
    free(lr);
    free(lb);
    tw_seq_free(ref);
    tw_seq_free(a);
    tw_seq_free(b);
    tw_prefix_cache_free(c);
    tw_model_free(m);
}

/* With half-precision K/V a cached block holds the halves themselves: half
 * the bytes of an f32 block's K/V, and a restore puts back exactly the rows
 * the prompt computed. */
static void test_f16_blocks(void **state)
{
    (void)state;
    tw_model *m = load_kv("qwen3_deep", TW_KV_F16), *m32 = load("qwen3_deep");
    tw_prefix_cache *c, *c32;
    tw_err err;
    assert_int_equal(tw_prefix_cache_create(m, NULL, &c, &err), TW_OK);
    assert_int_equal(tw_prefix_cache_create(m32, NULL, &c32, &err), TW_OK);
    uint32_t t[200];
    tw_test_rng rng = {5};
    random_tokens(&rng, t, 200, 256);
    tw_seq *a, *b, *a32;
    assert_int_equal(tw_seq_create(m, 0, &a, &err), TW_OK);
    assert_int_equal(tw_seq_create(m, 0, &b, &err), TW_OK);
    assert_int_equal(tw_seq_create(m32, 0, &a32, &err), TW_OK);
    prefill(m, a, t, 0, 150);
    prefill(m32, a32, t, 0, 150);
    size_t cached, got;
    assert_int_equal(tw_prefix_cache_insert(c, a, t, false, &cached, &err), TW_OK);
    assert_int_equal(tw_prefix_cache_insert(c32, a32, t, false, &cached, &err), TW_OK);
    tw_prefix_cache_stats s16, s32;
    tw_prefix_cache_get_stats(c, &s16);
    tw_prefix_cache_get_stats(c32, &s32);
    assert_int_equal(s16.nodes, 2);
    assert_int_equal(s32.nodes, 2);
    assert_int_equal(s32.bytes - s16.bytes,
                     s16.nodes * TW_PREFIX_BLOCK * tw_seq_kv_bytes_per_token(m));
    assert_int_equal(tw_prefix_cache_restore(c, b, t, 200, 200, &got, &err), TW_OK);
    assert_int_equal(got, 128);
    size_t bytes = 128 * tw_seq_kv_bytes_per_token(m);
    unsigned char *ka = malloc(bytes), *kb = malloc(bytes);
    assert_int_equal(tw_seq_kv_read(a, 0, 128, ka, &err), TW_OK);
    assert_int_equal(tw_seq_kv_read(b, 0, 128, kb, &err), TW_OK);
    assert_memory_equal(ka, kb, bytes);
    free(ka);
    free(kb);
    tw_seq_free(a);
    tw_seq_free(b);
    tw_seq_free(a32);
    tw_prefix_cache_free(c);
    tw_prefix_cache_free(c32);
    tw_model_free(m);
    tw_model_free(m32);
}

/* Mappings of the cache's memory file in this process (/proc/self/maps
 * names them by the file's name). */
static size_t file_mappings(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        fail_msg("no /proc/self/maps");
    char line[1024];
    size_t n = 0;
    while (fgets(line, sizeof line, f))
        if (strstr(line, "tokenwire-prefix-kv"))
            n++;
    fclose(f);
    return n;
}

/* Two sequences restored from one prefix read the cache's own pages: the
 * rows are mapped, not copied, the nodes under them stay while they are
 * read (even through a clear, even after the cache is freed), a write into
 * them stays with the writer, and continuing either matches a prefill that
 * never left. */
static void test_shared_pages(void **state)
{
    (void)state;
    tw_model *m = load("qwen3_deep");
    tw_prefix_cache *c;
    tw_err err;
    assert_int_equal(tw_prefix_cache_create(m, NULL, &c, &err), TW_OK);
    assert_true(tw_prefix_cache_maps(c));
    assert_false(tw_prefix_cache_maps(NULL));
    uint32_t t[200];
    tw_test_rng rng = {7};
    random_tokens(&rng, t, 200, 256);
    tw_seq *a, *b, *b2, *ref;
    assert_int_equal(tw_seq_create(m, 0, &a, &err), TW_OK);
    assert_int_equal(tw_seq_create(m, 0, &b, &err), TW_OK);
    assert_int_equal(tw_seq_create(m, 0, &b2, &err), TW_OK);
    assert_int_equal(tw_seq_create(m, 0, &ref, &err), TW_OK);
    prefill(m, a, t, 0, 200);
    size_t cached, got;
    assert_int_equal(tw_prefix_cache_insert(c, a, t, false, &cached, &err), TW_OK);
    assert_int_equal(cached, 192);
    assert_int_equal(file_mappings(), 0);
    assert_int_equal(tw_prefix_cache_restore(c, b, t, 200, 200, &got, &err), TW_OK);
    assert_int_equal(got, 192);
    assert_int_equal(tw_prefix_cache_restore(c, b2, t, 200, 200, &got, &err), TW_OK);
    assert_int_equal(got, 192);
    tw_prefix_cache_stats st;
    tw_prefix_cache_get_stats(c, &st);
    assert_int_equal(st.tokens_mapped, 384);
    /* one mapping per K/V run and sequence: the three blocks lie side by side */
    assert_int_equal(file_mappings(), 2 * tw_seq_kv_runs(m));
    /* pinned while read */
    tw_prefix_cache_clear(c);
    tw_prefix_cache_get_stats(c, &st);
    assert_int_equal(st.nodes, 3);

    size_t bytes = 192 * tw_seq_kv_bytes_per_token(m);
    unsigned char *ka = malloc(bytes), *kb = malloc(bytes);
    assert_int_equal(tw_seq_kv_read(a, 0, 192, ka, &err), TW_OK);
    assert_int_equal(tw_seq_kv_read(b2, 0, 192, kb, &err), TW_OK);
    assert_memory_equal(ka, kb, bytes);
    /* continuing from the mapped rows is a prefill that never left */
    uint32_t V = tw_model_get_info(m)->vocab_size;
    float *lr = malloc(V * sizeof(float)), *lb = malloc(V * sizeof(float));
    prefill(m, ref, t, 0, 192);
    assert_int_equal(tw_model_forward(m, NULL, ref, t + 192, 8, lr, TW_LOGITS_LAST, &err), TW_OK);
    assert_int_equal(tw_model_forward(m, NULL, b, t + 192, 8, lb, TW_LOGITS_LAST, &err), TW_OK);
    assert_memory_equal(lr, lb, V * sizeof(float));
    /* b overwrites a mapped row: b2 and the cache keep theirs */
    memset(kb, 0x5a, bytes);
    assert_int_equal(tw_seq_kv_write(b, 0, 64, kb, &err), TW_OK);
    assert_int_equal(tw_seq_kv_read(b2, 0, 192, kb, &err), TW_OK);
    assert_memory_equal(ka, kb, bytes);
    tw_seq *b3;
    assert_int_equal(tw_seq_create(m, 0, &b3, &err), TW_OK);
    assert_int_equal(tw_prefix_cache_restore(c, b3, t, 200, 200, &got, &err), TW_OK);
    assert_int_equal(got, 192);
    assert_int_equal(tw_seq_kv_read(b3, 0, 192, kb, &err), TW_OK);
    assert_memory_equal(ka, kb, bytes);
    tw_seq_free(b3);

    /* the cache freed under its readers: they read on, and the last to let
     * go frees what is left (the sanitizers watch) */
    tw_prefix_cache_free(c);
    assert_int_equal(tw_model_forward(m, NULL, b2, t + 192, 8, lb, TW_LOGITS_LAST, &err), TW_OK);
    assert_memory_equal(lr, lb, V * sizeof(float));
    tw_seq_reset(b);
    assert_int_equal(file_mappings(), tw_seq_kv_runs(m));
    /* a reset sequence's K/V is fresh memory of its own */
    assert_int_equal(tw_seq_len(b), 0);
    prefill(m, b, t, 0, 192);
    assert_int_equal(tw_seq_kv_read(b, 0, 192, kb, &err), TW_OK);
    assert_memory_equal(ka, kb, bytes);
    tw_seq_free(b2);
    assert_int_equal(file_mappings(), 0);
    free(ka);
    free(kb);
    free(lr);
    free(lb);
    tw_seq_free(a);
    tw_seq_free(b);
    tw_seq_free(ref);
    tw_model_free(m);
}

/* Under a file size limit the memory file would end the process with
 * SIGXFSZ: the cache keeps its rows on the heap and copies them instead. */
static void test_file_size_limit_copies(void **state)
{
    (void)state;
    struct rlimit old;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    struct rlimit low = {1 << 20, old.rlim_max};
    if (old.rlim_max != RLIM_INFINITY && old.rlim_max < low.rlim_cur)
        low.rlim_cur = old.rlim_max;
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &low), 0);
    tw_model *m = load("qwen3_deep");
    tw_prefix_cache *c;
    tw_err err;
    assert_int_equal(tw_prefix_cache_create(m, NULL, &c, &err), TW_OK);
    assert_false(tw_prefix_cache_maps(c));
    uint32_t t[130];
    tw_test_rng rng = {9};
    random_tokens(&rng, t, 130, 256);
    tw_seq *a, *b;
    assert_int_equal(tw_seq_create(m, 0, &a, &err), TW_OK);
    assert_int_equal(tw_seq_create(m, 0, &b, &err), TW_OK);
    prefill(m, a, t, 0, 130);
    size_t cached, got;
    assert_int_equal(tw_prefix_cache_insert(c, a, t, false, &cached, &err), TW_OK);
    assert_int_equal(cached, 128);
    assert_int_equal(tw_prefix_cache_restore(c, b, t, 130, 130, &got, &err), TW_OK);
    assert_int_equal(got, 128);
    tw_prefix_cache_stats st;
    tw_prefix_cache_get_stats(c, &st);
    assert_int_equal(st.tokens_mapped, 0);
    assert_int_equal(file_mappings(), 0);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    tw_seq_free(a);
    tw_seq_free(b);
    tw_prefix_cache_free(c);
    tw_model_free(m);
}

int main(int argc, char **argv)
{
    repo_golden_dir = argc > 1 ? argv[1] : "tests/data/golden";
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attention_restore_and_evict),
        cmocka_unit_test(test_attention_restore_and_evict_copying),
        cmocka_unit_test(test_shared_pages),
        cmocka_unit_test(test_file_size_limit_copies),
        cmocka_unit_test(test_hybrid_snapshots),
        cmocka_unit_test(test_f16_blocks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
