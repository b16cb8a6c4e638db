/* String formats a schema may ask for, as byte automata: each takes the
 * string's characters one at a time from position 0 and says where it
 * stands, so the matcher stays exact on prefixes. Dates are held to real
 * calendar days (February 29 in leap years of the Gregorian calendar), times to
 * RFC 3339 with an offset, as JSON Schema's date-time and time formats
 * read it. */
#include <string.h>

#include "json_internal.h"

typedef struct format_name {
    const char *name;
    jformat format;
} format_name;

static const format_name names[] = {
    {"date", JF_DATE}, {"time", JF_TIME}, {"date-time", JF_DATE_TIME}, {"uuid", JF_UUID}};

jformat json_format_named(const char *name)
{
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(name, names[i].name) == 0)
            return names[i].format;
    return JF_NONE;
}

static bool is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

static bool is_hex(unsigned char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* YYYY-MM-DD, positions 0-9; mem keeps the month (bits 0-7), the day's
 * tens (8-15) and the year (16-29). */
static int date_step(unsigned pos, uint32_t *mem, unsigned char c)
{
    const unsigned month = *mem & 0xFF, tens = *mem >> 8 & 0xFF, year = *mem >> 16;
    switch (pos) {
    case 0:
    case 1:
    case 2:
    case 3:
        if (!is_digit(c))
            return -1;
        *mem = (year * 10 + (unsigned)(c - '0')) << 16;
        return (int)pos + 1;
    case 4:
    case 7:
        return c == '-' ? (int)pos + 1 : -1;
    case 5:
        if (c != '0' && c != '1')
            return -1;
        *mem = year << 16 | (uint32_t)(c - '0') * 10;
        return 6;
    case 6: {
        if (!is_digit(c))
            return -1;
        unsigned m = month + (unsigned)(c - '0');
        if (m < 1 || m > 12)
            return -1;
        *mem = year << 16 | m;
        return 7;
    }
    case 8: {
        unsigned t = c >= '0' && c <= '3' ? (unsigned)(c - '0') : 9;
        if (t > 3 || (month == 2 && t > 2))
            return -1;
        *mem = year << 16 | t << 8 | month;
        return 9;
    }
    case 9: {
        if (!is_digit(c))
            return -1;
        unsigned d = tens * 10 + (unsigned)(c - '0');
        static const unsigned days[13] = {0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
        const bool leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
        const unsigned last = days[month] + (month == 2 && leap);
        return d >= 1 && d <= last ? 10 : -1;
    }
    }
    return -1;
}

/* HH:MM:SS[.fraction]offset, positions 0-15: 8 after the seconds, 9 after
 * the dot, 10 in the fraction (mem counts its digits), 11-15 the offset's
 * +HH:MM after its sign, 16 done. */
enum { T_SECONDS = 8, T_DOT, T_FRACTION, T_OFFSET, T_DONE = 16 };

static int hh_mm(unsigned at, uint32_t *mem, unsigned char c)
{
    switch (at) {
    case 0:
        if (c < '0' || c > '2')
            return -1;
        *mem = (uint32_t)(c - '0');
        return 1;
    case 1:
        return is_digit(c) && (*mem < 2 || c <= '3') ? 2 : -1;
    case 2:
        return c == ':' ? 3 : -1;
    case 3:
        return c >= '0' && c <= '5' ? 4 : -1;
    case 4:
        return is_digit(c) ? 5 : -1;
    }
    return -1;
}

static int time_step(unsigned pos, uint32_t *mem, unsigned char c)
{
    if (pos < 5)
        return hh_mm(pos, mem, c);
    switch (pos) {
    case 5:
        return c == ':' ? 6 : -1;
    case 6:
        return c >= '0' && c <= '5' ? 7 : -1;
    case 7:
        return is_digit(c) ? T_SECONDS : -1;
    case T_DOT:
        *mem = 1;
        return is_digit(c) ? T_FRACTION : -1;
    case T_SECONDS:
    case T_FRACTION:
        if (pos == T_SECONDS && c == '.')
            return T_DOT;
        if (pos == T_FRACTION && is_digit(c) && *mem < 9) {
            ++*mem;
            return T_FRACTION;
        }
        if (c == 'Z')
            return T_DONE;
        return c == '+' || c == '-' ? T_OFFSET : -1;
    }
    if (pos >= T_OFFSET && pos < T_DONE) {
        int r = hh_mm(pos - T_OFFSET, mem, c);
        return r < 0 ? -1 : r + T_OFFSET;
    }
    return -1;
}

/* 8-4-4-4-12 hex digits. */
static int uuid_step(unsigned pos, unsigned char c)
{
    if (pos == 8 || pos == 13 || pos == 18 || pos == 23)
        return c == '-' ? (int)pos + 1 : -1;
    return pos < 36 && is_hex(c) ? (int)pos + 1 : -1;
}

int json_format_step(jformat f, unsigned pos, uint32_t *mem, unsigned char c)
{
    switch (f) {
    case JF_DATE:
        return date_step(pos, mem, c);
    case JF_TIME:
        return time_step(pos, mem, c);
    case JF_DATE_TIME:
        if (pos < 10)
            return date_step(pos, mem, c);
        if (pos == 10)
            return c == 'T' ? 11 : -1;
        {
            int r = time_step(pos - 11, mem, c);
            return r < 0 ? -1 : r + 11;
        }
    case JF_UUID:
        return uuid_step(pos, c);
    case JF_NONE:
        break;
    }
    return -1;
}

bool json_format_final(jformat f, unsigned pos)
{
    switch (f) {
    case JF_DATE:
        return pos == 10;
    case JF_TIME:
        return pos == T_DONE;
    case JF_DATE_TIME:
        return pos == 11 + T_DONE;
    case JF_UUID:
        return pos == 36;
    case JF_NONE:
        break;
    }
    return false;
}
