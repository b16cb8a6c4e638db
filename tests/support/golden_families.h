/* Helpers shared by the tests that run every family: the golden checkpoints
 * and random prompts for them. */
#ifndef TW_TEST_GOLDEN_FAMILIES_H
#define TW_TEST_GOLDEN_FAMILIES_H

#include <stdio.h>
#include <stdlib.h>

#include "test_support.h"
#include "tw/model.h"

/* Families of the reference set (../shared/golden) and the repository's
 * own unseen shapes (tests/data/golden, passed as argv[1]). */
static const char *const shared_families[] = {"llama",       "qwen2",   "qwen3",
                                              "gemma3_text", "qwen3_5", "qwen3_5_moe"};
static const char *const repo_families[] = {"llama_gqa3",     "mistral_wide_heads", "qwen2_mqa",
                                            "qwen3_deep",     "gemma3_softcap",     "qwen3_5_mix",
                                            "qwen3_5_moe_mix"};
#define N_SHARED_FAMILIES (sizeof shared_families / sizeof shared_families[0])
#define N_REPO_FAMILIES   (sizeof repo_families / sizeof repo_families[0])

static const char *repo_golden_dir;

/* Path of family i over both lists (shared first); NULL when the shared
 * data is absent and i names a shared family. */
static inline const char *family_path(size_t i, char *buf, size_t cap)
{
    if (i < N_SHARED_FAMILIES) {
        const char *dir = tw_test_shared_dir();
        if (!dir)
            return NULL;
        snprintf(buf, cap, "%s/golden/%s", dir, shared_families[i]);
    } else {
        snprintf(buf, cap, "%s/%s", repo_golden_dir, repo_families[i - N_SHARED_FAMILIES]);
    }
    return buf;
}

#define N_FAMILIES (N_SHARED_FAMILIES + N_REPO_FAMILIES)

/* Runs check(path, ctx) on every family whose files are here; true when
 * some were absent, for the caller to say so. */
static inline bool each_family(void (*check)(const char *path, void *ctx), void *ctx)
{
    bool skipped = false;
    for (size_t i = 0; i < N_FAMILIES; i++) {
        char path[4096];
        if (family_path(i, path, sizeof path))
            check(path, ctx);
        else
            skipped = true;
    }
    return skipped;
}

static inline void random_tokens(tw_test_rng *rng, uint32_t *out, size_t n, uint32_t vocab)
{
    for (size_t i = 0; i < n; i++)
        out[i] = (uint32_t)(tw_test_rand_u64(rng) % vocab);
}

#endif
