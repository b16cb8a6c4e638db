/* Tokenizer from a Hugging Face tokenizer.json (+ tokenizer_config.json).
 * Every field is checked for presence and type; a component tokenwire
 * does not implement is refused by name rather than approximated. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "hf_internal.h"

#define META "\xe2\x96\x81"

static tw_status oom(tw_err *err)
{
    return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
}

tw_status tok_hf_bool(json_t *obj, const char *key, bool *out, const char *where, tw_err *err)
{
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v))
        return TW_OK;
    if (!json_is_boolean(v))
        return tw_errorf(err, TW_INVALID_ARGUMENT, "%s.%s must be a boolean", where, key);
    *out = json_is_true(v);
    return TW_OK;
}

static const char *get_type(json_t *obj, const char *where, tw_err *err, tw_status *st)
{
    json_t *t = json_is_object(obj) ? json_object_get(obj, "type") : NULL;
    if (!json_is_string(t)) {
        *st = tw_errorf(err, TW_INVALID_ARGUMENT, "%s must be an object with a string \"type\"",
                        where);
        return NULL;
    }
    *st = TW_OK;
    return json_string_value(t);
}

/* {"String": s} or {"Regex": r} -> compiled regex. */
static tw_status get_pattern(json_t *obj, const char *where, pcre2_code **re, tw_err *err)
{
    json_t *p = json_object_get(obj, "pattern");
    json_t *s = json_is_object(p) ? json_object_get(p, "String") : NULL;
    json_t *r = json_is_object(p) ? json_object_get(p, "Regex") : NULL;
    if (json_is_string(s))
        return tok_regex_literal(json_string_value(s), json_string_length(s), re, err);
    if (json_is_string(r)) {
        tw_status st = tok_regex_compile(json_string_value(r), json_string_length(r), re, err);
        return st == TW_OK ? st : tw_error_wrap(err, st, "%s.pattern", where);
    }
    return tw_errorf(err, TW_INVALID_ARGUMENT,
                     "%s.pattern must be {\"String\": ...} or {\"Regex\": ...}", where);
}

/* ---- normalizer ------------------------------------------------------------- */

static tw_status add_norm(tw_tokenizer *tok, tok_norm **out, tw_err *err)
{
    if (tok->n_norm >= TOK_MAX_STEPS)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "more than %d normalizer steps", TOK_MAX_STEPS);
    *out = &tok->norm[tok->n_norm++];
    memset(*out, 0, sizeof **out);
    return TW_OK;
}

static tw_status dup_str(json_t *v, char **out, size_t *len, const char *what, tw_err *err)
{
    if (!json_is_string(v))
        return tw_errorf(err, TW_INVALID_ARGUMENT, "%s must be a string", what);
    *len = json_string_length(v);
    *out = malloc(*len + 1);
    if (!*out)
        return oom(err);
    memcpy(*out, json_string_value(v), *len + 1);
    return TW_OK;
}

