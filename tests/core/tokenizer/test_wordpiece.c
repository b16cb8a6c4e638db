/* WordPiece tokenizers from tokenizer.json: the reference ids Hugging Face
 * tokenizers 0.23 gives for tests/data/tokenizers/wordpiece-{uncased,cased}
 * and the BERT checkpoint of tests/data/golden/bert_cls, decoding whole and
 * streamed, and the rules one by one on small vocabularies. Hostile files
 * and text: test_wordpiece_hostile.c. */
#include <jansson.h>

#include "tok_cases.h"
#include "tw/safetensors.h"
#include "wp_test_util.h"

/* ---- the reference cases ------------------------------------------------------ */

static size_t count_lines(const char *path)
{
    size_t len = 0, n = 0;
    char *text = tw_test_read_file(path, &len);
    assert_non_null(text);
    for (size_t i = 0; i < len; i++)
        n += text[i] == '\n';
    free(text);
    return n;
}

static void run_reference(const char *rel)
{
    tw_tokenizer *tok = load_repo(rel);
    assert_int_equal(tw_tokenizer_kind_of(tok), TW_TOKENIZER_WORDPIECE);
    char inp[1100], outp[1100];
    snprintf(inp, sizeof inp, "%s/%s/tests.inp", TW_REPO_DATA, rel);
    snprintf(outp, sizeof outp, "%s/%s/tests.out", TW_REPO_DATA, rel);
    size_t lines = count_lines(outp);
    tok_cases cases;
    assert_true(tok_cases_load(&cases, inp, outp));
    /* every line of tests.out has its text: none is left unchecked */
    assert_int_equal(cases.n, lines);
    assert_true(cases.n >= 30);
    size_t failures = 0;
    uint32_t *ids = malloc(MAX_IDS * sizeof *ids);
    for (size_t i = 0; i < cases.n; i++) {
        const tok_case *tc = &cases.v[i];
        /* tokenizers always splits special tokens out of the text */
        size_t n = encode(tok, tc->text, tc->len, TW_ENCODE_PARSE_SPECIAL, ids);
        if (n != tc->n_ids || memcmp(ids, tc->ids, n * sizeof *ids) != 0) {
            printf("%s case %zu mismatch for \"%s\"\n", rel, i, tc->text);
            tok_print_ids("expected", tc->ids, tc->n_ids);
            tok_print_ids("got     ", ids, n);
            failures++;
        }
    }
    free(ids);
    tok_cases_free(&cases);
    tw_tokenizer_free(tok);
    assert_int_equal(failures, 0);
}

static void test_reference_uncased(void **state)
{
    (void)state;
    run_reference("tokenizers/wordpiece-uncased");
}

static void test_reference_cased(void **state)
{
    (void)state;
    run_reference("tokenizers/wordpiece-cased");
}

/* golden.json's texts against the ids (with [CLS] and [SEP]) that
 * transformers fed the reference BERT. */
static void test_golden_bert_ids(void **state)
{
    (void)state;
    tw_tokenizer *tok = load_repo("golden/bert_cls");
    wp_check_golden_ids(tok);
    tw_tokenizer_free(tok);
}

/* ---- special tokens ----------------------------------------------------------- */

