/* Compiles a hostile schema, then reads a hostile document through the
 * matcher: the accepted part of it, when complete, must be what a strict
 * parser reads; a state the matcher reached must have a way on (a byte it
 * takes, or completion), since constrained sampling relies on that (but
 * where strings are read as patterns, which may strand it); and
 * the vocabulary mask of the GPT-2 vocabulary must agree with feeding each
 * token's bytes. Input: schema, a NUL byte, document (no NUL: any object);
 * a schema that starts with a 0x01 byte is instead a list of choices, one
 * per line, and one that starts with 0x02 has its first line as the
 * grammar's tail. */
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

/* The grammar the input's schema part asks for (see the header), and
 * what a complete document must then be. */
typedef struct input_grammar {
    tw_json_grammar *g;
    char *copy; /* choices: the lines, cut in place */
    const char *choices[TW_JSON_MAX_ENUM + 1];
    size_t n_choices;
    const char *tail;
    size_t tail_len;
} input_grammar;

static bool compile(const char *schema, size_t len, input_grammar *in)
{
    tw_err err;
    memset(in, 0, sizeof *in);
    if (len > 0 && schema[0] == 0x01) {
        in->copy = strndup(schema + 1, len - 1);
        for (char *save = NULL, *line = in->copy ? strtok_r(in->copy, "\n", &save) : NULL;
             line && in->n_choices <= TW_JSON_MAX_ENUM; line = strtok_r(NULL, "\n", &save))
            in->choices[in->n_choices++] = line;
        if (in->copy && tw_json_grammar_choice(in->choices, in->n_choices, &in->g, &err) == TW_OK)
            return true;
        free(in->copy);
        return false;
    }
    if (len > 0 && schema[0] == 0x02) {
        const char *nl = memchr(schema, '\n', len);
        in->tail = schema + 1;
        in->tail_len = nl ? (size_t)(nl - in->tail) : len - 1;
        len -= 1 + in->tail_len + (nl != NULL);
        schema = nl ? nl + 1 : schema + 1 + in->tail_len;
    }
    if (tw_json_grammar_compile(schema, len, &in->g, &err) != TW_OK)
        return false;
    if (in->tail && tw_json_grammar_set_tail(in->g, in->tail, in->tail_len, &err) != TW_OK) {
        tw_json_grammar_free(in->g);
        return false;
    }
    return true;
}

/* A complete document is one of the choices, or JSON a strict parser reads
 * followed by the tail. */
static bool complete_ok(const input_grammar *in, const char *doc, size_t n)
{
    if (in->copy) {
        for (size_t i = 0; i < in->n_choices; i++)
            if (strlen(in->choices[i]) == n && memcmp(in->choices[i], doc, n) == 0)
                return true;
        return false;
    }
    if (n < in->tail_len ||
        (in->tail_len && memcmp(doc + n - in->tail_len, in->tail, in->tail_len) != 0))
        return false;
    json_t *v = json_loadb(doc, n - in->tail_len, JSON_DECODE_ANY, NULL);
    const bool parsed = v != NULL;
    json_decref(v);
    return parsed;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    load_vocab();
    const uint8_t *nul = memchr(data, 0, size);
    const char *schema = nul ? (const char *)data : NULL;
    size_t schema_len = nul ? (size_t)(nul - data) : 0;
    const char *doc = nul ? (const char *)nul + 1 : (const char *)data;
    size_t doc_len = nul ? size - schema_len - 1 : size;
    input_grammar in;
    if (!compile(schema, schema_len, &in))
        return 0;
    tw_json_grammar *g = in.g;
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
    /* a pattern, or a set of numbers, may strand the matcher (json_grammar.h) */
    bool way_on = tw_json_state_complete(&s) || tw_json_grammar_may_strand(g);
    for (int c = 0; c < 256 && !way_on; c++) {
        tw_json_state_copy(&t, &s);
        way_on = tw_json_state_feed_byte(&t, (unsigned char)c);
    }
    if (!way_on)
        abort();
    if (tw_json_state_complete(&s) && !complete_ok(&in, doc, taken))
        abort();
    tw_json_grammar_free(g);
    free(in.copy);
    return 0;
}