static tw_status parse_normalizer(tw_tokenizer *tok, json_t *n, int depth, tw_err *err)
{
    if (!n || json_is_null(n))
        return TW_OK;
    if (depth > 8)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "normalizer nested too deeply");
    tw_status st;
    const char *type = get_type(n, "normalizer", err, &st);
    if (!type)
        return st;
    tok_norm *nm = NULL;
    if (strcmp(type, "Sequence") == 0) {
        json_t *list = json_object_get(n, "normalizers");
        if (!json_is_array(list))
            return tw_errorf(err, TW_INVALID_ARGUMENT, "normalizer Sequence needs a \"normalizers\" array");
        for (size_t i = 0; i < json_array_size(list); i++)
            if ((st = parse_normalizer(tok, json_array_get(list, i), depth + 1, err)) != TW_OK)
                return st;
        return TW_OK;
    }
    static const struct { const char *name; tok_norm_kind kind; } forms[] = {
        {"NFC", NORM_NFC}, {"NFD", NORM_NFD}, {"NFKC", NORM_NFKC}, {"NFKD", NORM_NFKD},
        {"Lowercase", NORM_LOWERCASE},
    };
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        if (strcmp(type, forms[i].name) == 0) {
            if ((st = add_norm(tok, &nm, err)) != TW_OK)
                return st;
            nm->kind = forms[i].kind;
            return TW_OK;
        }
    }
    if (strcmp(type, "Prepend") == 0) {
        if ((st = add_norm(tok, &nm, err)) != TW_OK)
            return st;
        nm->kind = NORM_PREPEND;
        return dup_str(json_object_get(n, "prepend"), &nm->str, &nm->len, "Prepend.prepend", err);
    }
    if (strcmp(type, "Replace") == 0) {
        if ((st = add_norm(tok, &nm, err)) != TW_OK)
            return st;
        nm->kind = NORM_REPLACE;
        json_t *p = json_object_get(n, "pattern");
        json_t *s = json_is_object(p) ? json_object_get(p, "String") : NULL;
        if (json_is_string(s))
            st = dup_str(s, &nm->str, &nm->len, "Replace.pattern.String", err);
        else
            st = get_pattern(n, "normalizer Replace", &nm->re, err);
        if (st != TW_OK)
            return st;
        return dup_str(json_object_get(n, "content"), &nm->str2, &nm->len2, "Replace.content", err);
    }
    if (strcmp(type, "BertNormalizer") == 0)
        return tok_hf_bert_normalizer(tok, n, err);
    if (strcmp(type, "Strip") == 0) {
        if ((st = add_norm(tok, &nm, err)) != TW_OK)
            return st;
        nm->kind = NORM_STRIP;
        nm->left = nm->right = true;
        if ((st = tok_hf_bool(n, "strip_left", &nm->left, "Strip", err)) != TW_OK)
            return st;
        return tok_hf_bool(n, "strip_right", &nm->right, "Strip", err);
    }
    return tw_errorf(err, TW_UNIMPLEMENTED, "unsupported normalizer type \"%s\"", type);
}

/* ---- pre-tokenizer ------------------------------------------------------------ */

static tw_status add_pre(tw_tokenizer *tok, tok_pre **out, tw_err *err)
{
    if (tok->n_pre >= TOK_MAX_STEPS)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "more than %d pre-tokenizer steps",
                         TOK_MAX_STEPS);
    *out = &tok->pre[tok->n_pre++];
    memset(*out, 0, sizeof **out);
    return TW_OK;
}

static tw_status parse_behavior(json_t *n, tok_behavior *b, tw_err *err)
{
    static const struct { const char *name; tok_behavior b; } names[] = {
        {"Removed", SPLIT_REMOVED},           {"Isolated", SPLIT_ISOLATED},
        {"MergedWithPrevious", SPLIT_MERGED_PREV}, {"MergedWithNext", SPLIT_MERGED_NEXT},
        {"Contiguous", SPLIT_CONTIGUOUS},
    };
    json_t *v = json_object_get(n, "behavior");
    if (!json_is_string(v))
        return tw_errorf(err, TW_INVALID_ARGUMENT, "Split.behavior must be a string");
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcmp(json_string_value(v), names[i].name) == 0) {
            *b = names[i].b;
            return TW_OK;
        }
    }
    return tw_errorf(err, TW_INVALID_ARGUMENT, "unknown Split.behavior \"%s\"", json_string_value(v));
}

