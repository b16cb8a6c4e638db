/* WordPiece vocabularies through GGUF: tw-convert (argv[1]) writes the
 * tokenizer.json of tests/data/golden/bert_cls as llama.cpp's converter
 * writes a "bert" vocabulary, and the tokenizer read back from that file
 * gives Hugging Face's ids for tests/data/tokenizers/wordpiece-uncased and
 * the golden texts, decodes like the tokenizer.json one, and leaves in the
 * file what llama.cpp reads. The cased tokenizer survives the trip through
 * tokenizer.ggml.normalizer.lowercase; what a "bert" vocabulary cannot
 * record is refused by tw-convert with a message. Hand-made hostile files:
 * test_wordpiece_gguf_hostile.c. */
#include <jansson.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tok_cases.h"
#include "tw/gguf.h"
#include "tw/safetensors.h"
#include "wp_test_util.h"

static const char *convert_bin;

#define META "\xe2\x96\x81"

/* Runs tw-convert on dir; its stderr lands in *log (malloc'd) when log is
 * not NULL. Returns the exit status. */
static int run_convert(const char *dir, const char *out, char **log)
{
    char logpath[4200], cmd[12800];
    snprintf(logpath, sizeof logpath, "%s.log", out);
    snprintf(cmd, sizeof cmd, "'%s' '%s' '%s' --type F32 2>'%s'", convert_bin, dir, out, logpath);
    int rc = system(cmd);
    size_t len;
    char *text = tw_test_read_file(logpath, &len);
    if (rc != 0 && text)
        printf("tw-convert %s: %s", dir, text);
    if (log)
        *log = text;
    else
        free(text);
    unlink(logpath);
    return rc;
}

static tw_tokenizer *load_gguf(const char *path)
{
    tw_err err = {{0}};
    tw_tokenizer *tok = NULL;
    tw_status st = tw_tokenizer_load_gguf(path, &tok, &err);
    if (st != TW_OK)
        printf("loading %s: %s\n", path, err.msg);
    assert_int_equal(st, TW_OK);
    return tok;
}

/* Every reference case of tests/data/<rel> gives the expected ids. */
static void check_reference(const tw_tokenizer *tok, const char *rel)
{
    char inp[1100], outp[1100];
    snprintf(inp, sizeof inp, "%s/%s/tests.inp", TW_REPO_DATA, rel);
    snprintf(outp, sizeof outp, "%s/%s/tests.out", TW_REPO_DATA, rel);
    tok_cases cases;
    assert_true(tok_cases_load(&cases, inp, outp));
    assert_true(cases.n >= 30);
    uint32_t *ids = malloc(MAX_IDS * sizeof *ids);
    size_t failures = 0;
    for (size_t i = 0; i < cases.n; i++) {
        const tok_case *tc = &cases.v[i];
        /* tests.out is tokenizers' encode without the added [CLS]/[SEP],
         * which splits special tokens out of the text */
        size_t n = encode(tok, tc->text, tc->len, TW_ENCODE_PARSE_SPECIAL, ids);
        if (n != tc->n_ids || (n && memcmp(ids, tc->ids, n * sizeof *ids) != 0)) {
            printf("%s case %zu mismatch for \"%s\"\n", rel, i, tc->text);
            tok_print_ids("expected", tc->ids, tc->n_ids);
            tok_print_ids("got     ", ids, n);
            failures++;
        }
    }
    free(ids);
    tok_cases_free(&cases);
    assert_int_equal(failures, 0);
}

/* Same texts, types and decoding as the tokenizer.json tokenizer. */
static void check_same_as_json(const tw_tokenizer *g, const tw_tokenizer *j, const char *rel)
{
    assert_int_equal(tw_tokenizer_kind_of(g), TW_TOKENIZER_WORDPIECE);
    assert_int_equal(tw_tokenizer_vocab_size(g), tw_tokenizer_vocab_size(j));
    for (uint32_t id = 0; id < tw_tokenizer_vocab_size(j); id++) {
        assert_string_equal(tw_tokenizer_token_text(g, id), tw_tokenizer_token_text(j, id));
        assert_int_equal(tw_tokenizer_token_type(g, id), tw_tokenizer_token_type(j, id));
    }
    assert_int_equal(tw_tokenizer_unk(g), tw_tokenizer_unk(j));
    assert_int_equal(tw_tokenizer_bos(g), tw_tokenizer_bos(j));
    assert_int_equal(tw_tokenizer_eos(g), tw_tokenizer_eos(j));
    assert_true(tw_tokenizer_adds_bos(g) && tw_tokenizer_adds_eos(g));

    char inp[1100], outp[1100];
    snprintf(inp, sizeof inp, "%s/%s/tests.inp", TW_REPO_DATA, rel);
    snprintf(outp, sizeof outp, "%s/%s/tests.out", TW_REPO_DATA, rel);
    tok_cases cases;
    assert_true(tok_cases_load(&cases, inp, outp));
    uint32_t *ids = malloc(MAX_IDS * sizeof *ids);
    static const unsigned flags[] = {0, TW_DECODE_SKIP_SPECIAL};
    for (size_t i = 0; i < cases.n; i++) {
        size_t n = encode(g, cases.v[i].text, cases.v[i].len,
                          TW_ENCODE_ADD_SPECIAL | TW_ENCODE_PARSE_SPECIAL, ids);
        for (size_t f = 0; f < 2; f++) {
            char *a = decode_both(g, ids, n, flags[f]);
            char *b = decode_both(j, ids, n, flags[f]);
            if (strcmp(a, b) != 0)
                printf("case %zu decodes to \"%s\" from GGUF, \"%s\" from json\n", i, a, b);
            assert_string_equal(a, b);
            free(a);
            free(b);
        }
    }
    free(ids);
    tok_cases_free(&cases);
}

