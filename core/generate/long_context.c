/* The long-context thinking rule (tw/long_context.h).
 *
 * Whether a short text is a question is decided by two patterns: a question
 * mark (or a sentence-final question particle) at the end, or a question
 * word at the start. Word lists are small on purpose: a false "question"
 * only turns on thinking for a short request after a long context, which is
 * harmless, while a long list would slow down every chat request. Patterns
 * are compiled once per process. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <pthread.h>
#include <string.h>

#include "tw/long_context.h"

/* Question words and auxiliaries that open a question, followed by a word
 * boundary (scripts without spaces have their own branch without one). */
static const char START_PATTERN[] =
    "^(?:\\x{00BF}"
    "|(?:what|why|how|when|where|who|whom|whose|which|is|are|am|was|were|can|could|do|does|"
    "did|should|would|will|shall|may|might|must|has|have|had|isn't|aren't|doesn't|didn't|"
    "can't|won't"                                                    /* English */
    "|quoi|pourquoi|comment|quand|o\\x{00F9}|qui|quel|quelle|quels|quelles|combien|est-ce"
    "|was|warum|wieso|weshalb|wie|wann|wo|woher|wohin|wer|wen|wem|welche|welcher|welches"
    "|qu\\x{00E9}|c\\x{00F3}mo|cu\\x{00E1}ndo|d\\x{00F3}nde|qui\\x{00E9}n|qui\\x{00E9}nes|"
    "cu\\x{00E1}l|cu\\x{00E1}les|cu\\x{00E1}nto|cu\\x{00E1}nta"       /* Spanish */
    "|cosa|perch\\x{00E9}|come|quando|dove|chi|quale|quali|quanto"    /* Italian */
    "|como|onde|quem|qual|quais|quantos"                               /* Portuguese */
    "|wat|waarom|hoe|wanneer|waar|wie|welke"                           /* Dutch */
    "|\\x{0447}\\x{0442}\\x{043E}|\\x{043F}\\x{043E}\\x{0447}\\x{0435}\\x{043C}\\x{0443}|"
    "\\x{043A}\\x{0430}\\x{043A}|\\x{043A}\\x{043E}\\x{0433}\\x{0434}\\x{0430}|"
    "\\x{0433}\\x{0434}\\x{0435}|\\x{043A}\\x{0442}\\x{043E}|\\x{0437}\\x{0430}\\x{0447}"
    "\\x{0435}\\x{043C}|\\x{0441}\\x{043A}\\x{043E}\\x{043B}\\x{044C}\\x{043A}\\x{043E}"
    ")\\b"
    /* Chinese, Japanese, Korean: no word boundary to look for. */
    "|\\x{4EC0}\\x{4E48}|\\x{4E3A}\\x{4EC0}\\x{4E48}|\\x{70BA}\\x{4EC0}\\x{9EBC}|"
    "\\x{600E}\\x{4E48}|\\x{600E}\\x{9EBC}|\\x{5982}\\x{4F55}|\\x{54EA}|\\x{8C01}|\\x{8AB0}|"
    "\\x{591A}\\x{5C11}|\\x{662F}\\x{5426}"
    "|\\x{306A}\\x{305C}|\\x{3069}\\x{3046}|\\x{4F55}|\\x{306A}\\x{306B}|\\x{3044}\\x{3064}|"
    "\\x{3069}\\x{3053}|\\x{3060}\\x{308C}|\\x{3069}\\x{306E}|\\x{3069}\\x{308C}"
    "|\\x{BB34}\\x{C5C7}|\\x{BB50}|\\x{C65C}|\\x{C5B4}\\x{B5BB}\\x{AC8C}|\\x{C5B8}\\x{C81C}|"
    "\\x{C5B4}\\x{B514}|\\x{B204}\\x{AD6C}|\\x{C5B4}\\x{B290})";

/* A question mark of some script, or a sentence-final question particle
 * (Chinese ma / ne, Japanese ka), before closing punctuation. */
static const char END_PATTERN[] =
    "(?:[?\\x{FF1F}\\x{061F}\\x{037E}]|\\x{5417}|\\x{55CE}|\\x{5462}|\\x{304B})"
    "[\\s\"'\\x{201D}\\x{3002}\\x{300D})\\]]*$";

