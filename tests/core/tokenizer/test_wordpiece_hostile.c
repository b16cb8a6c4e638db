/* WordPiece from hostile tokenizer.json files (inline, in a fresh
 * directory, and the real file damaged at random) refused with a message
 * that names the field, never a crash; and hostile text through a real
 * WordPiece tokenizer. */
#include "wp_test_util.h"

static void expect_refused(const char *json, tw_status code, const char *needle)
{
    tw_err err = {{0}};
    tw_tokenizer *tok = (tw_tokenizer *)0x1;
    tw_status st = tw_tokenizer_from_hf_json(json, strlen(json), NULL, 0, &tok, &err);
    if (st != code || !strstr(err.msg, needle))
        printf("got %d \"%s\", wanted %d containing \"%s\"\n  for %s\n", st, err.msg, code, needle,
               json);
    assert_int_equal(st, code);
    assert_non_null(strstr(err.msg, needle));
    assert_null(tok);
}

#define WP_MODEL(extra, vocab)                                                                     \
    "{\"model\": {\"type\": \"WordPiece\", " extra "\"vocab\": {" vocab "}}"
#define UNK_A "\"[UNK]\": 0, \"a\": 1"

typedef struct bad_case {
    const char *json;
    tw_status code;
    const char *needle;
} bad_case;

static const bad_case bad_cases[] = {
    {WP_MODEL("", "\"a\": 0") "}", TW_INVALID_ARGUMENT,
     "unk_token \"[UNK]\" is not in model.vocab"},
    {WP_MODEL("\"unk_token\": \"?\", ", UNK_A) "}", TW_INVALID_ARGUMENT,
     "\"?\" is not in model.vocab"},
    {WP_MODEL("", "\"a\": 0") ", \"added_tokens\": [{\"id\": 1, \"content\": \"[UNK]\"}]}",
     TW_INVALID_ARGUMENT, "is not in model.vocab"},
    {WP_MODEL("\"unk_token\": 7, ", UNK_A) "}", TW_INVALID_ARGUMENT, "unk_token must be a string"},
    {WP_MODEL("\"continuing_subword_prefix\": \"#################\", ", UNK_A) "}",
     TW_INVALID_ARGUMENT, "continuing_subword_prefix is 17 bytes long (at most 16)"},
    {WP_MODEL("\"continuing_subword_prefix\": 5, ", UNK_A) "}", TW_INVALID_ARGUMENT,
     "continuing_subword_prefix must be a string"},
    {WP_MODEL("\"max_input_chars_per_word\": 0, ", UNK_A) "}", TW_INVALID_ARGUMENT,
     "max_input_chars_per_word must be an integer in 1.."},
    {WP_MODEL("\"max_input_chars_per_word\": -3, ", UNK_A) "}", TW_INVALID_ARGUMENT,
     "max_input_chars_per_word"},
    {WP_MODEL("\"max_input_chars_per_word\": 99999999999999, ", UNK_A) "}", TW_INVALID_ARGUMENT,
     "max_input_chars_per_word"},
    {WP_MODEL("\"max_input_chars_per_word\": 1e300, ", UNK_A) "}", TW_INVALID_ARGUMENT,
     "max_input_chars_per_word"},
    {WP_MODEL("\"max_input_chars_per_word\": \"100\", ", UNK_A) "}", TW_INVALID_ARGUMENT,
     "max_input_chars_per_word"},
    {WP_MODEL("", "\"[UNK]\": 0, \"a\": 16777216") "}", TW_INVALID_ARGUMENT,
     "id must be an integer"},
    {WP_MODEL("", "\"[UNK]\": 0, \"a\": -1") "}", TW_INVALID_ARGUMENT, "id must be an integer"},
    {WP_MODEL("", "\"[UNK]\": 0, \"a\": 1.5") "}", TW_INVALID_ARGUMENT, "id must be an integer"},
    {WP_MODEL("", "\"[UNK]\": 0, \"a\": 0") "}", TW_INVALID_ARGUMENT, "two tokens"},
    {"{\"model\": {\"type\": \"WordPiece\", \"vocab\": [\"[UNK]\"]}}", TW_INVALID_ARGUMENT,
     "model.vocab must be an object"},
    {"{\"model\": {\"type\": \"WordPiece\"}}", TW_INVALID_ARGUMENT,
     "model.vocab must be an object"},
    {"{\"model\": {\"type\": 5, \"vocab\": {}}}", TW_INVALID_ARGUMENT,
     "model.type must be a string"},
    {WP_MODEL("",
              UNK_A) ", \"normalizer\": {\"type\": \"BertNormalizer\", \"lowercase\": \"yes\"}}",
     TW_INVALID_ARGUMENT, "BertNormalizer.lowercase must be a boolean"},
    {WP_MODEL("", UNK_A) ", \"normalizer\": {\"type\": \"BertNormalizer\", \"strip_accents\": 1}}",
     TW_INVALID_ARGUMENT, "BertNormalizer.strip_accents must be a boolean"},
    {WP_MODEL("", UNK_A) ", \"normalizer\": {\"type\": \"BertNormalizer\", \"clean_text\": []}}",
     TW_INVALID_ARGUMENT, "BertNormalizer.clean_text must be a boolean"},
    {WP_MODEL("",
              UNK_A) ", \"decoder\": {\"type\": \"WordPiece\", \"prefix\": \"#################\"}}",
     TW_INVALID_ARGUMENT, "decoder WordPiece.prefix is 17 bytes long"},
    {WP_MODEL(
         "",
         UNK_A) ", \"decoder\": {\"type\": \"WordPiece\", \"prefix\": null, \"cleanup\": \"no\"}}",
     TW_INVALID_ARGUMENT, "decoder WordPiece.cleanup must be a boolean"},
    {WP_MODEL(
         "",
         UNK_A) ", \"decoder\": {\"type\": \"Sequence\", \"decoders\": [{\"type\": \"WordPiece\"},"
                " {\"type\": \"WordPiece\"}]}}",
     TW_UNIMPLEMENTED, "given twice"},
    {WP_MODEL(
         "",
         UNK_A) ", \"decoder\": {\"type\": \"Sequence\", \"decoders\": [{\"type\": \"WordPiece\"},"
                " {\"type\": \"ByteLevel\"}]}}",
     TW_UNIMPLEMENTED, "combined"},
    {WP_MODEL("", UNK_A) ", \"post_processor\": {\"type\": \"BertProcessing\", \"cls\": \"[CLS]\","
                         " \"sep\": [\"a\", 1]}}",
     TW_INVALID_ARGUMENT, "post_processor BertProcessing.cls must be [token, id]"},
    {WP_MODEL("",
              UNK_A) ", \"post_processor\": {\"type\": \"BertProcessing\", \"cls\": [\"a\", 1]}}",
     TW_INVALID_ARGUMENT, "BertProcessing.sep must be [token, id]"},
    {WP_MODEL("", UNK_A) ", \"post_processor\": {\"type\": \"BertProcessing\", \"cls\": [\"a\", 2],"
                         " \"sep\": [\"a\", 1]}}",
     TW_INVALID_ARGUMENT, "id 2 is outside the vocabulary (2 tokens)"},
    {WP_MODEL("",
              UNK_A) ", \"post_processor\": {\"type\": \"RobertaProcessing\", \"cls\": [\"a\", -1],"
                     " \"sep\": [\"a\", 1]}}",
     TW_INVALID_ARGUMENT, "RobertaProcessing.cls id -1 is outside"},
    {WP_MODEL("", UNK_A) ", \"normalizer\": {\"type\": \"Precompiled\"}}", TW_UNIMPLEMENTED,
     "Precompiled"},
    {WP_MODEL("", UNK_A) ", \"pre_tokenizer\": {\"type\": \"ByteLevel\"}}", TW_UNIMPLEMENTED,
     "ByteLevel with a WordPiece model"},
};

