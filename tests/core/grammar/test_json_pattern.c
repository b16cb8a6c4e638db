/* Strings held to a schema's "pattern": the matcher's verdicts on whole
 * documents and prefixes, the refusals, and random walks whose strings
 * glibc's POSIX regex engine (not PCRE2, which the matcher uses) finds
 * matching; the formats read as patterns (ipv4, ipv6, hostname, email,
 * duration, uri) against glibc's address parser and the RFCs' rules. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <ctype.h>
#include <jansson.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar_test.h"
#include "test_support.h"

/* The schema {"type":"string","pattern":p, extra...}. */
static tw_json_grammar *string_schema(const char *pattern, const char *extra)
{
    json_t *s = json_pack("{ss ss}", "type", "string", "pattern", pattern);
    if (extra) {
        json_t *more = json_loads(extra, 0, NULL);
        assert_non_null(more);
        json_object_update(s, more);
        json_decref(more);
    }
    char *text = json_dumps(s, JSON_COMPACT);
    tw_json_grammar *g = compile_ok(text);
    free(text);
    json_decref(s);
    return g;
}

static void test_verdicts(void **state)
{
    (void)state;
    /* anchored at both ends: each character is asked at once */
    tw_json_grammar *g = string_schema("^[A-Z]{2}-\\d{3}$", NULL);
    assert_true(tw_json_grammar_has_patterns(g));
    assert_true(accepts(g, "\"AB-123\""));
    assert_false(accepts(g, "\"AB-12\""));
    assert_int_equal(taken(g, "\"AB-1234\""), 7); /* the fourth digit */
    assert_int_equal(taken(g, "\"ab-123\""), 1);  /* the lower case a */
    assert_int_equal(taken(g, "\"AB-12\""), 6);   /* all but the quote */
    assert_int_equal(taken(g, "\"AB\\u002d"), 3); /* no escapes */
    uint32_t room;
    tw_json_state s;
    tw_json_state_init(&s, g);
    assert_true(tw_json_state_feed(&s, "\"A", 2));
    assert_false(tw_json_state_in_plain_string(&s, &room)); /* no fast path */
    tw_json_grammar_free(g);

    /* not anchored: any text may still come to hold a match; only the end
     * is asked */
    g = string_schema("ab|cd", NULL);
    assert_true(accepts(g, "\"xxabyy\""));
    assert_true(accepts(g, "\"cd\""));
    assert_int_equal(taken(g, "\"xyz\""), 4); /* all but the quote */
    assert_false(accepts(g, "\"acbd\""));
    tw_json_grammar_free(g);

    /* $ is the end of the text only */
    g = string_schema("z$", NULL);
    assert_true(accepts(g, "\"abz\""));
    assert_false(accepts(g, "\"za\""));
    tw_json_grammar_free(g);

    /* the character that fills maxLength must make a match, so a string
     * that cannot match within it is refused before it is stuck */
    g = string_schema("x", "{\"maxLength\":3,\"minLength\":2}");
    assert_true(accepts(g, "\"abx\""));
    assert_int_equal(taken(g, "\"abc"), 3);
    assert_int_equal(taken(g, "\"x\""), 2); /* minLength still holds */
    assert_true(accepts(g, "\"xy\""));
    tw_json_grammar_free(g);

    /* an ASCII-only pattern refuses a UTF-8 lead byte itself; one that may
     * match other characters asks when the character is whole */
    g = string_schema("^[a-z]+$", NULL);
    assert_int_equal(taken(g, "\"ab\xc3\xa9\""), 3);
    tw_json_grammar_free(g);
    g = string_schema("^caf[e\xc3\xa9]$", NULL);
    assert_true(accepts(g, "\"caf\xc3\xa9\""));
    assert_true(accepts(g, "\"cafe\""));
    assert_int_equal(taken(g, "\"caf\xc3\xa8\""), 5); /* è: its second byte */
    tw_json_grammar_free(g);
    /* \\h matches the no-break space, [:^alpha:] all but letters */
    g = string_schema("^a\\h$", NULL);
    assert_true(accepts(g, "\"a\xc2\xa0\""));
    tw_json_grammar_free(g);
    g = string_schema("^[[:^alpha:]]$", NULL);
    assert_true(accepts(g, "\"\xc3\x97\""));
    tw_json_grammar_free(g);
    g = string_schema("^.{2}$", NULL);
    assert_true(accepts(g, "\"\xe2\x82\xac\xc3\xa9\""));
    assert_false(accepts(g, "\"abc\""));
    tw_json_grammar_free(g);

    /* inside an object, and where a string is one type among several */
    g = compile_ok("{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"string\",\"pattern\":"
                   "\"^[0-9]+$\"},\"v\":{\"type\":[\"string\",\"null\"],\"pattern\":\"^q\"}},"
                   "\"required\":[\"id\"]}");
    assert_true(accepts(g, "{\"id\": \"0042\", \"v\": null}"));
    assert_true(accepts(g, "{\"id\": \"7\", \"v\": \"qq\"}"));
    assert_false(accepts(g, "{\"id\": \"7\", \"v\": \"rq\"}"));
    assert_false(accepts(g, "{\"id\": \"\"}"));
    tw_json_grammar_free(g);

    g = compile_ok("{\"type\":\"string\",\"maxLength\":3}");
    assert_false(tw_json_grammar_has_patterns(g));
    tw_json_grammar_free(g);

    /* enum and const values are checked against the pattern once */
    g = compile_ok("{\"enum\":[\"AB\",\"CD\",3],\"pattern\":\"^[A-Z]+$\"}");
    assert_false(tw_json_grammar_has_patterns(g)); /* the literals need none */
    assert_true(accepts(g, "\"CD\""));
    assert_true(accepts(g, "3"));
    tw_json_grammar_free(g);
}

