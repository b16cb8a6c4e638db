/* tokenizer.json (+ tokenizer_config.json) -> tokenizer.ggml.* metadata, the
 * way llama.cpp's converter writes a byte-level BPE vocabulary; WordPiece
 * (BERT) vocabularies are written by vocab_wordpiece.c. */
#include "convert.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static json_t *load_json(const char *dir, const char *name, bool *present, tw_err *err)
{
    char path[PATH_MAX];
    struct stat sb;
    *present = false;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (stat(path, &sb) != 0)
        return NULL;
    *present = true;
    json_error_t je;
    json_t *j = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!j)
        tw_errorf(err, TW_INVALID_ARGUMENT, "%s: %s (line %d)", path, je.text, je.line);
    return j;
}

bool twc_looks_special(const char *s)
{
    size_t n = strlen(s);
    return (n >= 4 && strncmp(s, "<|", 2) == 0 && strcmp(s + n - 2, "|>") == 0) ||
           strcmp(s, "<pad>") == 0 || strcmp(s, "<mask>") == 0;
}

/* Which llama.cpp pre-tokenizer a Split regex corresponds to. */
static const char *guess_pre(const json_t *tok)
{
    char *dump = json_dumps(json_object_get(tok, "pre_tokenizer"), JSON_COMPACT);
    const char *pre = "default";
    if (dump) {
        if (strstr(dump, "\\\\p{N}{1,3}") && strstr(dump, "[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+"))
            pre = "llama-bpe";
        else if (strstr(dump, "[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}|"))
            pre = "qwen2";
        else if (strstr(dump, "'s|'t|'re|'ve|'m|'ll|'d| ?\\\\p{L}+| ?\\\\p{N}+"))
            pre = "gpt-2";
        free(dump);
    }
    return pre;
}

const char *twc_special_text(const json_t *v)
{
    if (json_is_string(v))
        return json_string_value(v);
    if (json_is_object(v))
        return json_string_value(json_object_get(v, "content"));
    return NULL;
}

static tw_status add_chat_templates(const char *dir, const json_t *tcfg, tw_gguf_writer *w,
                                    tw_err *err)
{
    const json_t *ct = json_object_get(tcfg, "chat_template");
    if (json_is_string(ct))
        return tw_gguf_writer_set_str(w, "tokenizer.chat_template", json_string_value(ct), err);
    if (json_is_array(ct)) {
        size_t i;
        const json_t *e;
        json_array_foreach(ct, i, e)
        {
            const char *name = json_string_value(json_object_get(e, "name"));
            const char *tmpl = json_string_value(json_object_get(e, "template"));
            if (!name || !tmpl)
                continue;
            char key[256];
            if (strcmp(name, "default") == 0)
                snprintf(key, sizeof key, "tokenizer.chat_template");
            else
                snprintf(key, sizeof key, "tokenizer.chat_template.%s", name);
            tw_status st = tw_gguf_writer_set_str(w, key, tmpl, err);
            if (st)
                return st;
        }
        return TW_OK;
    }
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/chat_template.jinja", dir);
    FILE *f = fopen(path, "rb");
    if (!f)
        return TW_OK;
    char *text = NULL;
    size_t len = 0, cap = 0;
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (len + n + 1 > cap) {
            cap = (len + n + 1) * 2;
            char *t = realloc(text, cap);
            if (!t) {
                free(text);
                fclose(f);
                return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
            }
            text = t;
        }
        memcpy(text + len, chunk, n);
        len += n;
    }
    fclose(f);
    tw_status st = text ? tw_gguf_writer_set_strn(w, "tokenizer.chat_template", text, len, err)
                        : TW_OK;
    free(text);
    return st;
}