static uint32_t u32_key(const tw_gguf *g, const char *key)
{
    tw_err err = {{0}};
    uint32_t v = 0;
    if (tw_gguf_get_u32(g, key, &v, &err) != TW_OK)
        fail_msg("%s", err.msg);
    return v;
}

static bool bool_key(const tw_gguf *g, const char *key)
{
    tw_err err = {{0}};
    bool v = false;
    if (tw_gguf_get_bool(g, key, &v, &err) != TW_OK)
        fail_msg("%s", err.msg);
    return v;
}

static uint32_t json_id(const json_t *vocab, const char *text)
{
    const json_t *v = json_object_get(vocab, text);
    assert_true(json_is_integer(v));
    return (uint32_t)json_integer_value(v);
}

/* What llama.cpp reads: model "bert", the phantom-space spelling of
 * tokenizer.json's vocabulary worked out here on its own, and the special
 * ids under SpecialVocab's keys. */
static void check_metadata(const char *gguf, const char *tokenizer_json, bool lower)
{
    tw_err err = {{0}};
    tw_gguf *g = NULL;
    assert_int_equal(tw_gguf_open(gguf, &g, &err), TW_OK);
    json_t *tj = json_load_file(tokenizer_json, 0, NULL);
    assert_non_null(tj);
    const json_t *vocab = json_object_get(json_object_get(tj, "model"), "vocab");
    const json_t *added = json_object_get(tj, "added_tokens");

    const char *model = NULL;
    assert_int_equal(tw_gguf_get_str(g, "tokenizer.ggml.model", &model, NULL, &err), TW_OK);
    assert_string_equal(model, "bert");
    const tw_gguf_value *toks = tw_gguf_get(g, "tokenizer.ggml.tokens");
    const tw_gguf_value *types = tw_gguf_get(g, "tokenizer.ggml.token_type");
    assert_int_equal(tw_gguf_array_len(toks), json_object_size(vocab));
    assert_int_equal(tw_gguf_array_len(types), json_object_size(vocab));
    const char *k;
    const json_t *v;
    size_t continuations = 0;
    json_object_foreach((json_t *)vocab, k, v)
    {
        uint64_t id = (uint64_t)json_integer_value(v);
        bool special = false;
        size_t i;
        const json_t *a;
        json_array_foreach(added, i, a)
        {
            if (json_integer_value(json_object_get(a, "id")) == (json_int_t)id)
                special = json_is_true(json_object_get(a, "special"));
        }
        char want[256];
        if (special)
            snprintf(want, sizeof want, "%s", k);
        else if (strncmp(k, "##", 2) == 0)
            snprintf(want, sizeof want, "%s", k + 2), continuations++;
        else
            snprintf(want, sizeof want, META "%s", k);
        size_t len;
        const char *got = tw_gguf_array_str(toks, id, &len);
        assert_non_null(got);
        if (len != strlen(want) || memcmp(got, want, len) != 0)
            fail_msg("token %llu is \"%.*s\", wanted \"%s\"", (unsigned long long)id, (int)len, got,
                     want);
        int64_t type = 0;
        assert_true(tw_gguf_array_i64(types, id, &type));
        assert_int_equal(type, special ? 3 : 1);
    }
    assert_true(continuations > 100);

    uint32_t cls = json_id(vocab, "[CLS]"), sep = json_id(vocab, "[SEP]");
    assert_int_equal(u32_key(g, "tokenizer.ggml.cls_token_id"), cls);
    assert_int_equal(u32_key(g, "tokenizer.ggml.bos_token_id"), cls);
    assert_int_equal(u32_key(g, "tokenizer.ggml.seperator_token_id"), sep);
    assert_int_equal(u32_key(g, "tokenizer.ggml.eos_token_id"), sep);
    assert_int_equal(u32_key(g, "tokenizer.ggml.unknown_token_id"), json_id(vocab, "[UNK]"));
    assert_int_equal(u32_key(g, "tokenizer.ggml.padding_token_id"), json_id(vocab, "[PAD]"));
    assert_int_equal(u32_key(g, "tokenizer.ggml.mask_token_id"), json_id(vocab, "[MASK]"));
    assert_int_equal(u32_key(g, "tokenizer.ggml.token_type_count"), 2);
    assert_true(bool_key(g, "tokenizer.ggml.add_bos_token"));
    assert_true(bool_key(g, "tokenizer.ggml.add_eos_token"));
    assert_false(bool_key(g, "tokenizer.ggml.add_sep_token"));
    assert_int_equal(bool_key(g, "tokenizer.ggml.normalizer.lowercase"), lower);
    assert_int_equal(bool_key(g, "tokenizer.ggml.normalizer.strip_accents"), lower);
    json_decref(tj);
    tw_gguf_close(g);
}