static void test_refusals(void **state)
{
    (void)state;
    char long_pattern[TW_JSON_MAX_PATTERN + 64];
    snprintf(long_pattern, sizeof long_pattern, "{\"type\":\"string\",\"pattern\":\"");
    size_t at = strlen(long_pattern);
    memset(long_pattern + at, 'a', TW_JSON_MAX_PATTERN + 1);
    strcpy(long_pattern + at + TW_JSON_MAX_PATTERN + 1, "\"}");
    const struct {
        const char *schema, *says;
    } cases[] = {
        {"{\"type\":\"string\",\"pattern\":\"(ab\"}",
         "\"pattern\" does not compile: missing closing"},
        {"{\"properties\":{\"p\":{\"pattern\":\"[z-a]\"}}}", "(at /properties/p)"},
        {"{\"type\":\"string\",\"pattern\":\"(a)\\\\1\"}", "back reference"},
        {"{\"type\":\"string\",\"pattern\":7}", "\"pattern\" must be a string"},
        {"{\"type\":\"string\",\"format\":\"date\",\"pattern\":\"^2\"}",
         "\"pattern\" beside \"format\""},
        {"{\"type\":\"string\",\"format\":\"email\",\"pattern\":\"^a\"}",
         "\"pattern\" beside \"format\""},
        {"{\"enum\":[\"AB\",\"c\"],\"pattern\":\"^[A-Z]+$\"}",
         "c, an enum or const value, does not"},
        {"{\"const\":\"x\",\"pattern\":\"y\"}", "does not match its \"pattern\""},
        {long_pattern, "a \"pattern\" of 1025 bytes (at most 1024)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tw_json_grammar *g = NULL;
        tw_err err;
        tw_status st = tw_json_grammar_compile(cases[i].schema, strlen(cases[i].schema), &g, &err);
        if (st != TW_INVALID_ARGUMENT || !strstr(err.msg, cases[i].says))
            fail_msg("case %zu: %d %s (wanted %s)", i, (int)st, st ? err.msg : "", cases[i].says);
        assert_null(g);
    }
}

/* Takes random accepted bytes until the document is whole (past `soft`
 * bytes, the closing quote preferred once allowed, else an e-mail's @, so
 * that a walk ends long before the string's room does); fails on a dead
 * end. */
static size_t walk(const tw_json_grammar *g, tw_test_rng *rng, char *out, size_t cap, size_t soft)
{
    tw_json_state s, t;
    tw_json_state_init(&s, g);
    size_t n = 0;
    while (!tw_json_state_closed(&s) && n + 1 < cap) {
        unsigned char ok[256];
        int n_ok = 0;
        bool close = false, at = false;
        for (int c = 1; c < 256; c++) {
            tw_json_state_copy(&t, &s);
            if (tw_json_state_feed_byte(&t, (unsigned char)c)) {
                ok[n_ok++] = (unsigned char)c;
                close |= c == '"' && n > 0;
                at |= c == '@';
            }
        }
        if (n_ok == 0)
            fail_msg("dead end after %zu bytes: %.*s", n, (int)n, out);
        const unsigned char c = n > soft && close ? '"'
                                : n > soft && at  ? '@'
                                                  : ok[tw_test_rand_u64(rng) % n_ok];
        assert_true(tw_json_state_feed_byte(&s, c));
        out[n++] = (char)c;
    }
    out[n] = '\0';
    return tw_json_state_closed(&s) ? n : 0;
}

static void test_random_walks(void **state)
{
    (void)state;
    /* each in a syntax both PCRE2 and POSIX ERE read the same way */
    static const char *const patterns[] = {
        "^[A-Z]{2}-[0-9]{3}$", "^(ab|cd)+e?$", "^[a-c]*x[0-9]?$", "^q[0-9]", "^(x|y)?[a-f]{1,4}z$",
    };
    tw_test_rng rng = {0x5eed5eedull};
    char doc[1024];
    for (size_t i = 0; i < sizeof patterns / sizeof patterns[0]; i++) {
        tw_json_grammar *g = string_schema(patterns[i], NULL);
        regex_t re;
        assert_int_equal(regcomp(&re, patterns[i], REG_EXTENDED | REG_NOSUB), 0);
        int finished = 0;
        for (int w = 0; w < 200; w++) {
            const size_t n = walk(g, &rng, doc, sizeof doc, 4 + (size_t)w % 24);
            if (!n)
                continue;
            finished++;
            json_error_t je;
            json_t *v = json_loadb(doc, n, JSON_DECODE_ANY, &je);
            if (!v || !json_is_string(v))
                fail_msg("%s: walk %d gave %s (%s)", patterns[i], w, doc, je.text);
            if (regexec(&re, json_string_value(v), 0, NULL, 0) != 0)
                fail_msg("%s: walk %d gave %s, which does not match", patterns[i], w, doc);
            json_decref(v);
        }
        assert_true(finished > 150);
        regfree(&re);
        tw_json_grammar_free(g);
    }
}

/* Independent readings of the pattern-backed formats: glibc's address
 * parser for ipv4 and ipv6, and the RFCs' rules written out here for the
 * rest. */
static bool host_fits(const char *h, size_t n)
{
    if (n == 0 || n > 253)
        return false;
    for (size_t at = 0; at <= n;) {
        size_t end = at;
        while (end < n && h[end] != '.')
            end++;
        const size_t len = end - at;
        if (len == 0 || len > 63 || h[at] == '-' || h[end - 1] == '-')
            return false;
        for (size_t i = at; i < end; i++)
            if (!isalnum((unsigned char)h[i]) && h[i] != '-')
                return false;
        at = end + 1;
    }
    return true;
}

static bool email_fits(const char *e)
{
    const char *at = strrchr(e, '@');
    if (!at || at == e || e[0] == '.' || at[-1] == '.' || strstr(e, "..") ||
        !host_fits(at + 1, strlen(at + 1)) || strlen(e) > 254)
        return false;
    for (const char *p = e; p < at; p++)
        if (!isalnum((unsigned char)*p) && !strchr("!#$%&'*+/=?^_`{|}~-.", *p))
            return false;
    return true;
}

/* Digits then the unit; advances *p past both. */
static bool dur_part(const char **p, char unit)
{
    const char *q = *p;
    while (isdigit((unsigned char)*q))
        q++;
    if (q == *p || *q != unit)
        return false;
    *p = q + 1;
    return true;
}

/* The next part's unit, if digits are followed by one. */
static char dur_next(const char *p)
{
    while (isdigit((unsigned char)*p))
        p++;
    return *p;
}

/* RFC 3339 appendix A, read front to back. */
static bool duration_fits(const char *d)
{
    if (*d++ != 'P')
        return false;
    if (dur_next(d) == 'W' && d[0] != 'T')
        return dur_part(&d, 'W') && *d == '\0';
    bool date = false;
    const char units[] = "YMD";
    for (int u = 0; u < 3 && *d && *d != 'T'; u++) {
        if (dur_next(d) != units[u])
            continue;
        /* years carry months only, months carry days only */
        if (date && u > 0 && units[u - 1] != d[-1])
            return false;
        if (!dur_part(&d, units[u]))
            return false;
        date = true;
    }
    bool time = false;
    if (*d == 'T') {
        d++;
        const char tunits[] = "HMS";
        for (int u = 0; u < 3 && *d; u++) {
            if (dur_next(d) != tunits[u])
                continue;
            if (time && tunits[u - 1] != d[-1])
                return false;
            if (!dur_part(&d, tunits[u]))
                return false;
            time = true;
        }
        if (!time)
            return false;
    }
    return *d == '\0' && (date || time);
}

/* RFC 3986's pchar at *p (a %-escape, unreserved, sub-delims, : or @);
 * advances past it. */
static bool uri_pchar(const char **p, const char *extra)
{
    const char *q = *p;
    if (*q == '%') {
        if (!isxdigit((unsigned char)q[1]) || !isxdigit((unsigned char)q[2]))
            return false;
        *p = q + 3;
        return true;
    }
    if (*q && (isalnum((unsigned char)*q) || strchr("-._~!$&'()*+,;=:@", *q) ||
               (extra && strchr(extra, *q)))) {
        *p = q + 1;
        return true;
    }
    return false;
}

/* The host of an authority (n bytes at h): a bracketed IPv6 address or
 * IPvFuture, or a registered name. */
static bool uri_host(const char *h, size_t n)
{
    char buf[128];
    if (n > 0 && h[0] == '[') {
        if (n < 3 || h[n - 1] != ']' || n - 2 >= sizeof buf)
            return false;
        memcpy(buf, h + 1, n - 2);
        buf[n - 2] = '\0';
        unsigned char addr[16];
        if (buf[0] != 'v')
            return inet_pton(AF_INET6, buf, addr) == 1;
        const char *dot = strchr(buf, '.');
        if (!dot || dot == buf + 1 || !dot[1])
            return false;
        for (const char *q = buf + 1; q < dot; q++)
            if (!isxdigit((unsigned char)*q))
                return false;
        for (const char *q = dot + 1; *q; q++) /* no %-escapes there */
            if (!isalnum((unsigned char)*q) && !strchr("-._~!$&'()*+,;=:", *q))
                return false;
        return true;
    }
    for (const char *q = h; q < h + n;)
        if (!uri_pchar(&q, NULL) || q[-1] == ':' || q[-1] == '@')
            return false;
    return true;
}

/* RFC 3986 section 3, read front to back. */
static bool uri_fits(const char *u)
{
    const char *p = u;
    if (!isalpha((unsigned char)*p))
        return false;
    while (isalnum((unsigned char)*p) || (*p && strchr("+-.", *p)))
        p++;
    if (*p++ != ':')
        return false;
    if (p[0] == '/' && p[1] == '/') {
        p += 2;
        const char *end = p + strcspn(p, "/?#");
        const char *at = memchr(p, '@', (size_t)(end - p));
        if (at) {
            for (const char *q = p; q < at;)
                if (!uri_pchar(&q, NULL) || q[-1] == '@')
                    return false;
            p = at + 1;
        }
        const char *host_end = end;
        if (*p == '[') {
            const char *close = memchr(p, ']', (size_t)(end - p));
            if (!close)
                return false;
            host_end = close + 1;
        } else {
            const char *colon = memchr(p, ':', (size_t)(end - p));
            if (colon)
                host_end = colon;
        }
        if (!uri_host(p, (size_t)(host_end - p)))
            return false;
        if (host_end < end) {
            if (*host_end != ':')
                return false;
            for (const char *q = host_end + 1; q < end; q++)
                if (!isdigit((unsigned char)*q))
                    return false;
        }
        p = end;
    }
    while (*p && *p != '?' && *p != '#')
        if (*p == '/')
            p++;
        else if (!uri_pchar(&p, NULL))
            return false;
    if (*p == '?')
        for (p++; *p && *p != '#';)
            if (!uri_pchar(&p, "/?"))
                return false;
    if (*p == '#')
        for (p++; *p;)
            if (!uri_pchar(&p, "/?"))
                return false;
    return *p == '\0';
}

/* RFC 4648 base64: groups of four of the alphabet, "=" only to pad the
 * last. */
static bool base64_fits(const char *v)
{
    const size_t n = strlen(v);
    size_t pad = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i] == '=') {
            if (i + 2 < n)
                return false;
            pad++;
        } else if (pad || !(isalnum((unsigned char)v[i]) || v[i] == '+' || v[i] == '/')) {
            return false;
        }
    }
    return n % 4 == 0;
}

