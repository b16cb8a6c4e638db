/* Compiles a hostile schema, then reads a hostile document through the
 * matcher: the accepted part of it, when complete, must be what a strict
 * parser reads; a state the matcher reached must have a way on (a byte it
 * takes, or completion), since constrained sampling relies on that; and
 * the vocabulary mask of the GPT-2 vocabulary must agree with feeding each
 * token's bytes. Input: schema, a NUL byte, document (no NUL: any object). */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tw/json_mask.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static tw_tokenizer *g_tok;
static tw_json_vocab *g_vocab;
static tw_json_masker *g_mask;
static uint8_t *g_allowed;

static void load_vocab(void)
{
    static int tried;
    if (tried++)
        return;
    tw_err err;
    if (tw_tokenizer_load_gguf(TW_FUZZ_SHARED_DIR "/vocab/ggml-vocab-gpt-2.gguf", &g_tok, &err) !=
            TW_OK ||
        tw_json_vocab_build(g_tok, NULL, 0, &g_vocab, &err) != TW_OK ||
        tw_json_masker_create(g_vocab, &g_mask, &err) != TW_OK)
        return;
    g_allowed = malloc(tw_tokenizer_vocab_size(g_tok));
}

/* The mask against feeding every token. */
static void check_mask(const tw_json_state *s)
{
    if (!g_allowed)
        return;
    const uint32_t n = tw_tokenizer_vocab_size(g_tok);
    tw_json_mask_allowed(g_mask, s, NULL, 0, g_allowed, n);
    tw_json_state t;
    for (uint32_t id = 0; id < n; id++) {
        size_t len;
        const char *b = tw_tokenizer_token_bytes(g_tok, id, &len);
        bool want = false;
        if (tw_json_vocab_has(g_tok, id, NULL, 0)) {
            tw_json_state_copy(&t, s);
            want = tw_json_state_feed(&t, b, len);
        }
        if (want != (g_allowed[id] != 0))
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    load_vocab();
    const uint8_t *nul = memchr(data, 0, size);
    const char *schema = nul ? (const char *)data : NULL;
    size_t schema_len = nul ? (size_t)(nul - data) : 0;
    const char *doc = nul ? (const char *)nul + 1 : (const char *)data;
    size_t doc_len = nul ? size - schema_len - 1 : size;
    tw_json_grammar *g;
    tw_err err;
    if (tw_json_grammar_compile(schema, schema_len, &g, &err) != TW_OK)
        return 0;
    tw_json_state s, t;
    tw_json_state_init(&s, g);
    size_t taken = 0;
    while (taken < doc_len) {
        tw_json_state_copy(&t, &s);
        if (!tw_json_state_feed_byte(&t, (unsigned char)doc[taken]))
            break;
        tw_json_state_copy(&s, &t);
        taken++;
    }
    if (size % 8 == 0) /* the whole vocabulary is slow to feed */
        check_mask(&s);
    bool way_on = tw_json_state_complete(&s);
    for (int c = 0; c < 256 && !way_on; c++) {
        tw_json_state_copy(&t, &s);
        way_on = tw_json_state_feed_byte(&t, (unsigned char)c);
    }
    if (!way_on)
        abort();
    if (tw_json_state_complete(&s)) {
        json_t *v = json_loadb(doc, taken, JSON_DECODE_ANY, NULL);
        if (!v)
            abort();
        json_decref(v);
    }
    tw_json_grammar_free(g);
    return 0;
}
