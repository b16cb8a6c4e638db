/* tw-bench-encode: embeddings from an encoder of a real shape (random
 * weights written to a temporary folder as a Hugging Face BERT checkpoint):
 * inputs of 16, 128 and 512 tokens through tw_model_encode, against the
 * same layers' dense matrix products alone through OpenBLAS's sgemm on as
 * many threads, alternated round by round. The ratio says what attention,
 * the norms and the activations cost beyond the products. */
#include <cblas.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_common.h"
#include "tw/hw.h"
#include "tw/log.h"
#include "tw/model.h"
#include "tw/pool.h"

typedef struct shape {
    const char *name;
    uint32_t hidden, layers, heads, ffn, vocab, max_pos;
} shape;

static const shape g_shapes[] = {
    {"bge-small", 384, 12, 12, 1536, 30522, 512},
    {"bge-base", 768, 12, 12, 3072, 30522, 512},
};

typedef struct tensor {
    char name[96];
    uint64_t rows, cols; /* cols 0: a vector of rows values */
    int fill;            /* 0 random, 1 ones, 2 small */
} tensor;

static size_t list_tensors(const shape *s, tensor *t)
{
    size_t n = 0;
#define T(r, c, f, ...)                                                                            \
    do {                                                                                           \
        snprintf(t[n].name, sizeof t[n].name, __VA_ARGS__);                                        \
        t[n].rows = (r);                                                                           \
        t[n].cols = (c);                                                                           \
        t[n].fill = (f);                                                                           \
        n++;                                                                                       \
    } while (0)
    const uint32_t H = s->hidden, F = s->ffn;
    T(s->vocab, H, 0, "embeddings.word_embeddings.weight");
    T(s->max_pos, H, 0, "embeddings.position_embeddings.weight");
    T(2, H, 0, "embeddings.token_type_embeddings.weight");
    T(H, 0, 1, "embeddings.LayerNorm.weight");
    T(H, 0, 2, "embeddings.LayerNorm.bias");
    for (uint32_t l = 0; l < s->layers; l++) {
        static const char *const lin[] = {"attention.self.query", "attention.self.key",
                                          "attention.self.value", "attention.output.dense"};
        for (int k = 0; k < 4; k++) {
            T(H, H, 0, "encoder.layer.%u.%s.weight", l, lin[k]);
            T(H, 0, 2, "encoder.layer.%u.%s.bias", l, lin[k]);
        }
        T(H, 0, 1, "encoder.layer.%u.attention.output.LayerNorm.weight", l);
        T(H, 0, 2, "encoder.layer.%u.attention.output.LayerNorm.bias", l);
        T(F, H, 0, "encoder.layer.%u.intermediate.dense.weight", l);
        T(F, 0, 2, "encoder.layer.%u.intermediate.dense.bias", l);
        T(H, F, 0, "encoder.layer.%u.output.dense.weight", l);
        T(H, 0, 2, "encoder.layer.%u.output.dense.bias", l);
        T(H, 0, 1, "encoder.layer.%u.output.LayerNorm.weight", l);
        T(H, 0, 2, "encoder.layer.%u.output.LayerNorm.bias", l);
    }
#undef T
    return n;
}

