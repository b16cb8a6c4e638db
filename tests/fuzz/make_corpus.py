#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz harnesses under OUT/<harness>/.

Seeds are written here (small hand-made inputs) or copied at run time from
the repository's test data and from the reference data folder, which is
never copied into the repository.

usage: make_corpus.py OUT BUILD_DIR SHARED_DIR
"""
import glob
import json
import os
import struct
import subprocess
import sys


def put(out, name, data):
    os.makedirs(out, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)


def small_files(pattern, limit=64 * 1024):
    return [p for p in sorted(glob.glob(pattern)) if os.path.getsize(p) <= limit]


def safetensors(header, payload):
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + payload


def varint(v):
    b = bytearray()
    while True:
        if v < 0x80:
            b.append(v)
            return bytes(b)
        b.append((v & 0x7F) | 0x80)
        v >>= 7


def pb(*fields):
    """Protobuf bytes of (number, value) pairs: int as varint, float as
    fixed32, bytes/str as length-delimited, list of ints as packed."""
    out = b""
    for num, v in fields:
        if isinstance(v, bool) or isinstance(v, int):
            out += varint(num << 3) + varint(int(v))
        elif isinstance(v, float):
            out += varint(num << 3 | 5) + struct.pack("<f", v)
        else:
            if isinstance(v, list):
                v = b"".join(varint(x) for x in v)
            elif isinstance(v, str):
                v = v.encode()
            out += varint(num << 3 | 2) + varint(len(v)) + v
    return out


def token_logprob(tid, text, lp, tops=(), reasoning=False):
    top = [(4, pb((1, t), (2, x), (3, l))) for t, x, l in tops]
    return pb((1, tid), (2, text), (3, lp), *top, (5, reasoning))


def bridge_reply_seeds(out):
    """fuzz_bridge_reply: selector (request << 1 | streamed), then a
    GenerateReply, or StreamChunks each behind a two-byte length."""
    d = os.path.join(out, "bridge_reply")
    lp = token_logprob(7, b"ab", -0.5, [(7, b"ab", -0.5), (9, b"\xe4", -1.5)])
    rlp = token_logprob(8, b"<think>", -0.1, reasoning=True)
    chunks = [
        pb((3, 0), (4, [8, 7]), (6, "hm"), (7, rlp), (7, lp), (14, "ab"),
           (13, token_logprob(1, b"a", float("nan"))), (13, lp)),
        pb((3, 1), (4, [7]), (5, "<tool_call>{\"name\":\"f\","), (7, lp), (14, "ab")),
        pb((3, 1), (5, "\"arguments\":{}}</tool_call>"), (8, 1)),
        pb((3, 0), (4, [7]), (5, "ab"), (7, lp), (8, 3), (12, True),
           (9, pb((1, 2), (2, 3)))),
    ]
    stream = b"".join(struct.pack("<H", len(c)) + c for c in chunks)
    choice = pb((1, 0), (2, [7, 7]), (3, "abab"), (4, "why"), (6, 3), (8, lp), (8, lp),
                (5, pb((1, "c"), (2, "f"), (3, "{}"))))
    reply = pb((1, "m"), (3, choice), (3, pb((1, 1), (3, "x"), (6, 8))), (4, pb((1, 2))),
               (5, "ab"), (6, token_logprob(1, b"a", float("nan"))), (6, lp))
    for i in range(6):
        put(d, "stream_%d" % i, bytes([i << 1 | 1]) + stream)
        put(d, "whole_%d" % i, bytes([i << 1]) + reply)


def main():
    out, build, shared = sys.argv[1:4]
    src = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(src))

    subprocess.run([os.path.join(build, "tests/fuzz/seed_wire"), mk(out, "wire")], check=True)
    subprocess.run([os.path.join(build, "tests/fuzz/seed_gguf"), mk(out, "gguf")], check=True)

    st = os.path.join(out, "safetensors")
    f32 = struct.pack("<4f", 1.0, -2.0, 0.5, 3.0)
    put(st, "f32", safetensors({"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
                               "__metadata__": {"format": "pt"}}, f32))
    put(st, "mixed", safetensors({
        "a": {"dtype": "F16", "shape": [2], "data_offsets": [0, 4]},
        "b": {"dtype": "BF16", "shape": [2], "data_offsets": [4, 8]},
        "c": {"dtype": "I8", "shape": [], "data_offsets": [8, 9]},
        "d": {"dtype": "F64", "shape": [1, 1], "data_offsets": [9, 17]}},
        struct.pack("<2e", 1.0, -0.5) + b"\x80\x3f\x00\xc0" + b"\x07" + struct.pack("<d", 2.5)))
    put(st, "empty", safetensors({}, b""))

    mc = os.path.join(out, "model_config")
    for p in small_files(os.path.join(root, "tests/data/golden/*/config.json")):
        put(mc, os.path.basename(os.path.dirname(p)), open(p, "rb").read())

    tk = os.path.join(out, "tokenize")
    for i, p in enumerate(small_files(os.path.join(shared, "vocab/*.inp"))):
        text = open(p, "rb").read()
        for sel in (0, 1, 6, 7, 0x1e, 0x1f):
            put(tk, "%d_%02x" % (i, sel), bytes([sel]) + text[:1024])
    put(tk, "special", b"\x07<|endoftext|> <s></s>\xe2\x96\x81 \xff\xfe abc\n\n")

    hf = os.path.join(out, "tokenizer_hf")
    vocab = {"<s>": 0, "</s>": 1, "a": 2, "b": 3, "ab": 4, "\u0120": 5, "\u0120a": 6}
    bpe = {
        "version": "1.0",
        "added_tokens": [
            {"id": 0, "content": "<s>", "special": True, "single_word": False,
             "lstrip": False, "rstrip": False, "normalized": False},
            {"id": 1, "content": "</s>", "special": True, "single_word": False,
             "lstrip": False, "rstrip": False, "normalized": False}],
        "normalizer": {"type": "Sequence", "normalizers": [{"type": "NFC"}]},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": "\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+"},
             "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
             "use_regex": False}]},
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [0],
                                                                 "tokens": ["<s>"]}}},
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                    "use_regex": False},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": ["a b", "\u0120 a"]}}
    cfg = {"bos_token": "<s>", "eos_token": "</s>", "add_bos_token": True,
           "chat_template": "{{ messages }}"}
    put(hf, "bpe", json.dumps(bpe) + "\n%%CONFIG%%\n" + json.dumps(cfg))
    spm_vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, "<0x0A>": 3, "\u2581": 4, "a": 5,
                 "\u2581a": 6, "b": 7}
    spm = {
        "version": "1.0", "added_tokens": [],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
        "pre_tokenizer": None, "post_processor": None,
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "unk_token": "<unk>", "fuse_unk": True, "byte_fallback": True,
                  "vocab": spm_vocab, "merges": [["\u2581", "a"]]}}
    put(hf, "spm", json.dumps(spm))
    meta = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first",
            "split": True}
    spm2 = dict(spm, pre_tokenizer=meta, normalizer=None)
    put(hf, "metaspace", json.dumps(spm2) + "\n%%CONFIG%%\n{}")
    wp_vocab = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "a": 4, "##b": 5, "ab": 6,
                "!": 7, "\u00e9": 8, "##\u00e9": 9, "\u4e2d": 10}
    wp = {
        "version": "1.0",
        "added_tokens": [{"id": i, "content": t, "special": True, "single_word": False,
                          "lstrip": False, "rstrip": False, "normalized": False}
                         for t, i in list(wp_vocab.items())[:4]],
        "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                       "strip_accents": None, "lowercase": True},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {"type": "BertProcessing", "sep": ["[SEP]", 3], "cls": ["[CLS]", 2]},
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 8, "vocab": wp_vocab}}
    put(hf, "wordpiece", json.dumps(wp))
    for p in small_files(os.path.join(root, "tests/data/tokenizers/*/tokenizer.json")):
        put(hf, "wp_" + os.path.basename(os.path.dirname(p)), open(p, "rb").read())

    ct = os.path.join(out, "chat_template")
    cr = os.path.join(out, "chat_render")
    for p in small_files(os.path.join(shared, "chat/*.jinja")):
        put(ct, os.path.basename(p), open(p, "rb").read())
    put(ct, "loops", "{% set ns = namespace(x=0) %}{% for m in messages %}{% if m.role == "
        "'user' %}{{ m.content | trim | upper }}{% elif m.tool_calls %}{{ m.tool_calls | "
        "tojson(indent=2) }}{% endif %}{% set ns.x = ns.x + 1 %}{% endfor %}{{ ns.x }}"
        "{{ tools | length }}{{ '%d'|format(n) }}{{ raise_exception('x') if z }}")
    put(ct, "macro", "{% macro f(a, b=2) %}{{ a ~ b }}{{ caller() if caller }}{% endmacro %}"
        "{{ f(1) }}{%- for k, v in messages[0].items() -%}{{ k }}={{ v }}{% endfor %}"
        "{{ messages[1:] | map(attribute='role') | join(',') }}{{ 'a' in 'abc' }}")
    for p in small_files(os.path.join(shared, "chat/*.cases.json"), 256 * 1024):
        try:
            cases = json.load(open(p))
        except ValueError:
            continue
        items = cases if isinstance(cases, list) else cases.get("cases", [])
        for i, c in enumerate(items[:8]):
            vars_ = c.get("vars", c.get("input", c)) if isinstance(c, dict) else c
            put(cr, "%s_%d" % (os.path.basename(p), i),
                bytes([i % 6]) + json.dumps(vars_).encode())
    put(cr, "basic", b"\x00" + json.dumps({"messages": [{"role": "user", "content": "hi"}],
                                          "add_generation_prompt": True}).encode())

    br = os.path.join(out, "bridge_request")
    put(br, "chat", b"\x00" + json.dumps({
        "model": "m", "messages": [{"role": "system", "content": "s"},
                                   {"role": "user", "content": [{"type": "text", "text": "hi"}]},
                                   {"role": "assistant", "content": None, "tool_calls": [
                                       {"id": "c", "type": "function", "function": {
                                           "name": "f", "arguments": "{\"a\":1}"}}]},
                                   {"role": "tool", "tool_call_id": "c", "content": "r"}],
        "max_tokens": 16, "temperature": 0.7, "top_p": 0.9, "stop": ["\n", "x"], "seed": 3,
        "stream": True, "stream_options": {"include_usage": True}, "logprobs": True,
        "top_logprobs": 2, "n": 1, "logit_bias": {"12": -100},
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
        "tool_choice": "auto", "response_format": {"type": "json_object"},
        "presence_penalty": 0.1, "frequency_penalty": 0.2}).encode())
    put(br, "completion", b"\x01" + json.dumps({
        "model": "m", "prompt": "hello", "max_tokens": 4, "echo": False, "logprobs": 2,
        "stop": "x", "best_of": 1, "suffix": None}).encode())
    put(br, "guided", b"\x00" + json.dumps({
        "model": "m", "messages": [{"role": "user", "content": "x"}],
        "guided_choice": ["yes", "no"]}).encode())
    put(br, "json_schema", b"\x00" + json.dumps({
        "model": "m", "messages": [{"role": "user", "content": "x"}],
        "response_format": {"type": "json_schema", "json_schema": {
            "name": "p", "strict": True, "schema": {"type": "object"}}}}).encode())
    put(br, "completion_ids", b"\x01" + json.dumps({"model": "m", "prompt": [[1, 2, 3]]}).encode())
    put(br, "responses", b"\x02" + json.dumps({
        "model": "m", "instructions": "be brief", "max_output_tokens": 32, "stream": True,
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
                  {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
                  {"type": "function_call_output", "call_id": "c", "output": "ok"},
                  {"type": "reasoning", "summary": []}],
        "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}],
        "tool_choice": {"type": "function", "name": "f"}, "reasoning": {"effort": "low"},
        "text": {"format": {"type": "json_schema", "name": "n",
                            "schema": {"type": "object"}}}}).encode())

    put(br, "responses_kept", b"\x02" + json.dumps({
        "previous_response_id": "resp_1", "store": False, "input": [
            {"id": "mine", "type": "message", "role": "assistant", "content": "earlier"},
            {"role": "developer", "content": "rules", "status": "in_progress"},
            {"type": "function_call", "id": 7, "call_id": "c", "name": "f", "arguments": "{}"},
            {"type": "message", "role": "user",
             "content": [{"type": "output_text", "text": "a"}, {"type": "text", "text": "b"}]}]
    }).encode())

    bridge_reply_seeds(out)

    tc = os.path.join(out, "toolcall")
    put(tc, "hermes", b"\x03Let me check.\n<tool_call>\n{\"name\": \"get_weather\", "
        b"\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>")
    put(tc, "llama", b"\x05<|python_tag|>{\"name\": \"a\", \"parameters\": {\"x\": 1}}; "
        b"{\"name\": \"b\", \"parameters\": {}}")
    put(tc, "prose", b"\x00no <tool_call> here {\"name\": 1}")

    tw = os.path.join(out, "twd_config")
    put(tw, "full", "[server]\nlisten = tcp://127.0.0.1:1\nlisten=ipc:///tmp/x\n"
        "publish = tcp://127.0.0.1:2\nthreads = 4\nmax-batch = 8\nprefill_chunk = 64\n"
        "mlock = true\ncache-bytes = 1G\nstate_bytes = 512M\nmax_concurrent = 4\n"
        "[models]\nmodel = /nonexistent/a.gguf\nmodel = b=/x.gguf\n"
        "api-key = k1\nmax-message-bytes = 16M\nstream-grace-ms = 100\n"
        "\n%%ARGS%%\n--threads=2\n--model\nc=/y.gguf\n--verbose\n--max-streams=3")
    put(tw, "bad", "x = \n[\n\n%%ARGS%%\n-z\n--help")

    jg = os.path.join(out, "json_grammar")
    put(jg, "any", b'{"a": [1, -2.5e+3, true, null, "x\\u00e9\\ud83d\\ude00"], "b": {}}')
    put(jg, "schema", json.dumps({
        "type": "object", "properties": {
            "name": {"type": "string", "maxLength": 8},
            "n": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            "tags": {"type": "array", "items": {"enum": ["a", 1, 12, {"k": [True]}]},
                     "maxItems": 3},
            "kid": {"$ref": "#/$defs/kid"}},
        "required": ["name"], "$defs": {"kid": {"type": "object", "properties": {
            "kid": {"$ref": "#/$defs/kid"}}}}}).encode() +
        b'\0{"name": "ab", "n": null, "tags": [12, {"k":[true]}], "kid": {"kid": {}}}')
    put(jg, "tagged", json.dumps({"oneOf": [
        {"type": "object", "properties": {"t": {"const": "a"}, "x": {"type": "integer"}},
         "required": ["x", "t"]},
        {"type": "object", "properties": {"t": {"enum": [1, 12]}, "y": {"type": "array"}},
         "required": ["t"], "additionalProperties": False},
        {"type": "null"}]}).encode() + b'\0{"t": "a", "x": 3}')
    put(jg, "formats", json.dumps({"type": "array", "items": {"anyOf": [
        {"type": "string", "format": "date-time"}, {"type": "integer", "format": "int64"}]}}).encode()
        + b'\0["2024-02-28T23:59:59.5+01:00", 12, "1999-12-31T00:00:00Z"]')
    put(jg, "choices", b"\x01yes\nno\nyes please\n\"q\"\0yes please")
    put(jg, "tail", b"\x02}\n</tool_call>\n" + json.dumps({"type": "object", "properties": {
        "city": {"type": "string"}}}).encode() + b'\0{"city": "Oslo"}}\n</tool_call>')
    put(jg, "pattern", json.dumps({"type": "object", "properties": {
        "id": {"type": "string", "pattern": "^[A-Z]{2}-\\d{3}$"},
        "note": {"type": "string", "pattern": "é|x", "maxLength": 8}}}).encode()
        + b'\0{"id": "AB-123", "note": "caf\xc3\xa9"}')
    put(jg, "formats_re", json.dumps({"type": "array", "items": {"anyOf": [
        {"type": "string", "format": "uri"}, {"type": "object", "properties": {
            "ip": {"type": "string", "format": "ipv6"}, "at": {"type": "string", "format": "email"}}}]
        }}).encode() + b'\0["https://x.org/a?b#c", {"ip": "::1", "at": "a@b.c"}]')
    put(jg, "compose", json.dumps({"$defs": {"B": {"type": "object", "properties": {
        "id": {"type": "integer"}}, "required": ["id"]}}, "allOf": [{"$ref": "#/$defs/B"}, {
        "properties": {"t": {"prefixItems": [{"type": "boolean"}, {"type": "string", "nullable":
        True}], "items": False}, "m": {"type": "object"}}}]}).encode()
        + b'\0{"id": 1, "t": [true, null], "m": {"a": 1, "\\u0061": 2}}')
    put(jg, "sets", json.dumps({"type": "object", "properties": {
        "s": {"type": "array", "uniqueItems": True, "items": {"type": "string", "maxLength": 3}},
        "n": {"type": "array", "uniqueItems": True, "items": {"type": ["number", "null"]}},
        "e": {"type": "array", "uniqueItems": True, "items": {"enum": ["a", 1, 1.0, [2]]}},
        "d": {"type": "array", "uniqueItems": True, "items": {"type": "string", "format": "date"}}
        }}).encode() + b'\0{"s": ["a", "\\u0062", "ab"], "n": [1, 1.5, 0e1, null], '
        b'"e": ["a", 1, [2]], "d": ["2024-02-29"]}')
    put(jg, "key_patterns", json.dumps({"type": "object", "properties": {
        "m": {"type": "object", "patternProperties": {"^[a-z]+$": {"type": "integer"},
              "^x_\\d+$": {"type": "string"}, "b$": {"type": "integer"}},
              "additionalProperties": False},
        "o": {"patternProperties": {"^n": {"type": "number"}}}}}).encode()
        + b'\0{"m": {"ab": 1, "x_12": "v"}, "o": {"n1": 2.5, "z": [null]}}')
    put(jg, "unions", json.dumps({"type": "array", "items": {"anyOf": [
        {"type": "integer"}, {"type": "number", "minimum": 0}, {"const": "a"}, {"enum": ["b", 1]},
        {"type": "string", "format": "date"}, {"type": "string"}, {"type": "null"}]}}).encode()
        + b'\0[1, 2.5, "a", "2024-01-01", null, "x"]')
    put(jg, "keyed", json.dumps({"$defs": {
        "Cat": {"type": "object", "properties": {"name": {"type": "string"},
                "meows": {"type": "boolean"}}, "required": ["name", "meows"]},
        "Dog": {"type": "object", "properties": {"name": {"type": "string"},
                "barks": {"type": "integer"}}, "required": ["barks"]}},
        "type": "array", "items": {"oneOf": [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"},
                                             {"type": "null"}]}}).encode()
        + b'\0[{"meows": true, "name": "Tom"}, {"barks": 2}, null]')
    put(jg, "counts", json.dumps({"type": "object", "properties": {
        "m": {"type": "object", "minProperties": 1, "maxProperties": 3,
              "additionalProperties": {"type": "integer"}},
        "k": {"patternProperties": {"^[a-z]$": {"type": "null"}}, "additionalProperties": False,
              "minProperties": 1}}}).encode()
        + b'\0{"m": {"a": 1, "b": 2}, "k": {"q": null}}')
    put(jg, "names", json.dumps({"$defs": {"C": {"enum": ["red", "re", "caf\u00e9"],
                                                 "type": "string"}},
        "type": "object", "properties": {
        "e": {"type": "object", "propertyNames": {"$ref": "#/$defs/C"},
              "additionalProperties": {"type": "integer"}, "minProperties": 1},
        "p": {"propertyNames": {"pattern": "^[a-c]+[0-9]?$", "maxLength": 4},
              "patternProperties": {"^a": {"type": "string"}},
              "additionalProperties": {"type": "integer"}},
        "f": {"propertyNames": False}}}).encode()
        + b'\0{"e": {"re": 1, "red": 2}, "p": {"ab1": "x", "b": 3}, "f": {}}')
    put(jg, "openapi_formats", json.dumps({"type": "object", "properties": {
        "i": {"type": "integer", "format": "int32", "minimum": -10},
        "u": {"format": "uint8"}, "n": {"type": "number", "format": "int16"},
        "b": {"type": "string", "format": "byte", "maxLength": 12},
        "p": {"type": "string", "format": "password"}}}).encode()
        + b'\0{"i": 2147483647, "u": 255, "n": -1.5, "b": "YWJjZA==", "p": "x"}')
    put(jg, "some_of", json.dumps({"type": "array", "items": {"anyOf": [
        {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"},
                                          "c": {}}, "minProperties": 1},
        {"type": "null"}]}}).encode()
        + b'\0[{"b": "x", "c": [1]}, null, {"a": 2}]')
    put(jg, "all_of_keys", json.dumps({"$defs": {"S": {"type": "string", "minLength": 1}},
        "type": "object", "properties": {
        "s": {"allOf": [{"$ref": "#/$defs/S"}, {"maxLength": 4}]},
        "n": {"allOf": [{"type": ["number", "null"], "minimum": -5}, {"type": "integer",
                                                                    "maximum": 50}]},
        "e": {"allOf": [{"enum": ["a", "b", 1]}, {"enum": ["b", 1, 2]}]}}}).encode()
        + b'\0{"s": "abc", "n": 49, "e": "b"}')
    put(jg, "bad_schema", b'{"type": "object", "dependentRequired": {"a": ["b"]}}\0{}')
    put(jg, "bounds", json.dumps({"type": "object", "properties": {
        "age": {"type": "integer", "minimum": 0, "exclusiveMaximum": 150},
        "p": {"type": "number", "minimum": 0.1, "maximum": 0.9},
        "t": {"type": ["number", "null"], "exclusiveMinimum": -2.5, "maximum": -0.75},
        "big": {"type": "integer", "minimum": 999999999999999990},
        "cents": {"type": "number", "multipleOf": 0.01, "maximum": 100}}}).encode()
        + b'\0{"age": 149, "p": 0.123456789, "t": -1.5, "big": 999999999999999999, '
        b'"cents": 99.95}')
    put(jg, "leap", json.dumps({"type": "string", "format": "date"}).encode()
        + b'\0"2000-02-29"')

    # fuzz_seq_state: odd selectors fill a real header's body (format from
    # the selector, token count from the next byte); even ones are whole blobs
    ss = os.path.join(out, "seq_state")
    nan, inf = struct.pack("<f", float("nan")), struct.pack("<f", float("inf"))
    put(ss, "f32_nan", b"\x01\x05" + nan + struct.pack("<f", 1.5) + inf)
    put(ss, "q8_scales", b"\x03\x18" + inf + bytes(range(32)) + struct.pack("<f", 3e38))
    put(ss, "f16_full", b"\x05\x17\x00\x7c\x00\xfc\xff\x7f\x01\x3c")
    put(ss, "blob_header", b"\x00TWSQ" + struct.pack("<IIIIII", 1, 0, 2, 2, 16, 2) +
        bytes(64 - 28))
    return 0


def mk(out, name):
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    return d


if __name__ == "__main__":
    sys.exit(main())