static tw_status parse_pretokenizer(tw_tokenizer *tok, json_t *n, int depth, bool *saw_byte_level,
                                    tw_err *err)
{
    if (!n || json_is_null(n))
        return TW_OK;
    if (depth > 8)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "pre_tokenizer nested too deeply");
    tw_status st;
    const char *type = get_type(n, "pre_tokenizer", err, &st);
    if (!type)
        return st;
    if (strcmp(type, "Sequence") == 0) {
        json_t *list = json_object_get(n, "pretokenizers");
        if (!json_is_array(list))
            return tw_errorf(err, TW_INVALID_ARGUMENT,
                             "pre_tokenizer Sequence needs a \"pretokenizers\" array");
        for (size_t i = 0; i < json_array_size(list); i++)
            if ((st = parse_pretokenizer(tok, json_array_get(list, i), depth + 1, saw_byte_level,
                                         err)) != TW_OK)
                return st;
        return TW_OK;
    }
    /* Byte-level symbols are formed when a piece reaches the model, so a
     * step that would run on them afterwards cannot be honoured. */
    if (*saw_byte_level)
        return tw_errorf(err, TW_UNIMPLEMENTED, "pre_tokenizer \"%s\" after ByteLevel", type);
    tok_pre *p = NULL;
    if (strcmp(type, "Split") == 0) {
        if ((st = add_pre(tok, &p, err)) != TW_OK)
            return st;
        p->kind = PRE_SPLIT;
        if ((st = parse_behavior(n, &p->behavior, err)) != TW_OK)
            return st;
        if ((st = tok_hf_bool(n, "invert", &p->invert, "Split", err)) != TW_OK)
            return st;
        return get_pattern(n, "pre_tokenizer Split", &p->re, err);
    }
    if (strcmp(type, "ByteLevel") == 0) {
        if (tok->kind == TW_TOKENIZER_WORDPIECE) /* its symbols are formed by the BPE path */
            return tw_errorf(err, TW_UNIMPLEMENTED,
                             "pre_tokenizer ByteLevel with a WordPiece model");
        bool prefix = false, use_regex = true;
        if ((st = tok_hf_bool(n, "add_prefix_space", &prefix, "ByteLevel", err)) != TW_OK ||
            (st = tok_hf_bool(n, "use_regex", &use_regex, "ByteLevel", err)) != TW_OK)
            return st;
        if (prefix) {
            if ((st = add_pre(tok, &p, err)) != TW_OK)
                return st;
            p->kind = PRE_PREFIX_SPACE;
        }
        if (use_regex && (st = tok_pre_add_split(tok, tok_re_gpt2, SPLIT_ISOLATED, false, err)) != TW_OK)
            return st;
        *saw_byte_level = true;
        return TW_OK;
    }
    if (strcmp(type, "Metaspace") == 0) {
        if ((st = add_pre(tok, &p, err)) != TW_OK)
            return st;
        p->kind = PRE_METASPACE;
        json_t *r = json_object_get(n, "replacement");
        const char *repl = json_is_string(r) ? json_string_value(r) : META;
        size_t rl = strlen(repl);
        if (rl == 0 || rl >= sizeof p->repl)
            return tw_errorf(err, TW_INVALID_ARGUMENT, "Metaspace.replacement must be one character");
        memcpy(p->repl, repl, rl);
        p->repl_len = rl;
        p->split = true;
        p->prepend = PREPEND_ALWAYS;
        bool add_prefix = true;
        if ((st = tok_hf_bool(n, "add_prefix_space", &add_prefix, "Metaspace", err)) != TW_OK ||
            (st = tok_hf_bool(n, "split", &p->split, "Metaspace", err)) != TW_OK)
            return st;
        if (!add_prefix)
            p->prepend = PREPEND_NEVER;
        json_t *scheme = json_object_get(n, "prepend_scheme");
        if (json_is_string(scheme)) {
            const char *s = json_string_value(scheme);
            if (strcmp(s, "always") == 0)
                p->prepend = PREPEND_ALWAYS;
            else if (strcmp(s, "first") == 0)
                p->prepend = PREPEND_FIRST;
            else if (strcmp(s, "never") == 0)
                p->prepend = PREPEND_NEVER;
            else
                return tw_errorf(err, TW_INVALID_ARGUMENT, "unknown Metaspace.prepend_scheme \"%s\"", s);
        }
        return TW_OK;
    }
    if (strcmp(type, "Digits") == 0) {
        bool single = false;
        if ((st = tok_hf_bool(n, "individual_digits", &single, "Digits", err)) != TW_OK)
            return st;
        return tok_pre_add_split(tok, single ? "\\p{N}" : "\\p{N}+", SPLIT_ISOLATED, false, err);
    }
    if (strcmp(type, "Whitespace") == 0)
        return tok_pre_add_split(tok, "\\w+|[^\\w\\s]+", SPLIT_REMOVED, true, err);
    /* Walked char by char: PCRE2's \s is not quite Rust's char::is_whitespace. */
    if (strcmp(type, "BertPreTokenizer") == 0 || strcmp(type, "WhitespaceSplit") == 0) {
        if ((st = add_pre(tok, &p, err)) != TW_OK)
            return st;
        p->kind = type[0] == 'B' ? PRE_BERT : PRE_WS_SPLIT;
        return TW_OK;
    }
    return tw_errorf(err, TW_UNIMPLEMENTED, "unsupported pre_tokenizer type \"%s\"", type);
}

/* ---- decoder ---------------------------------------------------------------------- */