static bool format_fits(const char *format, const char *v)
{
    unsigned char addr[16];
    if (!strcmp(format, "byte"))
        return base64_fits(v);
    if (!strcmp(format, "ipv4"))
        return inet_pton(AF_INET, v, addr) == 1;
    if (!strcmp(format, "ipv6"))
        return inet_pton(AF_INET6, v, addr) == 1;
    if (!strcmp(format, "hostname"))
        return host_fits(v, strlen(v));
    if (!strcmp(format, "email"))
        return email_fits(v);
    if (!strcmp(format, "uri"))
        return uri_fits(v);
    return duration_fits(v);
}

static void test_formats(void **state)
{
    (void)state;
    static const struct {
        const char *format, *good[8], *bad[8];
    } cases[] = {
        {"ipv4",
         {"0.0.0.0", "255.255.255.255", "192.168.1.10"},
         {"256.1.1.1", "01.2.3.4", "1.2.3", "1.2.3.4.5", "a.b.c.d", "1.2.3.4 "}},
        {"ipv6",
         {"::", "::1", "2001:db8::8a2e:370:7334", "fe80::1:2:3:4", "1:2:3:4:5:6:7:8",
          "::ffff:192.0.2.128", "1::", "A:b::C"},
         {"1:2:3:4:5:6:7:8:9", "12345::", "1::2::3", ":1", "1:2:3:4:5:6:7", "::ffff:256.0.0.1",
          "g::"}},
        {"hostname",
         {"example.com", "a", "xn--bcher-kva.example", "a-b.c9"},
         {"-a.com", "a-.com", "a..b", ".a", "a_b", "a.",
          "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.b"}},
        {"email",
         {"ada@example.org", "first.last+tag@sub.example.co", "x@y", "o'neil@x.io"},
         {"ada", "@example.org", "a..b@x.org", ".a@x", "a@-x.org", "a b@x.org", "a@b@c"}},
        {"duration",
         {"P1Y", "P1Y2M3D", "PT4H5M6S", "P3W", "P1DT2H", "PT0S", "P1M", "P2MT30M"},
         {"P", "PT", "P1H", "P1Y2D", "P1W2D", "1Y", "P1.5Y", "PT1H2S"}},
        {"uri",
         {"https://example.com/a/b?x=1#frag", "mailto:ada@example.org", "urn:isbn:0451450523",
          "http://[2001:db8::1]:8080/", "ftp://user:pw@host:21/file%20name",
          "a:", "file:///etc/hosts", "x://[v1f.a:b]"},
         {"example.com", "1http://x", "http://exa mple.com", "http://x/%zz", "http://[::1/",
          "http://x#a#b", "ht tp://x", "http://[1::2::3]/"}},
        {"byte",
         {"", "YWJj", "YWI=", "YQ==", "+/+/", "YWJjZA==", "AAAAAAAA"},
         {"YWJ", "Y===", "YW=j", "YWJj=", "Y WJ", "YQ=", "YWJj====", "-_ab"}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char schema[128], doc[300];
        snprintf(schema, sizeof schema, "{\"type\":\"string\",\"format\":\"%s\"}", cases[i].format);
        tw_json_grammar *g = compile_ok(schema);
        for (int k = 0; k < 8 && cases[i].good[k]; k++) {
            assert_true(format_fits(cases[i].format, cases[i].good[k]));
            snprintf(doc, sizeof doc, "\"%s\"", cases[i].good[k]);
            if (!accepts(g, doc))
                fail_msg("%s refused %s", cases[i].format, doc);
        }
        for (int k = 0; k < 8 && cases[i].bad[k]; k++) {
            assert_false(format_fits(cases[i].format, cases[i].bad[k]));
            snprintf(doc, sizeof doc, "\"%s\"", cases[i].bad[k]);
            if (accepts(g, doc))
                fail_msg("%s accepted %s", cases[i].format, doc);
        }
        /* random walks: every finished string is the format's */
        tw_test_rng rng = {0xf00d + i};
        int finished = 0;
        for (int w = 0; w < 150; w++) {
            const size_t n = walk(g, &rng, doc, sizeof doc, 6 + (size_t)w % 40);
            if (!n)
                continue;
            finished++;
            json_t *v = json_loadb(doc, n, JSON_DECODE_ANY, NULL);
            if (!json_is_string(v) || !format_fits(cases[i].format, json_string_value(v)))
                fail_msg("%s: walk %d gave %s", cases[i].format, w, doc);
            json_decref(v);
        }
        assert_true(finished > 100);
        tw_json_grammar_free(g);
    }
    /* these formats take length bounds, the shorter bound winning */
    tw_json_grammar *g =
        compile_ok("{\"type\":\"string\",\"format\":\"hostname\",\"maxLength\":5}");
    assert_true(accepts(g, "\"ab.cd\""));
    assert_false(accepts(g, "\"abc.de\""));
    tw_json_grammar_free(g);
    /* formats that name no syntax: any string (pydantic's SecretStr and
     * bytes) */
    g = compile_ok("{\"type\":\"object\",\"properties\":{\"p\":{\"type\":\"string\",\"format\":"
                   "\"password\",\"writeOnly\":true},\"b\":{\"type\":\"string\",\"format\":"
                   "\"binary\"}}}");
    assert_true(accepts(g, "{\"p\":\"s3cr\\u00e9t \",\"b\":\"x\\ny\"}"));
    tw_json_grammar_free(g);
    /* what pydantic writes for an HttpUrl */
    g = compile_ok("{\"type\":\"string\",\"format\":\"uri\",\"minLength\":1,"
                   "\"maxLength\":2083}");
    assert_true(accepts(g, "\"https://example.org/x?y=1\""));
    assert_false(accepts(g, "\"\""));
    tw_json_grammar_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_verdicts),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_random_walks),
        cmocka_unit_test(test_formats),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
