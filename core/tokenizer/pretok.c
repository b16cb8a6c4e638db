/* Pre-tokenizers: regex splits (PCRE2, Unicode properties), ByteLevel's
 * prefix space, Metaspace, BERT's whitespace and punctuation split; and
 * the named regex sets of GGUF's tokenizer.ggml.pre.
 *
 * A sequence of steps runs piece by piece, as Hugging Face's Sequence does:
 * every step splits every piece the previous step produced. llama.cpp's
 * lists of regexes for a pre-tokenizer name follow the same rule. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include "tok_internal.h"

/* The patterns as the models' tokenizer.json files write them. PCRE2 runs
 * them as written (case-insensitive groups, possessive quantifiers and
 * lookaheads included), so no rewriting for a weaker regex engine. */
#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
#define RE_LLAMA3                                                                          \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}|"              \
    " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN2                                                                           \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}|"                   \
    " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN35                                                                          \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}|"           \
    " ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_SEED_CODER                                                                      \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}|"                \
    " ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_BAILING                                                                         \
    "'(?i:[sdmt]|ll|ve|re)|[^\\r\\n\\p{L}\\p{N}]?+\\p{L}+|\\p{N}|"                         \
    " ?[^\\s\\p{L}\\p{N}]++[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"
#define RE_TEKKEN                                                                          \
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|" \
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|" \
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_O200K                                                                           \
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+" \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"                                                       \
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*" \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"                                                       \
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_DEEPSEEK3_MAIN                                                                  \
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|"                                  \
    "[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*|"                  \
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* Letters of the scripts DeepSeek's tokenizer lists explicitly. */
#define RE_DEEPSEEK_LETTERS                                                                \
    "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}"          \
    "\\x{1C4}-\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}"       \
    "\\x{37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}"                \
    "\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}"  \
    "\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}"              \
    "\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}"              \
    "\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}"      \
    "\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}"     \
    "\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}"              \
    "\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}"      \
    "\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}"      \
    "\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}"                \
    "\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}"               \
    "\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}"              \
    "\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}"              \
    "\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}"          \
    "\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}"      \
    "\\x{1E900}-\\x{1E943}]+"
#define RE_DEEPSEEK_PUNCT                                                                  \
    "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+"
#define RE_CJK "[\\x{4E00}-\\x{9FA5}\\x{0800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+"
#define RE_BLOOM " ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{0964}\\x{06D4}\\x{060C})]+"

const char tok_re_gpt2[] = RE_GPT2;

typedef struct pre_preset {
    const char *names; /* '|'-separated tokenizer.ggml.pre values */
    const char *regex[6];
    bool ignore_merges;
} pre_preset;

static const pre_preset presets[] = {
    {"default", {"[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]"}, false},
    {"llama3|llama-v3|llama-bpe|falcon3|falcon-h1|pixtral|midm-2.0|lfm2", {RE_LLAMA3}, true},
    {"dbrx|smaug-bpe|chatglm-bpe|glm4", {RE_LLAMA3}, false},
    {"deepseek-llm",
     {"[\\r\\n]", RE_DEEPSEEK_LETTERS, RE_DEEPSEEK_PUNCT, "\\s+$", RE_CJK, "\\p{N}+"},
     false},
    {"deepseek-coder", {"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", RE_CJK, "\\p{N}"}, false},
    {"deepseek-v3|hunyuan-dense",
     {"\\p{N}{1,3}", "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+",
      RE_DEEPSEEK3_MAIN},
     false},
    {"falcon", {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RE_GPT2, "[0-9][0-9][0-9]"}, false},
    {"starcoder|refact|command-r|smollm|codeshell|exaone|minerva-7b", {"\\p{N}", RE_GPT2}, false},
    {"gpt-2|phi-2|jina-es|jina-de|gigachat|jina-v1-en|jina-v2-es|jina-v2-de|jina-v2-code|"
     "roberta-bpe|a.x-4.0|mellum|mpt|olmo|jais|trillion|granite-docling|exaone4",
     {RE_GPT2},
     false},
    {"qwen2|deepseek-r1-qwen|kormo|megrez|stablelm2|hunyuan|grok-2", {RE_QWEN2}, false},
    {"qwen35", {RE_QWEN35}, false},
    {"poro-chat|bloom|gpt3-finnish", {RE_BLOOM}, false},
    {"viking", {RE_BLOOM, "\\p{N}"}, false},
    {"tekken", {RE_TEKKEN}, true},
    {"gpt-4o|llama4|minimax-m2", {RE_O200K}, false},
    {"bailingmoe|bailingmoe2|llada-moe", {RE_BAILING}, false},
    {"seed-coder", {RE_SEED_CODER}, false},
};

static bool name_in_list(const char *list, const char *name)
{
    size_t n = strlen(name);
    const char *p = list;
    while (*p) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && memcmp(p, name, n) == 0)
            return true;
        if (!bar)
            break;
        p = bar + 1;
    }
    return false;
}

