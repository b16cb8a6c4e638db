/* Internal representation shared by the tokenizer sources (GGUF, tokenizer.json),
 * the encoder and the decoder. Nothing here is part of the public API. */
#ifndef TW_TOK_INTERNAL_H
#define TW_TOK_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "tw/status.h"
#include "tw/tokenizer.h"

/* Hostile-input limits: far above any real tokenizer, low enough that a
 * forged count cannot make us allocate gigabytes. */
#define TOK_MAX_VOCAB (1u << 24)
#define TOK_MAX_TOKEN_BYTES (1u << 16)
#define TOK_MAX_STEPS 32
/* WordPiece: longest continuing-subword prefix ("##" in every real model)
 * and largest max_input_chars_per_word accepted (real models use 100-200). */
#define TOK_WP_MAX_PREFIX 16
#define TOK_WP_MAX_CHARS  (1u << 20)

/* ---- growable byte buffer ------------------------------------------------ */

typedef struct tok_buf {
    char *p;
    size_t len, cap;
} tok_buf;

bool tok_buf_reserve(tok_buf *b, size_t extra);
bool tok_buf_append(tok_buf *b, const void *data, size_t n);
void tok_buf_free(tok_buf *b);

/* ---- hash maps ----------------------------------------------------------- */

uint64_t tok_hash(const void *data, size_t len);

/* Maps byte strings to token ids. The strings live elsewhere (the vocab
 * arena); the table stores ids and asks `text_of` for the key of an id. */
typedef struct tok_strmap {
    uint32_t *slots; /* id + 1; 0 = empty */
    size_t mask;
} tok_strmap;

typedef struct tok_vocab tok_vocab;

/* ---- vocabulary ---------------------------------------------------------- */

typedef struct tok_span {
    uint32_t off, len;
} tok_span;

struct tok_vocab {
    uint32_t n;
    tok_buf text;    /* vocabulary texts, each NUL-terminated */
    tok_span *tspan; /* text of id */
    tok_buf bytes;   /* decoded bytes of every token */
    tok_span *bspan;
    uint8_t *type;   /* tw_token_type */
    float *score;    /* SentencePiece scores (NULL for BPE) */
    tok_strmap map;  /* text -> id */
    size_t max_bytes;
};

/* Merge table: (left id, right id) -> (rank, merged id). */
typedef struct tok_merges {
    uint64_t *keys; /* UINT64_MAX = empty */
    uint32_t *rank;
    uint32_t *result;
    size_t mask, count;
} tok_merges;

bool tok_merges_init(tok_merges *m, size_t expected);
/* Returns false only on allocation failure; a pair already present keeps
 * its first (lowest) rank. */
bool tok_merges_add(tok_merges *m, uint32_t a, uint32_t b, uint32_t rank, uint32_t result);
bool tok_merges_find(const tok_merges *m, uint32_t a, uint32_t b, uint32_t *rank,
                     uint32_t *result);
void tok_merges_free(tok_merges *m);

/* Builds the text map after all texts are set. */
bool tok_vocab_build_map(tok_vocab *v);
bool tok_vocab_find(const tok_vocab *v, const char *s, size_t len, uint32_t *id);
void tok_vocab_free(tok_vocab *v);

/* ---- added / special tokens --------------------------------------------- */

typedef struct tok_added {
    uint32_t id;
    bool special;     /* control token: matched only with PARSE_SPECIAL */
    bool normalized;  /* matched in normalized text (HF) */
    bool lstrip, rstrip, single_word;
} tok_added;

/* A byte trie over added-token texts, for leftmost-longest matching. */
typedef struct tok_trie_node {
    int32_t child;   /* first child, -1 none */
    int32_t sibling; /* next sibling, -1 none */
    int32_t added;   /* index into tok->added, -1 none */
    uint8_t byte;
} tok_trie_node;

typedef struct tok_trie {
    tok_trie_node *nodes;
    size_t n, cap;
    int32_t root[256]; /* first-level nodes by byte */
    bool empty;
} tok_trie;

/* ---- normalizer and pre-tokenizer steps --------------------------------- */

typedef enum tok_norm_kind {
    NORM_NFC,
    NORM_NFD,
    NORM_NFKC,
    NORM_NFKD,
    NORM_LOWERCASE,
    NORM_PREPEND, /* prepend str when the text is not empty */
    NORM_REPLACE, /* replace every occurrence of str by str2 */
    NORM_STRIP,   /* strip whitespace: left/right */
    NORM_BERT,    /* Hugging Face's BertNormalizer */
} tok_norm_kind;

typedef struct tok_norm {
    tok_norm_kind kind;
    char *str, *str2;
    size_t len, len2;
    pcre2_code *re; /* NORM_REPLACE with a regex pattern */
    bool left, right;
    /* NORM_BERT: clean_text, handle_chinese_chars, strip_accents, lowercase */
    bool clean, cjk, accents, lower;
} tok_norm;

typedef enum tok_behavior {
    SPLIT_REMOVED,
    SPLIT_ISOLATED,
    SPLIT_MERGED_PREV,
    SPLIT_MERGED_NEXT,
    SPLIT_CONTIGUOUS,
} tok_behavior;

