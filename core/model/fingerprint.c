/* Model fingerprints: a SHA-256 that changes whenever the architecture or
 * any tensor's identity changes, so persisted sequence state is never
 * loaded into a different model. Hashing every byte of a multi-gigabyte
 * model would make startup slow, so large tensors contribute evenly spaced
 * samples alongside their name, type, shape and size. */
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_internal.h"
#include "model/wsource.h"

#define FULL_HASH_LIMIT (1u << 20)
#define SAMPLES 64
#define SAMPLE_BYTES 1024

static void hash_tensor(EVP_MD_CTX *ctx, const tw_wtensor *t)
{
    char head[512];
    int n = snprintf(head, sizeof head, "%s|%u|%u|%llu,%llu,%llu,%llu|%llu|%d\n", t->name,
                     (unsigned)t->type, t->n_dims, (unsigned long long)t->shape[0],
                     (unsigned long long)t->shape[1], (unsigned long long)t->shape[2],
                     (unsigned long long)t->shape[3], (unsigned long long)t->nbytes,
                     (int)t->transform);
    EVP_DigestUpdate(ctx, head, n > 0 && (size_t)n < sizeof head ? (size_t)n : sizeof head - 1);
    const unsigned char *d = t->data;
    if (!d)
        return;
    if (t->nbytes <= FULL_HASH_LIMIT) {
        EVP_DigestUpdate(ctx, d, t->nbytes);
        return;
    }
    uint64_t span = t->nbytes - SAMPLE_BYTES;
    for (uint64_t i = 0; i < SAMPLES; i++)
        EVP_DigestUpdate(ctx, d + span * i / (SAMPLES - 1), SAMPLE_BYTES);
}

tw_status tw_model_fingerprint(tw_model *m, char out[65], tw_err *err)
{
    if (!m || !out)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "fingerprint: NULL argument");
    if (m->have_fingerprint) {
        memcpy(out, m->fingerprint, 65);
        return TW_OK;
    }
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (!ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(ctx);
        return tw_errorf(err, TW_INTERNAL, "fingerprint: SHA-256 unavailable");
    }
    char *cfg = json_dumps(tw_wsource_config(m->src), JSON_SORT_KEYS | JSON_COMPACT);
    if (cfg) {
        EVP_DigestUpdate(ctx, cfg, strlen(cfg));
        free(cfg);
    }
    tw_wtensor t;
    for (size_t i = 0; tw_wsource_at(m->src, i, &t); i++)
        hash_tensor(ctx, &t);
    if (m->info.kv_type == TW_KV_F16)
        EVP_DigestUpdate(ctx, "kv:f16\n", 7);
    /* a checkpoint quantized at load computes other numbers than as stored */
    if (m->quantized_to != TW_TYPE_F32) {
        char q[48];
        int n = snprintf(q, sizeof q, "quantized:%s\n", tw_type_name(m->quantized_to));
        EVP_DigestUpdate(ctx, q, (size_t)n);
    }
    unsigned char md[32];
    unsigned int len = 0;
    int ok = EVP_DigestFinal_ex(ctx, md, &len);
    EVP_MD_CTX_free(ctx);
    if (ok != 1 || len != 32)
        return tw_errorf(err, TW_INTERNAL, "fingerprint: SHA-256 failed");
    for (int i = 0; i < 32; i++)
        snprintf(m->fingerprint + 2 * i, 3, "%02x", md[i]);
    m->have_fingerprint = true;
    memcpy(out, m->fingerprint, 65);
    return TW_OK;
}