static void test_hostile_json(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++)
        expect_refused(bad_cases[i].json, bad_cases[i].code, bad_cases[i].needle);
}

/* The same through the directory loader, files written to a fresh
 * directory: the message names the directory and the field. */
static void test_hostile_dir(void **state)
{
    (void)state;
    char *dir = tw_test_mkdtemp();
    assert_non_null(dir);
    char path[1024];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    tw_err err = {{0}};
    tw_tokenizer *tok = NULL;
    assert_int_equal(tw_tokenizer_load_hf(dir, &tok, &err), TW_NOT_FOUND);
    assert_null(tok);
    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        const bad_case *bc = &bad_cases[i];
        assert_true(tw_test_write_file(path, bc->json, strlen(bc->json)));
        tw_status st = tw_tokenizer_load_hf(dir, &tok, &err);
        assert_int_equal(st, bc->code);
        assert_null(tok);
        assert_non_null(strstr(err.msg, bc->needle));
        assert_non_null(strstr(err.msg, dir));
    }
    /* the real file cut short, and a good file with a broken config */
    snprintf(path, sizeof path, "%s/tokenizers/wordpiece-uncased/tokenizer.json", TW_REPO_DATA);
    size_t len;
    char *good = tw_test_read_file(path, &len);
    assert_non_null(good);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    assert_true(tw_test_write_file(path, good, len / 2));
    assert_int_equal(tw_tokenizer_load_hf(dir, &tok, &err), TW_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "tokenizer.json: line"));
    assert_true(tw_test_write_file(path, good, len));
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    assert_true(tw_test_write_file(path, "{\"unk_token\": 5}", 16));
    assert_int_equal(tw_tokenizer_load_hf(dir, &tok, &err), TW_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "unk_token"));
    assert_true(tw_test_write_file(path, "{\"unk_token\": \"[UNK]\"}", 22));
    assert_int_equal(tw_tokenizer_load_hf(dir, &tok, &err), TW_OK);
    tw_tokenizer_free(tok);
    free(good);
    tw_test_rmtree(dir);
    free(dir);
}