static tw_status parse_decoder(tw_tokenizer *tok, json_t *n, int depth, tw_err *err)
{
    if (!n || json_is_null(n))
        return TW_OK;
    if (depth > 8)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "decoder nested too deeply");
    tw_status st;
    const char *type = get_type(n, "decoder", err, &st);
    if (!type)
        return st;
    if (strcmp(type, "Sequence") == 0) {
        json_t *list = json_object_get(n, "decoders");
        if (!json_is_array(list))
            return tw_errorf(err, TW_INVALID_ARGUMENT, "decoder Sequence needs a \"decoders\" array");
        for (size_t i = 0; i < json_array_size(list); i++)
            if ((st = parse_decoder(tok, json_array_get(list, i), depth + 1, err)) != TW_OK)
                return st;
        return TW_OK;
    }
    if (strcmp(type, "ByteLevel") == 0) {
        tok->dec_byte_level = true;
        return TW_OK;
    }
    if (strcmp(type, "ByteFallback") == 0 || strcmp(type, "Fuse") == 0)
        return TW_OK;
    if (strcmp(type, "WordPiece") == 0)
        return tok_hf_wordpiece_decoder(tok, n, err);
    if (strcmp(type, "Metaspace") == 0) {
        tok->dec_metaspace = true;
        bool prefix = true;
        if ((st = tok_hf_bool(n, "add_prefix_space", &prefix, "Metaspace", err)) != TW_OK)
            return st;
        json_t *scheme = json_object_get(n, "prepend_scheme");
        if (json_is_string(scheme))
            prefix = strcmp(json_string_value(scheme), "never") != 0;
        tok->strip_leading_space = prefix;
        return TW_OK;
    }
    if (strcmp(type, "Replace") == 0) {
        json_t *p = json_object_get(n, "pattern");
        json_t *s = json_is_object(p) ? json_object_get(p, "String") : NULL;
        json_t *c = json_object_get(n, "content");
        if (json_is_string(s) && json_is_string(c) && strcmp(json_string_value(s), META) == 0 &&
            strcmp(json_string_value(c), " ") == 0) {
            tok->dec_metaspace = true;
            return TW_OK;
        }
        return tw_errorf(err, TW_UNIMPLEMENTED, "decoder Replace other than U+2581 -> space");
    }
    if (strcmp(type, "Strip") == 0) {
        json_t *c = json_object_get(n, "content");
        json_t *start = json_object_get(n, "start");
        json_t *stop = json_object_get(n, "stop");
        if (!json_is_string(c) || strcmp(json_string_value(c), " ") != 0 || !json_is_integer(start) ||
            json_integer_value(start) > 1 || (stop && json_integer_value(stop) != 0))
            return tw_errorf(err, TW_UNIMPLEMENTED, "decoder Strip other than one leading space");
        tok->strip_leading_space = json_integer_value(start) == 1;
        return TW_OK;
    }
    return tw_errorf(err, TW_UNIMPLEMENTED, "unsupported decoder type \"%s\"", type);
}

/* ---- model ------------------------------------------------------------------------- */

static tw_status vocab_id(json_t *v, const char *what, const char *name, uint32_t *id, tw_err *err)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0 ||
        json_integer_value(v) >= (json_int_t)TOK_MAX_VOCAB)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "%s \"%.64s\": id must be an integer in 0..%u",
                         what, name, TOK_MAX_VOCAB - 1);
    *id = (uint32_t)json_integer_value(v);
    return TW_OK;
}