static void test_round_trip_uncased(void **state)
{
    (void)state;
    char *tmp = tw_test_mkdtemp();
    char dir[1024], out[1100], tj[1100];
    snprintf(dir, sizeof dir, "%s/golden/bert_cls", TW_REPO_DATA);
    snprintf(out, sizeof out, "%s/bert.gguf", tmp);
    snprintf(tj, sizeof tj, "%s/tokenizer.json", dir);
    assert_int_equal(run_convert(dir, out, NULL), 0);

    tw_tokenizer *g = load_gguf(out);
    tw_tokenizer *j = load_repo("golden/bert_cls");
    check_reference(g, "tokenizers/wordpiece-uncased");
    wp_check_golden_ids(g);
    check_same_as_json(g, j, "tokenizers/wordpiece-uncased");
    check_metadata(out, tj, true);
    tw_tokenizer_free(g);
    tw_tokenizer_free(j);
    tw_test_rmtree(tmp);
    free(tmp);
}

/* A checkpoint folder dir: bert_cls's weights (linked) and config.json with
 * vocab_size set, and the given tokenizer.json text. */
static void make_checkpoint(const char *dir, const char *tokenizer_json, json_int_t vocab_size)
{
    char src[1100], dst[1100];
    assert_int_equal(mkdir(dir, 0700), 0);
    snprintf(src, sizeof src, "%s/golden/bert_cls/model.safetensors", TW_REPO_DATA);
    snprintf(dst, sizeof dst, "%s/model.safetensors", dir);
    assert_int_equal(symlink(src, dst), 0);
    snprintf(src, sizeof src, "%s/golden/bert_cls/config.json", TW_REPO_DATA);
    json_t *cfg = json_load_file(src, 0, NULL);
    assert_non_null(cfg);
    json_object_set_new(cfg, "vocab_size", json_integer(vocab_size));
    snprintf(dst, sizeof dst, "%s/config.json", dir);
    assert_int_equal(json_dump_file(cfg, dst, 0), 0);
    json_decref(cfg);
    snprintf(dst, sizeof dst, "%s/tokenizer.json", dir);
    assert_true(tw_test_write_file(dst, tokenizer_json, strlen(tokenizer_json)));
}

/* llama.cpp reads tokenizer.ggml.normalizer.lowercase (and strip_accents,
 * which follows it): a cased vocabulary is written as such and read back
 * cased. */
static void test_round_trip_cased(void **state)
{
    (void)state;
    char *tmp = tw_test_mkdtemp();
    char dir[1100], out[1100], tj[1100];
    snprintf(tj, sizeof tj, "%s/tokenizers/wordpiece-cased/tokenizer.json", TW_REPO_DATA);
    size_t len;
    char *text = tw_test_read_file(tj, &len);
    assert_non_null(text);
    snprintf(dir, sizeof dir, "%s/cased", tmp);
    make_checkpoint(dir, text, 1400);
    free(text);
    snprintf(out, sizeof out, "%s/cased.gguf", tmp);
    assert_int_equal(run_convert(dir, out, NULL), 0);

    tw_tokenizer *g = load_gguf(out);
    tw_tokenizer *j = load_repo("tokenizers/wordpiece-cased");
    check_reference(g, "tokenizers/wordpiece-cased");
    check_same_as_json(g, j, "tokenizers/wordpiece-cased");
    check_metadata(out, tj, false);
    tw_tokenizer_free(g);
    tw_tokenizer_free(j);
    tw_test_rmtree(tmp);
    free(tmp);
}

