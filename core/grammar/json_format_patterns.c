/* String formats read as patterns (json_pattern.c): the formats a schema
 * may name whose texts are regular languages with no calendar in them.
 * Each expression is written so that every partial match it allows can
 * still be finished, within the format's length, which keeps the matcher
 * from stranding an answer in them (but for a URI whose userinfo or IPv6
 * literal runs into the last bytes of TW_JSON_PATTERN_BYTES), and each is
 * anchored at both ends. */
#include <string.h>

#include "json_internal.h"

/* RFC 2673 dotted quads: four decimal octets with no leading zero. */
#define OCTET "(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
#define IPV4  OCTET "(?:\\." OCTET "){3}"

/* RFC 4291 / RFC 3986's IPv6address: up to eight groups of 1-4 hex
 * digits, one run of zero groups shortened to "::", the last two groups
 * possibly a dotted quad. */
#define H16     "[0-9A-Fa-f]{1,4}"
#define LS32    "(?:" H16 ":" H16 "|" IPV4 ")"
#define HEAD(n) "(?:(?:" H16 ":){0," #n "}" H16 ")?::"
#define IPV6                                                                                       \
    "(?:(?:" H16 ":){6}" LS32 "|::(?:" H16 ":){5}" LS32 "|(?:" H16 ")?::(?:" H16 ":){4}" LS32      \
    "|" HEAD(1) "(?:" H16 ":){3}" LS32 "|" HEAD(2) "(?:" H16 ":){2}" LS32 "|" HEAD(3) H16          \
        ":" LS32 "|" HEAD(4) LS32 "|" HEAD(5) H16 "|" HEAD(6) ")"

/* RFC 1123 host names: dot-separated labels of letters, digits and
 * hyphens, 1 to 63 of them, not starting or ending with a hyphen. */
#define LABEL    "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
#define HOSTNAME LABEL "(?:\\." LABEL ")*"

/* RFC 5321 mailboxes in their common form: a dot-atom local part and a
 * host name (no quoted local parts, no address literals). The local part
 * is a character and at most 31 more, each with a dot before it or not,
 * so it stays within RFC 5321's 64 octets by its form alone: a lookahead
 * that counted them would make every string a partial match (PCRE2 finds
 * a lookahead that meets the end of the text partial), and with no bound
 * an answer could write a local part up to the address's 254 characters
 * and find no way to an @ there. */
#define ATEXT "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]"
#define EMAIL ATEXT "(?:\\.?" ATEXT "){0,31}@" HOSTNAME

/* RFC 3339 appendix A durations: P then a date part (years, months and
 * days, each with the smaller ones it may carry) with an optional time
 * part, a time part alone, or weeks. */
#define NUM      "[0-9]+"
#define DUR_TIME "T(?:" NUM "H(?:" NUM "M(?:" NUM "S)?)?|" NUM "M(?:" NUM "S)?|" NUM "S)"
#define DUR_DATE                                                                                   \
    "(?:" NUM "D|" NUM "M(?:" NUM "D)?|" NUM "Y(?:" NUM "M(?:" NUM "D)?)?)(?:" DUR_TIME ")?"
#define DURATION "P(?:" DUR_DATE "|" DUR_TIME "|" NUM "W)"

/* RFC 3986 URIs: scheme ":" hier-part [ "?" query ] [ "#" fragment ],
 * the authority's host a bracketed IPv6 or IPvFuture literal or a
 * registered name (which dotted quads are a case of). */
#define PCT       "%[0-9A-Fa-f]{2}"
#define SUB_UNRES "\\-A-Za-z0-9._~!$&'()*+,;="
#define PCHAR     "(?:[" SUB_UNRES ":@]|" PCT ")"
/* at most 32 characters, as no scheme in use is longer, so that a scheme
 * cannot run to the end of the string's room with no ":" in reach */
#define SCHEME    "[A-Za-z][A-Za-z0-9+.-]{0,31}"
#define IP_LIT    "\\[(?:" IPV6 "|v[0-9A-Fa-f]+\\.[" SUB_UNRES ":]+)\\]"
#define AUTHORITY                                                                                  \
    "(?:(?:[" SUB_UNRES ":]|" PCT ")*@)?(?:" IP_LIT "|(?:[" SUB_UNRES "]|" PCT ")*)(?::[0-9]*)?"
#define HIER_PART                                                                                  \
    "(?://" AUTHORITY "(?:/" PCHAR "*)*|/(?:" PCHAR "+(?:/" PCHAR "*)*)?|" PCHAR "+(?:/" PCHAR     \
    "*)*)?"
#define URI SCHEME ":" HIER_PART "(?:\\?(?:" PCHAR "|[/?])*)?(?:#(?:" PCHAR "|[/?])*)?"

/* RFC 4648 base64 (OpenAPI's "byte"): groups of four, the last one
 * perhaps padded. */
#define B64    "[A-Za-z0-9+/]"
#define BASE64 "(?:" B64 "{4})*(?:" B64 "{2}==|" B64 "{3}=)?"

typedef struct format_pattern {
    const char *name, *pattern;
    uint32_t max_chars; /* the longest text the format allows */
} format_pattern;

static const format_pattern formats[] = {
    {"ipv4", "^" IPV4 "$", 15},
    {"ipv6", "^" IPV6 "$", 45},
    {"hostname", "^" HOSTNAME "$", 253},
    {"email", "^" EMAIL "$", 254},
    {"duration", "^" DURATION "$", UINT32_MAX},
    {"uri", "^" URI "$", UINT32_MAX},
    {"byte", "^" BASE64 "$", UINT32_MAX},
};

const char *json_format_pattern(const char *name, uint32_t *max_chars)
{
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++)
        if (strcmp(name, formats[i].name) == 0) {
            *max_chars = formats[i].max_chars;
            return formats[i].pattern;
        }
    return NULL;
}

bool json_format_plain(const char *name)
{
    return !strcmp(name, "password") || !strcmp(name, "binary");
}
