/* Unit tests of the template interpreter: whitespace control, expressions,
 * filters, tests, loops, macros, namespaces, slicing (every expected text
 * below is what Jinja2 renders in Hugging Face's configuration), and refusal
 * of hostile templates and inputs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "chat_test_util.h"
#include "test_support.h"

/* 2024-07-26 13:20:00 UTC, so strftime_now is reproducible. */
static const tw_chat_render_opts fixed_clock = {.now = 1722000000};

typedef struct render_case {
    const char *tmpl;
    const char *vars;
    const char *want; /* NULL: the render must fail */
} render_case;

static const render_case cases[] = {
    {"{% if true %}\n  yes\n{% endif %}\nafter", "{}", "  yes\nafter"},
    {"  {% if true %}x{% endif %}  \n  {%- if true %}y{% endif %}", "{}", "xy"},
    {"a  {{- ' b ' -}}  c", "{}", "a b c"},
    {"{# comment #}\nline\n  {# c2 -#}   z", "{}", "line\nz"},
    {"{%+ if true %}p{% endif +%}\nq", "{}", "p\nq"},
    {"{% raw %}{{ x }}{% endraw %}\n!", "{}", "{{ x }}!"},
    {"text\n", "{}", "text"},
    {"a\r\nb\rc", "{}", "a\nb\nc"},
    {"{{ 'a\\tb\\x41\\u00e9\\n' }}", "{}", "a\tbA\303\251\n"},
    {"{{ \"it's\" ~ 'x' 'y' }}", "{}", "it'sxy"},
    {"{% for x in xs %}{{ loop.index0 }}{{ loop.index }}{{ loop.first }}{{ loop.last }}{{ "
     "loop.length }}{{ loop.revindex }}|{% endfor %}",
     "{\"xs\": [5, 6, 7]}", "01TrueFalse33|12FalseFalse32|23FalseTrue31|"},
    {"{% for x in xs %}{{ loop.previtem }}-{{ loop.nextitem }};{% endfor %}", "{\"xs\": [1, 2, 3]}",
     "-2;1-3;2-;"},
    {"{% for x in xs %}{{ x }}{% else %}empty{% endfor %}", "{\"xs\": []}", "empty"},
    {"{% for x in xs if x > 1 %}{{ x }}{{ loop.length }}{% endfor %}", "{\"xs\": [1, 2, 3]}",
     "2232"},
    {"{% for k, v in d.items() %}{{ k }}={{ v }},{% endfor %}", "{\"d\": {\"b\": 1, \"a\": 2}}",
     "b=1,a=2,"},
    {"{% for k, v in d|items %}{{ k }}={{ v }},{% endfor %}", "{\"d\": {\"b\": 1, \"a\": 2}}",
     "b=1,a=2,"},
    {"{% for x in xs %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif "
     "%}{{ x }}{% endfor %}",
     "{\"xs\": [1, 2, 3, 4, 5]}", "13"},
    {"{% set ns = namespace(a=1, b='x') %}{% for i in range(3) %}{% set ns.a = ns.a + i %}{% "
     "endfor %}{{ ns.a }}{{ ns.b }}",
     "{}", "4x"},
    {"{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}", "{}", "1"},
    {"{% set x = 1 %}{% if true %}{% set x = 2 %}{% endif %}{{ x }}", "{}", "2"},
    {"{{ xs[1:] }}{{ xs[:-1] }}{{ xs[::-1] }}{{ xs[::2] }}{{ xs[-2] }}{{ s[::-1] }}{{ s[1:3] }}",
     "{\"xs\": [1, 2, 3, 4], \"s\": \"h\303\251llo\"}",
     "[2, 3, 4][1, 2, 3][4, 3, 2, 1][1, 3]3oll\303\251h\303\251l"},
    {"{{ s[10:] }}|{{ xs[5] }}|{{ xs[-10:2] }}|{{ s[-1] }}", "{\"xs\": [1, 2, 3], \"s\": \"abc\"}",
     "||[1, 2]|c"},
    {"{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 7 / 2 }} {{ 1 + 2 * 3 "
     "}} {{ (1 + 2) * 3 }} {{ 2 ** -1 }}",
     "{}", "3 -4 1 2 1024 3.5 7 9 0.5"},
    {"{{ 0.1 + 0.2 }} {{ 1.0 }} {{ 1e20 }} {{ 1e-5 }} {{ 123456789.123 }} {{ 3.0 * 2 }} {{ 10 / 4 "
     "}}",
     "{}", "0.30000000000000004 1.0 1e+20 1e-05 123456789.123 6.0 2.5"},
    {"{{ none }} {{ true }} {{ false }} {{ [1, 'a', none, true] }} {{ {'a': [1, 2], 'b': 'x'} }} "
     "{{ (1,) }} {{ (1, 2) }}",
     "{}", "None True False [1, 'a', None, True] {'a': [1, 2], 'b': 'x'} (1,) (1, 2)"},
    {"{{ \"it's\" }} {{ [\"it's\", 'q\"'] }} {{ ['a\\nb'] }}", "{}",
     "it's [\"it's\", 'q\"'] ['a\\nb']"},
    {"{{ x is defined }}{{ y is defined }}{{ y is undefined }}{{ none is none }}{{ 'a' is string "
     "}}{{ 1 is number }}{{ true is boolean }}{{ d is mapping }}{{ xs is iterable }}{{ 'a' is "
     "iterable }}{{ xs is sequence }}",
     "{\"x\": 1, \"d\": {}, \"xs\": []}", "TrueFalseTrueTrueTrueTrueTrueTrueTrueTrueTrue"},
    {"{{ 1 is odd }}{{ 2 is even }}{{ 6 is divisibleby 3 }}{{ 'a' is lower }}{{ 'A' is upper }}{{ "
     "x is true }}{{ x is false }}{{ 1 is integer }}{{ 1.0 is float }}",
     "{\"x\": true}", "TrueTrueTrueTrueTrueTrueFalseTrueTrue"},
    {"{{ 'a' in 'abc' }}{{ 'z' not in 'abc' }}{{ 1 in [1,2] }}{{ 'k' in {'k': 1} }}{{ 'q' in "
     "undefined_thing }}",
     "{}", "TrueTrueTrueTrueFalse"},
    {"{{ 1 < 2 < 3 }}{{ 3 > 2 > 2 }}{{ 1 == 1.0 }}{{ 'a' != 'b' }}{{ [1,2] == [1,2] }}", "{}",
     "TrueFalseTrueTrueTrue"},
    {"{{ x or 'dflt' }}|{{ '' or 'e' }}|{{ 0 and 1 }}|{{ 'a' and 'b' }}|{{ not x }}", "{}",
     "dflt|e|0|b|True"},
    {"{{ 'yes' if c else 'no' }}{{ 'only' if c }}", "{\"c\": false}", "no"},
    {"{{ '  hi  ' | trim }}|{{ 'xxhixx' | trim('x') }}|{{ 'abc' | upper }}|{{ 'ABC' | lower }}|{{ "
     "'hello world' | capitalize }}|{{ 'hello wORLD-foo (bar)' | title }}",
     "{}", "hi|hi|ABC|abc|Hello world|Hello World-Foo (Bar)"},
    {"{{ [3,1,2] | length }}{{ 'h\303\251llo' | length }}{{ {'a':1} | length }}{{ [3,1,2] | first "
     "}}{{ [3,1,2] | last }}{{ [3,1,2] | sort | join(',') }}{{ [3,1,2] | sort(reverse=true) | list "
     "}}",
     "{}", "351321,2,3[3, 2, 1]"},
    {"{{ xs | map(attribute='n') | join('-') }}|{{ xs | selectattr('n', 'gt', 1) | "
     "map(attribute='n') | list }}|{{ xs | rejectattr('n', 'equalto', 1) | list | length }}",
     "{\"xs\": [{\"n\": 1}, {\"n\": 2}, {\"n\": 3}]}", "1-2-3|[2, 3]|2"},
    {"{{ [1,2,3,4] | select('odd') | list }}{{ [1,2,3,4] | reject('odd') | list }}{{ ['a','B'] | "
     "map('upper') | list }}{{ [0, 1, ''] | select | list }}",
     "{}", "[1, 3][2, 4]['A', 'B'][1]"},
    {"{{ x | default('d') }}|{{ '' | default('d') }}|{{ '' | default('d', true) }}|{{ none | "
     "default('d') }}|{{ x | d }}",
     "{}", "d||d|None|"},
    {"{{ 'a,b,,c' .split(',') }}{{ '  a b  c '.split() }}{{ 'a b c'.split(' ', 1) }}{{ "
     "'a,b,c'.rsplit(',', 1) }}{{ ' x '.strip() }}{{ 'xxaxx'.lstrip('x') }}{{ 'xxaxx'.rstrip('x') "
     "}}",
     "{}", "['a', 'b', '', 'c']['a', 'b', 'c']['a', 'b c']['a,b', 'c']xaxxxxa"},
    {"{{ 'hello'.startswith('he') }}{{ 'hello'.endswith(('lo', 'x')) }}{{ 'aXbX'.replace('X', '-') "
     "}}{{ 'aXbX'.replace('X', '-', 1) }}{{ 'Ab'.upper() }}{{ 'Ab'.lower() }}{{ 'hello "
     "world'.title() }}{{ 'h\303\251llo'.find('l') }}{{ 'abc'.count('b') }}",
     "{}", "TrueTruea-b-a-bXABabHello World21"},
    {"{{ d.get('a') }}{{ d.get('z') }}{{ d.get('z', 5) }}{{ d.keys() | list }}{{ d.values() | list "
     "}}{{ d['a'] }}{{ d.a }}{{ d.z }}|",
     "{\"d\": {\"a\": 1, \"b\": 2}}", "1None5['a', 'b'][1, 2]11|"},
    {"{{ d | tojson }}|{{ d | tojson(indent=2) }}|{{ '\303\251\"\\n' | tojson }}|{{ [] | "
     "tojson(indent=2) }}|{{ {} | tojson }}|{{ [1.5, none, true] | tojson }}|{{ d | "
     "tojson(sort_keys=true) }}",
     "{\"d\": {\"b\": [1, {\"c\": \"\303\274\"}], \"a\": null}}",
     "{\"b\": [1, {\"c\": \"\303\274\"}], \"a\": null}|{\n  \"b\": [\n    1,\n    {\n      \"c\": "
     "\"\303\274\"\n    }\n  ],\n  \"a\": null\n}|\"\303\251\\\"\\n\"|[]|{}|[1.5, null, "
     "true]|{\"a\": null, \"b\": [1, {\"c\": \"\303\274\"}]}"},
    {"{% macro greet(name, greeting='Hello') %}{{ greeting }}, {{ name }}!{% endmacro %}{{ "
     "greet('Ann') }} {{ greet('Bob', greeting='Hi') }} {{ greet(name='Cy') }}",
     "{}", "Hello, Ann! Hi, Bob! Hello, Cy!"},
    {"{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') "
     "%}bold{% endcall %}",
     "{}", "<b>bold</b>"},
    {"{% macro f() %}{{ varargs | length }}{{ kwargs.x }}{% endmacro %}{{ f(1, 2, x=3) }}", "{}",
     "23"},
    {"{% set t %}  captured {{ 1 + 1 }}{% endset %}[{{ t }}]", "{}", "[  captured 2]"},
    {"{% filter upper %}shout {{ 'this' }}{% endfilter %}", "{}", "SHOUT THIS"},
    {"{{ 'x' * 3 }}{{ [1] * 2 }}{{ [1] + [2] }}{{ 'a' + 'b' }}{{ 1 ~ 2 ~ none }}", "{}",
     "xxx[1, 1][1, 2]ab12None"},
    {"{{ text | indent(2) }}|{{ text | indent(2, true) }}|{{ text | indent('> ', first=true, "
     "blank=true) }}",
     "{\"text\": \"a\\n\\nb\\nc\"}", "a\n\n  b\n  c|  a\n\n  b\n  c|> a\n> \n> b\n> c"},
    {"{{ [1, 1, 'a', 'A'] | unique | list }}{{ [3, 1] | max }}{{ [3, 1] | min }}{{ [1, 2.5] | sum "
     "}}{{ '3' | int + 1 }}{{ '2.5' | float }}{{ 'x' | int }}{{ 3.7 | int }}{{ -3 | abs }}",
     "{}", "[1, 'a']313.542.5033"},
    {"{{ 'a&<b>\"' | e }}{{ 'abc' | reverse }}{{ [1,2] | reverse | list }}{{ {'b':1,'a':2} | "
     "dictsort }}{{ 42 | string }}{{ 'hello world foo' | wordcount }}",
     "{}", "a&amp;&lt;b&gt;&#34;cba[2, 1][('a', 2), ('b', 1)]423"},
    {"{{ '%s-%d-%.2f' | format('a', 3, 1.5) }}{{ '%s and %s' % ('x', 'y') }}{{ '{} {}'.format(1, "
     "'b') }}{{ '{0}{name}'.format('z', name='n') }}",
     "{}", "a-3-1.50x and y1 bzn"},
    /* %-formatting: widths and precisions on strings count characters and
     * never cut a long string; numbers take C's conversions */
    {"{{ '[%5s|%-5s|%.2s|%5.1s]' % ('ab', 'cd', 'xyz', '\xc3\xa9\xc3\xa9') }}{{ ('%-3s' % ('x' * "
     "600)) | length }}",
     "{}", "[   ab|cd   |xy|    \xc3\xa9]600"},
    {"{{ '%.3f|%08.2f|%x|%.f' % (3.14159, -2.5, 255, 2.5) }}|{{ ('%256d' % 1) | length }}|{{ "
     "('%.256f' % 1e308) | length }}",
     "{}", "3.142|-0002.50|ff|2|256|566"},
    /* a precision or width past 256 is refused, not built digit by digit */
    {"{{ '%.555555555e' | format(1) }}", "{}", NULL},
    {"{{ '%257d' % 1 }}", "{}", NULL},
    {"{{ '%5' % 1 }}", "{}", NULL},
    {"{{ range(3) | list }}{{ range(1, 10, 3) | list }}{{ range(5, 0, -2) | list }}", "{}",
     "[0, 1, 2][1, 4, 7][5, 3, 1]"},
    {"{{ strftime_now('%d %b %Y') }}", "{}", "26 Jul 2024"},
    {"{{ messages[0]['content'] }}{{ messages[0].content }}{{ messages[-1].role }}",
     "{\"messages\": [{\"role\": \"user\", \"content\": \"c1\"}, {\"role\": \"assistant\", "
     "\"content\": \"c2\"}]}",
     "c1c1assistant"},
    {"{% set a, b = [1, 2] %}{{ a }}{{ b }}{% set x = y = 3 %}", "{}", NULL},
    {"{{ foo.bar }}|{{ foo['x'] }}|{{ foo }}|{{ foo | length }}|{% for x in foo %}no{% endfor "
     "%}|{{ foo | list }}",
     "{}", "|||0||[]"},
    {"{{ raise_exception('nope') }}", "{}", NULL},
    {"{{ 1 + 'a' }}", "{}", NULL},
    {"{{ [] | first }}|{{ [] | last }}|{{ ''|first }}", "{}", "||"},
    {"{% for x in 'ab' %}{{ x }}.{% endfor %}{% for k in {'p': 1, 'q': 2} %}{{ k }}{% endfor %}",
     "{}", "a.b.pq"},
    {"{{ loop }}", "{}", ""},
    {"{% for a in [1,2] %}{% for b in [3,4] %}{{ loop.index }}{% endfor %}{{ loop.index }}{% "
     "endfor %}",
     "{}", "121122"},
    {"{{ 'abc'[0] }}{{ 'abc'.0 }}{{ xs.0 }}", "{\"xs\": [9]}", "aa9"},
    {"{{ -x }}{{ +x }}{{ - 2 ** 2 }}{{ not 1 == 2 }}", "{\"x\": 3}", "-334True"},
    {"{{ x|length > 2 and x[0] == 'a' }}", "{\"x\": \"abc\"}", "True"},
    {"{{ 'a' ~ 1 + 2 }}", "{}", NULL},
    {"{{ \"\\\\\" }}{{ 'a\\\\nb' }}{{ '\\q' }}", "{}", "\\a\\nb\\q"},
    {"{%- for m in messages -%}\n  {{ m }}\n{%- endfor %}", "{\"messages\": [\"a\", \"b\"]}", "ab"},
    {"{% if x %}\n    A\n{% elif y %}\n    B\n{% else %}\n    C\n{% endif %}", "{\"y\": 1}",
     "    B\n"},
    {"<{{ 1 }}>\n  {% if true %}\n  in\n  {% endif %}\n<{{ 2 }}>", "{}", "<1>\n  in\n<2>"},
    {"{{ x }}  {% if true %}k{% endif %}", "{\"x\": 1}", "1  k"},
    {"{%- set x = 'v' -%}\n\n   {{ x }}  \n\n{#- c -#}\n  end", "{}", "vend"},
    {"{{- '\\n' -}}  x", "{}", "\nx"},
    {"{% if true -%}\n  text\n{%- endif %}", "{}", "text"},
    {"{%- if true %}   \nA{% endif %}", "{}", "   \nA"},
    {"\t {% if true %}\t\nB{% endif %}", "{}", "\t\nB"},
    {"{{ 1 }}\n   {% if true %}C{% endif %}", "{}", "1\nC"},
    {"{{ 1 }}   {% if true %}C{% endif %}", "{}", "1   C"},
    {"a {# c #} b\n  {# d #}\ne", "{}", "a  b\ne"},
    {"x\n  {%- raw -%}  {{ y }}  {%- endraw -%}  \nz", "{}", "x{{ y }}z"},
    {"{% raw %}\n r {% endraw %}\nz", "{}", "\n r z"},
    {"{{ \"a\\\"b\" }}", "{}", "a\"b"},
    {"{% for x in xs %}{{ loop.cycle('o', 'e') }}{% endfor %}", "{\"xs\": [1, 2, 3]}", "oeo"},
    {"{{ ({'a': 1})['a'] }}{{ {'a': 1}.a }}", "{}", "11"},
    {"{{ m | selectattr('role', 'equalto', 'user') | list | length }}{{ m | map(attribute='role') "
     "| join(',') }}",
     "{\"m\": [{\"role\": \"user\"}, {\"role\": \"assistant\"}, {\"role\": \"user\"}]}",
     "2user,assistant,user"},
    {"{{ t | tojson(indent=4) }}",
     "{\"t\": {\"name\": \"f\", \"parameters\": {\"type\": \"object\", \"properties\": {}, "
     "\"required\": []}}}",
     "{\n    \"name\": \"f\",\n    \"parameters\": {\n        \"type\": \"object\",\n        "
     "\"properties\": {},\n        \"required\": []\n    }\n}"},
    {"{% set ns = namespace(items=[]) %}{% for x in [1,2] %}{% set ns.items = ns.items + [x * 10] "
     "%}{% endfor %}{{ ns.items }}",
     "{}", "[10, 20]"},
    {"{{ x is not none }}{{ y is not defined }}{{ x is not string }}", "{\"x\": 1}",
     "TrueTrueTrue"},
    {"{{ d.items() | list }}{{ d | list }}", "{\"d\": {\"a\": 1, \"b\": [2]}}",
     "[('a', 1), ('b', [2])]['a', 'b']"},
    {"{% for x in xs | reverse %}{{ x }}{% endfor %}", "{\"xs\": [1, 2, 3]}", "321"},
    {"{{ '{\"a\": 1}' | tojson }}", "{}", "\"{\\\"a\\\": 1}\""},
    {"{{ xs | length - 1 }}{{ -xs | length }}", "{\"xs\": [1, 2, 3]}", NULL},
    {"{% for x in xs %}{{ x }}{%- if not loop.last %},{% endif %}{% endfor %}",
     "{\"xs\": [1, 2, 3]}", "1,2,3"},
    {"{{ 'a' if x is defined and x else 'b' }}", "{\"x\": 0}", "b"},
    {"{{ 1/3 }} {{ 2.0**0.5 }} {{ 1e300*1e10 }} {{ -1e300*1e10 }} {{ 0.0 }} {{ -0.0 }} {{ 1e16 }} "
     "{{ 1e15 }} {{ 0.0001 }} {{ 0.00001 }} {{ 123e-20 }}",
     "{}",
     "0.3333333333333333 1.4142135623730951 inf -inf 0.0 -0.0 1e+16 1000000000000000.0 0.0001 "
     "1e-05 1.23e-18"},
    {"{{ x }} {{ y }} {{ z }}", "{\"x\": 1.5, \"y\": 1e+20, \"z\": 1e-07}", "1.5 1e+20 1e-07"},
    {"{{ d | tojson }}",
     "{\"d\": {\"f\": 1.0, \"g\": 2.5e-08, \"i\": 12345678901234, \"s\": "
     "\"\\u0001\\u001f\177\342\200\250\"}}",
     "{\"f\": 1.0, \"g\": 2.5e-08, \"i\": 12345678901234, \"s\": "
     "\"\\u0001\\u001f\177\342\200\250\"}"},
    {"{{ '  a  '|trim|length }}{{ 'a\\u3000'|trim|length }}", "{}", "11"},
    {"{% macro m(a, b=a ~ '!') %}{{ a }}{{ b }}{% endmacro %}{{ m('x') }}", "{}", "xx!"},
    {"{% set x %}{% for i in range(3) %}{{ i }}{% endfor %}{% endset %}{{ x | length }}", "{}",
     "3"},
    {"{{ [1, 2, 3][1:] | join(', ') }}", "{}", "2, 3"},
    {"{{ messages[1:] | length }}{% set msgs = messages[1:] %}{{ msgs[0].c }}",
     "{\"messages\": [{\"c\": \"a\"}, {\"c\": \"b\"}]}", "1b"},
    {"{% if messages[0]['role'] == 'system' %}{% set s = messages[0]['content'] | trim %}{% set "
     "messages = messages[1:] %}{% endif %}{{ s }}|{{ messages | length }}",
     "{\"messages\": [{\"role\": \"system\", \"content\": \" S \"}, {\"role\": \"user\", "
     "\"content\": \"u\"}]}",
     "S|1"},
    {"{{ 'Hello %s' | format('W') }}", "{}", "Hello W"},
    {"{{ content.split('</think>')[-1].lstrip('\\n') }}|{{ "
     "content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') }}",
     "{\"content\": \"<think>\\nR\\n</think>\\n\\nA\"}", "A|R"},
    {"{{ 'a\\nb\\r\\nc' .splitlines() }}", "{}", "['a', 'b', 'c']"},
    {"{{ x | string | length }}{{ x | tojson }}", "{\"x\": [1, \"two\", {\"3\": null}]}",
     "23[1, \"two\", {\"3\": null}]"},
    {"{{ [1, [2, [3]]] }}{{ {'k': (1, 'v')} }}", "{}", "[1, [2, [3]]]{'k': (1, 'v')}"},
    {"{% for i in range(3) %}{% if i == 1 %}{% break %}{% endif %}{{ i }}{% else %}E{% endfor %}",
     "{}", "0"},
    {"{{ true + 1 }}{{ 3 * true }}{{ 1 == true }}{{ 5 // 2.0 }}{{ 5 % 2.5 }}{{ -5 % 3.0 }}", "{}",
     "23True2.00.01.0"},
    {"{{ 'ab' * 0 }}|{{ 'ab' * -1 }}|{{ [] * 3 }}", "{}", "||[]"},
    {"{{ (1, 2) + (3,) }}{{ (1, 2) == (1, 2) }}{{ [1] == (1,) }}", "{}", "(1, 2, 3)TrueFalse"},
    {"{{ 10 ** 18 }}{{ 2 ** 62 }}", "{}", "10000000000000000004611686018427387904"},
    {"{{ ['b', 'A', 'c'] | sort }}{{ ['b', 'A', 'c'] | sort(case_sensitive=true) }}{{ xs | "
     "sort(attribute='n') | map(attribute='n') | list }}",
     "{\"xs\": [{\"n\": 3}, {\"n\": 1}]}", "['A', 'b', 'c']['A', 'b', 'c'][1, 3]"},
    {"{{ 'abc' | center(9) }}|{{ 'ab' | center(7) }}|{{ 'abc'.ljust(5, '*') }}|{{ 'abc'.rjust(5) "
     "}}",
     "{}", "   abc   |   ab  |abc**|  abc"},
    {"{{ 'a-b c' | title }}{{ 'x' | truncate(3) }}{{ 'hello world this is long' | truncate(12) "
     "}}{{ 'hello world this is long' | truncate(12, true) }}",
     "{}", "A-B Cxhello...hello wor..."},
    {"{{ 2.5 | round }}{{ 3.5 | round }}{{ 2.567 | round(2) }}{{ 2.1 | round(0, 'ceil') }}{{ 7 | "
     "round }}",
     "{}", "2.04.02.573.07"},
    {"{% set a = 1 %}{% macro f() %}{{ a }}{% endmacro %}{% set a = 2 %}{{ f() }}", "{}", "2"},
    {"{{ xs | join }}{{ xs | join(attribute='a') }}", "{\"xs\": [{\"a\": 1}, {\"a\": 2}]}",
     "{'a': 1}{'a': 2}12"},
    {"{{ 'x' ~ none }}{{ none | string }}{{ [none] | join(',') }}", "{}", "xNoneNoneNone"},
    {"{{ [1,2,3] | batch(2) | list }}", "{}", "[[1, 2], [3]]"},
    {"{{ x | int(5) }}{{ '0x1A' | int(0, 16) }}{{ '12abc' | int }}{{ ' 42 ' | int }}{{ '1_000' | "
     "int }}",
     "{\"x\": \"nope\"}", "5260421000"},
    /* Found by tests/fuzz/fuzz_chat_template: an attribute path part of
     * digits too long for an index overflowed while being read as one; it
     * is a key. */
    {"{{ x | map(attribute='77777777777777777777') | first }}",
     "{\"x\": [{\"77777777777777777777\": 5}]}", "5"},
};