/* A BERT checkpoint of shape s with random F32 weights in dir. */
static int write_checkpoint(const shape *s, const char *dir)
{
    char path[4096];
    json_t *cfg = json_pack(
        "{s:[s], s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:s, s:f}", "architectures", "BertModel",
        "model_type", "bert", "vocab_size", (int)s->vocab, "hidden_size", (int)s->hidden,
        "num_hidden_layers", (int)s->layers, "num_attention_heads", (int)s->heads,
        "intermediate_size", (int)s->ffn, "max_position_embeddings", (int)s->max_pos,
        "type_vocab_size", 2, "hidden_act", "gelu", "layer_norm_eps", 1e-12);
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (!cfg || json_dump_file(cfg, path, 0) != 0)
        return -1;
    json_decref(cfg);

    tensor *t = calloc(16 + 16 * (size_t)s->layers, sizeof *t);
    const size_t n = list_tensors(s, t);
    json_t *head = json_object();
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        const uint64_t elems = t[i].rows * (t[i].cols ? t[i].cols : 1);
        json_t *shp = t[i].cols ? json_pack("[I,I]", (json_int_t)t[i].rows, (json_int_t)t[i].cols)
                                : json_pack("[I]", (json_int_t)t[i].rows);
        json_object_set_new(head, t[i].name,
                            json_pack("{s:s, s:o, s:[I,I]}", "dtype", "F32", "shape", shp,
                                      "data_offsets", (json_int_t)off,
                                      (json_int_t)(off + 4 * elems)));
        off += 4 * elems;
    }
    char *text = json_dumps(head, JSON_COMPACT);
    json_decref(head);
    size_t hlen = strlen(text), pad = (8 - hlen % 8) % 8;
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    uint64_t hl = hlen + pad;
    fwrite(&hl, 8, 1, f);
    fwrite(text, 1, hlen, f);
    for (size_t i = 0; i < pad; i++)
        fputc(' ', f);
    free(text);
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    float *buf = malloc(sizeof(float) * 65536);
    for (size_t i = 0; i < n; i++) {
        uint64_t left = t[i].rows * (t[i].cols ? t[i].cols : 1);
        const float scale = 1.0f / sqrtf((float)(t[i].cols ? t[i].cols : 1));
        while (left) {
            size_t k = left < 65536 ? (size_t)left : 65536;
            for (size_t j = 0; j < k; j++) {
                seed = seed * 6364136223846793005ull + 1442695040888963407ull;
                float u = (float)((seed >> 40) & 0xffffff) / 16777216.0f * 2.0f - 1.0f;
                buf[j] = t[i].fill == 1 ? 1.0f : t[i].fill == 2 ? 0.02f * u : u * scale;
            }
            fwrite(buf, sizeof(float), k, f);
            left -= k;
        }
    }
    free(buf);
    free(t);
    return fclose(f) == 0 ? 0 : -1;
}

/* The dense products of every layer for n tokens through sgemm on weights
 * of the same sizes: the baseline. */
typedef struct dense {
    float *w_h, *w_f, *x, *y, *f;
} dense;

