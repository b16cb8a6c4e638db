/* GGUF "bert" vocabularies made here with the GGUF writer: a small valid
 * one read the way llama.cpp's files mean it (phantom space undone, ids
 * from llama.cpp's keys or ours, the normalizer switches), and hostile
 * variants (ids missing or out of range, a token list of the wrong type,
 * empty and clashing tokens, ...) refused with a message naming the key;
 * random damage never crashes. */
#include "tw/gguf.h"
#include "wp_test_util.h"

#define META "\xe2\x96\x81"

/* The vocabulary in the form llama.cpp's converter writes: "s", "▁", "é"
 * and "e" are the continuations ##s, ##▁, ##é and ##e; "[unused1]" is
 * spelled as llama.cpp's first converter left every bracketed token. */
static const char *const base_tokens[] = {
    "[PAD]",      "[UNK]",    "[CLS]",  "[SEP]",          "[MASK]",    META "hello",
    META "world", "s",        META "!", META "[unused0]", "[unused1]", META,
    META "caf",   "\xc3\xa9", "e",      META "Hello",
};
#define N_BASE (sizeof base_tokens / sizeof base_tokens[0])
static const int32_t base_types[N_BASE] = {3, 3, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};

static char *tmpdir;

static int setup(void **state)
{
    (void)state;
    tmpdir = tw_test_mkdtemp();
    return tmpdir ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    tw_test_rmtree(tmpdir);
    free(tmpdir);
    return 0;
}

#define OK(x) assert_int_equal((x), TW_OK)

/* The ids under llama.cpp's keys, as its converter wrote them before
 * [CLS] became BOS too. */
static void write_base(tw_gguf_writer *w, tw_err *err)
{
    OK(tw_gguf_writer_set_str(w, "general.architecture", "bert", err));
    OK(tw_gguf_writer_set_str(w, "tokenizer.ggml.model", "bert", err));
    OK(tw_gguf_writer_set_arr_strs(w, "tokenizer.ggml.tokens", base_tokens, N_BASE, err));
    OK(tw_gguf_writer_set_arr_data(w, "tokenizer.ggml.token_type", TW_GGUF_I32, base_types, N_BASE,
                                   err));
    OK(tw_gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 1, err));
    OK(tw_gguf_writer_set_u32(w, "tokenizer.ggml.cls_token_id", 2, err));
    OK(tw_gguf_writer_set_u32(w, "tokenizer.ggml.seperator_token_id", 3, err));
    OK(tw_gguf_writer_set_u32(w, "tokenizer.ggml.padding_token_id", 0, err));
    OK(tw_gguf_writer_set_u32(w, "tokenizer.ggml.mask_token_id", 4, err));
}

typedef void (*mutate_fn)(tw_gguf_writer *w, tw_err *err);

/* Writes the base vocabulary changed by mutate and loads it. */
static tw_status load(mutate_fn mutate, tw_tokenizer **tok, tw_err *err)
{
    tw_gguf_writer *w = NULL;
    OK(tw_gguf_writer_new(&w, err));
    write_base(w, err);
    if (mutate)
        mutate(w, err);
    char path[1100];
    snprintf(path, sizeof path, "%s/v.gguf", tmpdir);
    OK(tw_gguf_writer_write(w, path, err));
    tw_gguf_writer_free(w);
    *tok = NULL;
    return tw_tokenizer_load_gguf(path, tok, err);
}

static tw_tokenizer *load_ok(mutate_fn mutate)
{
    tw_err err = {{0}};
    tw_tokenizer *tok = NULL;
    tw_status st = load(mutate, &tok, &err);
    if (st != TW_OK)
        printf("load: %s\n", err.msg);
    assert_int_equal(st, TW_OK);
    return tok;
}

#define IDS(...) ((const uint32_t[]){__VA_ARGS__}), sizeof((const uint32_t[]){__VA_ARGS__}) / 4

static void expect(const tw_tokenizer *tok, const char *text, unsigned flags, const uint32_t *want,
                   size_t n_want)
{
    uint32_t got[64];
    size_t n = encode(tok, text, strlen(text), flags, got);
    if (n != n_want || memcmp(got, want, n * sizeof *got) != 0) {
        printf("\"%s\":\n", text);
        for (size_t i = 0; i < n; i++)
            printf(" %u", got[i]);
        printf("\n");
    }
    assert_int_equal(n, n_want);
    assert_memory_equal(got, want, n * sizeof *got);
}