static void test_rendering_table(void **state)
{
    (void)state;
    int failures = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *out = NULL;
        tw_err err = {{0}};
        tw_status st = chat_render_text(cases[i].tmpl, cases[i].vars, &fixed_clock, &out, &err);
        char label[64];
        snprintf(label, sizeof label, "case %zu", i);
        if (!cases[i].want) {
            if (st == TW_OK) {
                printf("%s: rendered \"%s\", want an error\n  template: %s\n", label, out,
                       cases[i].tmpl);
                failures++;
            }
        } else if (st != TW_OK) {
            printf("%s: failed: %s\n  template: %s\n", label, err.msg, cases[i].tmpl);
            failures++;
        } else if (strcmp(out, cases[i].want) != 0) {
            chat_print_mismatch(label, cases[i].want, strlen(cases[i].want), out, strlen(out));
            printf("  template: %s\n", cases[i].tmpl);
            failures++;
        }
        free(out);
    }
    assert_int_equal(failures, 0);
}

static tw_status render(const char *tmpl, const char *vars, const tw_chat_render_opts *o,
                        char **out, tw_err *err)
{
    return chat_render_text(tmpl, vars, o ? o : &fixed_clock, out, err);
}

static void expect_error(const char *tmpl, const char *vars, tw_status code, const char *needle)
{
    char *out = NULL;
    tw_err err = {{0}};
    tw_status st = render(tmpl, vars, NULL, &out, &err);
    if (st != code || !strstr(err.msg, needle))
        printf("template %s: got %s \"%s\", want %s containing \"%s\"\n", tmpl,
               tw_status_name(st), err.msg, tw_status_name(code), needle);
    free(out);
    assert_int_equal(st, code);
    assert_non_null(strstr(err.msg, needle));
}