static tw_status parse_vocab(tw_tokenizer *tok, json_t *model, json_t *added, tw_err *err)
{
    json_t *vocab = json_object_get(model, "vocab");
    if (!json_is_object(vocab))
        return tw_errorf(err, TW_INVALID_ARGUMENT, "model.vocab must be an object");
    uint32_t n = 0, id = 0;
    const char *key;
    json_t *v;
    tw_status st;
    json_object_foreach(vocab, key, v) {
        if ((st = vocab_id(v, "model.vocab", key, &id, err)) != TW_OK)
            return st;
        if (id + 1 > n)
            n = id + 1;
    }
    for (size_t i = 0; i < json_array_size(added); i++) {
        json_t *a = json_array_get(added, i);
        if (!json_is_object(a))
            return tw_errorf(err, TW_INVALID_ARGUMENT, "added_tokens[%zu] must be an object", i);
        json_t *c = json_object_get(a, "content");
        if (!json_is_string(c) || json_string_length(c) == 0)
            return tw_errorf(err, TW_INVALID_ARGUMENT,
                             "added_tokens[%zu].content must be a non-empty string", i);
        if ((st = vocab_id(json_object_get(a, "id"), "added token", json_string_value(c), &id,
                           err)) != TW_OK)
            return st;
        if (id + 1 > n)
            n = id + 1;
    }
    if ((st = tok_vocab_alloc(&tok->vocab, n, false, err)) != TW_OK)
        return st;
    /* Ids no entry names stay empty and unused. */
    memset(tok->vocab.type, TW_TOKEN_UNUSED, n);
    json_object_foreach(vocab, key, v) {
        id = (uint32_t)json_integer_value(v);
        if (tok->vocab.tspan[id].len != 0)
            return tw_errorf(err, TW_INVALID_ARGUMENT, "model.vocab gives id %u to two tokens", id);
        if ((st = tok_vocab_set_text(&tok->vocab, id, key, strlen(key), err)) != TW_OK)
            return st;
        tok->vocab.type[id] = TW_TOKEN_NORMAL;
    }
    tok->added = calloc(json_array_size(added) + 1, sizeof *tok->added);
    if (!tok->added)
        return oom(err);
    for (size_t i = 0; i < json_array_size(added); i++) {
        json_t *a = json_array_get(added, i);
        json_t *c = json_object_get(a, "content");
        id = (uint32_t)json_integer_value(json_object_get(a, "id"));
        tok_added *ad = &tok->added[tok->n_added++];
        ad->id = id;
        char where[48];
        snprintf(where, sizeof where, "added_tokens[%zu]", i);
        if ((st = tok_hf_bool(a, "special", &ad->special, where, err)) != TW_OK)
            return st;
        ad->normalized = !ad->special; /* HF's default for AddedToken */
        if ((st = tok_hf_bool(a, "normalized", &ad->normalized, where, err)) != TW_OK ||
            (st = tok_hf_bool(a, "lstrip", &ad->lstrip, where, err)) != TW_OK ||
            (st = tok_hf_bool(a, "rstrip", &ad->rstrip, where, err)) != TW_OK ||
            (st = tok_hf_bool(a, "single_word", &ad->single_word, where, err)) != TW_OK)
            return st;
        tok_span sp = tok->vocab.tspan[id];
        if (sp.len != json_string_length(c) ||
            memcmp(tok->vocab.text.p + sp.off, json_string_value(c), sp.len) != 0) {
            if ((st = tok_vocab_set_text(&tok->vocab, id, json_string_value(c),
                                         json_string_length(c), err)) != TW_OK)
                return st;
        }
        tok->vocab.type[id] = ad->special ? TW_TOKEN_CONTROL : TW_TOKEN_USER_DEFINED;
    }
    if (!tok_vocab_build_map(&tok->vocab))
        return oom(err);
    return TW_OK;
}

static tw_status merge_part(const tw_tokenizer *tok, size_t i, const char *s, size_t len,
                            uint32_t *id, tw_err *err)
{
    if (!tok_vocab_find(&tok->vocab, s, len, id))
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "model.merges[%zu] names \"%.*s\", which is not in the vocabulary", i,
                         (int)(len > 64 ? 64 : len), s);
    return TW_OK;
}

static tw_status parse_merges(tw_tokenizer *tok, json_t *model, tw_err *err)
{
    json_t *merges = json_object_get(model, "merges");
    if (!merges || json_is_null(merges))
        merges = NULL;
    else if (!json_is_array(merges))
        return tw_errorf(err, TW_INVALID_ARGUMENT, "model.merges must be an array");
    size_t n = merges ? json_array_size(merges) : 0;
    if (!tok_merges_init(&tok->merges, n))
        return oom(err);
    tok_buf joined = {0};
    tw_status st = TW_OK;
    for (size_t i = 0; i < n && st == TW_OK; i++) {
        json_t *m = json_array_get(merges, i);
        const char *a, *b;
        size_t la, lb;
        if (json_is_string(m)) {
            a = json_string_value(m);
            const char *sp = strchr(a, ' ');
            if (!sp || strchr(sp + 1, ' ')) {
                st = tw_errorf(err, TW_INVALID_ARGUMENT,
                               "model.merges[%zu] \"%.64s\" is not two tokens separated by one space",
                               i, a);
                break;
            }
            la = (size_t)(sp - a);
            b = sp + 1;
            lb = strlen(b);
        } else if (json_is_array(m) && json_array_size(m) == 2 &&
                   json_is_string(json_array_get(m, 0)) && json_is_string(json_array_get(m, 1))) {
            a = json_string_value(json_array_get(m, 0));
            la = json_string_length(json_array_get(m, 0));
            b = json_string_value(json_array_get(m, 1));
            lb = json_string_length(json_array_get(m, 1));
        } else {
            st = tw_errorf(err, TW_INVALID_ARGUMENT,
                           "model.merges[%zu] must be a string \"a b\" or an array [a, b]", i);
            break;
        }
        uint32_t ia, ib, ir;
        joined.len = 0;
        if (!tok_buf_append(&joined, a, la) || !tok_buf_append(&joined, b, lb)) {
            st = oom(err);
            break;
        }
        if ((st = merge_part(tok, i, a, la, &ia, err)) != TW_OK ||
            (st = merge_part(tok, i, b, lb, &ib, err)) != TW_OK ||
            (st = merge_part(tok, i, joined.p, joined.len, &ir, err)) != TW_OK)
            break;
        if (!tok_merges_add(&tok->merges, ia, ib, (uint32_t)i, ir))
            st = oom(err);
    }
    tok_buf_free(&joined);
    return st;
}