static void test_valid(void **state)
{
    (void)state;
    tw_tokenizer *tok = load_ok(NULL);
    assert_int_equal(tw_tokenizer_kind_of(tok), TW_TOKENIZER_WORDPIECE);
    static const char *const texts[N_BASE] = {
        "[PAD]", "[UNK]",      "[CLS]", "[SEP]",     "[MASK]",    "hello",
        "world", "##s",        "!",     "[unused0]", "[unused1]", "##\xe2\x96\x81",
        "caf",   "##\xc3\xa9", "##e",   "Hello",
    };
    for (uint32_t id = 0; id < N_BASE; id++)
        assert_string_equal(tw_tokenizer_token_text(tok, id), texts[id]);
    assert_int_equal(tw_tokenizer_bos(tok), 2);
    assert_int_equal(tw_tokenizer_eos(tok), 3);
    assert_int_equal(tw_tokenizer_unk(tok), 1);
    assert_int_equal(tw_tokenizer_pad(tok), 0);
    assert_true(tw_tokenizer_adds_bos(tok) && tw_tokenizer_adds_eos(tok));

    /* lowercased, accents stripped, "!" a word of its own, "##" continuing */
    unsigned both = TW_ENCODE_ADD_SPECIAL | TW_ENCODE_PARSE_SPECIAL;
    expect(tok, "Hello  worlds!", both, IDS(2, 5, 6, 7, 8, 3));
    expect(tok, "CAF\xc3\x89 hello" META, 0, IDS(12, 14, 5, 11));
    expect(tok, "helloworld", 0, IDS(1));
    expect(tok, "a [MASK] hello", TW_ENCODE_PARSE_SPECIAL, IDS(1, 4, 5));
    uint32_t ids[] = {2, 5, 6, 7, 8, 11, 3};
    char *text = decode_both(tok, ids, 7, 0);
    assert_string_equal(text, "[CLS] hello worlds!" META " [SEP]");
    free(text);
    text = decode_both(tok, ids, 7, TW_DECODE_SKIP_SPECIAL);
    assert_string_equal(text, "hello worlds!" META);
    free(text);
    tw_tokenizer_free(tok);
}

static void set_cased(tw_gguf_writer *w, tw_err *err)
{
    OK(tw_gguf_writer_set_bool(w, "tokenizer.ggml.normalizer.lowercase", false, err));
}

static void set_cased_stripped(tw_gguf_writer *w, tw_err *err)
{
    set_cased(w, err);
    OK(tw_gguf_writer_set_bool(w, "tokenizer.ggml.normalizer.strip_accents", true, err));
}

static void set_uncased_accents(tw_gguf_writer *w, tw_err *err)
{
    OK(tw_gguf_writer_set_bool(w, "tokenizer.ggml.normalizer.lowercase", true, err));
    OK(tw_gguf_writer_set_bool(w, "tokenizer.ggml.normalizer.strip_accents", false, err));
}

/* llama.cpp's tokenizer.ggml.normalizer.* switches, strip_accents following
 * lowercase unless set. */
static void test_normalizer_keys(void **state)
{
    (void)state;
    tw_tokenizer *tok = load_ok(set_cased);
    expect(tok, "Hello hello caf\xc3\xa9", 0, IDS(15, 5, 12, 13));
    tw_tokenizer_free(tok);
    tok = load_ok(set_cased_stripped);
    expect(tok, "Hello caf\xc3\xa9", 0, IDS(15, 12, 14));
    tw_tokenizer_free(tok);
    tok = load_ok(set_uncased_accents);
    expect(tok, "Hello CAF\xc3\x89", 0, IDS(5, 12, 13));
    tw_tokenizer_free(tok);
}

static void ours_only(tw_gguf_writer *w, tw_err *err)
{
    tw_gguf_writer_remove(w, "tokenizer.ggml.cls_token_id");
    tw_gguf_writer_remove(w, "tokenizer.ggml.seperator_token_id");
    OK(tw_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 4, err));
    OK(tw_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 0, err));
}

static void cls_over_bos(tw_gguf_writer *w, tw_err *err)
{
    OK(tw_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 4, err));
    OK(tw_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 0, err));
}

static void no_ids(tw_gguf_writer *w, tw_err *err)
{
    (void)err;
    static const char *const keys[] = {"unknown_token_id", "cls_token_id", "seperator_token_id",
                                       "padding_token_id", "mask_token_id"};
    for (size_t i = 0; i < 5; i++) {
        char k[64];
        snprintf(k, sizeof k, "tokenizer.ggml.%s", keys[i]);
        tw_gguf_writer_remove(w, k);
    }
}