static pcre2_code *start_re, *end_re;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static pcre2_code *compile(const char *pattern)
{
    int code;
    PCRE2_SIZE off;
    /* A pattern that fails to compile is a bug here; that test is then
     * simply never true. */
    return pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED,
                         PCRE2_CASELESS | PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &code,
                         &off, NULL);
}

static void compile_patterns(void)
{
    start_re = compile(START_PATTERN);
    end_re = compile(END_PATTERN);
}

static bool matches(const pcre2_code *re, const char *text, size_t len)
{
    if (!re)
        return false;
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    if (!md)
        return false;
    int rc = pcre2_match(re, (PCRE2_SPTR)text, len, 0, 0, md, NULL);
    pcre2_match_data_free(md);
    return rc >= 0;
}

void tw_long_context_rule_init(tw_long_context_rule *r)
{
    r->enabled = true;
    r->context_chars = TW_LONG_CONTEXT_DEFAULT_CHARS;
    r->question_chars = TW_SHORT_QUESTION_DEFAULT_CHARS;
}

size_t tw_text_chars(const char *text, size_t len)
{
    size_t n = 0;
    for (size_t i = 0; text && i < len; i++)
        n += ((unsigned char)text[i] & 0xC0) != 0x80;
    return n;
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

bool tw_text_is_question(const char *text, size_t len)
{
    if (!text)
        return false;
    while (len && is_space(*text)) {
        text++;
        len--;
    }
    while (len && is_space(text[len - 1]))
        len--;
    if (len == 0)
        return false;
    pthread_once(&once, compile_patterns);
    return matches(end_re, text, len) || matches(start_re, text, len);
}

tw_think_mode tw_long_context_decide(const tw_long_context_rule *rule, tw_think_mode requested,
                                     size_t context_chars, const char *question,
                                     size_t question_len)
{
    tw_long_context_rule def;
    if (!rule) {
        tw_long_context_rule_init(&def);
        rule = &def;
    }
    if (requested != TW_THINK_DEFAULT || !rule->enabled || context_chars <= rule->context_chars)
        return requested;
    size_t q = tw_text_chars(question, question_len);
    if (q == 0 || q >= rule->question_chars || !tw_text_is_question(question, question_len))
        return requested;
    return TW_THINK_ON;
}

size_t tw_long_context_split(const char *text, size_t len, size_t *question_off)
{
    *question_off = 0;
    if (!text)
        return 0;
    /* The last blank line with something other than white space after it. */
    size_t end = len;
    while (end && is_space(text[end - 1]))
        end--;
    for (size_t i = end; i >= 2; i--) {
        if (text[i - 1] != '\n')
            continue;
        size_t j = i - 1; /* the '\n'; look back over blanks for another one */
        while (j > 0 && (text[j - 1] == ' ' || text[j - 1] == '\t' || text[j - 1] == '\r'))
            j--;
        if (j > 0 && text[j - 1] == '\n') {
            *question_off = i;
            return tw_text_chars(text, i);
        }
    }
    return 0;
}

static size_t content_chars(const char *s)
{
    return s ? tw_text_chars(s, strlen(s)) : 0;
}

tw_think_mode tw_long_context_decide_chat(const tw_long_context_rule *rule,
                                          tw_think_mode requested,
                                          const tw_chat_message *messages, size_t n_messages)
{
    if (requested != TW_THINK_DEFAULT || (rule && !rule->enabled) || !messages)
        return requested;
    size_t last_user = n_messages;
    for (size_t i = n_messages; i > 0; i--) {
        const tw_chat_message *m = &messages[i - 1];
        if (m->role && strcmp(m->role, "user") == 0 && m->content) {
            last_user = i - 1;
            break;
        }
    }
    if (last_user == n_messages)
        return requested;
    size_t context = 0;
    for (size_t i = 0; i < n_messages; i++) {
        if (i == last_user)
            continue;
        context += content_chars(messages[i].content);
        context += content_chars(messages[i].reasoning_content);
    }
    const char *q = messages[last_user].content;
    size_t qlen = strlen(q), off;
    context += tw_long_context_split(q, qlen, &off);
    return tw_long_context_decide(rule, requested, context, q + off, qlen - off);
}
