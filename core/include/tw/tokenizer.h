/* Tokenizers: text <-> token ids, byte-exact with the models' own tokenizers.
 *
 * Three model families are covered:
 *  - byte-level BPE (GPT-2, Llama 3, Qwen, DeepSeek, ...): the text is split by
 *    the model's pre-tokenizer regexes (PCRE2 with Unicode properties), each
 *    piece is mapped byte by byte onto the 256 byte-level symbols and merged
 *    by merge rank;
 *  - SentencePiece BPE (Llama 1/2, Mistral, Phi-3, Gemma): spaces become U+2581
 *    with a dummy prefix, symbols are merged by piece score, and characters
 *    the vocabulary lacks fall back to <0xXX> byte tokens;
 *  - WordPiece (BERT and the embedding models built on it: bge, MiniLM, e5):
 *    BertNormalizer, words split at whitespace and punctuation, each word
 *    cut greedily into the longest vocabulary pieces ("##" continuing
 *    them), a word that cannot be cut completely becoming [UNK]
 *    (tokenizer.json, or a GGUF "bert" vocabulary in llama.cpp's
 *    phantom-space spelling).
 * A tokenizer is loaded from GGUF metadata (tokenizer.ggml.*) or from a
 * Hugging Face tokenizer.json (+ tokenizer_config.json); both give the same
 * behaviour for the same model.
 *
 * Added and special tokens are matched in the raw text before the model runs
 * (leftmost, longest match). Control tokens (<|im_end|>, <s>, ...) are matched
 * only with TW_ENCODE_PARSE_SPECIAL; user-defined added tokens (<think>, ...)
 * always are, as in Hugging Face tokenizers and llama.cpp.
 *
 * Input text may contain invalid UTF-8: the invalid bytes are encoded as raw
 * bytes (byte-level models, byte fallback) or as the unknown token, never
 * rejected and never dropped silently.
 *
 * Thread-safety: a tw_tokenizer is immutable after loading. Any number of
 * threads may call the encode/decode/lookup functions concurrently; each
 * call allocates its own scratch memory. A tw_detok belongs to one thread at
 * a time.
 */
#ifndef TW_TOKENIZER_H
#define TW_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tw/status.h"

typedef struct tw_tokenizer tw_tokenizer;
typedef struct tw_gguf tw_gguf;

/* "no such token" for the special-token getters. */
#define TW_TOKEN_NONE UINT32_MAX

/* Token types, numbered as GGUF's tokenizer.ggml.token_type. */
typedef enum tw_token_type {
    TW_TOKEN_UNDEFINED = 0,
    TW_TOKEN_NORMAL = 1,
    TW_TOKEN_UNKNOWN = 2,
    TW_TOKEN_CONTROL = 3,      /* special: <s>, <|im_end|>, ... */
    TW_TOKEN_USER_DEFINED = 4, /* added, not special: <think>, ... */
    TW_TOKEN_UNUSED = 5,
    TW_TOKEN_BYTE = 6,         /* <0xXX> byte-fallback token */
} tw_token_type;

typedef enum tw_tokenizer_kind {
    TW_TOKENIZER_BPE = 0,       /* byte-level or character BPE ranked by merges */
    TW_TOKENIZER_SPM = 1,       /* SentencePiece BPE ranked by piece scores */
    TW_TOKENIZER_WORDPIECE = 2, /* greedy longest-match WordPiece (BERT) */
} tw_tokenizer_kind;

/* ---- loading ------------------------------------------------------------ */

/* Loads the tokenizer stored in the metadata of the GGUF file at path.
 * Blocks on file I/O. On success *out owns everything it needs (the file is
 * closed again); free it with tw_tokenizer_free(). A file without a
 * tokenizer, an unsupported tokenizer.ggml.model, or inconsistent arrays is
 * refused with a message naming the key. */
tw_status tw_tokenizer_load_gguf(const char *path, tw_tokenizer **out, tw_err *err);

/* Same from a GGUF file the caller already opened; g is only read during the
 * call and may be closed afterwards. */
tw_status tw_tokenizer_from_gguf(const tw_gguf *g, tw_tokenizer **out, tw_err *err);

/* Loads dir/tokenizer.json and, when present, dir/tokenizer_config.json
 * (bos/eos/pad/unk names, add_bos_token, add_eos_token, chat_template).
 * Blocks on file I/O. Every field is validated; an unsupported component is
 * refused with TW_UNIMPLEMENTED naming it, malformed JSON with
 * TW_INVALID_ARGUMENT naming the field. */