typedef enum tok_pre_kind {
    PRE_SPLIT,        /* regex split */
    PRE_PREFIX_SPACE, /* ByteLevel add_prefix_space */
    PRE_METASPACE,    /* replace ' ' by U+2581, optional prepend, optional split */
    PRE_WS_SPLIT,     /* drop whitespace between words (WhitespaceSplit) */
    PRE_BERT,         /* PRE_WS_SPLIT, and each punctuation char a piece */
} tok_pre_kind;

typedef enum tok_prepend {
    PREPEND_NEVER,
    PREPEND_FIRST,
    PREPEND_ALWAYS,
} tok_prepend;

typedef struct tok_pre {
    tok_pre_kind kind;
    pcre2_code *re;
    tok_behavior behavior;
    bool invert;
    /* metaspace */
    char repl[8];
    size_t repl_len;
    tok_prepend prepend;
    bool split;
} tok_pre;

/* ---- the tokenizer -------------------------------------------------------- */

struct tw_tokenizer {
    tw_tokenizer_kind kind;
    tok_vocab vocab;
    tok_merges merges;

    /* byte-level BPE: token of the byte-level symbol of each byte */
    bool byte_level;
    int64_t byte_char_tok[256];
    /* <0xXX> tokens (SentencePiece, HF byte_fallback) */
    bool byte_fallback;
    int64_t byte_tok[256];

    bool ignore_merges;
    bool fuse_unk;

    /* WordPiece model */
    char wp_prefix[TOK_WP_MAX_PREFIX + 1]; /* continuing_subword_prefix */
    size_t wp_prefix_len;
    size_t wp_max_chars; /* longer words are one unk */
    size_t wp_max_len;   /* longest model.vocab text: no longer piece can match */
    uint32_t wp_unk;
    /* Ids that model.vocab names: an added token that only added_tokens
     * lists is no piece of a word, as in Hugging Face. */
    uint8_t *wp_in_model;

    tok_added *added;
    size_t n_added;
    tok_trie trie_raw;  /* added tokens matched in the raw text */
    tok_trie trie_norm; /* added tokens matched after normalization */

    tok_norm norm[TOK_MAX_STEPS];
    size_t n_norm;
    tok_pre pre[TOK_MAX_STEPS];
    size_t n_pre;

    /* decoding: how a normal token's text becomes bytes */
    bool dec_byte_level; /* byte-level symbols back to bytes */
    bool dec_metaspace;  /* U+2581 back to a space */
    bool strip_leading_space;
    /* WordPiece decoder: vocab.bspan holds a token's bytes after another
     * token (prefix removed or a space put before it), wp_first its bytes
     * as the first token; both cleaned up when dec_wp_cleanup. */
    bool dec_wordpiece, dec_wp_cleanup;
    char dec_wp_prefix[TOK_WP_MAX_PREFIX + 1];
    size_t dec_wp_prefix_len;
    tok_span *wp_first;

    /* special ids (TW_TOKEN_NONE when absent) */
    uint32_t bos, eos, eot, eom, pad, unk, think_open, think_close;
    bool add_bos, add_eos;
    uint8_t *eog; /* bitmap over the vocabulary */

    char *chat_template;
};

/* ---- per-call scratch ---------------------------------------------------- */

/* A piece of text in scratch.text, as the pre-tokenizer hands it on. */
typedef struct tok_piece {
    size_t off, len;
    bool first; /* starts at offset 0 of the caller's text */
} tok_piece;

typedef struct tok_pieces {
    tok_piece *v;
    size_t n, cap;
} tok_pieces;

/* Symbols and candidate merges of the BPE / SentencePiece merge loops. */
typedef struct tok_sym {
    uint32_t id;     /* token id (BPE) */
    uint32_t off;    /* byte offset in the piece */
    uint32_t len;    /* byte length; 0 once merged into its left neighbour */
    int32_t prev, next;
} tok_sym;

typedef struct tok_cand {
    double prio;       /* lower pops first: rank (BPE) or -score (SPM) */
    int32_t left, right;
    uint32_t a, b;     /* ids (BPE) or lengths (SPM) of the two symbols */
    uint32_t result;   /* merged token */
} tok_cand;

/* Everything one encode call writes to; never shared between calls. */
typedef struct tok_scratch {
    tok_buf text;
    tok_buf word; /* byte-level text of one piece */
    tok_pieces pieces, tmp;
    pcre2_match_data *md;
    tok_sym *syms;
    size_t n_syms, cap_syms;
    tok_cand *heap;
    size_t n_heap, cap_heap;
} tok_scratch;

/* Output sink that counts past its capacity instead of truncating. */
typedef struct tok_out {
    uint32_t *ids;
    size_t cap, n;
} tok_out;

static inline void tok_out_push(tok_out *o, uint32_t id)
{
    if (o->n < o->cap)
        o->ids[o->n] = id;
    o->n++;
}

bool tok_pieces_push(tok_pieces *p, size_t off, size_t len, bool first);