static void test_errors_name_line_and_column(void **state)
{
    (void)state;
    expect_error("line one\n{% if x %}\n  {{ 1 + }}\n{% endif %}", NULL, TW_INVALID_ARGUMENT,
                 "line 3, column 10");
    expect_error("ab\n{% for x in y %}", NULL, TW_INVALID_ARGUMENT,
                 "line 2, column 17: unexpected end of template, expected 'endfor'");
    expect_error("{{ x | nosuchfilter }}", NULL, TW_INVALID_ARGUMENT,
                 "line 1, column 8: no filter named 'nosuchfilter'");
    expect_error("{% if x is nosuchtest %}{% endif %}", NULL, TW_INVALID_ARGUMENT,
                 "no test named 'nosuchtest'");
    expect_error("\n\n   {{ 1 / 0 }}", NULL, TW_INVALID_ARGUMENT, "line 3, column 9: division by zero");
    expect_error("{% frobnicate %}", NULL, TW_INVALID_ARGUMENT, "unknown tag 'frobnicate'");
    expect_error("{% include 'x.jinja' %}", NULL, TW_INVALID_ARGUMENT, "self-contained");
    expect_error("{% break %}", NULL, TW_INVALID_ARGUMENT, "outside of a loop");
    expect_error("{{ 'unterminated }}", NULL, TW_INVALID_ARGUMENT, "unterminated string");
    expect_error("{# never closed", NULL, TW_INVALID_ARGUMENT, "unterminated comment");
    expect_error("{% raw %} no end", NULL, TW_INVALID_ARGUMENT, "endraw");
    expect_error("{{ (1 }}", NULL, TW_INVALID_ARGUMENT, "expected ')'");
    expect_error("{{ x }", NULL, TW_INVALID_ARGUMENT, "unexpected");
    expect_error("{% endif %}", NULL, TW_INVALID_ARGUMENT, "unexpected 'endif'");
}

