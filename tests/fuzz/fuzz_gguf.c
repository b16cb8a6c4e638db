/* Opens hostile bytes as a GGUF file, reads every key, array element and
 * tensor the reader hands out, then derives the Hugging Face config, the
 * model config and the tokenizer from it, as the loader does. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/config.h"
#include "tw/gguf.h"
#include "tw/gguf_arch.h"
#include "tw/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint64_t sink;

static void walk_value(const tw_gguf_value *v, int depth)
{
    if (!v || depth > TW_GGUF_MAX_DEPTH + 1)
        return;
    uint64_t u;
    int64_t i;
    double d;
    bool b;
    size_t len;
    sink += tw_gguf_value_u64(v, &u) ? u : 0;
    sink += tw_gguf_value_i64(v, &i) ? (uint64_t)i : 0;
    sink += tw_gguf_value_f64(v, &d) ? (uint64_t)(d == d) : 0;
    sink += tw_gguf_value_bool(v, &b) ? b : 0;
    const char *s = tw_gguf_value_str(v, &len);
    if (s)
        sink += (uint8_t)s[len]; /* the terminator must be there */
    if (tw_gguf_value_type(v) != TW_GGUF_ARRAY)
        return;
    uint64_t n = tw_gguf_array_len(v);
    const void *raw = tw_gguf_array_data(v);
    sink += raw != NULL;
    for (uint64_t k = 0; k < n && k < 4096; k++) {
        float f;
        sink += tw_gguf_array_u64(v, k, &u);
        sink += tw_gguf_array_i64(v, k, &i);
        sink += tw_gguf_array_f64(v, k, &d);
        sink += tw_gguf_array_f32(v, k, &f);
        s = tw_gguf_array_str(v, k, &len);
        if (s)
            sink += (uint8_t)s[len];
        walk_value(tw_gguf_array_elem(v, k), depth + 1);
    }
    /* one past the end must be refused, not read */
    sink += tw_gguf_array_u64(v, n, &u);
    sink += tw_gguf_array_str(v, n, &len) != NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A private copy of exactly size bytes, so that ASan sees any read past
     * the end of the "file". */
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    tw_gguf *g = NULL;
    tw_err err = {0};
    if (tw_gguf_open_memory(buf, size, &g, &err) != TW_OK) {
        free(buf);
        return 0;
    }
    sink += tw_gguf_version(g) + tw_gguf_alignment(g) + tw_gguf_data_offset(g);
    int64_t nk = tw_gguf_key_count(g);
    for (int64_t k = 0; k < nk; k++) {
        const char *name = tw_gguf_key_name(g, k);
        if (name)
            sink += tw_gguf_find_key(g, name) >= 0;
        walk_value(tw_gguf_key_value(g, k), 0);
    }
    sink += tw_gguf_key_name(g, nk) != NULL;
    int64_t nt = tw_gguf_tensor_count(g);
    for (int64_t k = 0; k < nt; k++) {
        const tw_gguf_tensor *t = tw_gguf_tensor_at(g, k);
        if (!t)
            continue;
        sink += tw_gguf_find_tensor(g, t->name) != NULL;
        if (t->data && t->nbytes) {
            const uint8_t *p = t->data;
            sink += p[0] + p[t->nbytes - 1];
        }
    }
    json_t *cfg = NULL;
    if (tw_gguf_to_hf_config(g, &cfg, &err) == TW_OK) {
        char *text = json_dumps(cfg, JSON_COMPACT);
        free(text);
        tw_mconfig *mc = malloc(sizeof *mc);
        if (mc) {
            (void)tw_mconfig_parse(cfg, mc, &err);
            free(mc);
        }
        json_decref(cfg);
    }
    tw_tokenizer *tok = NULL;
    if (tw_tokenizer_from_gguf(g, &tok, &err) == TW_OK) {
        uint32_t ids[64];
        size_t n = 0;
        static const char text[] = "Hello world <|im_start|> 123 \xe2\x96\x81\xc3";
        if (tw_tokenizer_encode(tok, text, sizeof text - 1, TW_ENCODE_ADD_SPECIAL |
                                TW_ENCODE_PARSE_SPECIAL, ids, 64, &n, &err) == TW_OK) {
            char out[512];
            size_t on = 0;
            (void)tw_tokenizer_decode(tok, ids, n, 0, out, sizeof out, &on, &err);
        }
        tw_tokenizer_free(tok);
    }
    tw_gguf_close(g);
    free(buf);
    return 0;
}
