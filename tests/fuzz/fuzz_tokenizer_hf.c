/* Builds a tokenizer from hostile tokenizer.json and tokenizer_config.json
 * text (the input holds both, split at a marker) and, when it loads, encodes
 * and decodes a fixed text and the input itself with it. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "tw/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void roundtrip(const tw_tokenizer *tok, const char *text, size_t len)
{
    tw_err err = {0};
    uint32_t ids[512];
    size_t n = 0;
    if (tw_tokenizer_encode(tok, text, len, TW_ENCODE_ADD_SPECIAL | TW_ENCODE_PARSE_SPECIAL, ids,
                            512, &n, &err) != TW_OK)
        return;
    char out[8192];
    size_t on = 0;
    (void)tw_tokenizer_decode(tok, ids, n, 0, out, sizeof out, &on, &err);
    tw_detok *d = NULL;
    if (tw_detok_new(tok, TW_DECODE_SKIP_SPECIAL, &d, &err) == TW_OK) {
        for (size_t i = 0; i < n; i++) {
            const char *t;
            size_t tl;
            (void)tw_detok_feed(d, ids[i], &t, &tl, &err);
        }
        const char *t;
        size_t tl;
        tw_detok_flush(d, &t, &tl);
        tw_detok_free(d);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *a, *b;
    size_t al, bl;
    fuzz_split(data, size, "\n%%CONFIG%%\n", &a, &al, &b, &bl);
    /* exact-size copies so that a read past either end is caught */
    char *tj = malloc(al ? al : 1);
    char *cj = malloc(bl ? bl : 1);
    if (!tj || !cj) {
        free(tj);
        free(cj);
        return 0;
    }
    memcpy(tj, a, al);
    memcpy(cj, b, bl);
    tw_tokenizer *tok = NULL;
    tw_err err = {0};
    if (tw_tokenizer_from_hf_json(tj, al, bl ? cj : NULL, bl, &tok, &err) == TW_OK) {
        static const char fixed[] = "Hello, world! <s> 12345 \xe4\xbd\xa0\xe5\xa5\xbd  \t\n\xff";
        roundtrip(tok, fixed, sizeof fixed - 1);
        roundtrip(tok, (const char *)data, size < 2048 ? size : 2048);
        uint32_t v = tw_tokenizer_vocab_size(tok);
        size_t len;
        (void)tw_tokenizer_token_bytes(tok, v, &len);
        (void)tw_tokenizer_token_text(tok, v);
        (void)tw_tokenizer_chat_template(tok);
        tw_tokenizer_free(tok);
    }
    free(tj);
    free(cj);
    return 0;
}
