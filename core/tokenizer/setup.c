/* The steps every tokenizer source finishes with (byte tables, decoded
 * bytes, added-token tries, special ids), the accessors and freeing. */
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"

tw_tokenizer *tok_new(void)
{
    tw_tokenizer *tok = calloc(1, sizeof *tok);
    if (!tok)
        return NULL;
    tok->bos = tok->eos = tok->eot = tok->eom = TW_TOKEN_NONE;
    tok->pad = tok->unk = tok->think_open = tok->think_close = TW_TOKEN_NONE;
    for (int i = 0; i < 256; i++) {
        tok->byte_char_tok[i] = -1;
        tok->byte_tok[i] = -1;
    }
    for (int i = 0; i < 256; i++)
        tok->trie_raw.root[i] = tok->trie_norm.root[i] = -1;
    tok->trie_raw.empty = tok->trie_norm.empty = true;
    return tok;
}

static void free_regex(pcre2_code *re)
{
    if (re)
        pcre2_code_free(re);
}

void tw_tokenizer_free(tw_tokenizer *tok)
{
    if (!tok)
        return;
    tok_vocab_free(&tok->vocab);
    tok_merges_free(&tok->merges);
    free(tok->added);
    free(tok->trie_raw.nodes);
    free(tok->trie_norm.nodes);
    for (size_t i = 0; i < tok->n_norm; i++) {
        free(tok->norm[i].str);
        free(tok->norm[i].str2);
        free_regex(tok->norm[i].re);
    }
    for (size_t i = 0; i < tok->n_pre; i++)
        free_regex(tok->pre[i].re);
    free(tok->eog);
    free(tok->chat_template);
    free(tok->wp_in_model);
    free(tok->wp_first);
    free(tok);
}