static void test_raise_exception_carries_exact_message(void **state)
{
    (void)state;
    char *out = NULL;
    tw_err err = {{0}};
    assert_int_equal(render("a{{ raise_exception('Roles must alternate: ' ~ n) }}b", "{\"n\": 3}",
                            NULL, &out, &err),
                     TW_INVALID_ARGUMENT);
    assert_string_equal(err.msg, "Roles must alternate: 3");
    assert_null(out);
}

static void test_undefined_is_lenient_and_falsy(void **state)
{
    (void)state;
    char *out = NULL;
    tw_err err = {{0}};
    assert_int_equal(render("[{{ nope }}|{{ nope.attr }}|{{ nope['k'] }}|{{ nope is defined }}|"
                            "{{ nope.attr is defined }}|{{ 'x' if nope else 'y' }}|"
                            "{% for i in nope %}i{% endfor %}|{{ nope | length }}|{{ nope ~ 'z' }}]",
                            NULL, NULL, &out, &err),
                     TW_OK);
    assert_string_equal(out, "[|||False|False|y||0|z]");
    free(out);
    expect_error("{{ nope + 1 }}", NULL, TW_INVALID_ARGUMENT, "undefined");
    expect_error("{{ nope() }}", NULL, TW_INVALID_ARGUMENT, "undefined");
    expect_error("{{ nope | tojson }}", NULL, TW_INVALID_ARGUMENT, "not JSON serializable");
}