static tw_status parse_model(tw_tokenizer *tok, json_t *root, tw_err *err)
{
    json_t *model = json_object_get(root, "model");
    if (!json_is_object(model))
        return tw_errorf(err, TW_INVALID_ARGUMENT, "tokenizer.json has no \"model\" object");
    json_t *type = json_object_get(model, "type");
    if (type && !json_is_string(type))
        return tw_errorf(err, TW_INVALID_ARGUMENT, "model.type must be a string");
    bool wordpiece = type && strcmp(json_string_value(type), "WordPiece") == 0;
    if (type && !wordpiece && strcmp(json_string_value(type), "BPE") != 0)
        return tw_errorf(err, TW_UNIMPLEMENTED,
                         "unsupported tokenizer model \"%s\" (only BPE and WordPiece)",
                         json_string_value(type));
    static const char *const unsupported[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (size_t i = 0; i < 2 && !wordpiece; i++) {
        json_t *v = json_object_get(model, unsupported[i]);
        if (json_is_string(v) && json_string_length(v) > 0)
            return tw_errorf(err, TW_UNIMPLEMENTED, "model.%s is not supported", unsupported[i]);
    }
    json_t *added = json_object_get(root, "added_tokens");
    if (added && !json_is_null(added) && !json_is_array(added))
        return tw_errorf(err, TW_INVALID_ARGUMENT, "added_tokens must be an array");
    tw_status st = parse_vocab(tok, model, json_is_array(added) ? added : NULL, err);
    if (st != TW_OK)
        return st;
    if (wordpiece)
        return tok_hf_wordpiece_model(tok, model, err);
    if ((st = parse_merges(tok, model, err)) != TW_OK)
        return st;
    if ((st = tok_hf_bool(model, "byte_fallback", &tok->byte_fallback, "model", err)) != TW_OK ||
        (st = tok_hf_bool(model, "fuse_unk", &tok->fuse_unk, "model", err)) != TW_OK ||
        (st = tok_hf_bool(model, "ignore_merges", &tok->ignore_merges, "model", err)) != TW_OK)
        return st;
    json_t *unk = json_object_get(model, "unk_token");
    if (json_is_string(unk)) {
        uint32_t id;
        if (!tok_vocab_find(&tok->vocab, json_string_value(unk), json_string_length(unk), &id))
            return tw_errorf(err, TW_INVALID_ARGUMENT, "model.unk_token \"%.64s\" is not in the vocabulary",
                             json_string_value(unk));
        tok->unk = id;
        if (tok->vocab.type[id] == TW_TOKEN_NORMAL)
            tok->vocab.type[id] = TW_TOKEN_UNKNOWN;
    } else if (unk && !json_is_null(unk)) {
        return tw_errorf(err, TW_INVALID_ARGUMENT, "model.unk_token must be a string");
    }
    if (tok->byte_fallback) {
        tok_init_byte_tokens(tok);
        for (int b = 0; b < 256; b++)
            if (tok->byte_tok[b] >= 0 && tok->vocab.type[tok->byte_tok[b]] == TW_TOKEN_NORMAL)
                tok->vocab.type[tok->byte_tok[b]] = TW_TOKEN_BYTE;
    }
    return TW_OK;
}

/* TemplateProcessing: a special token first in "single" is a BOS to add,
 * one last is an EOS to add. */
static tw_status parse_post(tw_tokenizer *tok, json_t *pp, int depth, tw_err *err)
{
    if (!pp || json_is_null(pp) || depth > 8)
        return TW_OK;
    tw_status st;
    const char *type = get_type(pp, "post_processor", err, &st);
    if (!type)
        return st;
    if (strcmp(type, "Sequence") == 0) {
        json_t *list = json_object_get(pp, "processors");
        for (size_t i = 0; i < json_array_size(list); i++)
            if ((st = parse_post(tok, json_array_get(list, i), depth + 1, err)) != TW_OK)
                return st;
        return TW_OK;
    }
    if (strcmp(type, "BertProcessing") == 0 || strcmp(type, "RobertaProcessing") == 0)
        return tok_hf_bert_post(tok, pp, type, err);
    if (strcmp(type, "TemplateProcessing") != 0)
        return TW_OK;
    json_t *single = json_object_get(pp, "single");
    size_t n = json_array_size(single);
    for (size_t k = 0; k < n; k += n - 1 ? n - 1 : 1) {
        json_t *sp = json_object_get(json_array_get(single, k), "SpecialToken");
        json_t *name = json_object_get(sp, "id");
        uint32_t id;
        if (json_is_string(name) &&
            tok_vocab_find(&tok->vocab, json_string_value(name), json_string_length(name), &id)) {
            if (k == 0) {
                tok->bos = id;
                tok->add_bos = true;
            } else {
                if (tok->eos == TW_TOKEN_NONE)
                    tok->eos = id;
                tok->add_eos = true;
            }
        }
        if (n == 1)
            break;
    }
    return TW_OK;
}

/* ---- tokenizer_config.json ------------------------------------------------------------ */

static tw_status config_token(tw_tokenizer *tok, json_t *cfg, const char *key, uint32_t *id,
                              tw_err *err)
{
    json_t *v = json_object_get(cfg, key);
    if (json_is_object(v))
        v = json_object_get(v, "content");
    if (!v || json_is_null(v))
        return TW_OK;
    if (!json_is_string(v))
        return tw_errorf(err, TW_INVALID_ARGUMENT, "tokenizer_config.json: %s must be a string", key);
    if (!tok_vocab_find(&tok->vocab, json_string_value(v), json_string_length(v), id))
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "tokenizer_config.json: %s \"%.64s\" is not in the vocabulary", key,
                         json_string_value(v));
    return TW_OK;
}