tw_status tok_init_byte_level(tw_tokenizer *tok, tw_err *err)
{
    for (int b = 0; b < 256; b++) {
        char u[4];
        size_t n = tok_utf8_encode(tok_byte_to_cp((uint8_t)b), u);
        uint32_t id;
        if (tok_vocab_find(&tok->vocab, u, n, &id))
            tok->byte_char_tok[b] = id;
    }
    tok->byte_level = true;
    (void)err;
    return TW_OK;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* Byte value of a "<0xXX>" text, or -1. */
static int byte_token_value(const char *s, size_t len)
{
    if (len != 6 || s[0] != '<' || s[1] != '0' || s[2] != 'x' || s[5] != '>')
        return -1;
    int hi = hexval(s[3]), lo = hexval(s[4]);
    if (hi < 0 || lo < 0)
        return -1;
    return hi * 16 + lo;
}

void tok_init_byte_tokens(tw_tokenizer *tok)
{
    static const char hex[] = "0123456789ABCDEF";
    for (int b = 0; b < 256; b++) {
        char t[6] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
        uint32_t id;
        if (tok_vocab_find(&tok->vocab, t, 6, &id))
            tok->byte_tok[b] = id;
    }
}

/* Hugging Face's ByteLevel decoder: a token whose every character is a
 * byte-level symbol becomes those bytes; any other token (an added token
 * such as "<｜end▁of▁sentence｜>") stays as its UTF-8 text. Returns false
 * when the token is not all byte-level symbols (out unchanged). */
static bool decode_byte_level(const char *s, size_t len, tok_buf *out, bool *oom)
{
    size_t start = out->len, i = 0;
    while (i < len) {
        uint32_t cp;
        size_t n = tok_utf8_decode((const uint8_t *)s + i, len - i, &cp);
        int b = n ? tok_cp_to_byte(cp) : -1;
        if (b < 0) {
            out->len = start;
            return false;
        }
        char c = (char)b;
        if (!tok_buf_append(out, &c, 1)) {
            *oom = true;
            return false;
        }
        i += n;
    }
    return true;
}

/* Appends the bytes a normal token's text stands for. */
static bool decode_normal(const tw_tokenizer *tok, const char *s, size_t len, tok_buf *out)
{
    if (tok->dec_byte_level) {
        bool oom = false;
        if (decode_byte_level(s, len, out, &oom))
            return true;
        if (oom)
            return false;
        return tok_buf_append(out, s, len);
    }
    size_t i = 0;
    while (i < len) {
        size_t n = tok_utf8_valid_len((const uint8_t *)s + i, len - i);
        if (n == 0) {
            if (!tok_buf_append(out, s + i, 1))
                return false;
            i++;
            continue;
        }
        if (tok->dec_metaspace && n == 3 && memcmp(s + i, "\xe2\x96\x81", 3) == 0) {
            if (!tok_buf_append(out, " ", 1))
                return false;
        } else if (!tok_buf_append(out, s + i, n)) {
            return false;
        }
        i += n;
    }
    return true;
}

/* Both WordPiece forms of every token; ids no entry names decode to
 * nothing, as Hugging Face drops ids it has no token for. */
static tw_status build_wordpiece_bytes(tw_tokenizer *tok, tw_err *err)
{
    tok_vocab *v = &tok->vocab;
    if (tok->dec_byte_level || tok->dec_metaspace || tok->strip_leading_space)
        return tw_errorf(err, TW_UNIMPLEMENTED,
                         "decoder WordPiece combined with ByteLevel, Metaspace or Strip");
    free(tok->wp_first);
    tok->wp_first = calloc(v->n, sizeof *tok->wp_first);
    if (!tok->wp_first)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory decoding the vocabulary");
    for (uint32_t id = 0; id < v->n; id++) {
        const char *s = v->text.p + v->tspan[id].off;
        size_t len = v->tspan[id].len;
        bool used = v->type[id] != TW_TOKEN_UNUSED;
        size_t f = v->bytes.len;
        bool ok = !used || tok_wordpiece_decoded(tok, s, len, true, &v->bytes);
        size_t b = v->bytes.len;
        ok = ok && (!used || tok_wordpiece_decoded(tok, s, len, false, &v->bytes));
        if (!ok || v->bytes.len > UINT32_MAX)
            return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory decoding the vocabulary");
        tok->wp_first[id] = (tok_span){(uint32_t)f, (uint32_t)(b - f)};
        v->bspan[id] = (tok_span){(uint32_t)b, (uint32_t)(v->bytes.len - b)};
        if (b - f > v->max_bytes)
            v->max_bytes = b - f;
        if (v->bytes.len - b > v->max_bytes)
            v->max_bytes = v->bytes.len - b;
    }
    return TW_OK;
}

tw_status tok_build_bytes(tw_tokenizer *tok, tw_err *err)
{
    tok_vocab *v = &tok->vocab;
    tok_buf_free(&v->bytes);
    v->max_bytes = 0;
    if (tok->dec_wordpiece)
        return build_wordpiece_bytes(tok, err);
    for (uint32_t id = 0; id < v->n; id++) {
        const char *s = v->text.p + v->tspan[id].off;
        size_t len = v->tspan[id].len;
        size_t start = v->bytes.len;
        bool ok;
        int byte = v->type[id] == TW_TOKEN_BYTE ? byte_token_value(s, len) : -1;
        if (byte >= 0) {
            char c = (char)byte;
            ok = tok_buf_append(&v->bytes, &c, 1);
        } else if (v->type[id] == TW_TOKEN_NORMAL || v->type[id] == TW_TOKEN_UNDEFINED ||
                   (!tok->dec_byte_level && v->type[id] == TW_TOKEN_USER_DEFINED)) {
            /* Added tokens of byte-level models keep their text (llama.cpp's
             * rule): DeepSeek's added "ü" means the letter ü, which is how
             * the encoder matched it, not the byte 0xFC its symbol maps to. */
            ok = decode_normal(tok, s, len, &v->bytes);
        } else {
            ok = tok_buf_append(&v->bytes, s, len);
        }
        if (!ok || v->bytes.len > UINT32_MAX)
            return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory decoding the vocabulary");
        v->bspan[id].off = (uint32_t)start;
        v->bspan[id].len = (uint32_t)(v->bytes.len - start);
        if (v->bspan[id].len > v->max_bytes)
            v->max_bytes = v->bspan[id].len;
    }
    return TW_OK;
}

/* ---- added-token tries ----------------------------------------------------- */

static int32_t trie_new_node(tok_trie *t, uint8_t byte)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 256;
        tok_trie_node *n = realloc(t->nodes, cap * sizeof *n);
        if (!n)
            return -1;
        t->nodes = n;
        t->cap = cap;
    }
    if (t->n >= INT32_MAX)
        return -1;
    tok_trie_node *node = &t->nodes[t->n];
    node->child = node->sibling = node->added = -1;
    node->byte = byte;
    return (int32_t)t->n++;
}