static void test_special_tokens(void **state)
{
    (void)state;
    tw_tokenizer *tok = load_repo("tokenizers/wordpiece-uncased");
    uint32_t cls, sep, mask;
    tw_err err = {{0}};
    assert_int_equal(tw_tokenizer_lookup(tok, "[CLS]", 5, &cls, &err), TW_OK);
    assert_int_equal(tw_tokenizer_lookup(tok, "[SEP]", 5, &sep, &err), TW_OK);
    assert_int_equal(tw_tokenizer_lookup(tok, "[MASK]", 6, &mask, &err), TW_OK);
    assert_int_equal(tw_tokenizer_bos(tok), cls);
    assert_int_equal(tw_tokenizer_eos(tok), sep);
    assert_true(tw_tokenizer_adds_bos(tok));
    assert_true(tw_tokenizer_adds_eos(tok));
    assert_int_equal(tw_tokenizer_unk(tok), 1);
    assert_int_equal(tw_tokenizer_token_type(tok, cls), TW_TOKEN_CONTROL);

    uint32_t plain[64], with[64];
    const char *s = "Hello world, how are you?";
    size_t np = encode(tok, s, strlen(s), TW_ENCODE_PARSE_SPECIAL, plain);
    size_t nw = encode(tok, s, strlen(s), TW_ENCODE_ADD_SPECIAL | TW_ENCODE_PARSE_SPECIAL, with);
    assert_true(np > 3);
    assert_int_equal(nw, np + 2);
    assert_int_equal(with[0], cls);
    assert_int_equal(with[nw - 1], sep);
    assert_memory_equal(with + 1, plain, np * sizeof *plain);

    /* Raw-matched: "[CLS]" in the text is the token, "[cls]" is text. */
    s = "a [CLS] b[MASK]";
    np = encode(tok, s, strlen(s), TW_ENCODE_PARSE_SPECIAL, plain);
    size_t hits = 0;
    for (size_t i = 0; i < np; i++)
        hits += plain[i] == cls || plain[i] == mask;
    assert_int_equal(hits, 2);
    /* Without special parsing the brackets and letters are ordinary text. */
    np = encode(tok, s, strlen(s), 0, plain);
    for (size_t i = 0; i < np; i++)
        assert_true(plain[i] != cls && plain[i] != mask);

    /* Decoded with and without the specials. */
    s = "hello world";
    nw = encode(tok, s, strlen(s), TW_ENCODE_ADD_SPECIAL | TW_ENCODE_PARSE_SPECIAL, with);
    char *text = decode_both(tok, with, nw, 0);
    assert_string_equal(text, "[CLS] hello world [SEP]");
    free(text);
    text = decode_both(tok, with, nw, TW_DECODE_SKIP_SPECIAL);
    assert_string_equal(text, "hello world");
    free(text);
    tw_tokenizer_free(tok);
}

/* ---- decoding ------------------------------------------------------------------- */

/* What BertNormalizer and the decoder together make of plain ASCII text:
 * whitespace runs become one space, the ends are trimmed, and with
 * lowercase the letters go down. */
static char *expected_plain(const char *s, bool lower)
{
    size_t n = strlen(s), w = 0;
    char *out = malloc(n + 1);
    bool space = false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            space = w > 0;
            continue;
        }
        if (space)
            out[w++] = ' ';
        space = false;
        out[w++] = lower && c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
    }
    out[w] = '\0';
    return out;
}

/* ASCII words of letters and digits, each perhaps ended by one of . , ! ?
 * (the punctuation that the decoder's cleanup joins back). */