static void dense_products(const shape *s, const dense *d, int n)
{
    const int H = (int)s->hidden, F = (int)s->ffn;
    for (uint32_t l = 0; l < s->layers; l++) {
        for (int k = 0; k < 4; k++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, H, H, 1.0f, d->x, H, d->w_h, H,
                        0.0f, d->y, H);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, F, H, 1.0f, d->x, H, d->w_f, H,
                    0.0f, d->f, F);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, H, F, 1.0f, d->f, F, d->w_f, F,
                    0.0f, d->y, H);
    }
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    const char *shape_name = "bge-small";
    uint32_t threads = 2;
    unsigned reps = 5;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(argv[i], "--shape") == 0 && v)
            shape_name = argv[++i];
        else if (strcmp(argv[i], "--threads") == 0 && v && atoi(v) > 0 && atoi(v) <= 256)
            threads = (uint32_t)atoi(argv[++i]);
        else if (strcmp(argv[i], "--reps") == 0 && v && atoi(v) > 0 && atoi(v) <= 1000)
            reps = (unsigned)atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: tw-bench-encode [--shape bge-small|bge-base] [--threads N] "
                            "[--reps N]\n");
            return 2;
        }
    }
    const shape *s = NULL;
    for (size_t i = 0; i < sizeof g_shapes / sizeof g_shapes[0]; i++)
        if (strcmp(g_shapes[i].name, shape_name) == 0)
            s = &g_shapes[i];
    if (!s) {
        fprintf(stderr, "tw-bench-encode: unknown shape %s\n", shape_name);
        return 2;
    }
    tw_log_set_level(TW_LOG_WARN);
    tw_hw_info hw;
    tw_err err;
    tw_hw_detect(&hw, &err);
    printf("tw-bench-encode\nmachine: %s (family %u, model %u), %u CPUs, kernels %s\n",
           hw.cpu_model, hw.cpu_family, hw.cpu_model_number, hw.cpus_online, hw.isa);
    char dir[] = "/tmp/tw-bench-encode.XXXXXX";
    if (!mkdtemp(dir) || write_checkpoint(s, dir) != 0) {
        fprintf(stderr, "tw-bench-encode: cannot write the checkpoint\n");
        return 1;
    }
    tw_model *m;
    tw_pool *pool;
    if (tw_model_load(dir, NULL, &m, &err) != TW_OK ||
        tw_pool_create((int)threads, &pool, &err) != TW_OK) {
        fprintf(stderr, "tw-bench-encode: %s\n", err.msg);
        return 1;
    }
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    const size_t H = s->hidden, maxn = 512;
    dense d = {malloc(H * H * 4), malloc(H * s->ffn * 4), calloc(maxn * H, 4), malloc(maxn * H * 4),
               malloc(maxn * s->ffn * 4)};
    for (size_t i = 0; i < H * H; i++)
        d.w_h[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    for (size_t i = 0; i < H * s->ffn; i++)
        d.w_f[i] = (float)((i * 2246822519u) % 1000) / 1000.0f - 0.5f;
    float *out = malloc(maxn * H * sizeof *out);
    uint32_t *ids = malloc(maxn * sizeof *ids);
    for (size_t i = 0; i < maxn; i++)
        ids[i] = (uint32_t)(101 + i * 7919) % s->vocab;
    printf("shape %s: hidden %u, %u layers, %u heads, FFN %u; f32 weights; %u threads\n", s->name,
           s->hidden, s->layers, s->heads, s->ffn, threads);
    printf("%8s %12s %12s %12s %10s\n", "tokens", "encode ms", "tokens/s", "sgemm ms", "ratio");
    static const int lens[] = {16, 128, 512};
    double *te = malloc(reps * sizeof *te), *tb = malloc(reps * sizeof *tb);
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        const int n = lens[li];
        for (unsigned r = 0; r < reps; r++) {
            openblas_set_num_threads(1); /* as the pool runs it */
            double t0 = bench_now();
            if (tw_model_encode(m, pool, ids, (size_t)n, out, &err) != TW_OK) {
                fprintf(stderr, "tw-bench-encode: %s\n", err.msg);
                return 1;
            }
            te[r] = bench_now() - t0;
            openblas_set_num_threads((int)threads);
            t0 = bench_now();
            dense_products(s, &d, n);
            tb[r] = bench_now() - t0;
        }
        qsort(te, reps, sizeof *te, cmp);
        qsort(tb, reps, sizeof *tb, cmp);
        const double e_ms = te[reps / 2] * 1e3, b_ms = tb[reps / 2] * 1e3;
        printf("%8d %12.2f %12.0f %12.2f %9.2fx\n", n, e_ms, n / te[reps / 2], b_ms, e_ms / b_ms);
        char name[64];
        snprintf(name, sizeof name, "encode_%d_tokens_per_s", n);
        bench_row("encode", name, s->name, n / te[reps / 2], "tok/s", n / tb[reps / 2],
                  "sgemm_dense_products", NULL);
    }
    /* many short inputs, as an embedding request of sentences brings them:
     * one pass over the weights for all of them against one pass each */
    enum { SHORT = 16, INPUTS = 16 };
    const uint32_t *toks[INPUTS];
    size_t short_n[INPUTS];
    float *outs[INPUTS];
    float *many = malloc((size_t)INPUTS * SHORT * H * sizeof *many);
    for (size_t i = 0; i < INPUTS; i++) {
        toks[i] = ids + i * 7 % (maxn - SHORT);
        short_n[i] = SHORT;
        outs[i] = many + i * SHORT * H;
    }
    for (unsigned r = 0; r < reps; r++) {
        double t0 = bench_now();
        if (tw_model_encode_batch(m, pool, INPUTS, toks, short_n, outs, &err) != TW_OK) {
            fprintf(stderr, "tw-bench-encode: %s\n", err.msg);
            return 1;
        }
        te[r] = bench_now() - t0;
        t0 = bench_now();
        for (size_t i = 0; i < INPUTS; i++)
            if (tw_model_encode(m, pool, toks[i], SHORT, outs[i], &err) != TW_OK) {
                fprintf(stderr, "tw-bench-encode: %s\n", err.msg);
                return 1;
            }
        tb[r] = bench_now() - t0;
    }
    qsort(te, reps, sizeof *te, cmp);
    qsort(tb, reps, sizeof *tb, cmp);
    printf("%d inputs of %d tokens: %.2f ms in one pass, %.2f ms one by one: %.2fx\n", INPUTS,
           SHORT, te[reps / 2] * 1e3, tb[reps / 2] * 1e3, tb[reps / 2] / te[reps / 2]);
    bench_row("encode", "encode_16x16_batched_tokens_per_s", s->name, INPUTS * SHORT / te[reps / 2],
              "tok/s", INPUTS * SHORT / tb[reps / 2], "one_input_at_a_time", NULL);
    free(many);
    free(te);
    free(tb);
    free(out);
    free(ids);
    free(d.w_h);
    free(d.w_f);
    free(d.x);
    free(d.y);
    free(d.f);
    tw_pool_destroy(pool);
    tw_model_free(m);
    return system(cmd) == 0 ? 0 : 1;
}