tw_status tok_regex_compile(const char *pattern, size_t len, pcre2_code **out, tw_err *err)
{
    int code;
    PCRE2_SIZE at;
    /* MULTILINE: Hugging Face runs these patterns with Oniguruma's Ruby
     * syntax, where ^ and $ always refer to lines. */
    uint32_t opts = PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | PCRE2_MULTILINE;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, len, opts, &code, &at, NULL);
    if (!re) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(code, msg, sizeof msg);
        return tw_errorf(err, TW_INVALID_ARGUMENT, "bad pre-tokenizer regex at offset %zu: %s",
                         (size_t)at, (const char *)msg);
    }
    /* JIT is an optimisation: without it (no JIT support) matching still works. */
    (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
    *out = re;
    return TW_OK;
}

tw_status tok_regex_literal(const char *s, size_t len, pcre2_code **out, tw_err *err)
{
    tok_buf b = {0};
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        bool ok = true;
        if (c < 0x80 && !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
                          (c >= 'A' && c <= 'Z'))) {
            char esc[8];
            int n = snprintf(esc, sizeof esc, "\\x{%x}", c);
            ok = tok_buf_append(&b, esc, (size_t)n);
        } else {
            ok = tok_buf_append(&b, &s[i], 1);
        }
        if (!ok) {
            tok_buf_free(&b);
            return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
        }
    }
    tw_status st = tok_regex_compile(b.p ? b.p : "", b.len, out, err);
    tok_buf_free(&b);
    return st;
}

tw_status tok_pre_add_split(tw_tokenizer *tok, const char *pattern, tok_behavior behavior,
                            bool invert, tw_err *err)
{
    if (tok->n_pre >= TOK_MAX_STEPS)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "more than %d pre-tokenizer steps",
                         TOK_MAX_STEPS);
    tok_pre *p = &tok->pre[tok->n_pre];
    memset(p, 0, sizeof *p);
    p->kind = PRE_SPLIT;
    p->behavior = behavior;
    p->invert = invert;
    tw_status st = tok_regex_compile(pattern, strlen(pattern), &p->re, err);
    if (st != TW_OK)
        return st;
    tok->n_pre++;
    return TW_OK;
}

tw_status tok_pre_from_name(tw_tokenizer *tok, const char *name, tw_err *err)
{
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        if (!name_in_list(presets[i].names, name))
            continue;
        for (size_t r = 0; r < 6 && presets[i].regex[r]; r++) {
            tw_status st = tok_pre_add_split(tok, presets[i].regex[r], SPLIT_ISOLATED, false, err);
            if (st != TW_OK)
                return tw_error_wrap(err, st, "pre-tokenizer '%s'", name);
        }
        tok->ignore_merges = presets[i].ignore_merges;
        return TW_OK;
    }
    return tw_errorf(err, TW_UNIMPLEMENTED, "unsupported pre-tokenizer '%s'", name);
}

/* ---- running ----------------------------------------------------------------- */

bool tok_pieces_push(tok_pieces *p, size_t off, size_t len, bool first)
{
    if (len == 0)
        return true;
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 64;
        tok_piece *v = realloc(p->v, cap * sizeof *v);
        if (!v)
            return false;
        p->v = v;
        p->cap = cap;
    }
    p->v[p->n++] = (tok_piece){off, len, first};
    return true;
}

typedef struct seg {
    size_t s, e;
    bool delim;
} seg;

