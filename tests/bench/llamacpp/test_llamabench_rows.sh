#!/bin/sh
# llamabench_rows.py: llama-bench's JSON lines in, the suite's llamacpp rows
# out; lines it cannot trust are refused with a reason, never half-used.
# Exit 77 = skipped.
set -u
SCRIPT="${1:?usage: test_llamabench_rows.sh PATH/llamabench_rows.py}"
. "$(dirname "$0")/../script_test.sh"
line() { # n_prompt n_gen avg_ts [samples]
    printf '{"build_commit":"abc1234","build_number":42,"cpu_info":"Test CPU","backends":"CPU",'
    printf '"n_threads":2,"n_prompt":%s,"n_gen":%s,"avg_ts":%s,"stddev_ts":1.5,' "$1" "$2" "$3"
    printf '"samples_ts":[%s]}\n' "${4:-$3}"
}
run() { python3 "$SCRIPT" --label m "$@" <"$D/in" >"$D/out" 2>"$D/err"; }

# the three tests the reference was measured with, and one it ignores
{ line 128 0 174.5 "170,179"; line 512 0 161.25; line 0 128 53.4; line 64 0 9.0; } >"$D/in"
run --engine "llama-bench here" || fail "good input refused"
[ "$(wc -l <"$D/out")" -eq 3 ] || fail "expected 3 rows"
python3 - "$D/out" <<'PY' || fail "rows do not carry the input's values"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
want = {"prefill_128": 174.5, "prefill_512": 161.25, "decode_128": 53.4}
assert {r["name"]: r["value"] for r in rows} == want, rows
for r in rows:
    assert r["suite"] == "llamacpp" and r["model"] == "m" and r["unit"] == "tok/s", r
    e = r["extra"]
    assert e["threads"] == 2 and e["summary"] == "the mean of", e
    assert "llama-bench here" in e["engine"] and "42" in e["engine"], e
assert rows[0]["extra"]["samples_tok_s"] == [170.0, 179.0] and rows[0]["extra"]["reps"] == 2
PY

# each hostile input: refused (non-zero), with a reason naming the fault
refused() { # what, expected text
    run && fail "$1 accepted"
    grep -q -- "$2" "$D/err" || fail "$1: no '$2' in the message"
    [ -s "$D/out" ] && fail "$1: rows written before the refusal"
    return 0
}
: >"$D/in"
refused "empty input" "no pp128, pp512 or tg128"
echo 'not json' >"$D/in"
refused "a line that is not JSON" "not a JSON line"
echo '[1, 2]' >"$D/in"
refused "a JSON array" "not a JSON object"
echo '{"n_prompt":128,"n_gen":0}' >"$D/in"
refused "a line without avg_ts" "without the field 'avg_ts'"
echo '{"n_prompt":"many","n_gen":0,"avg_ts":1}' >"$D/in"
refused "a non-numeric count" "out of shape"
echo '{"n_prompt":128,"n_gen":0,"avg_ts":5,"samples_ts":7}' >"$D/in"
refused "samples that are not a list" "out of shape"
line 128 0 NaN >"$D/in"
refused "a NaN rate" "nan tok/s"
line 0 128 -3 >"$D/in"
refused "a negative rate" "-3.0 tok/s"
{ line 128 0 174.5; echo '{"n_prompt":512,"n_gen":0}'; } >"$D/in"
refused "a bad line after a good one" "without the field 'avg_ts'"
echo "PASS"