/* Seeded damage to the real file: every variant loads or is refused with a
 * message, and one that loads encodes and decodes hostile text. */
static void test_mutated_files(void **state)
{
    (void)state;
    char path[1100];
    snprintf(path, sizeof path, "%s/tokenizers/wordpiece-uncased/tokenizer.json", TW_REPO_DATA);
    size_t len;
    char *good = tw_test_read_file(path, &len);
    assert_non_null(good);
    char *buf = malloc(len + 1);
    tw_test_rng rng = {0x5eed1234ull};
    static const char junk[] = "{}[]\":,0123456789-.e#\\ aZ\xff\x01";
    static const char text[] = "Hello, [CLS] w\xc3\xb6rld \xe4\xb8\xad\xe6\x96\x87 ##x \xff!";
    size_t loaded = 0;
    for (int it = 0; it < 400; it++) {
        memcpy(buf, good, len);
        size_t n = len;
        int edits = 1 + (int)(tw_test_rand_u64(&rng) % 3);
        for (int e = 0; e < edits; e++) {
            size_t at = (size_t)(tw_test_rand_u64(&rng) % n);
            if (tw_test_rand_u64(&rng) % 8 == 0)
                n = at + 1;
            else
                buf[at] = junk[tw_test_rand_u64(&rng) % (sizeof junk - 1)];
        }
        tw_err err = {{0}};
        tw_tokenizer *tok = NULL;
        tw_status st = tw_tokenizer_from_hf_json(buf, n, NULL, 0, &tok, &err);
        if (st != TW_OK) {
            assert_null(tok);
            assert_true(strlen(err.msg) > 0);
            continue;
        }
        loaded++;
        uint32_t ids[256];
        size_t k = 0;
        st = tw_tokenizer_encode(tok, text, sizeof text - 1,
                                 TW_ENCODE_ADD_SPECIAL | TW_ENCODE_PARSE_SPECIAL, ids, 256, &k,
                                 &err);
        assert_int_equal(st, TW_OK);
        free(decode_both(tok, ids, k, 0));
        tw_tokenizer_free(tok);
    }
    /* most single edits land in the vocabulary's strings and still load */
    assert_true(loaded > 20);
    free(buf);
    free(good);
}

/* Random bytes and characters into the real tokenizer: ids always come
 * back, within the vocabulary, and decode the same whole and streamed. */
static void test_hostile_text(void **state)
{
    (void)state;
    tw_tokenizer *tok = load_repo("tokenizers/wordpiece-cased");
    static const char *const parts[] = {"a",
                                        "Z",
                                        " ",
                                        "\t",
                                        "\n",
                                        "##",
                                        "[SEP]",
                                        "[UNK]",
                                        ".",
                                        "\xc3\xa9",
                                        "e\xcc\x81",
                                        "\xe4\xb8\xad",
                                        "\xf0\x9f\x98\x80",
                                        "\xff",
                                        "\xc3",
                                        "\xe2\x80\x8b",
                                        "\xc4\xb0",
                                        "x",
                                        "\0"};
    tw_test_rng rng = {42};
    char text[1200];
    uint32_t *ids = malloc(MAX_IDS * sizeof *ids);
    for (int it = 0; it < 300; it++) {
        size_t n = 0, want = tw_test_rand_u64(&rng) % 1000;
        while (n < want) {
            const char *p = parts[tw_test_rand_u64(&rng) % (sizeof parts / sizeof parts[0])];
            size_t pl = p[0] ? strlen(p) : 1;
            memcpy(text + n, p, pl);
            n += pl;
        }
        size_t k = encode(tok, text, n, it % 2 ? TW_ENCODE_PARSE_SPECIAL : 0, ids);
        for (size_t i = 0; i < k; i++)
            assert_true(ids[i] < tw_tokenizer_vocab_size(tok));
        free(decode_both(tok, ids, k, it % 3 ? 0 : TW_DECODE_SKIP_SPECIAL));
    }
    /* one word of 1000 letters is past max_input_chars_per_word */
    memset(text, 'a', 1000);
    size_t k = encode(tok, text, 1000, 0, ids);
    assert_int_equal(k, 1);
    assert_int_equal(ids[0], tw_tokenizer_unk(tok));
    free(ids);
    tw_tokenizer_free(tok);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hostile_json),
        cmocka_unit_test(test_hostile_dir),
        cmocka_unit_test(test_mutated_files),
        cmocka_unit_test(test_hostile_text),
    };
    return cmocka_run_group_tests_name("core/tokenizer/wordpiece_hostile", tests, NULL, NULL);
}