static tw_status parse_config(tw_tokenizer *tok, json_t *cfg, tw_err *err)
{
    if (!json_is_object(cfg))
        return tw_errorf(err, TW_INVALID_ARGUMENT, "tokenizer_config.json must hold an object");
    tw_status st;
    if ((st = config_token(tok, cfg, "bos_token", &tok->bos, err)) != TW_OK ||
        (st = config_token(tok, cfg, "eos_token", &tok->eos, err)) != TW_OK ||
        (st = config_token(tok, cfg, "pad_token", &tok->pad, err)) != TW_OK ||
        (st = config_token(tok, cfg, "unk_token", &tok->unk, err)) != TW_OK ||
        (st = tok_hf_bool(cfg, "add_bos_token", &tok->add_bos, "tokenizer_config", err)) != TW_OK ||
        (st = tok_hf_bool(cfg, "add_eos_token", &tok->add_eos, "tokenizer_config", err)) != TW_OK)
        return st;
    json_t *tmpl = json_object_get(cfg, "chat_template");
    const char *text = NULL;
    if (json_is_string(tmpl)) {
        text = json_string_value(tmpl);
    } else if (json_is_array(tmpl)) {
        /* Named templates: the "default" one, else the first. */
        for (size_t i = 0; i < json_array_size(tmpl); i++) {
            json_t *e = json_array_get(tmpl, i);
            json_t *name = json_object_get(e, "name");
            json_t *t = json_object_get(e, "template");
            if (!json_is_string(t))
                return tw_errorf(err, TW_INVALID_ARGUMENT,
                                 "tokenizer_config.json: chat_template[%zu].template must be a string", i);
            if (!text || (json_is_string(name) && strcmp(json_string_value(name), "default") == 0))
                text = json_string_value(t);
        }
    } else if (tmpl && !json_is_null(tmpl)) {
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "tokenizer_config.json: chat_template must be a string or a list");
    }
    if (text && !(tok->chat_template = strdup(text)))
        return oom(err);
    return TW_OK;
}

