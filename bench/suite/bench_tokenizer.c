/* tw-bench-tokenizer: encode and decode speed of a GGUF vocabulary on a
 * text file, in MB/s of input, with a plain byte scan of the same text as
 * the in-run baseline (the speed ceiling of any single pass over it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "tw/tokenizer.h"

static char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 20, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n < cap)
            break;
        char *nb = realloc(buf, cap * 2);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    fclose(f);
    *len = n;
    return buf;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: tw-bench-tokenizer VOCAB.gguf TEXT_FILE [LABEL]\n");
        return 2;
    }
    const char *label = argc > 3 ? argv[3] : argv[1];
    size_t len;
    char *text = read_all(argv[2], &len);
    if (!text || len == 0) {
        fprintf(stderr, "tw-bench-tokenizer: cannot read %s\n", argv[2]);
        free(text);
        return 1;
    }
    tw_err err;
    tw_tokenizer *tok = NULL;
    if (tw_tokenizer_load_gguf(argv[1], &tok, &err) != TW_OK) {
        fprintf(stderr, "tw-bench-tokenizer: %s\n", err.msg);
        free(text);
        return 1;
    }
    size_t cap = len + 16;
    uint32_t *ids = malloc(cap * sizeof *ids);
    char *back = malloc(len * 2 + 64);
    if (!ids || !back) {
        free(ids);
        free(back);
        free(text);
        tw_tokenizer_free(tok);
        return 1;
    }
    /* baseline: one pass that looks at every byte */
    double t0 = bench_now();
    size_t spaces = 0;
    for (int r = 0; r < 20; r++)
        for (size_t i = 0; i < len; i++)
            spaces += text[i] == ' ';
    double scan = 20.0 * (double)len / (bench_now() - t0);

    size_t n = 0;
    double best = 1e30;
    for (int r = 0; r < 3; r++) {
        t0 = bench_now();
        if (tw_tokenizer_encode(tok, text, len, 0, ids, cap, &n, &err) != TW_OK) {
            fprintf(stderr, "tw-bench-tokenizer: encode: %s\n", err.msg);
            return 1;
        }
        double dt = bench_now() - t0;
        if (dt < best)
            best = dt;
    }
    double enc = (double)len / best;
    size_t out_len = 0;
    best = 1e30;
    for (int r = 0; r < 3; r++) {
        t0 = bench_now();
        if (tw_tokenizer_decode(tok, ids, n, 0, back, len * 2 + 64, &out_len, &err) != TW_OK) {
            fprintf(stderr, "tw-bench-tokenizer: decode: %s\n", err.msg);
            return 1;
        }
        double dt = bench_now() - t0;
        if (dt < best)
            best = dt;
    }
    double dec = (double)len / best;
    char extra[256];
    snprintf(extra, sizeof extra,
             "\"bytes\":%zu,\"tokens\":%zu,\"bytes_per_token\":%.3f,\"roundtrip_exact\":%s,"
             "\"spaces\":%zu",
             len, n, n ? (double)len / (double)n : 0,
             out_len == len && memcmp(back, text, len) == 0 ? "true" : "false", spaces / 20);
    bench_row("tokenizer", "encode", label, enc / 1e6, "MB/s", scan / 1e6, "byte scan", extra);
    bench_row("tokenizer", "decode", label, dec / 1e6, "MB/s", scan / 1e6, "byte scan", extra);
    bench_progress("tokenizer %s: encode %.2f MB/s (%.0f tokens/s), decode %.1f MB/s, on %.1f MB",
                   label, enc / 1e6, enc / ((double)len / (double)(n ? n : 1)), dec / 1e6,
                   (double)len / 1e6);
    free(ids);
    free(back);
    free(text);
    tw_tokenizer_free(tok);
    return 0;
}