static void test_strftime_now_uses_injected_clock(void **state)
{
    (void)state;
    char *out = NULL;
    tw_err err = {{0}};
    assert_int_equal(render("{{ strftime_now('%d %b %Y') }}|{{ strftime_now('%Y-%m-%d %H:%M') }}",
                            NULL, NULL, &out, &err),
                     TW_OK);
    assert_string_equal(out, "26 Jul 2024|2024-07-26 13:20");
    free(out);
    /* without an injected clock the real one is read: the year is plausible */
    tw_chat_render_opts live = {0};
    assert_int_equal(render("{{ strftime_now('%Y') | int > 2023 }}", NULL, &live, &out, &err),
                     TW_OK);
    assert_string_equal(out, "True");
    free(out);
}

static void test_hostile_templates_are_refused(void **state)
{
    (void)state;
    tw_chat_render_opts small = {.now = 1, .max_memory = 4 << 20, .max_output = 1 << 20,
                                 .max_steps = 200000};
    struct {
        const char *tmpl;
        tw_status code;
        const char *needle;
    } bad[] = {
        {"{% for i in range(100001) %}{% endfor %}", TW_RESOURCE_EXHAUSTED, "MAX_RANGE"},
        {"{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
         TW_RESOURCE_EXHAUSTED, "work limit"},
        {"{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}"
         "{% endfor %}", TW_RESOURCE_EXHAUSTED, "limit"},
        {"{% for i in range(100000) %}{{ 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx' }}{% endfor %}",
         TW_RESOURCE_EXHAUSTED, "rendered text exceeds"},
        {"{{ 'x' * 100000000 }}", TW_RESOURCE_EXHAUSTED, "limit"},
        {"{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", TW_RESOURCE_EXHAUSTED,
         "nested more than"},
        {"{% set ns = namespace() %}{% set ns.me = ns %}", TW_INVALID_ARGUMENT, "namespace"},
        {"{% set ns = namespace() %}{% set ns.l = [ns] %}", TW_INVALID_ARGUMENT, "namespace"},
        {"{{ 9223372036854775807 + 1 }}", TW_OUT_OF_RANGE, "overflow"},
        {"{{ 99999999999999999999 }}", TW_INVALID_ARGUMENT, "out of range"},
        {"{{ [].append(1) }}", TW_PERMISSION_DENIED, "unsafe"},
        {"{{ x[::0] }}", TW_INVALID_ARGUMENT, "step cannot be zero"},
        {"{% for a, b in [1] %}{% endfor %}", TW_INVALID_ARGUMENT, "unpack"},
        {"{{ '\\xZZ' }}", TW_INVALID_ARGUMENT, "escape"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *out = NULL;
        tw_err err = {{0}};
        tw_status st = render(bad[i].tmpl, "{\"x\": [1]}", &small, &out, &err);
        if (st != bad[i].code || !strstr(err.msg, bad[i].needle))
            printf("hostile %zu (%s): got %s \"%s\"\n", i, bad[i].tmpl, tw_status_name(st),
                   err.msg);
        assert_int_equal(st, bad[i].code);
        assert_non_null(strstr(err.msg, bad[i].needle));
        assert_null(out);
    }
}

static void test_deep_nesting_is_refused(void **state)
{
    (void)state;
    char *src = malloc(20000);
    assert_non_null(src);
    /* parentheses, if-blocks, unary operators and lists nested far too deep */
    const char *open[] = {"(", "{% if 1 %}", "not ", "["};
    const char *close[] = {")", "{% endif %}", "", "]"};
    for (int k = 0; k < 4; k++) {
        size_t n = 0;
        if (k != 1)
            n += (size_t)sprintf(src + n, "{{ ");
        for (int i = 0; i < 300; i++)
            n += (size_t)sprintf(src + n, "%s", open[k]);
        n += (size_t)sprintf(src + n, "1");
        for (int i = 0; i < 300; i++)
            n += (size_t)sprintf(src + n, "%s", close[k]);
        if (k != 1)
            n += (size_t)sprintf(src + n, " }}");
        tw_chat_template *t = NULL;
        tw_err err = {{0}};
        tw_status st = tw_chat_template_compile(src, n, &t, &err);
        assert_int_equal(st, TW_INVALID_ARGUMENT);
        assert_null(t);
        assert_non_null(strstr(err.msg, "deep"));
    }
    free(src);
}

static void test_garbage_bytes_never_crash(void **state)
{
    (void)state;
    static const char *const pieces[] = {
        "{{", "}}", "{%", "%}", "{#", "#}", "-", "+", "if", "for", "x", " in ", "endif",
        "endfor", "(", ")", "[", "]", "'", "\"", "|", "trim", ".", "\n", " ", "\xff", "\xc3",
        "\\", "set", "=", "macro", "raw", "endraw", "1", ",", ":", "loop", "is", "not"};
    tw_test_rng rng = {0x5eed};
    tw_chat_render_opts small = {.now = 1, .max_memory = 1 << 20, .max_output = 1 << 16,
                                 .max_steps = 10000};
    json_t *vars = json_pack("{s:[{s:s}],s:s}", "messages", "content", "c", "x", "v");
    char src[512];
    int compiled = 0;
    for (int iter = 0; iter < 3000; iter++) {
        size_t n = 0;
        int count = 1 + (int)(tw_test_rand_u64(&rng) % 30);
        for (int k = 0; k < count; k++) {
            const char *p = pieces[tw_test_rand_u64(&rng) % (sizeof pieces / sizeof pieces[0])];
            size_t l = strlen(p);
            if (n + l >= sizeof src)
                break;
            memcpy(src + n, p, l);
            n += l;
        }
        tw_chat_template *t = NULL;
        tw_err err = {{0}};
        if (tw_chat_template_compile(src, n, &t, &err) != TW_OK) {
            assert_true(err.msg[0] != '\0');
            continue;
        }
        compiled++;
        char *out = NULL;
        size_t len;
        if (tw_chat_template_render_ex(t, vars, &small, &out, &len, &err) == TW_OK)
            assert_int_equal(strlen(out), len);
        free(out);
        tw_chat_template_free(t);
    }
    assert_true(compiled > 0);
    json_decref(vars);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    tw_chat_template *t = NULL;
    tw_err err = {{0}};
    assert_int_equal(tw_chat_template_compile("hi", 2, NULL, &err), TW_INVALID_ARGUMENT);
    char *big = calloc(1, TW_CHAT_TEMPLATE_MAX_SOURCE + 1);
    assert_non_null(big);
    assert_int_equal(tw_chat_template_compile(big, TW_CHAT_TEMPLATE_MAX_SOURCE + 1, &t, &err),
                     TW_RESOURCE_EXHAUSTED);
    free(big);
    assert_int_equal(tw_chat_template_compile("{{ x }}", 7, &t, &err), TW_OK);
    json_t *arr = json_array();
    char *out = NULL;
    size_t len;
    assert_int_equal(tw_chat_template_render(t, arr, &out, &len, &err), TW_INVALID_ARGUMENT);
    assert_null(out);
    json_decref(arr);
    /* NULL variables render with none defined */
    assert_int_equal(tw_chat_template_render(t, NULL, &out, &len, &err), TW_OK);
    assert_string_equal(out, "");
    assert_int_equal(len, 0);
    free(out);
    tw_chat_template_free(t);
    tw_chat_template_free(NULL);
    /* an empty template renders empty text */
    assert_int_equal(tw_chat_template_compile("", 0, &t, &err), TW_OK);
    assert_int_equal(tw_chat_template_render(t, NULL, &out, &len, &err), TW_OK);
    assert_string_equal(out, "");
    free(out);
    tw_chat_template_free(t);
}

static void test_family_recognition(void **state)
{
    (void)state;
    struct {
        const char *src;
        tw_chat_family fam;
        const char *name;
    } f[] = {
        {"{{ '<|im_start|>' + m }}", TW_CHAT_FAMILY_CHATML, "chatml"},
        {"<|im_start|>system\nYou are Qwen", TW_CHAT_FAMILY_QWEN25, "qwen2.5"},
        {"<|im_start|> {{ '<think>' }}", TW_CHAT_FAMILY_QWEN3, "qwen3"},
        {"<|start_header_id|>", TW_CHAT_FAMILY_LLAMA3, "llama3"},
        {"[INST] x [/INST]", TW_CHAT_FAMILY_MISTRAL, "mistral"},
        {"<start_of_turn>user", TW_CHAT_FAMILY_GEMMA, "gemma"},
        {"{{ messages }}", TW_CHAT_FAMILY_UNKNOWN, "unknown"},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        tw_chat_family got = tw_chat_template_family(f[i].src, strlen(f[i].src));
        assert_int_equal(got, f[i].fam);
        assert_string_equal(tw_chat_family_name(got), f[i].name);
    }
    const char *chatml = tw_chat_template_chatml();
    assert_int_equal(tw_chat_template_family(chatml, strlen(chatml)), TW_CHAT_FAMILY_CHATML);
}

static void test_builtin_chatml(void **state)
{
    (void)state;
    char *out = NULL;
    tw_err err = {{0}};
    const char *vars =
        "{\"add_generation_prompt\": true, \"messages\": ["
        "{\"role\": \"system\", \"content\": \"Be brief.\"},"
        "{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"Hi \"},"
        " {\"type\": \"image_url\", \"image_url\": {\"url\": \"x\"}}, {\"type\": \"text\", \"text\": \"there\"}]},"
        "{\"role\": \"assistant\", \"content\": null, \"tool_calls\": []}]}";
    assert_int_equal(render(tw_chat_template_chatml(), vars, NULL, &out, &err), TW_OK);
    assert_string_equal(out, "<|im_start|>system\nBe brief.<|im_end|>\n"
                             "<|im_start|>user\nHi there<|im_end|>\n"
                             "<|im_start|>assistant\n<|im_end|>\n"
                             "<|im_start|>assistant\n");
    free(out);
}

/* Found by tests/fuzz/fuzz_chat_template: a filter that turns a string or a
 * dict into a list (join, map, sort, ...) leaked the part already built when
 * the memory limit stopped it. LeakSanitizer fails this test if it leaks. */
static void test_fuzz_limit_inside_filter_frees(void **state)
{
    (void)state;
    /* The 200 kB string fits the limit; its list of 200 000 one-character
     * strings does not, so each render stops inside the filter. */
    static const char *const tmpls[] = {"{{ s | join(',') }}", "{{ s | list | length }}",
                                        "{{ s | sort | first }}", "{{ s | unique | first }}"};
    size_t n = 200000;
    char *text = malloc(n + 1);
    assert_non_null(text);
    memset(text, 'a', n);
    text[n] = '\0';
    json_t *vars = json_pack("{s:s}", "s", text);
    assert_non_null(vars);
    tw_chat_render_opts small = {.now = 1, .max_memory = 512 << 10};
    char *out = NULL;
    size_t len;
    tw_err err = {{0}};
    tw_chat_template *t = NULL;
    assert_int_equal(tw_chat_template_compile("{{ s | length }}", 16, &t, &err), TW_OK);
    assert_int_equal(tw_chat_template_render_ex(t, vars, &small, &out, &len, &err), TW_OK);
    assert_string_equal(out, "200000");
    free(out);
    tw_chat_template_free(t);
    for (size_t i = 0; i < sizeof tmpls / sizeof tmpls[0]; i++) {
        t = NULL;
        out = NULL;
        assert_int_equal(tw_chat_template_compile(tmpls[i], strlen(tmpls[i]), &t, &err), TW_OK);
        assert_int_equal(tw_chat_template_render_ex(t, vars, &small, &out, &len, &err),
                         TW_RESOURCE_EXHAUSTED);
        assert_null(out);
        tw_chat_template_free(t);
    }
    json_decref(vars);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rendering_table),
        cmocka_unit_test(test_errors_name_line_and_column),
        cmocka_unit_test(test_raise_exception_carries_exact_message),
        cmocka_unit_test(test_undefined_is_lenient_and_falsy),
        cmocka_unit_test(test_strftime_now_uses_injected_clock),
        cmocka_unit_test(test_hostile_templates_are_refused),
        cmocka_unit_test(test_deep_nesting_is_refused),
        cmocka_unit_test(test_garbage_bytes_never_crash),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_family_recognition),
        cmocka_unit_test(test_builtin_chatml),
        cmocka_unit_test(test_fuzz_limit_inside_filter_frees),
    };
    return cmocka_run_group_tests_name("core/chat/jinja", tests, NULL, NULL);
}