/* ---- entry points ------------------------------------------------------------------- */

static tw_status build(tw_tokenizer *tok, json_t *root, json_t *cfg, tw_err *err)
{
    if (!json_is_object(root))
        return tw_errorf(err, TW_INVALID_ARGUMENT, "tokenizer.json must hold an object");
    tok->kind = TW_TOKENIZER_BPE;
    tw_status st = parse_model(tok, root, err);
    bool saw_byte_level = false;
    if (st == TW_OK)
        st = parse_normalizer(tok, json_object_get(root, "normalizer"), 0, err);
    if (st == TW_OK)
        st = parse_pretokenizer(tok, json_object_get(root, "pre_tokenizer"), 0, &saw_byte_level, err);
    if (st == TW_OK)
        st = parse_decoder(tok, json_object_get(root, "decoder"), 0, err);
    if (st == TW_OK)
        st = parse_post(tok, json_object_get(root, "post_processor"), 0, err);
    if (st == TW_OK && saw_byte_level)
        st = tok_init_byte_level(tok, err);
    if (st == TW_OK && cfg)
        st = parse_config(tok, cfg, err);
    if (st == TW_OK)
        st = tok_build_tries(tok, err);
    if (st == TW_OK)
        st = tok_build_bytes(tok, err);
    if (st == TW_OK)
        st = tok_finish_specials(tok, err);
    return st;
}

static json_t *parse_json(const char *text, size_t len, const char *what, tw_err *err,
                          tw_status *st)
{
    json_error_t je;
    json_t *j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!j)
        *st = tw_errorf(err, TW_INVALID_ARGUMENT, "%s: line %d column %d: %s", what, je.line,
                        je.column, je.text);
    return j;
}

tw_status tw_tokenizer_from_hf_json(const char *tokenizer_json, size_t len,
                                    const char *config_json, size_t config_len,
                                    tw_tokenizer **out, tw_err *err)
{
    if (!tokenizer_json || !out)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "tw_tokenizer_from_hf_json: NULL argument");
    *out = NULL;
    tw_status st = TW_OK;
    json_t *root = parse_json(tokenizer_json, len, "tokenizer.json", err, &st);
    if (!root)
        return st;
    json_t *cfg = NULL;
    if (config_json) {
        cfg = parse_json(config_json, config_len, "tokenizer_config.json", err, &st);
        if (!cfg) {
            json_decref(root);
            return st;
        }
    }
    tw_tokenizer *tok = tok_new();
    if (!tok)
        st = oom(err);
    else
        st = build(tok, root, cfg, err);
    json_decref(root);
    json_decref(cfg);
    if (st != TW_OK) {
        tw_tokenizer_free(tok);
        return st;
    }
    *out = tok;
    return TW_OK;
}

static tw_status read_file(const char *path, char **buf, size_t *len, bool optional, tw_err *err)
{
    *buf = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (optional)
            return TW_OK;
        return tw_errorf(err, TW_NOT_FOUND, "cannot open %s", path);
    }
    tok_buf b = {0};
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (!tok_buf_append(&b, chunk, n)) {
            fclose(f);
            tok_buf_free(&b);
            return oom(err);
        }
    }
    bool bad = ferror(f);
    fclose(f);
    if (bad) {
        tok_buf_free(&b);
        return tw_errorf(err, TW_UNAVAILABLE, "error reading %s", path);
    }
    *buf = b.p ? b.p : calloc(1, 1);
    *len = b.len;
    return *buf ? TW_OK : oom(err);
}

tw_status tw_tokenizer_load_hf(const char *dir, tw_tokenizer **out, tw_err *err)
{
    if (!dir || !out)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "tw_tokenizer_load_hf: NULL argument");
    char path[4096];
    char *tj, *cj;
    size_t tl, cl;
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    tw_status st = read_file(path, &tj, &tl, false, err);
    if (st != TW_OK)
        return st;
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    st = read_file(path, &cj, &cl, true, err);
    if (st == TW_OK)
        st = tw_tokenizer_from_hf_json(tj, tl, cj, cl, out, err);
    free(tj);
    free(cj);
    if (st != TW_OK)
        return tw_error_wrap(err, st, "%s", dir);
    return TW_OK;
}