tw_status tw_tokenizer_load_hf(const char *dir, tw_tokenizer **out, tw_err *err);

/* Same from JSON text already in memory (config_json may be NULL). The
 * buffers are only read during the call. */
tw_status tw_tokenizer_from_hf_json(const char *tokenizer_json, size_t len,
                                    const char *config_json, size_t config_len,
                                    tw_tokenizer **out, tw_err *err);

/* Releases everything; NULL is allowed. No call on tok may be running. */
void tw_tokenizer_free(tw_tokenizer *tok);

/* ---- encoding ----------------------------------------------------------- */

/* Add the BOS (and EOS) tokens that the tokenizer's configuration asks for
 * (GGUF tokenizer.ggml.add_bos_token/add_eos_token, tokenizer_config.json
 * add_bos_token/add_eos_token, tokenizer.json TemplateProcessing). A GGUF
 * "bert" vocabulary always adds [CLS] and [SEP], as llama.cpp does. */
#define TW_ENCODE_ADD_SPECIAL 0x1u
/* Match control tokens written in the text (e.g. "<|im_start|>") as the
 * tokens themselves. Without it they are tokenized as ordinary text. */
#define TW_ENCODE_PARSE_SPECIAL 0x2u

/* Tokenizes len bytes of text into out[0..cap). On success *n_out is the
 * number of ids written. When cap is too small nothing is truncated: the
 * call returns TW_RESOURCE_EXHAUSTED with *n_out set to the number of ids
 * needed (the contents of out are then unspecified); call again with a
 * larger buffer. out may be NULL when cap is 0 (a sizing call). text may be
 * NULL when len is 0. Thread-safe. */
tw_status tw_tokenizer_encode(const tw_tokenizer *tok, const char *text, size_t len,
                              unsigned flags, uint32_t *out, size_t cap, size_t *n_out,
                              tw_err *err);

/* ---- decoding ----------------------------------------------------------- */

/* Leave control and unknown tokens out of decoded text (Hugging Face's
 * skip_special_tokens). User-defined tokens such as <think> are kept. */
#define TW_DECODE_SKIP_SPECIAL 0x1u
/* Keep the leading space that a SentencePiece tokenizer's dummy prefix puts
 * in front of the first word (by default it is removed, as HF and llama.cpp
 * do). */
#define TW_DECODE_KEEP_LEADING_SPACE 0x2u

/* The raw bytes a token stands for: byte-level symbols mapped back to bytes,
 * U+2581 turned back into spaces, <0xXX> as the byte, added and control
 * tokens as their text. With a WordPiece decoder, what the token adds after
 * another one: "##ing" gives "ing", "the" gives " the" (the first token of
 * a decode has neither change). The pointer is owned by tok and valid until
 * tw_tokenizer_free(); it is not NUL-terminated and may hold a partial UTF-8
 * sequence. Returns NULL (and *len = 0) for an id out of range. */
const char *tw_tokenizer_token_bytes(const tw_tokenizer *tok, uint32_t id, size_t *len);

/* The token's text as stored in the vocabulary ("Ġthe", "▁the", "<0x0A>"),
 * NUL-terminated; NULL for an id out of range. */
const char *tw_tokenizer_token_text(const tw_tokenizer *tok, uint32_t id);

/* Decodes ids into UTF-8 text in out[0..cap). Invalid byte sequences become
 * U+FFFD (one per maximal invalid subpart, as Rust's from_utf8_lossy). On
 * success *n_out is the byte length written (no NUL terminator is added).
 * When cap is too small: TW_RESOURCE_EXHAUSTED and *n_out = bytes needed.
 * An id outside the vocabulary is TW_INVALID_ARGUMENT. Equal to the
 * concatenated output of a tw_detok fed the same ids and flushed.
 * Thread-safe. */
tw_status tw_tokenizer_decode(const tw_tokenizer *tok, const uint32_t *ids, size_t n,
                              unsigned flags, char *out, size_t cap, size_t *n_out,
                              tw_err *err);

/* ---- vocabulary --------------------------------------------------------- */

