/* WordPiece, as Hugging Face tokenizers runs it: each pre-tokenized word
 * is cut from the left into the longest piece the vocabulary has, pieces
 * after the first looked up with the continuing-subword prefix ("##"). A
 * word that cannot be cut to the end, or that has more characters than
 * max_input_chars_per_word, becomes a single unk: the model never emits
 * part of a word next to an unk.
 *
 * Also the WordPiece decoder's per-token forms, which tok_build_bytes
 * stores so that whole and streamed decoding share them. */
#include <string.h>

#include "tok_internal.h"

/* Characters of s[0..len), counting a byte that starts no valid sequence as
 * one (Hugging Face would see U+FFFD there); stops counting past limit. */
static size_t count_chars(const char *s, size_t len, size_t limit)
{
    size_t n = 0, i = 0;
    while (i < len && n <= limit) {
        size_t l = tok_utf8_valid_len((const uint8_t *)s + i, len - i);
        i += l ? l : 1;
        n++;
    }
    return n;
}

/* Bytes of the character that ends at s[end], never reaching before start.
 * The shortest valid sequence ending there is the one a forward scan
 * found, because UTF-8 lead bytes cannot be continuation bytes; anything
 * else is a stray byte counted alone. */
static size_t last_char_len(const char *s, size_t start, size_t end)
{
    for (size_t l = 1; l <= 4 && l <= end - start; l++)
        if (tok_utf8_valid_len((const uint8_t *)s + end - l, l) == l)
            return l;
    return 1;
}

static bool model_piece(const tw_tokenizer *tok, const char *s, size_t len, uint32_t *id)
{
    return tok_vocab_find(&tok->vocab, s, len, id) && (tok->wp_in_model[*id / 8] >> (*id % 8)) & 1;
}

tw_status tok_wordpiece_piece(const tw_tokenizer *tok, tok_scratch *sc, const char *s, size_t len,
                              tok_out *out, tw_err *err)
{
    if (len == 0)
        return TW_OK;
    if (count_chars(s, len, tok->wp_max_chars) > tok->wp_max_chars) {
        tok_out_push(out, tok->wp_unk);
        return TW_OK;
    }
    size_t plen = tok->wp_prefix_len;
    /* sc->word holds the prefix followed by the rest of the word, so every
     * continuation candidate is a prefix of it and needs no copy of its own. */
    sc->word.len = 0;
    if (!tok_buf_reserve(&sc->word, plen + len))
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
    memcpy(sc->word.p, tok->wp_prefix, plen);
    size_t mark = out->n, start = 0;
    while (start < len) {
        /* A candidate longer than the longest vocabulary text cannot match,
         * which keeps a long word linear in its length. */
        size_t room =
            start == 0 ? tok->wp_max_len : (tok->wp_max_len > plen ? tok->wp_max_len - plen : 0);
        size_t end = len - start > room ? start + room : len;
        const char *key = s + start;
        size_t extra = 0;
        if (start > 0) {
            memcpy(sc->word.p + plen, s + start, end - start);
            key = sc->word.p;
            extra = plen;
        }
        uint32_t id = 0;
        bool found = false;
        while (end > start && !found) {
            found = model_piece(tok, key, extra + end - start, &id);
            if (!found)
                end -= last_char_len(s, start, end);
        }
        if (!found) {
            out->n = mark;
            tok_out_push(out, tok->wp_unk);
            return TW_OK;
        }
        tok_out_push(out, id);
        start = end;
    }
    return TW_OK;
}

/* ---- decoder ------------------------------------------------------------------ */

/* tokenizers' cleanup, applied in this order to each token on its own (not
 * to the joined text, so "don ' t" keeps its spaces). */
static const struct {
    const char *from, *to;
} cleanups[] = {
    {" .", "."},   {" ?", "?"},     {" !", "!"},     {" ,", ","},
    {" ' ", "'"},  {" n't", "n't"}, {" 'm", "'m"},   {" do not", " don't"},
    {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"},
};

/* Every replacement is no longer than what it replaces, so one left-to-right
 * pass can write over what it has already read. */
static size_t replace_in_place(char *p, size_t n, const char *from, const char *to)
{
    size_t fl = strlen(from), tl = strlen(to), r = 0, w = 0;
    while (r < n) {
        if (n - r >= fl && memcmp(p + r, from, fl) == 0) {
            memcpy(p + w, to, tl);
            w += tl;
            r += fl;
        } else {
            p[w++] = p[r++];
        }
    }
    return w;
}

bool tok_wordpiece_decoded(const tw_tokenizer *tok, const char *s, size_t len, bool first,
                           tok_buf *out)
{
    size_t start = out->len, pl = tok->dec_wp_prefix_len;
    if (!first) {
        if (len >= pl && memcmp(s, tok->dec_wp_prefix, pl) == 0) {
            s += pl;
            len -= pl;
        } else if (!tok_buf_append(out, " ", 1)) {
            return false;
        }
    }
    if (!tok_buf_append(out, s, len))
        return false;
    if (tok->dec_wp_cleanup && out->len > start) {
        size_t n = out->len - start;
        for (size_t i = 0; i < sizeof cleanups / sizeof cleanups[0]; i++)
            n = replace_in_place(out->p + start, n, cleanups[i].from, cleanups[i].to);
        out->len = start + n;
    }
    return true;
}