static void negative_cls(tw_gguf_writer *w, tw_err *err)
{
    OK(tw_gguf_writer_set_i32(w, "tokenizer.ggml.cls_token_id", -1, err));
    OK(tw_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 4, err));
}

static void add_flags_off(tw_gguf_writer *w, tw_err *err)
{
    OK(tw_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", false, err));
    OK(tw_gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token", false, err));
}

/* BOS is [CLS] and EOS [SEP]: cls_token_id and seperator_token_id first,
 * then BOS and EOS, then the tokens' texts; a negative id means none. */
static void test_special_keys(void **state)
{
    (void)state;
    static const struct {
        mutate_fn fn;
        uint32_t bos, eos, unk;
    } cases[] = {
        {ours_only, 4, 0, 1},
        {cls_over_bos, 2, 3, 1},
        {no_ids, 2, 3, 1},
        {negative_cls, 4, 3, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tw_tokenizer *tok = load_ok(cases[i].fn);
        assert_int_equal(tw_tokenizer_bos(tok), cases[i].bos);
        assert_int_equal(tw_tokenizer_eos(tok), cases[i].eos);
        assert_int_equal(tw_tokenizer_unk(tok), cases[i].unk);
        expect(tok, "hello", TW_ENCODE_ADD_SPECIAL, IDS(cases[i].bos, 5, cases[i].eos));
        tw_tokenizer_free(tok);
    }
    /* llama.cpp adds [CLS] and [SEP] to a "bert" text whatever these say */
    tw_tokenizer *tok = load_ok(add_flags_off);
    expect(tok, "hello", TW_ENCODE_ADD_SPECIAL, IDS(2, 5, 3));
    tw_tokenizer_free(tok);
}

/* ---- hostile files ------------------------------------------------------------ */

static void cls_out_of_range(tw_gguf_writer *w, tw_err *err)
{
    OK(tw_gguf_writer_set_u32(w, "tokenizer.ggml.cls_token_id", N_BASE, err));
}

static void bos_out_of_range(tw_gguf_writer *w, tw_err *err)
{
    tw_gguf_writer_remove(w, "tokenizer.ggml.cls_token_id");
    OK(tw_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 99, err));
}

static void unk_huge(tw_gguf_writer *w, tw_err *err)
{
    OK(tw_gguf_writer_set_u64(w, "tokenizer.ggml.unknown_token_id", 5000000000ull, err));
}

static void unk_max(tw_gguf_writer *w, tw_err *err)
{
    OK(tw_gguf_writer_set_u64(w, "tokenizer.ggml.unknown_token_id", UINT64_MAX, err));
}

static void sep_string(tw_gguf_writer *w, tw_err *err)
{
    OK(tw_gguf_writer_set_str(w, "tokenizer.ggml.seperator_token_id", "[SEP]", err));
}

static void pad_float(tw_gguf_writer *w, tw_err *err)
{
    OK(tw_gguf_writer_set_f32(w, "tokenizer.ggml.padding_token_id", 0.0f, err));
}

static void mask_out_of_range(tw_gguf_writer *w, tw_err *err)
{
    OK(tw_gguf_writer_set_u32(w, "tokenizer.ggml.mask_token_id", UINT32_MAX, err));
}

static void tokens_i32(tw_gguf_writer *w, tw_err *err)
{
    OK(tw_gguf_writer_set_arr_data(w, "tokenizer.ggml.tokens", TW_GGUF_I32, base_types, N_BASE,
                                   err));
}

static void tokens_scalar(tw_gguf_writer *w, tw_err *err)
{
    OK(tw_gguf_writer_set_str(w, "tokenizer.ggml.tokens", "[CLS]", err));
}

static void tokens_missing(tw_gguf_writer *w, tw_err *err)
{
    (void)err;
    tw_gguf_writer_remove(w, "tokenizer.ggml.tokens");
}

static void tokens_none(tw_gguf_writer *w, tw_err *err)
{
    OK(tw_gguf_writer_set_arr_strs(w, "tokenizer.ggml.tokens", base_tokens, 0, err));
}

static void set_tokens(tw_gguf_writer *w, tw_err *err, size_t id, const char *text)
{
    const char *t[N_BASE];
    memcpy(t, base_tokens, sizeof t);
    t[id] = text;
    OK(tw_gguf_writer_set_arr_strs(w, "tokenizer.ggml.tokens", t, N_BASE, err));
}

static void token_empty(tw_gguf_writer *w, tw_err *err)
{
    set_tokens(w, err, 6, "");
}
static void token_empty_control(tw_gguf_writer *w, tw_err *err)
{
    set_tokens(w, err, 4, "");
}
/* "[UNK]" and "▁[UNK]" are one text once the phantom space is gone */
static void token_clash(tw_gguf_writer *w, tw_err *err)
{
    set_tokens(w, err, 9, META "[UNK]");
}
static void continuation_clash(tw_gguf_writer *w, tw_err *err)
{
    set_tokens(w, err, 13, "s");
}

static void token_huge(tw_gguf_writer *w, tw_err *err)
{
    char *big = malloc(70000);
    memset(big, 'a', 69999);
    big[69999] = '\0';
    set_tokens(w, err, 7, big);
    free(big);
}

static void no_unk(tw_gguf_writer *w, tw_err *err)
{
    tw_gguf_writer_remove(w, "tokenizer.ggml.unknown_token_id");
    set_tokens(w, err, 1, "[UNKNOWN]");
}

static void no_cls(tw_gguf_writer *w, tw_err *err)
{
    tw_gguf_writer_remove(w, "tokenizer.ggml.cls_token_id");
    set_tokens(w, err, 2, "<s>");
}

static void no_sep(tw_gguf_writer *w, tw_err *err)
{
    tw_gguf_writer_remove(w, "tokenizer.ggml.seperator_token_id");
    set_tokens(w, err, 3, "</s>");
}

static void lowercase_u8(tw_gguf_writer *w, tw_err *err)
{
    OK(tw_gguf_writer_set_u8(w, "tokenizer.ggml.normalizer.lowercase", 1, err));
}

static void accents_string(tw_gguf_writer *w, tw_err *err)
{
    OK(tw_gguf_writer_set_str(w, "tokenizer.ggml.normalizer.strip_accents", "yes", err));
}

static void types_short(tw_gguf_writer *w, tw_err *err)
{
    OK(tw_gguf_writer_set_arr_data(w, "tokenizer.ggml.token_type", TW_GGUF_I32, base_types,
                                   N_BASE - 1, err));
}

static void types_strings(tw_gguf_writer *w, tw_err *err)
{
    OK(tw_gguf_writer_set_arr_strs(w, "tokenizer.ggml.token_type", base_tokens, N_BASE, err));
}

static const struct {
    const char *name;
    mutate_fn fn;
    const char *needle;
} hostile[] = {
    {"cls out of range", cls_out_of_range,
     "tokenizer.ggml.cls_token_id = 16 is outside the vocabulary of 16 tokens"},
    {"bos out of range", bos_out_of_range, "tokenizer.ggml.bos_token_id = 99 is outside"},
    {"unk 5e9", unk_huge, "unknown_token_id = 5000000000 is outside"},
    {"unk 2^64-1", unk_max, "unknown_token_id = 18446744073709551615 is outside"},
    {"sep a string", sep_string, "tokenizer.ggml.seperator_token_id is not an integer"},
    {"pad a float", pad_float, "tokenizer.ggml.padding_token_id is not an integer"},
    {"mask out of range", mask_out_of_range, "mask_token_id = 4294967295 is outside"},
    {"tokens i32", tokens_i32, "tokenizer.ggml.tokens is not a string array"},
    {"tokens a string", tokens_scalar, "tokenizer.ggml.tokens"},
    {"tokens missing", tokens_missing, "tokenizer.ggml.tokens"},
    {"no tokens", tokens_none, "tokenizer.ggml.tokens has 0 entries"},
    {"empty token", token_empty, "tokenizer.ggml.tokens[6] is empty"},
    {"empty control token", token_empty_control, "tokenizer.ggml.tokens[4] is empty"},
    {"clash", token_clash, "tokenizer.ggml.tokens[1] and [9] are both \"[UNK]\""},
    {"continuation clash", continuation_clash, "[7] and [13] are both \"##s\""},
    {"huge token", token_huge, "tokenizer.ggml.tokens[7] is 69999 bytes long"},
    {"no unk", no_unk, "no [UNK] token: tokenizer.ggml.unknown_token_id unset"},
    {"no cls", no_cls,
     "no [CLS] token: tokenizer.ggml.cls_token_id and "
     "tokenizer.ggml.bos_token_id unset"},
    {"no sep", no_sep, "no [SEP] token"},
    {"lowercase u8", lowercase_u8, "tokenizer.ggml.normalizer.lowercase"},
    {"strip_accents a string", accents_string, "tokenizer.ggml.normalizer.strip_accents"},
    {"types short", types_short, "token_type has 15 entries, tokens has 16"},
    {"types strings", types_strings, "token_type[0] is not an integer"},
};

static void test_hostile(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof hostile / sizeof hostile[0]; i++) {
        tw_err err = {{0}};
        tw_tokenizer *tok = NULL;
        tw_status st = load(hostile[i].fn, &tok, &err);
        if (st == TW_OK || !strstr(err.msg, hostile[i].needle))
            fail_msg("%s: got %d \"%s\", wanted an error with \"%s\"", hostile[i].name, st, err.msg,
                     hostile[i].needle);
        assert_null(tok);
    }
}

/* Random token texts, types and ids: every file loads or is refused with a
 * message, and whatever loads encodes and decodes. */
static void test_random_damage(void **state)
{
    (void)state;
    tw_test_rng rng = {0x5eedb3e7ull};
    char path[1100];
    snprintf(path, sizeof path, "%s/r.gguf", tmpdir);
    size_t loaded = 0;
    for (int round = 0; round < 300; round++) {
        const char *t[N_BASE];
        int32_t types[N_BASE];
        char texts[N_BASE][8];
        static const char alphabet[] = "ab#[]!\xe2\x96\x81\xc3\xa9 ";
        for (size_t i = 0; i < N_BASE; i++) {
            t[i] = base_tokens[i];
            types[i] = base_types[i];
            if (tw_test_rand_u64(&rng) % 4 == 0) {
                size_t len = tw_test_rand_u64(&rng) % 7;
                for (size_t k = 0; k < len; k++)
                    texts[i][k] = alphabet[tw_test_rand_u64(&rng) % (sizeof alphabet - 1)];
                texts[i][len] = '\0';
                t[i] = texts[i];
            }
            if (tw_test_rand_u64(&rng) % 6 == 0)
                types[i] = (int32_t)(tw_test_rand_u64(&rng) % 12) - 3;
        }
        tw_err err = {{0}};
        tw_gguf_writer *w = NULL;
        OK(tw_gguf_writer_new(&w, &err));
        write_base(w, &err);
        OK(tw_gguf_writer_set_arr_strs(w, "tokenizer.ggml.tokens", t, N_BASE, &err));
        OK(tw_gguf_writer_set_arr_data(w, "tokenizer.ggml.token_type", TW_GGUF_I32, types, N_BASE,
                                       &err));
        static const char *const keys[] = {"tokenizer.ggml.cls_token_id",
                                           "tokenizer.ggml.unknown_token_id",
                                           "tokenizer.ggml.seperator_token_id"};
        if (tw_test_rand_u64(&rng) % 3 == 0)
            OK(tw_gguf_writer_set_i64(w, keys[tw_test_rand_u64(&rng) % 3],
                                      (int64_t)(tw_test_rand_u64(&rng) % 40) - 20, &err));
        OK(tw_gguf_writer_write(w, path, &err));
        tw_gguf_writer_free(w);
        tw_tokenizer *tok = NULL;
        tw_status st = tw_tokenizer_load_gguf(path, &tok, &err);
        if (st != TW_OK) {
            assert_null(tok);
            assert_true(err.msg[0] != '\0');
            continue;
        }
        loaded++;
        static const char text[] = "Hello [CLS] caf\xc3\xa9 ab#! a\xe2\x96\x81 [MASK]";
        uint32_t ids[64];
        size_t n = encode(tok, text, sizeof text - 1,
                          TW_ENCODE_ADD_SPECIAL | TW_ENCODE_PARSE_SPECIAL, ids);
        free(decode_both(tok, ids, n, 0));
        free(decode_both(tok, ids, n, TW_DECODE_SKIP_SPECIAL));
        tw_tokenizer_free(tok);
    }
    assert_true(loaded > 20);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid),         cmocka_unit_test(test_normalizer_keys),
        cmocka_unit_test(test_special_keys),  cmocka_unit_test(test_hostile),
        cmocka_unit_test(test_random_damage),
    };
    return cmocka_run_group_tests_name("core/tokenizer/wordpiece_gguf_hostile", tests, setup,
                                       teardown);
}
