/* Encodes hostile bytes with real tokenizers (GPT-2 byte-level BPE and
 * Llama SentencePiece, loaded once from the reference data), decodes the
 * result whole and through the streaming detokenizer, and checks that both
 * decodings agree. The input is also read as raw token ids, some of them
 * out of range, to drive the decoders directly. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "tw/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define N_TOK 2
static tw_tokenizer *g_tok[N_TOK];

static void load_once(void)
{
    static int done;
    if (done)
        return;
    done = 1;
    static const char *const files[N_TOK] = {"vocab/ggml-vocab-gpt-2.gguf",
                                             "vocab/ggml-vocab-llama-spm.gguf"};
    for (int i = 0; i < N_TOK; i++) {
        char path[4096];
        tw_err err = {0};
        if (tw_tokenizer_load_gguf(fuzz_shared_path(path, sizeof path, files[i]), &g_tok[i],
                                   &err) != TW_OK) {
            fprintf(stderr, "fuzz_tokenize: cannot load %s: %s\n", path, err.msg);
            abort();
        }
    }
}

/* Decodes ids whole and streamed; the two must be byte-identical. */
static void decode_both(const tw_tokenizer *tok, const uint32_t *ids, size_t n, unsigned flags)
{
    tw_err err = {0};
    size_t need = 0;
    tw_status st = tw_tokenizer_decode(tok, ids, n, flags, NULL, 0, &need, &err);
    if (st != TW_OK && st != TW_RESOURCE_EXHAUSTED)
        return; /* an id out of range */
    char *whole = malloc(need + 1);
    if (!whole)
        return;
    size_t got = 0;
    if (tw_tokenizer_decode(tok, ids, n, flags, whole, need, &got, &err) != TW_OK ||
        got != need)
        abort();
    tw_detok *d = NULL;
    if (tw_detok_new(tok, flags, &d, &err) != TW_OK) {
        free(whole);
        return;
    }
    char *streamed = malloc(need + 64);
    size_t sn = 0;
    for (size_t i = 0; i < n && streamed; i++) {
        const char *t;
        size_t tl;
        if (tw_detok_feed(d, ids[i], &t, &tl, &err) != TW_OK)
            abort();
        if (sn + tl > need)
            abort();
        memcpy(streamed + sn, t, tl);
        sn += tl;
        if (tw_detok_pending(d) > 3)
            abort();
    }
    if (streamed) {
        const char *t;
        size_t tl;
        tw_detok_flush(d, &t, &tl);
        if (sn + tl != need || memcmp(streamed, whole, sn) || memcmp(whole + sn, t, tl))
            abort();
    }
    free(streamed);
    tw_detok_free(d);
    free(whole);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    load_once();
    if (size < 1 || size > 4096)
        return 0;
    unsigned sel = data[0];
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    const tw_tokenizer *tok = g_tok[sel & 1];
    unsigned eflags = (sel >> 1) & 3;
    unsigned dflags = (sel >> 3) & 3;
    tw_err err = {0};

    size_t need = 0;
    tw_status st = tw_tokenizer_encode(tok, text, len, eflags, NULL, 0, &need, &err);
    if (st == TW_OK || st == TW_RESOURCE_EXHAUSTED) {
        uint32_t *ids = malloc((need ? need : 1) * sizeof *ids);
        size_t n = 0;
        if (ids && tw_tokenizer_encode(tok, text, len, eflags, ids, need, &n, &err) == TW_OK) {
            if (n != need)
                abort();
            decode_both(tok, ids, n, dflags);
        }
        free(ids);
    }

    /* the input as raw ids, a few just past the vocabulary */
    uint32_t vocab = tw_tokenizer_vocab_size(tok);
    size_t nids = len / 2;
    uint32_t *raw = malloc((nids ? nids : 1) * sizeof *raw);
    if (!raw)
        return 0;
    for (size_t i = 0; i < nids; i++) {
        uint32_t v = (uint32_t)(uint8_t)text[2 * i] | (uint32_t)(uint8_t)text[2 * i + 1] << 8;
        raw[i] = v % (vocab + 2);
    }
    decode_both(tok, raw, nids, dflags);
    free(raw);
    return 0;
}