/* Runs the pre-tokenizer over scratch.text[off, off+len) and leaves the
 * resulting pieces in scratch.pieces. */
tw_status tok_pretokenize(const tw_tokenizer *tok, tok_scratch *sc, size_t off, size_t len,
                          bool first, tw_err *err);
/* Normalizes in[0..len) into sc->text (appended); off and out_len give the
 * result's place. */
tw_status tok_normalize(const tw_tokenizer *tok, tok_scratch *sc, const char *in, size_t len,
                        size_t *off, size_t *out_len, tw_err *err);
/* Encodes one pre-tokenized piece with the model (BPE or SentencePiece). */
tw_status tok_bpe_piece(const tw_tokenizer *tok, tok_scratch *sc, const char *s, size_t len,
                        tok_out *out, tw_err *err);
tw_status tok_spm_piece(const tw_tokenizer *tok, tok_scratch *sc, const char *s, size_t len,
                        tok_out *out, tw_err *err);
tw_status tok_wordpiece_piece(const tw_tokenizer *tok, tok_scratch *sc, const char *s, size_t len,
                              tok_out *out, tw_err *err);
/* Appends what the WordPiece decoder makes of token text s, first in the
 * sequence or not. False when memory runs out. */
bool tok_wordpiece_decoded(const tw_tokenizer *tok, const char *s, size_t len, bool first,
                           tok_buf *out);
/* Heap of merge candidates. */
bool tok_heap_push(tok_scratch *sc, const tok_cand *c);
bool tok_heap_pop(tok_scratch *sc, tok_cand *c);

/* ---- helpers shared by the sources -------------------------------------- */

/* Allocates the per-id arrays of a vocabulary of n tokens. */
tw_status tok_vocab_alloc(tok_vocab *v, uint32_t n, bool with_scores, tw_err *err);
/* Sets the text of id (copied). */
tw_status tok_vocab_set_text(tok_vocab *v, uint32_t id, const char *s, size_t len, tw_err *err);

/* Compiles a pre-tokenizer regex (UTF, UCP, invalid UTF tolerated, JIT when
 * available). */
tw_status tok_regex_compile(const char *pattern, size_t len, pcre2_code **out, tw_err *err);
/* A regex matching exactly the literal s. */
tw_status tok_regex_literal(const char *s, size_t len, pcre2_code **out, tw_err *err);

/* Appends the pre-tokenizer steps llama.cpp associates with a GGUF
 * tokenizer.ggml.pre name; sets ignore_merges where that name implies it. */
tw_status tok_pre_from_name(tw_tokenizer *tok, const char *name, tw_err *err);
/* GPT-2's split pattern (ByteLevel's use_regex). */
extern const char tok_re_gpt2[];
tw_status tok_pre_add_split(tw_tokenizer *tok, const char *pattern, tok_behavior behavior,
                            bool invert, tw_err *err);

/* Fills byte_char_tok from the vocabulary (byte-level models). */
tw_status tok_init_byte_level(tw_tokenizer *tok, tw_err *err);
/* Fills byte_tok with the <0xXX> tokens present. */
void tok_init_byte_tokens(tw_tokenizer *tok);
/* Computes decoded bytes of every token and max_bytes; call after types and
 * byte_level are final. */
tw_status tok_build_bytes(tw_tokenizer *tok, tw_err *err);
/* Builds the added-token tries from tok->added. */
tw_status tok_build_tries(tw_tokenizer *tok, tw_err *err);
/* Adds every control / user-defined token of the vocabulary to tok->added
 * (GGUF, where no separate added-token list exists). */
tw_status tok_added_from_types(tw_tokenizer *tok, tw_err *err);
/* Finds eot/eom/think tokens by their text and fills the eog bitmap. */
tw_status tok_finish_specials(tw_tokenizer *tok, tw_err *err);

tw_tokenizer *tok_new(void);

/* GGUF "bert" vocabularies (gguf_wordpiece.c). tok_gguf_wp_text sets the
 * text of id from its phantom-space form, after its type; tok_gguf_wordpiece
 * sets up everything else once all texts are in and the map is built. */
tw_status tok_gguf_wp_text(tw_tokenizer *tok, uint32_t id, const char *s, size_t len, tw_err *err);
tw_status tok_gguf_wordpiece(tw_tokenizer *tok, const tw_gguf *g, tw_err *err);

/* byte-level mapping: unicode code point of byte b, and back (-1 if none). */
uint32_t tok_byte_to_cp(uint8_t b);
int tok_cp_to_byte(uint32_t cp);

/* UTF-8 helpers. Length of a valid sequence at s[0..n), or 0 when invalid. */
size_t tok_utf8_valid_len(const uint8_t *s, size_t n);
size_t tok_utf8_encode(uint32_t cp, char out[4]);
/* Decodes the valid sequence at s (length returned, 0 when invalid). */
size_t tok_utf8_decode(const uint8_t *s, size_t n, uint32_t *cp);
/* Unicode White_Space (what Rust's char::is_whitespace tests). */
bool tok_is_space(uint32_t cp);

#endif