/* Splits one piece by re and appends the result to out per behavior. */
static tw_status split_piece(const tok_pre *step, tok_scratch *sc, tok_piece pc, tok_pieces *out,
                             tw_err *err)
{
    const PCRE2_SPTR subj = (PCRE2_SPTR)sc->text.p + pc.off;
    size_t pos = 0, last = 0;
    /* Pending merged piece for the MERGED_* / CONTIGUOUS behaviors. */
    bool have = false, have_delim = false, have_first = false;
    size_t hs = 0, he = 0;

#define FLUSH()                                                                         \
    do {                                                                                \
        if (have && !tok_pieces_push(out, pc.off + hs, he - hs, have_first))              \
            return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");               \
        have = false;                                                                   \
    } while (0)

    for (;;) {
        size_t ms = pc.len, me = pc.len;
        bool found = false;
        while (pos <= pc.len) {
            int rc = pcre2_match(step->re, subj, pc.len, pos, 0, sc->md, NULL);
            if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
                rc = pcre2_match(step->re, subj, pc.len, pos, PCRE2_NO_JIT, sc->md, NULL);
            if (rc == PCRE2_ERROR_NOMATCH)
                break;
            if (rc < 0 && rc != 0) {
                PCRE2_UCHAR msg[160];
                pcre2_get_error_message(rc, msg, sizeof msg);
                return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "pre-tokenizer regex failed: %s",
                                 (const char *)msg);
            }
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(sc->md);
            if (ov[1] > ov[0]) {
                ms = ov[0];
                me = ov[1];
                found = true;
                break;
            }
            /* Empty match: step over one character, as find_iter does. */
            size_t step_len = tok_utf8_valid_len(subj + ov[0], pc.len - ov[0]);
            pos = ov[0] + (step_len ? step_len : 1);
        }
        seg parts[2];
        size_t np = 0;
        if (ms > last)
            parts[np++] = (seg){last, ms, false};
        if (found)
            parts[np++] = (seg){ms, me, true};
        for (size_t k = 0; k < np; k++) {
            seg g = parts[k];
            bool delim = g.delim != step->invert;
            bool first = pc.first && g.s == 0;
            switch (step->behavior) {
            case SPLIT_REMOVED:
                if (!delim && !tok_pieces_push(out, pc.off + g.s, g.e - g.s, first))
                    return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
                break;
            case SPLIT_ISOLATED:
                if (!tok_pieces_push(out, pc.off + g.s, g.e - g.s, first))
                    return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
                break;
            case SPLIT_MERGED_PREV:
                /* A delimiter joins the piece before it unless that was one too. */
                if (delim && have && !have_delim) {
                    he = g.e;
                    have_delim = true;
                } else {
                    FLUSH();
                    have = true, hs = g.s, he = g.e, have_delim = delim, have_first = first;
                }
                break;
            case SPLIT_MERGED_NEXT:
                /* A delimiter joins the piece after it unless that is one too. */
                if (have && have_delim && !delim) {
                    he = g.e;
                    have_delim = false;
                } else {
                    FLUSH();
                    have = true, hs = g.s, he = g.e, have_delim = delim, have_first = first;
                }
                break;
            case SPLIT_CONTIGUOUS:
                if (delim && have && have_delim) {
                    he = g.e;
                } else {
                    FLUSH();
                    have = true, hs = g.s, he = g.e, have_delim = delim, have_first = first;
                }
                break;
            }
        }
        if (!found)
            break;
        last = me;
        pos = me;
    }
    FLUSH();
#undef FLUSH
    return TW_OK;
}

/* Replaces spaces by the replacement, prepends it where the scheme says,
 * then optionally splits before every replacement. */
static tw_status metaspace_piece(const tok_pre *step, tok_scratch *sc, tok_piece pc,
                                 tok_pieces *out, tw_err *err)
{
    size_t count = 0;
    for (size_t i = 0; i < pc.len; i++)
        count += sc->text.p[pc.off + i] == ' ';
    size_t need = pc.len + (count + 1) * step->repl_len;
    if (!tok_buf_reserve(&sc->text, need))
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
    const char *src = sc->text.p + pc.off; /* valid: reserve already grew */
    size_t start = sc->text.len;
    char *dst = sc->text.p + start;
    size_t n = 0;
    bool starts_repl = (pc.len >= step->repl_len && memcmp(src, step->repl, step->repl_len) == 0) ||
                       (pc.len > 0 && src[0] == ' ');
    bool prepend = step->prepend == PREPEND_ALWAYS || (step->prepend == PREPEND_FIRST && pc.first);
    if (prepend && !starts_repl) {
        memcpy(dst, step->repl, step->repl_len);
        n += step->repl_len;
    }
    for (size_t i = 0; i < pc.len; i++) {
        if (src[i] == ' ') {
            memcpy(dst + n, step->repl, step->repl_len);
            n += step->repl_len;
        } else {
            dst[n++] = src[i];
        }
    }
    sc->text.len += n;
    if (!step->split) {
        if (!tok_pieces_push(out, start, n, pc.first))
            return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
        return TW_OK;
    }
    /* Split before each replacement (merged with the next piece). */
    size_t ps = 0;
    for (size_t i = step->repl_len > 0 ? 1 : n; i + step->repl_len <= n; i++) {
        if (memcmp(dst + i, step->repl, step->repl_len) == 0) {
            if (!tok_pieces_push(out, start + ps, i - ps, pc.first && ps == 0))
                return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
            ps = i;
        }
    }
    if (!tok_pieces_push(out, start + ps, n - ps, pc.first && ps == 0))
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
    return TW_OK;
}