tw_status twc_write_vocab(const char *dir, const json_t *config, uint64_t vocab_size,
                          const char *pre_override, tw_gguf_writer *w, bool *written, tw_err *err)
{
    *written = false;
    bool present, cfg_present;
    json_t *tok = load_json(dir, "tokenizer.json", &present, err);
    if (!present)
        return TW_OK;
    if (!tok)
        return TW_INVALID_ARGUMENT;
    json_t *tcfg = load_json(dir, "tokenizer_config.json", &cfg_present, err);
    if (cfg_present && !tcfg) {
        json_decref(tok);
        return TW_INVALID_ARGUMENT;
    }
    tw_status st = TW_OK;
    char **tokens = NULL;
    int32_t *types = NULL;
    tw_gguf_warr *merges = NULL;
    const json_t *model = json_object_get(tok, "model");
    const json_t *vocab = json_object_get(model, "vocab");
    const char *mtype = json_string_value(json_object_get(model, "type"));
    if (mtype && strcmp(mtype, "WordPiece") == 0) {
        st = twc_write_vocab_wordpiece(dir, tok, tcfg, config, vocab_size, pre_override, w, err);
        *written = st == TW_OK;
        goto done;
    }
    if (!mtype || strcmp(mtype, "BPE") != 0 || !json_is_object(vocab)) {
        st = tw_errorf(err, TW_UNIMPLEMENTED,
                       "%s/tokenizer.json: only byte-level BPE and WordPiece vocabularies are "
                       "converted (model type '%s')",
                       dir, mtype ? mtype : "?");
        goto done;
    }
    /* the table is sized by the model's vocabulary, padded like llama.cpp */
    const json_t *added = json_object_get(tok, "added_tokens");
    uint64_t n = vocab_size;
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)vocab, k, v)
    {
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            (uint64_t)json_integer_value(v) >= n) {
            st = tw_errorf(err, TW_INVALID_ARGUMENT,
                           "%s/tokenizer.json: token '%s' has id %lld outside the model's "
                           "vocabulary of %llu",
                           dir, k, (long long)json_integer_value(v), (unsigned long long)n);
            goto done;
        }
    }
    tokens = calloc(n ? n : 1, sizeof *tokens);
    types = calloc(n ? n : 1, sizeof *types);
    if (!tokens || !types) {
        st = tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
        goto done;
    }
    json_object_foreach((json_t *)vocab, k, v)
    {
        uint64_t id = (uint64_t)json_integer_value(v);
        tokens[id] = (char *)k;
        types[id] = TWC_TOK_NORMAL;
    }
    size_t i;
    const json_t *a;
    json_array_foreach(added, i, a)
    {
        const json_t *idv = json_object_get(a, "id");
        const char *content = json_string_value(json_object_get(a, "content"));
        if (!json_is_integer(idv) || !content || json_integer_value(idv) < 0 ||
            (uint64_t)json_integer_value(idv) >= n) {
            st = tw_errorf(err, TW_INVALID_ARGUMENT,
                           "%s/tokenizer.json: added token %zu has a bad id or content", dir, i);
            goto done;
        }
        uint64_t id = (uint64_t)json_integer_value(idv);
        tokens[id] = (char *)content;
        types[id] = json_is_true(json_object_get(a, "special")) || twc_looks_special(content)
                        ? TWC_TOK_CONTROL
                        : TWC_TOK_USER_DEFINED;
    }
    char pad[32];
    tw_gguf_warr *tok_arr;
    if ((st = tw_gguf_warr_new(TW_GGUF_STRING, &tok_arr, err)))
        goto done;
    for (uint64_t id = 0; id < n && !st; id++) {
        const char *s = tokens[id];
        if (!s) {
            snprintf(pad, sizeof pad, "[PAD%llu]", (unsigned long long)id);
            s = pad;
            types[id] = TWC_TOK_UNUSED;
        }
        st = tw_gguf_warr_push_str(tok_arr, s, strlen(s), err);
    }
    if (st) {
        tw_gguf_warr_free(tok_arr);
        goto done;
    }
    if ((st = tw_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2", err)) ||
        (st = tw_gguf_writer_set_str(w, "tokenizer.ggml.pre",
                                     pre_override ? pre_override : guess_pre(tok), err)) ||
        (st = tw_gguf_writer_set_arr(w, "tokenizer.ggml.tokens", tok_arr, err)) ||
        (st = tw_gguf_writer_set_arr_data(w, "tokenizer.ggml.token_type", TW_GGUF_I32, types, n,
                                          err)))
        goto done;

    if ((st = tw_gguf_warr_new(TW_GGUF_STRING, &merges, err)))
        goto done;
    const json_t *ml = json_object_get(model, "merges");
    const json_t *m;
    json_array_foreach(ml, i, m)
    {
        char buf[1024];
        const char *s = json_string_value(m);
        if (!s && json_is_array(m) && json_array_size(m) == 2 &&
            json_is_string(json_array_get(m, 0)) && json_is_string(json_array_get(m, 1))) {
            int len = snprintf(buf, sizeof buf, "%s %s", json_string_value(json_array_get(m, 0)),
                               json_string_value(json_array_get(m, 1)));
            s = len > 0 && (size_t)len < sizeof buf ? buf : NULL;
        }
        if (!s) {
            st = tw_errorf(err, TW_INVALID_ARGUMENT, "%s/tokenizer.json: merge %zu is malformed",
                           dir, i);
            goto done;
        }
        if ((st = tw_gguf_warr_push_str(merges, s, strlen(s), err)))
            goto done;
    }
    st = tw_gguf_writer_set_arr(w, "tokenizer.ggml.merges", merges, err);
    merges = NULL;
    if (st)
        goto done;

    /* special token ids: tokenizer_config names them, config.json numbers them */
    static const struct {
        const char *cfg, *id_key, *gguf;
    } specials[] = {
        {"bos_token", "bos_token_id", "tokenizer.ggml.bos_token_id"},
        {"eos_token", "eos_token_id", "tokenizer.ggml.eos_token_id"},
        {"unk_token", NULL, "tokenizer.ggml.unknown_token_id"},
        {"pad_token", "pad_token_id", "tokenizer.ggml.padding_token_id"},
    };
    for (size_t s = 0; s < sizeof specials / sizeof specials[0] && !st; s++) {
        const char *text = twc_special_text(json_object_get(tcfg, specials[s].cfg));
        int64_t id = -1;
        for (uint64_t t = 0; text && t < n; t++)
            if (tokens[t] && strcmp(tokens[t], text) == 0) {
                id = (int64_t)t;
                break;
            }
        const json_t *cid = specials[s].id_key ? json_object_get(config, specials[s].id_key) : NULL;
        if (json_is_array(cid))
            cid = json_array_get(cid, 0);
        if (id < 0 && json_is_integer(cid))
            id = json_integer_value(cid);
        if (id >= 0 && (uint64_t)id < n)
            st = tw_gguf_writer_set_u32(w, specials[s].gguf, (uint32_t)id, err);
    }
    if (st)
        goto done;
    const json_t *ab = json_object_get(tcfg, "add_bos_token");
    const json_t *ae = json_object_get(tcfg, "add_eos_token");
    if (json_is_boolean(ab) &&
        (st = tw_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", json_is_true(ab), err)))
        goto done;
    if (json_is_boolean(ae) &&
        (st = tw_gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token", json_is_true(ae), err)))
        goto done;
    if ((st = add_chat_templates(dir, tcfg, w, err)))
        goto done;
    *written = true;
done:
    tw_gguf_warr_free(merges);
    free(tokens);
    free(types);
    json_decref(tok);
    json_decref(tcfg);
    return st;
}