static bool plain_text(const char *s)
{
    for (size_t i = 0; s[i]; i++) {
        char c = s[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        bool space = c == ' ' || c == '\t' || c == '\n' || c == '\r';
        bool end_punct = (c == '.' || c == ',' || c == '!' || c == '?') && i > 0 &&
                         strchr(" \t\r\n.,!?", s[i + 1]) != NULL;
        if (!alnum && !space && !end_punct)
            return false;
    }
    return true;
}

static void round_trip(const char *rel, bool lower, const char *const *extra, size_t n_extra)
{
    tw_tokenizer *tok = load_repo(rel);
    char inp[1100], outp[1100];
    snprintf(inp, sizeof inp, "%s/%s/tests.inp", TW_REPO_DATA, rel);
    snprintf(outp, sizeof outp, "%s/%s/tests.out", TW_REPO_DATA, rel);
    tok_cases cases;
    assert_true(tok_cases_load(&cases, inp, outp));
    uint32_t *ids = malloc(MAX_IDS * sizeof *ids);
    size_t checked = 0;
    for (size_t i = 0; i < cases.n + n_extra; i++) {
        const char *text = i < cases.n ? cases.v[i].text : extra[i - cases.n];
        if ((i < cases.n && strlen(text) != cases.v[i].len) || !plain_text(text))
            continue;
        size_t n = encode(tok, text, strlen(text), 0, ids);
        bool unk = false;
        for (size_t k = 0; k < n; k++)
            unk |= ids[k] == tw_tokenizer_unk(tok);
        if (unk) {
            assert_true(i < cases.n); /* the hand-picked texts have no unknown word */
            continue;
        }
        char *want = expected_plain(text, lower);
        char *got = decode_both(tok, ids, n, 0);
        if (strcmp(want, got) != 0)
            printf("\"%s\" decodes to \"%s\", wanted \"%s\"\n", text, got, want);
        assert_string_equal(got, want);
        free(want);
        free(got);
        checked++;
    }
    assert_true(checked >= n_extra + 3);
    free(ids);
    tok_cases_free(&cases);
    tw_tokenizer_free(tok);
}

static const char *const plain_texts[] = {
    "Hello world",
    "  the   tokenizer reads\tfiles,  and\nthe model runs!  ",
    "Does the engine stream tokens? Yes.",
    "speculative decoding stays exact on hybrid models",
    "tokenization tokenizer tokenized tokens 42 and 1000",
};

static void test_round_trip_uncased(void **state)
{
    (void)state;
    round_trip("tokenizers/wordpiece-uncased", true, plain_texts,
               sizeof plain_texts / sizeof plain_texts[0]);
}

static void test_round_trip_cased(void **state)
{
    (void)state;
    round_trip("tokenizers/wordpiece-cased", false, plain_texts,
               sizeof plain_texts / sizeof plain_texts[0]);
}

/* Every reference case, with and without the specials, decodes the same
 * streamed as whole; and tw_tokenizer_token_bytes is what a token adds
 * after another. */
static void test_stream_equals_decode(void **state)
{
    (void)state;
    const char *rels[] = {"tokenizers/wordpiece-uncased", "tokenizers/wordpiece-cased"};
    uint32_t *ids = malloc(MAX_IDS * sizeof *ids);
    for (size_t r = 0; r < 2; r++) {
        tw_tokenizer *tok = load_repo(rels[r]);
        char inp[1100], outp[1100];
        snprintf(inp, sizeof inp, "%s/%s/tests.inp", TW_REPO_DATA, rels[r]);
        snprintf(outp, sizeof outp, "%s/%s/tests.out", TW_REPO_DATA, rels[r]);
        tok_cases cases;
        assert_true(tok_cases_load(&cases, inp, outp));
        for (size_t i = 0; i < cases.n; i++) {
            size_t n = encode(tok, cases.v[i].text, cases.v[i].len,
                              TW_ENCODE_ADD_SPECIAL | TW_ENCODE_PARSE_SPECIAL, ids);
            free(decode_both(tok, ids, n, 0));
            free(decode_both(tok, ids, n, TW_DECODE_SKIP_SPECIAL));
            free(decode_both(tok, ids + 1, n - 2, 0));
        }
        uint32_t two[2];
        tw_err err = {{0}};
        assert_int_equal(tw_tokenizer_lookup(tok, "a", 1, &two[0], &err), TW_OK);
        for (uint32_t id = 0; id < tw_tokenizer_vocab_size(tok); id++) {
            two[1] = id;
            char *text = decode_both(tok, two, 2, 0);
            size_t bl;
            const char *b = tw_tokenizer_token_bytes(tok, id, &bl);
            assert_int_equal(strlen(text), 1 + bl);
            assert_memory_equal(text + 1, b, bl);
            free(text);
        }
        tok_cases_free(&cases);
        tw_tokenizer_free(tok);
    }
    free(ids);
}

/* ---- the rules on small vocabularies ----------------------------------------- */

/* Non-ASCII bytes are written in octal where a letter follows them: a \x
 * escape would swallow the letter. */

typedef struct tiny_spec {
    const char *model_extra; /* more members of "model", each with a trailing comma */
    const char *vocab;       /* members of model.vocab */
    const char *normalizer;
    const char *pre;
    const char *decoder;
    const char *post;
    const char *added; /* members of added_tokens */
} tiny_spec;

static char *tiny_json(const tiny_spec *t)
{
    const char *fmt = "{\"model\": {\"type\": \"WordPiece\", %s \"vocab\": {%s}},"
                      " \"normalizer\": %s, \"pre_tokenizer\": %s, \"decoder\": %s,"
                      " \"post_processor\": %s, \"added_tokens\": [%s]}";
    const char *a[7] = {t->model_extra ? t->model_extra : "",
                        t->vocab,
                        t->normalizer ? t->normalizer : "null",
                        t->pre ? t->pre : "{\"type\": \"BertPreTokenizer\"}",
                        t->decoder ? t->decoder : "{\"type\": \"WordPiece\"}",
                        t->post ? t->post : "null",
                        t->added ? t->added : ""};
    size_t n = strlen(fmt) + 1;
    for (int i = 0; i < 7; i++)
        n += strlen(a[i]);
    char *s = malloc(n);
    snprintf(s, n, fmt, a[0], a[1], a[2], a[3], a[4], a[5], a[6]);
    return s;
}

static tw_tokenizer *tiny(const tiny_spec *t)
{
    char *j = tiny_json(t);
    tw_err err = {{0}};
    tw_tokenizer *tok = NULL;
    tw_status st = tw_tokenizer_from_hf_json(j, strlen(j), NULL, 0, &tok, &err);
    if (st != TW_OK)
        printf("%s\n  in %s\n", err.msg, j);
    free(j);
    assert_int_equal(st, TW_OK);
    return tok;
}

static void expect_ids(const tw_tokenizer *tok, const char *text, size_t len, unsigned flags,
                       const uint32_t *want, size_t n_want)
{
    uint32_t got[MAX_IDS];
    size_t n = encode(tok, text, len, flags, got);
    bool same = n == n_want && (n == 0 || (want && memcmp(got, want, n * sizeof *got) == 0));
    if (!same) {
        printf("\"%.*s\":\n", (int)len, text);
        tok_print_ids("expected", want, n_want);
        tok_print_ids("got     ", got, n);
    }
    assert_true(same);
}

/* EXPECT(tok, "text", ids...): encoded with special parsing. */
#define EXPECT(tok, text, ...)                                                                     \
    do {                                                                                           \
        const uint32_t w_[] = {__VA_ARGS__};                                                       \
        expect_ids(tok, text, sizeof(text) - 1, TW_ENCODE_PARSE_SPECIAL, w_,                       \
                   sizeof w_ / sizeof w_[0]);                                                      \
    } while (0)

#define EXPECT_NONE(tok, text) expect_ids(tok, text, sizeof(text) - 1, 0, NULL, 0)

/* EXPECT_DEC(tok, flags, "text", ids...): whole and streamed decode. */
#define EXPECT_DEC(tok, flags, want, ...)                                                          \
    do {                                                                                           \
        const uint32_t i_[] = {__VA_ARGS__};                                                       \
        char *g_ = decode_both(tok, i_, sizeof i_ / sizeof i_[0], flags);                          \
        if (strcmp(g_, want) != 0)                                                                 \
            printf("decoded \"%s\", wanted \"%s\"\n", g_, want);                                   \
        assert_string_equal(g_, want);                                                             \
        free(g_);                                                                                  \
    } while (0)

static const char *const abc_vocab =
    "\"[UNK]\": 0, \"a\": 1, \"ab\": 2, \"abc\": 3, \"##c\": 4, \"##d\": 5, \"##cd\": 6,"
    " \"##bcd\": 7, \"b\": 8";

static void test_longest_match(void **state)
{
    (void)state;
    tiny_spec t = {.vocab = abc_vocab};
    tw_tokenizer *tok = tiny(&t);
    /* Longest first from the left: not a + ##bcd, not ab + ##cd. */
    EXPECT(tok, "abcd", 3, 5);
    EXPECT(tok, "abc", 3);
    EXPECT(tok, "ab b a", 2, 8, 1);
    /* A word with a gap is one unk, not the pieces before it plus an unk. */
    EXPECT(tok, "abx", 0);
    EXPECT(tok, "ab abx b", 2, 0, 8);
    EXPECT(tok, "xab", 0);
    EXPECT_NONE(tok, "");
    EXPECT_NONE(tok, " \t\n ");
    /* A byte that starts no character sits in its word, which is unknown. */
    expect_ids(tok, "ab a\377b \xc3", 8, 0, (const uint32_t[]){2, 0, 0}, 3);
    tw_tokenizer_free(tok);

    /* Longest match still found when the cap on candidate length (the
     * longest vocabulary text, "[UNK]") falls inside a character. */
    t.vocab = "\"[UNK]\": 0, \"aaaa\": 1, \"##\xc3\xa9\": 2, \"a\": 3";
    tok = tiny(&t);
    EXPECT(tok, "aaaa\xc3\xa9", 1, 2);
    EXPECT(tok, "aaaaa\xc3\xa9", 0);
    tw_tokenizer_free(tok);

    /* Another prefix. */
    t.vocab = "\"[UNK]\": 0, \"ab\": 1, \"@@c\": 2, \"##c\": 3";
    t.model_extra = "\"continuing_subword_prefix\": \"@@\",";
    tok = tiny(&t);
    EXPECT(tok, "abc", 1, 2);
    tw_tokenizer_free(tok);
}

static void test_max_chars(void **state)
{
    (void)state;
    tiny_spec t = {.vocab = abc_vocab, .model_extra = "\"max_input_chars_per_word\": 3,"};
    tw_tokenizer *tok = tiny(&t);
    EXPECT(tok, "abc", 3);
    EXPECT(tok, "abcd ab", 0, 2);
    tw_tokenizer_free(tok);
    /* Characters, not bytes: two e-acutes are four bytes. */
    t.vocab = "\"[UNK]\": 0, \"\xc3\xa9\xc3\xa9\": 1, \"##\xc3\xa9\": 2";
    t.model_extra = "\"max_input_chars_per_word\": 2,";
    tok = tiny(&t);
    EXPECT(tok, "\xc3\xa9\xc3\xa9", 1);
    EXPECT(tok, "\xc3\xa9\xc3\xa9\xc3\xa9", 0);
    tw_tokenizer_free(tok);
    t.model_extra = "\"max_input_chars_per_word\": 3,";
    tok = tiny(&t);
    EXPECT(tok, "\xc3\xa9\xc3\xa9\xc3\xa9", 1, 2);
    tw_tokenizer_free(tok);

    /* The largest limit, and a word that long: candidates are capped by the
     * longest vocabulary text, so this is linear (quadratic would not end). */
    t.vocab = "\"[UNK]\": 0, \"a\": 1, \"##a\": 2";
    t.model_extra = "\"max_input_chars_per_word\": 1048576,";
    tok = tiny(&t);
    size_t big = 1000000, n = 0;
    char *word = malloc(big);
    memset(word, 'a', big);
    tw_err err = {{0}};
    assert_int_equal(tw_tokenizer_encode(tok, word, big, 0, NULL, 0, &n, &err),
                     TW_RESOURCE_EXHAUSTED);
    assert_int_equal(n, big);
    free(word);
    tw_tokenizer_free(tok);
}

static void test_added_tokens(void **state)
{
    (void)state;
    /* "xyz" is only an added token: without special parsing it is text,
     * and the model, whose vocabulary lacks it, makes it unknown. */
    tiny_spec t = {.vocab = "\"[UNK]\": 0, \"a\": 1, \"[CLS]\": 2, \"[SEP]\": 3",
                   .added = "{\"id\": 9, \"content\": \"xyz\", \"special\": true},"
                            " {\"id\": 2, \"content\": \"[CLS]\", \"special\": true,"
                            " \"normalized\": false}"};
    tw_tokenizer *tok = tiny(&t);
    EXPECT(tok, "xyz a", 9, 1);
    expect_ids(tok, "xyz a", 5, 0, (const uint32_t[]){0, 1}, 2);
    EXPECT(tok, "a[CLS]a", 1, 2, 1);
    tw_tokenizer_free(tok);

    t.added = NULL;
    t.post = "{\"type\": \"BertProcessing\", \"sep\": [\"[SEP]\", 3], \"cls\": [\"[CLS]\", 2]}";
    tok = tiny(&t);
    expect_ids(tok, "a", 1, TW_ENCODE_ADD_SPECIAL, (const uint32_t[]){2, 1, 3}, 3);
    tw_tokenizer_free(tok);
    t.post = "{\"type\": \"RobertaProcessing\", \"sep\": [\"</s>\", 3], \"cls\": [\"<s>\", 2],"
             " \"trim_offsets\": true, \"add_prefix_space\": false}";
    tok = tiny(&t);
    expect_ids(tok, "a a", 3, TW_ENCODE_ADD_SPECIAL, (const uint32_t[]){2, 1, 1, 3}, 4);
    tw_tokenizer_free(tok);
}

static void test_pretokenizers(void **state)
{
    (void)state;
    tiny_spec t = {.vocab = "\"[UNK]\": 0, \"a\": 1, \"b\": 2, \",\": 3, \"$\": 4,"
                            " \"\xc2\xbf\": 5, \"+\": 6, \"##,\": 7, \"##b\": 8, \"c\": 9"};
    tw_tokenizer *tok = tiny(&t);
    EXPECT(tok, "a,b", 1, 3, 2);
    EXPECT(tok, "a$b+a", 1, 4, 2, 6, 1); /* ASCII symbols count as punctuation */
    EXPECT(tok, "\302\277a", 5, 1);      /* U+00BF is Po */
    EXPECT(tok, "a\302\240b", 1, 2);     /* NBSP is whitespace to Rust */
    EXPECT(tok, "a\342\200\250b", 1, 2); /* so is U+2028 */
    EXPECT(tok, "a\342\200\213b", 0);    /* U+200B is not (Cf) */
    tw_tokenizer_free(tok);
    t.pre = "{\"type\": \"WhitespaceSplit\"}";
    tok = tiny(&t);
    EXPECT(tok, "a,b c", 1, 7, 8, 9);
    tw_tokenizer_free(tok);
    t.pre = "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"WhitespaceSplit\"},"
            " {\"type\": \"BertPreTokenizer\"}]}";
    tok = tiny(&t);
    EXPECT(tok, "a,b c", 1, 3, 2, 9);
    tw_tokenizer_free(tok);
}

static const char *const norm_vocab =
    "\"[UNK]\": 0, \"a\": 1, \"b\": 2, \"ab\": 3, \"\xe4\xb8\xad\": 4, \"ea\": 5,"
    " \"\xc3\x89\x61\": 6, \"Ea\": 7, \"i\": 8, \"##\xcc\x87\": 9, \"e\": 10";

static void test_bert_normalizer(void **state)
{
    (void)state;
    tiny_spec t = {.vocab = norm_vocab,
                   .normalizer = "{\"type\": \"BertNormalizer\", \"clean_text\": true,"
                                 " \"handle_chinese_chars\": true, \"strip_accents\": null,"
                                 " \"lowercase\": true}"};
    tw_tokenizer *tok = tiny(&t);
    /* clean_text drops NUL, U+FFFD and C* (Cc, Cf, Co, Cn) ... */
    expect_ids(tok, "a\0b", 3, 0, (const uint32_t[]){3}, 1);
    EXPECT(tok, "a\357\277\275b", 3);
    EXPECT(tok, "a\007b", 3);
    EXPECT(tok, "a\342\200\213b", 3); /* U+200B, Cf */
    EXPECT(tok, "a\356\200\200b", 3); /* U+E000, Co */
    EXPECT(tok, "a\315\270b", 3);     /* U+0378, unassigned */
    EXPECT(tok, "a\302\205b", 3);     /* U+0085 is Cc before it is whitespace */
    /* ... and makes tab, newline, CR and Zs a plain space. */
    EXPECT(tok, "a\tb\r\na\343\200\200b", 1, 2, 1, 2);
    /* handle_chinese_chars */
    EXPECT(tok, "a\344\270\255b", 1, 4, 2);
    /* tokenizers 0.23 starts the fifth range at U+2B920, so U+2B820 stays
     * inside its word (see normalize.c). */
    EXPECT(tok, "a\360\253\240\240b", 0);
    /* strip_accents follows lowercase; decomposed and composed agree */
    EXPECT(tok, "\303\211A", 5);
    EXPECT(tok, "E\314\201a", 5);
    tw_tokenizer_free(tok);

    t.normalizer = "{\"type\": \"BertNormalizer\", \"lowercase\": false}";
    tok = tiny(&t);
    EXPECT(tok, "\303\211a", 6);
    expect_ids(tok, "a\0b", 3, 0, (const uint32_t[]){3}, 1); /* clean_text defaults on */
    tw_tokenizer_free(tok);

    t.normalizer = "{\"type\": \"BertNormalizer\", \"lowercase\": false, \"strip_accents\": true}";
    tok = tiny(&t);
    EXPECT(tok, "\303\211a", 7);
    tw_tokenizer_free(tok);

    /* Rust lowercases U+0130 to i + U+0307 (kept without strip_accents). */
    t.normalizer = "{\"type\": \"BertNormalizer\", \"strip_accents\": false}";
    tok = tiny(&t);
    EXPECT(tok, "\xc4\xb0", 8, 9);
    tw_tokenizer_free(tok);

    t.normalizer = "{\"type\": \"BertNormalizer\", \"clean_text\": false,"
                   " \"handle_chinese_chars\": false}";
    tok = tiny(&t);
    expect_ids(tok, "a\0b", 3, 0, (const uint32_t[]){0}, 1);
    EXPECT(tok, "a\344\270\255b", 0);
    tw_tokenizer_free(tok);
}

static const char *const dec_vocab =
    "\"[UNK]\": 0, \"don\": 1, \"'\": 2, \"t\": 3, \"a\": 4, \".\": 5, \"##s\": 6, \"'s\": 7,"
    " \"do\": 8, \"not\": 9, \"so do not\": 10, \"[CLS]\": 11, \"b\": 13";

static void test_decoder(void **state)
{
    (void)state;
    tiny_spec t = {.vocab = dec_vocab,
                   .added = "{\"id\": 11, \"content\": \"[CLS]\", \"special\": true}"};
    tw_tokenizer *tok = tiny(&t);
    EXPECT_DEC(tok, 0, "don ' t", 1, 2, 3); /* cleanup is per token */
    EXPECT_DEC(tok, 0, "a.", 4, 5);
    EXPECT_DEC(tok, 0, "as", 4, 6);
    EXPECT_DEC(tok, 0, "##s", 6); /* the first token keeps its prefix */
    EXPECT_DEC(tok, 0, ". a", 5, 4);
    EXPECT_DEC(tok, 0, "a's", 4, 7);
    EXPECT_DEC(tok, 0, "do not", 8, 9);
    EXPECT_DEC(tok, 0, "a so don't", 4, 10);
    EXPECT_DEC(tok, 0, "[CLS] a", 11, 4);
    EXPECT_DEC(tok, TW_DECODE_SKIP_SPECIAL, "as", 11, 4, 6);
    EXPECT_DEC(tok, 0, "b", 12, 13); /* id 12 names no token */
    EXPECT_DEC(tok, 0, "", 12);
    tw_tokenizer_free(tok);

    t.decoder = "{\"type\": \"WordPiece\", \"prefix\": \"##\", \"cleanup\": false}";
    tok = tiny(&t);
    EXPECT_DEC(tok, 0, "a .", 4, 5);
    EXPECT_DEC(tok, 0, "a so do not", 4, 10);
    tw_tokenizer_free(tok);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_uncased),
        cmocka_unit_test(test_reference_cased),
        cmocka_unit_test(test_golden_bert_ids),
        cmocka_unit_test(test_special_tokens),
        cmocka_unit_test(test_round_trip_uncased),
        cmocka_unit_test(test_round_trip_cased),
        cmocka_unit_test(test_stream_equals_decode),
        cmocka_unit_test(test_longest_match),
        cmocka_unit_test(test_max_chars),
        cmocka_unit_test(test_added_tokens),
        cmocka_unit_test(test_pretokenizers),
        cmocka_unit_test(test_bert_normalizer),
        cmocka_unit_test(test_decoder),
    };
    return cmocka_run_group_tests_name("core/tokenizer/wordpiece", tests, NULL, NULL);
}