/* A change to bert_cls's tokenizer.json: the member at path (dot-separated
 * object keys) set to the JSON value, or removed when value is NULL. */
typedef struct edit {
    const char *path, *value;
    const char *needle;    /* in tw-convert's message */
    json_int_t vocab_size; /* config.json's; 0: bert_cls's 1200 */
} edit;

static const edit refused[] = {
    {"normalizer.clean_text", "false", "BertNormalizer.clean_text is false"},
    {"normalizer.handle_chinese_chars", "false", "handle_chinese_chars is false"},
    {"normalizer", "{\"type\": \"Lowercase\"}", "the normalizer is Lowercase, not BertNormalizer"},
    {"normalizer", "null", "the normalizer is none"},
    {"normalizer.lowercase", "\"yes\"", "BertNormalizer.lowercase must be a boolean"},
    {"pre_tokenizer", "{\"type\": \"WhitespaceSplit\"}", "not BertPreTokenizer"},
    {"decoder.cleanup", "false", "no cleanup"},
    {"decoder", "null", "the decoder is none, not WordPiece"},
    {"post_processor", "null", "the post-processor is none"},
    {"post_processor.single", "[{\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}]",
     "single template is not [CLS] $A [SEP]"},
    {"post_processor.special_tokens.[CLS].ids", "[2, 3]", "one special token each"},
    {"post_processor.special_tokens.[SEP].ids", "[4000]", "not an id below the vocabulary size"},
    {"model.continuing_subword_prefix", "\"@@\"", "continuing_subword_prefix is not \"##\""},
    {"model.max_input_chars_per_word", "200", "max_input_chars_per_word is not 100"},
    {"model.unk_token", "\"<unk>\"", "model.unk_token \"<unk>\" is not in the vocabulary"},
    {"model.vocab.##", "1200", "token 1200 \"##\" is empty in llama.cpp's phantom-space form",
     1201},
    /* a control token spelled like the phantom form of the word "the" */
    {"added_tokens", "[{\"id\": 4, \"content\": \"\\u2581the\", \"special\": true}]",
     "are both \"\xe2\x96\x81the\""},
    {"model.vocab.##" META "x", "1200", "would read as the word start \"x\"", 1201},
    {"model.vocab.zzz", "5000", "outside the model's vocabulary of 1200"},
};

/* Applies e to root (a copy of the real tokenizer.json). */
static void apply(json_t *root, const edit *e)
{
    char path[256];
    snprintf(path, sizeof path, "%s", e->path);
    json_t *obj = root;
    char *key = path, *dot;
    /* "[CLS]" holds no dot, so splitting at dots is safe for these paths */
    while ((dot = strchr(key, '.')) != NULL) {
        *dot = '\0';
        obj = json_object_get(obj, key);
        assert_non_null(obj);
        key = dot + 1;
    }
    json_t *v = json_loads(e->value, JSON_DECODE_ANY, NULL);
    assert_non_null(v);
    assert_int_equal(json_object_set_new(obj, key, v), 0);
}

static void test_convert_refusals(void **state)
{
    (void)state;
    char path[1100];
    snprintf(path, sizeof path, "%s/golden/bert_cls/tokenizer.json", TW_REPO_DATA);
    char *tmp = tw_test_mkdtemp();
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        json_t *root = json_load_file(path, 0, NULL);
        assert_non_null(root);
        apply(root, &refused[i]);
        char *text = json_dumps(root, JSON_COMPACT);
        json_decref(root);
        char dir[1100], out[1200];
        snprintf(dir, sizeof dir, "%s/case%zu", tmp, i);
        make_checkpoint(dir, text, refused[i].vocab_size ? refused[i].vocab_size : 1200);
        free(text);
        snprintf(out, sizeof out, "%s.gguf", dir);
        char *log = NULL;
        int rc = run_convert(dir, out, &log);
        if (rc == 0 || !log || !strstr(log, refused[i].needle))
            fail_msg("%s = %s: tw-convert gave %d \"%s\", wanted a message with \"%s\"",
                     refused[i].path, refused[i].value, rc, log ? log : "", refused[i].needle);
        free(log);
        assert_int_equal(access(out, F_OK), -1); /* no file left behind */
    }
    tw_test_rmtree(tmp);
    free(tmp);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_wordpiece_gguf PATH-TO-tw-convert\n");
        return 1;
    }
    convert_bin = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_uncased),
        cmocka_unit_test(test_round_trip_cased),
        cmocka_unit_test(test_convert_refusals),
    };
    return cmocka_run_group_tests_name("core/tokenizer/wordpiece_gguf", tests, NULL, NULL);
}