static bool trie_insert(tok_trie *t, const uint8_t *s, size_t len, int32_t added)
{
    int32_t cur = t->root[s[0]];
    if (cur < 0) {
        cur = trie_new_node(t, s[0]);
        if (cur < 0)
            return false;
        t->root[s[0]] = cur;
    }
    for (size_t i = 1; i < len; i++) {
        int32_t c = t->nodes[cur].child, prev = -1;
        while (c >= 0 && t->nodes[c].byte != s[i]) {
            prev = c;
            c = t->nodes[c].sibling;
        }
        if (c < 0) {
            c = trie_new_node(t, s[i]);
            if (c < 0)
                return false;
            if (prev < 0)
                t->nodes[cur].child = c;
            else
                t->nodes[prev].sibling = c;
        }
        cur = c;
    }
    /* Two added tokens with the same text: the first one wins. */
    if (t->nodes[cur].added < 0)
        t->nodes[cur].added = added;
    t->empty = false;
    return true;
}

tw_status tok_build_tries(tw_tokenizer *tok, tw_err *err)
{
    for (size_t i = 0; i < tok->n_added; i++) {
        uint32_t id = tok->added[i].id;
        tok_span sp = tok->vocab.tspan[id];
        if (sp.len == 0)
            continue;
        tok_trie *t = tok->added[i].normalized ? &tok->trie_norm : &tok->trie_raw;
        if (!trie_insert(t, (const uint8_t *)tok->vocab.text.p + sp.off, sp.len, (int32_t)i))
            return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory for added tokens");
    }
    return TW_OK;
}

tw_status tok_added_from_types(tw_tokenizer *tok, tw_err *err)
{
    size_t n = 0;
    for (uint32_t id = 0; id < tok->vocab.n; id++) {
        uint8_t t = tok->vocab.type[id];
        if (t == TW_TOKEN_CONTROL || t == TW_TOKEN_USER_DEFINED || t == TW_TOKEN_UNKNOWN)
            n++;
    }
    tok->added = calloc(n ? n : 1, sizeof *tok->added);
    if (!tok->added)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
    for (uint32_t id = 0; id < tok->vocab.n; id++) {
        uint8_t t = tok->vocab.type[id];
        if (t != TW_TOKEN_CONTROL && t != TW_TOKEN_USER_DEFINED && t != TW_TOKEN_UNKNOWN)
            continue;
        tok_added *a = &tok->added[tok->n_added++];
        a->id = id;
        a->special = t != TW_TOKEN_USER_DEFINED;
    }
    return TW_OK;
}

/* ---- special ids ------------------------------------------------------------- */

static uint32_t find_text(const tw_tokenizer *tok, const char *s)
{
    uint32_t id;
    return tok_vocab_find(&tok->vocab, s, strlen(s), &id) ? id : TW_TOKEN_NONE;
}

/* End-of-turn markers of the chat formats we know, most specific first:
 * a model with both <|im_end|> and <|endoftext|> ends turns with the
 * former. */
static const char *const eot_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<end_of_turn>", "<|end|>", "<|end_of_text|>", "<EOT>",
    "<\xef\xbd\x9c\x65nd\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>", "<|endoftext|>",
    "<end_of_utterance>",
};

static void eog_set(tw_tokenizer *tok, uint32_t id)
{
    if (id < tok->vocab.n)
        tok->eog[id / 8] |= (uint8_t)(1u << (id % 8));
}

tw_status tok_finish_specials(tw_tokenizer *tok, tw_err *err)
{
    uint32_t n = tok->vocab.n;
    uint32_t *ids[] = {&tok->bos, &tok->eos, &tok->eot, &tok->eom, &tok->pad, &tok->unk};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
        if (*ids[i] != TW_TOKEN_NONE && *ids[i] >= n)
            *ids[i] = TW_TOKEN_NONE;
    if (tok->eot == TW_TOKEN_NONE) {
        for (size_t i = 0; i < sizeof eot_texts / sizeof eot_texts[0]; i++) {
            uint32_t id = find_text(tok, eot_texts[i]);
            if (id != TW_TOKEN_NONE) {
                tok->eot = id;
                break;
            }
        }
    }
    if (tok->eom == TW_TOKEN_NONE)
        tok->eom = find_text(tok, "<|eom_id|>");
    tok->think_open = find_text(tok, "<think>");
    tok->think_close = find_text(tok, "</think>");

    tok->eog = calloc((size_t)n / 8 + 1, 1);
    if (!tok->eog)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
    eog_set(tok, tok->eos);
    eog_set(tok, tok->eot);
    eog_set(tok, tok->eom);
    for (size_t i = 0; i < sizeof eot_texts / sizeof eot_texts[0]; i++)
        eog_set(tok, find_text(tok, eot_texts[i]));
    eog_set(tok, find_text(tok, "<|eom_id|>"));
    return TW_OK;
}