static tw_status prefix_space_piece(tok_scratch *sc, tok_piece pc, tok_pieces *out, tw_err *err)
{
    if (pc.len > 0 && sc->text.p[pc.off] == ' ') {
        if (!tok_pieces_push(out, pc.off, pc.len, pc.first))
            return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
        return TW_OK;
    }
    if (!tok_buf_reserve(&sc->text, pc.len + 1))
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
    size_t start = sc->text.len;
    sc->text.p[start] = ' ';
    memcpy(sc->text.p + start + 1, sc->text.p + pc.off, pc.len);
    sc->text.len += pc.len + 1;
    if (!tok_pieces_push(out, start, pc.len + 1, pc.first))
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
    return TW_OK;
}

/* ASCII punctuation (Rust's is_ascii_punctuation, which takes in symbols
 * such as $ + < = > ^ ` | ~) or general category P*. */
static bool is_bert_punct(uint32_t cp)
{
    if (cp < 0x80)
        return (cp >= '!' && cp <= '/') || (cp >= ':' && cp <= '@') || (cp >= '[' && cp <= '`') ||
               (cp >= '{' && cp <= '~');
    utf8proc_category_t c = utf8proc_category((utf8proc_int32_t)cp);
    return c >= UTF8PROC_CATEGORY_PC && c <= UTF8PROC_CATEGORY_PO;
}

/* Whitespace ends a word and is dropped; with PRE_BERT every punctuation
 * character is also a piece of its own. A byte that starts no valid
 * sequence stays inside its word, where the model makes it unknown. */
static tw_status word_split_piece(const tok_pre *step, tok_scratch *sc, tok_piece pc,
                                  tok_pieces *out, tw_err *err)
{
    const uint8_t *s = (const uint8_t *)sc->text.p + pc.off;
    size_t word = 0, i = 0;
    while (i < pc.len) {
        uint32_t cp;
        size_t l = tok_utf8_decode(s + i, pc.len - i, &cp);
        bool space = l && tok_is_space(cp);
        bool punct = l && !space && step->kind == PRE_BERT && is_bert_punct(cp);
        if (l == 0)
            l = 1;
        if (space || punct) {
            if (!tok_pieces_push(out, pc.off + word, i - word, pc.first && word == 0) ||
                (punct && !tok_pieces_push(out, pc.off + i, l, pc.first && i == 0)))
                return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
            word = i + l;
        }
        i += l;
    }
    if (!tok_pieces_push(out, pc.off + word, pc.len - word, pc.first && word == 0))
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
    return TW_OK;
}

tw_status tok_pretokenize(const tw_tokenizer *tok, tok_scratch *sc, size_t off, size_t len,
                          bool first, tw_err *err)
{
    sc->pieces.n = 0;
    if (!tok_pieces_push(&sc->pieces, off, len, first))
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
    for (size_t k = 0; k < tok->n_pre; k++) {
        const tok_pre *step = &tok->pre[k];
        sc->tmp.n = 0;
        for (size_t i = 0; i < sc->pieces.n; i++) {
            tok_piece pc = sc->pieces.v[i];
            tw_status st;
            switch (step->kind) {
            case PRE_SPLIT:
                st = split_piece(step, sc, pc, &sc->tmp, err);
                break;
            case PRE_METASPACE:
                st = metaspace_piece(step, sc, pc, &sc->tmp, err);
                break;
            case PRE_WS_SPLIT:
            case PRE_BERT:
                st = word_split_piece(step, sc, pc, &sc->tmp, err);
                break;
            case PRE_PREFIX_SPACE:
            default:
                st = prefix_space_piece(sc, pc, &sc->tmp, err);
                break;
            }
            if (st != TW_OK)
                return st;
        }
        tok_pieces t = sc->pieces;
        sc->pieces = sc->tmp;
        sc->tmp = t;
    }
    return TW_OK;
}