uint32_t tw_tokenizer_vocab_size(const tw_tokenizer *tok);
tw_tokenizer_kind tw_tokenizer_kind_of(const tw_tokenizer *tok);
/* TW_TOKEN_UNDEFINED for an id out of range. */
tw_token_type tw_tokenizer_token_type(const tw_tokenizer *tok, uint32_t id);
/* Id of the token whose vocabulary text is exactly text[0..len)
 * ("<|im_end|>", "Ġthe"); TW_NOT_FOUND when there is none. */
tw_status tw_tokenizer_lookup(const tw_tokenizer *tok, const char *text, size_t len,
                              uint32_t *id, tw_err *err);
/* Longest token, in decoded bytes; bounds any single tw_detok delta. */
size_t tw_tokenizer_max_token_bytes(const tw_tokenizer *tok);

/* ---- special tokens (TW_TOKEN_NONE when the model has none) ------------- */

uint32_t tw_tokenizer_bos(const tw_tokenizer *tok);
uint32_t tw_tokenizer_eos(const tw_tokenizer *tok);
/* End of turn: <|im_end|>, <|eot_id|>, <end_of_turn>, <|end|>, ... */
uint32_t tw_tokenizer_eot(const tw_tokenizer *tok);
/* End of message (Llama 3.1 tool calls: <|eom_id|>). */
uint32_t tw_tokenizer_eom(const tw_tokenizer *tok);
uint32_t tw_tokenizer_pad(const tw_tokenizer *tok);
uint32_t tw_tokenizer_unk(const tw_tokenizer *tok);
/* Reasoning delimiters <think> / </think> when the vocabulary has them. */
uint32_t tw_tokenizer_think_open(const tw_tokenizer *tok);
uint32_t tw_tokenizer_think_close(const tw_tokenizer *tok);
/* True for every token that ends generation: eos, eot, eom and the other
 * well-known end markers present in the vocabulary. */
bool tw_tokenizer_is_eog(const tw_tokenizer *tok, uint32_t id);
/* Whether TW_ENCODE_ADD_SPECIAL prepends BOS / appends EOS. */
bool tw_tokenizer_adds_bos(const tw_tokenizer *tok);
bool tw_tokenizer_adds_eos(const tw_tokenizer *tok);

/* The model's chat template (GGUF tokenizer.chat_template or
 * tokenizer_config.json chat_template, the "default" one when several are
 * named), NUL-terminated and owned by tok; NULL when there is none. */
const char *tw_tokenizer_chat_template(const tw_tokenizer *tok);
/* Text of the BOS / EOS tokens ("" when absent), for chat templates. */
const char *tw_tokenizer_bos_text(const tw_tokenizer *tok);
const char *tw_tokenizer_eos_text(const tw_tokenizer *tok);

/* ---- streaming detokenizer ---------------------------------------------- */

/* Turns a stream of token ids into text deltas. A delta never ends inside a
 * UTF-8 sequence: incomplete bytes are held until the sequence completes,
 * and bytes that can no longer form a character are replaced by U+FFFD.
 * Tokens are emitted whole, so a delta never holds part of a special token.
 * The concatenation of all deltas plus the final flush equals
 * tw_tokenizer_decode() of the same ids with the same flags.
 *
 * All memory is allocated by tw_detok_new(); feeding never allocates. A
 * tw_detok borrows tok, which must outlive it. Not thread-safe: one stream
 * per tw_detok. */
typedef struct tw_detok tw_detok;

/* flags: TW_DECODE_* as for tw_tokenizer_decode(). */
tw_status tw_detok_new(const tw_tokenizer *tok, unsigned flags, tw_detok **out, tw_err *err);
void tw_detok_free(tw_detok *d);
/* Forgets all state, for a new sequence. */
void tw_detok_reset(tw_detok *d);

/* Feeds one id. *text points to the new text (possibly empty, never NULL),
 * *len its length; both stay valid until the next call on d. An id outside
 * the vocabulary is TW_INVALID_ARGUMENT and leaves the state unchanged. */
tw_status tw_detok_feed(tw_detok *d, uint32_t id, const char **text, size_t *len, tw_err *err);

/* Ends the stream: held-back bytes that never completed a character come
 * out as U+FFFD. The state is reset for a new sequence afterwards. */
void tw_detok_flush(tw_detok *d, const char **text, size_t *len);

/* Bytes held back waiting for the rest of a UTF-8 sequence (0..3). */
size_t tw_detok_pending(const tw_detok *d);

#endif