/* ---- accessors ---------------------------------------------------------------- */

uint32_t tw_tokenizer_vocab_size(const tw_tokenizer *tok) { return tok->vocab.n; }
tw_tokenizer_kind tw_tokenizer_kind_of(const tw_tokenizer *tok) { return tok->kind; }

tw_token_type tw_tokenizer_token_type(const tw_tokenizer *tok, uint32_t id)
{
    return id < tok->vocab.n ? (tw_token_type)tok->vocab.type[id] : TW_TOKEN_UNDEFINED;
}

tw_status tw_tokenizer_lookup(const tw_tokenizer *tok, const char *text, size_t len, uint32_t *id,
                              tw_err *err)
{
    if (!text && len)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "NULL text");
    if (!tok_vocab_find(&tok->vocab, text, len, id))
        return tw_errorf(err, TW_NOT_FOUND, "no token with text \"%.*s\"", (int)(len > 64 ? 64 : len),
                         text ? text : "");
    return TW_OK;
}

size_t tw_tokenizer_max_token_bytes(const tw_tokenizer *tok) { return tok->vocab.max_bytes; }

const char *tw_tokenizer_token_text(const tw_tokenizer *tok, uint32_t id)
{
    if (id >= tok->vocab.n)
        return NULL;
    return tok->vocab.text.p + tok->vocab.tspan[id].off;
}

const char *tw_tokenizer_token_bytes(const tw_tokenizer *tok, uint32_t id, size_t *len)
{
    if (id >= tok->vocab.n) {
        *len = 0;
        return NULL;
    }
    *len = tok->vocab.bspan[id].len;
    if (*len == 0) /* the byte store is NULL when every token is empty */
        return "";
    return tok->vocab.bytes.p + tok->vocab.bspan[id].off;
}

uint32_t tw_tokenizer_bos(const tw_tokenizer *tok) { return tok->bos; }
uint32_t tw_tokenizer_eos(const tw_tokenizer *tok) { return tok->eos; }
uint32_t tw_tokenizer_eot(const tw_tokenizer *tok) { return tok->eot; }
uint32_t tw_tokenizer_eom(const tw_tokenizer *tok) { return tok->eom; }
uint32_t tw_tokenizer_pad(const tw_tokenizer *tok) { return tok->pad; }
uint32_t tw_tokenizer_unk(const tw_tokenizer *tok) { return tok->unk; }
uint32_t tw_tokenizer_think_open(const tw_tokenizer *tok) { return tok->think_open; }
uint32_t tw_tokenizer_think_close(const tw_tokenizer *tok) { return tok->think_close; }
bool tw_tokenizer_adds_bos(const tw_tokenizer *tok) { return tok->add_bos && tok->bos != TW_TOKEN_NONE; }
bool tw_tokenizer_adds_eos(const tw_tokenizer *tok) { return tok->add_eos && tok->eos != TW_TOKEN_NONE; }

bool tw_tokenizer_is_eog(const tw_tokenizer *tok, uint32_t id)
{
    return id < tok->vocab.n && (tok->eog[id / 8] >> (id % 8)) & 1;
}

const char *tw_tokenizer_chat_template(const tw_tokenizer *tok) { return tok->chat_template; }

const char *tw_tokenizer_bos_text(const tw_tokenizer *tok)
{
    return tok->bos == TW_TOKEN_NONE ? "" : tw_tokenizer_token_text(tok, tok->bos);
}

const char *tw_tokenizer_eos_text(const tw_tokenizer *tok)
{
    return tok->eos == TW_TOKEN_NONE ? "" : tw_tokenizer_token_text(tok, tok->eos);
}
