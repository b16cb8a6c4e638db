/* Guessing from a prompt what kind of answer it wants, so a thinking block
 * closed on a loop can be followed by a matching lead-in (tw/thinking.h).
 *
 * The rules are keyword patterns tried in a fixed order; the first that
 * matches wins. JSON comes first because "give me JSON for this code" wants
 * JSON, and translation before code because "translate this function's
 * comments" wants prose. Patterns are compiled once per process. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <pthread.h>

#include "tw/thinking.h"

static const struct {
    tw_transition_kind kind;
    const char *pattern;
} rules[] = {
    {TW_TRANSITION_JSON, "\\bjson\\b"},
    {TW_TRANSITION_TRANSLATION,
     "\\btranslat(e|es|ed|ing|ion)\\b|\\b(in|into|to) (english|french|german|spanish|italian|"
     "portuguese|chinese|japanese|korean|russian|arabic|dutch|polish|turkish)\\s*[:.?!]?\\s*$"},
    {TW_TRANSITION_CODE,
     "```|\\b(code|function|program|script|implement|implementation|refactor|debug|compile|"
     "python|javascript|typescript|java|c\\+\\+|rust|golang|sql|bash|html|css|regex)\\b"},
    {TW_TRANSITION_MATH,
     "\\b(solve|calculate|compute|evaluate|equation|integral|derivative|prove|probability|"
     "math|maths|mathematics|algebra|geometry|arithmetic|how many|how much)\\b|"
     "\\d\\s*[-+*/^=]\\s*\\d|\\\\frac|\\\\sqrt"},
};

#define N_RULES (sizeof rules / sizeof rules[0])

static pcre2_code *compiled[N_RULES];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void compile_rules(void)
{
    for (size_t i = 0; i < N_RULES; i++) {
        int code;
        PCRE2_SIZE off;
        /* A pattern that fails to compile is a bug in this table; the rule
         * is then simply never applied. */
        compiled[i] = pcre2_compile((PCRE2_SPTR)rules[i].pattern, PCRE2_ZERO_TERMINATED,
                                    PCRE2_CASELESS | PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE |
                                        PCRE2_MATCH_INVALID_UTF,
                                    &code, &off, NULL);
    }
}

tw_transition_kind tw_thinking_classify_prompt(const char *text, size_t len)
{
    if (!text || len == 0)
        return TW_TRANSITION_PLAIN;
    pthread_once(&once, compile_rules);
    tw_transition_kind kind = TW_TRANSITION_PLAIN;
    for (size_t i = 0; i < N_RULES && kind == TW_TRANSITION_PLAIN; i++) {
        if (!compiled[i])
            continue;
        pcre2_match_data *md = pcre2_match_data_create_from_pattern(compiled[i], NULL);
        if (!md)
            break;
        int rc = pcre2_match(compiled[i], (PCRE2_SPTR)text, len, 0, 0, md, NULL);
        if (rc >= 0)
            kind = rules[i].kind;
        pcre2_match_data_free(md);
    }
    return kind;
}
