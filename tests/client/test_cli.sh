#!/bin/sh
# The tokenwire command-line client against a real tokenwired serving the
# golden qwen2 model (token-id prompts only). Exit 77 = skipped.
set -u
B="${TW_BUILD_DIR:?}"
S="${TW_SHARED_DIR:-}"
GOLDEN="$S/golden/qwen2/golden.json"
if [ -z "$S" ] || [ ! -f "$GOLDEN" ]; then
    echo "SKIPPED (no ../shared reference data)"
    exit 77
fi
TW="$B/client/cli/tokenwire"
D=$(mktemp -d)
RPC="ipc://$D/rpc"
PUB="ipc://$D/pub"
DPID=""
WPID=""
cleanup() {
    [ -n "$WPID" ] && kill "$WPID" 2>/dev/null
    [ -n "$DPID" ] && kill -9 "$DPID" 2>/dev/null
    rm -rf "$D"
}
trap cleanup EXIT
# The report shows the errors first and the tail of each file, so that a
# truncated CI log still holds what went wrong.
fail() {
    echo "FAIL: $*"
    for f in "$D"/*.err "$D"/*.out; do
        [ -s "$f" ] && { echo "--- $f"; tail -c 1500 "$f"; }
    done
    exit 1
}
# kill -0 also succeeds on a process that exited and was not reaped yet.
alive() {
    kill -0 "$1" 2>/dev/null && ! grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null
}
tw() { "$TW" --engine "$RPC" --pub "$PUB" "$@"; }

IDS=$(python3 -c 'import json,sys; print(",".join(map(str, json.load(open(sys.argv[1]))["input_ids"])))' "$GOLDEN")
WANT=$(python3 -c 'import json,sys; print(" ".join(map(str, json.load(open(sys.argv[1]))["greedy_ids"][:8])))' "$GOLDEN")

"$B/server/engine/tokenwired" --listen "$RPC" --publish "$PUB" --threads 1 \
    --model "$S/golden/qwen2" --model-name qwen2 \
    --model "${TW_SOURCE_DIR:?}/tests/data/golden/bert_cls" --model-name bert >"$D/daemon.err" 2>&1 &
DPID=$!
ready=0
for _ in $(seq 1 300); do
    # the last try's error stays in health.err, which fail() prints
    if "$TW" --engine "$RPC" --pub "$PUB" --timeout 200 health \
        >"$D/health.out" 2>"$D/health.err"; then
        ready=1
        break
    fi
done
[ $ready = 1 ] || fail "tokenwired did not come up"

grep -q "^state: ok" "$D/health.out" || fail "health does not say ok"
tw models >"$D/models.out" 2>>"$D/cli.err" || fail "models exited $?"
grep -q "^qwen2.*ready" "$D/models.out" || fail "models does not list qwen2 as ready"

# Greedy generation: the golden continuation.
tw generate --ids "$IDS" --max-tokens 8 --temperature 0 >"$D/gen.out" 2>>"$D/cli.err" || fail "generate exited $?"
[ "$(cat "$D/gen.out")" = "$WANT" ] || fail "generate printed '$(cat "$D/gen.out")', want '$WANT'"
tw generate --stream --ids "$IDS" --max-tokens 8 --temperature 0 >"$D/stream.out" 2>>"$D/cli.err" ||
    fail "generate --stream exited $?"
got=$(tr -s ' \n' '  ' <"$D/stream.out" | sed 's/^ //; s/ $//')
[ "$got" = "$WANT" ] || fail "generate --stream printed '$got', want '$WANT'"

# Embeddings: a unit vector of the model's hidden size; --raw keeps its
# length, --mean is another vector, --last the one the model's unsaid
# pooling gives.
tw embed --ids "$IDS" >"$D/embed.out" 2>>"$D/cli.err" || fail "embed exited $?"
tw embed --raw --ids "$IDS" >"$D/embed_raw.out" 2>>"$D/cli.err" || fail "embed --raw exited $?"
tw embed --mean --ids "$IDS" >"$D/embed_mean.out" 2>>"$D/cli.err" || fail "embed --mean exited $?"
tw embed --last --ids "$IDS" >"$D/embed_last.out" 2>>"$D/cli.err" || fail "embed --last exited $?"
cmp -s "$D/embed.out" "$D/embed_last.out" || fail "embed --last differs from the model's pooling"
tw embed --mean --last --ids "$IDS" >/dev/null 2>&1
[ $? = 2 ] || fail "embed --mean --last should exit 2"
python3 - "$D/embed.out" "$D/embed_raw.out" "$D/embed_mean.out" "$S/golden/qwen2/config.json" \
    >"$D/embed_check.err" 2>&1 <<'PY' || fail "embed vectors: $(cat "$D/embed_check.err")"
import json, math, sys
v, raw, mean = (json.load(open(p)) for p in sys.argv[1:4])
hidden = json.load(open(sys.argv[4]))["hidden_size"]
assert len(v) == len(raw) == len(mean) == hidden, (len(v), hidden)
def norm(a):
    return math.sqrt(sum(x * x for x in a))
assert abs(norm(v) - 1) < 1e-5, norm(v)
assert abs(norm(raw) - 1) > 1e-3, norm(raw)
assert all(abs(a / norm(raw) - b) < 1e-5 for a, b in zip(raw, v))
assert max(abs(a - b) for a, b in zip(mean, v)) > 1e-3
PY
tw embed >/dev/null 2>&1
[ $? = 2 ] || fail "embed without a prompt should exit 2"

# An encoder (the shipped BERT, whose files say CLS): a text's vector is the
# one --cls gives and not the mean; it writes no answer; CLS on a decoder is
# refused with the reason; two poolings at once are a usage error.
tw embed --model bert "Hello world" >"$D/bert.out" 2>>"$D/cli.err" || fail "embed on bert exited $?"
tw embed --model bert --cls "Hello world" >"$D/bert_cls.out" 2>>"$D/cli.err" ||
    fail "embed --cls on bert exited $?"
tw embed --model bert --mean "Hello world" >"$D/bert_mean.out" 2>>"$D/cli.err" ||
    fail "embed --mean on bert exited $?"
cmp -s "$D/bert.out" "$D/bert_cls.out" || fail "bert's own pooling is not --cls"
cmp -s "$D/bert.out" "$D/bert_mean.out" && fail "bert's --mean gave the CLS vector"
tw generate --model bert "Hello" >/dev/null 2>"$D/bert_gen.err"
[ $? = 1 ] || fail "generate on an encoder should exit 1"
grep -q "encoder" "$D/bert_gen.err" || fail "generate on an encoder gave no reason"
tw embed --cls --ids "$IDS" >/dev/null 2>"$D/cls_decoder.err"
[ $? = 1 ] || fail "embed --cls on a decoder should exit 1"
grep -q "decoder" "$D/cls_decoder.err" || fail "embed --cls on a decoder gave no reason"
tw embed --mean --cls --ids "$IDS" >/dev/null 2>&1
[ $? = 2 ] || fail "embed --mean --cls should exit 2"

tw stats >"$D/stats.out" 2>>"$D/cli.err" || fail "stats exited $?"
grep -q "^requests_total: [1-9]" "$D/stats.out" || fail "stats: no requests counted"
grep -q "^chunks_published: [1-9]" "$D/stats.out" || fail "stats: no chunks counted"
grep -q "^rss_bytes: [1-9]" "$D/stats.out" || fail "stats: no rss"

# watch sees a stream that another client runs. The subscription is set up
# asynchronously, so a stream may start before watch listens: retry until
# watch has printed a stream from its first chunk, for up to a minute (a
# loaded machine running the suite in parallel can take that long to start
# a sanitized watcher and connect it).
first=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["greedy_ids"][0])' "$GOLDEN")
"$TW" --engine "$RPC" --pub "$PUB" watch >"$D/watch.out" 2>"$D/watch.err" &
WPID=$!
seen=0
for _ in $(seq 1 240); do
    sleep 0.25
    alive "$WPID" || fail "watch exited before it saw a stream"
    tw generate --stream --ids "$IDS" --max-tokens 4 --temperature 0 >/dev/null 2>>"$D/cli.err" ||
        fail "generate for watch exited $?"
    if grep -q "#0\] $first\( \|$\)" "$D/watch.out" 2>/dev/null; then
        seen=1
        break
    fi
done
kill "$WPID"
wait "$WPID" 2>/dev/null
WPID=""
[ $seen = 1 ] || fail "watch never printed a stream's first chunk (token $first)"

# Usage errors: exit 2 with the usage text.
for args in "--bogus health" "generate --max-tokens abc --ids 1" "frobnicate" "generate --ids 1,x"; do
    # shellcheck disable=SC2086
    tw $args >/dev/null 2>"$D/usage.err"
    rc=$?
    [ $rc = 2 ] || fail "'$args' exited $rc, want 2"
done
tw --bogus health >/dev/null 2>"$D/usage.err"
grep -q "^usage: tokenwire" "$D/usage.err" || fail "no usage text for a bad flag"
"$TW" >/dev/null 2>"$D/usage.err"
[ $? = 2 ] || fail "no command: want exit 2"

# A refused request: exit 1 with the engine's reason.
tw pull ftp://127.0.0.1/m.gguf >/dev/null 2>"$D/pull.err"
[ $? = 1 ] || fail "pull of ftp:// should exit 1"
grep -q "INVALID_ARGUMENT" "$D/pull.err" || fail "pull of ftp:// gave no reason"

# load --chat-template sends the file; this model has no tokenizer to use it
# with, which the engine says. A file that cannot be read is a usage error.
echo '{{ messages[0].content }}' >"$D/t.jinja"
tw load "$S/golden/qwen2" --name templated --chat-template "$D/t.jinja" >/dev/null 2>"$D/load.err"
[ $? = 1 ] || fail "load with a template for a model without a tokenizer should exit 1"
grep -q "no tokenizer" "$D/load.err" || fail "load --chat-template: no reason given: $(cat "$D/load.err")"
tw load "$S/golden/qwen2" --chat-template "$D/missing.jinja" >/dev/null 2>"$D/load.err"
[ $? = 2 ] || fail "load with a missing template file should exit 2"
grep -q "cannot open" "$D/load.err" || fail "missing template file: unclear message"

# --json-schema reads its file before any call: one that cannot be read is
# a usage error.
tw generate --json-schema "$D/missing.json" --ids 1 >/dev/null 2>"$D/schema.err"
[ $? = 2 ] || fail "generate with a missing schema file should exit 2"
grep -q "cannot open" "$D/schema.err" || fail "missing schema file: unclear message"

# JSON answers need a model with a tokenizer: the shipped one, loaded next
# to qwen2. A toy model sampled at temperature 1 may run out of tokens in
# the middle of a document, so a few seeds are tried; one whole answer must
# parse, and fit the schema when one is given.
MODEL="${TW_SOURCE_DIR:-}/models/tokenwire-coder-24m-q8_0.gguf"
if [ -f "$MODEL" ]; then
    tw load "$MODEL" --name coder >/dev/null 2>>"$D/cli.err" || fail "load of $MODEL exited $?"
    echo '{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"],
           "additionalProperties":false}' >"$D/n.json"
    for form in "--json" "--json-schema $D/n.json"; do
        parsed=0
        for seed in 1 2 3 4 5 6; do
            # shellcheck disable=SC2086
            tw chat --model coder $form --max-tokens 200 --temperature 1 --seed $seed \
                --hide-reasoning "Describe a user." >"$D/json.out" 2>>"$D/cli.err" ||
                fail "chat $form exited $?"
            if python3 -c 'import json,sys
d = json.load(sys.stdin)
assert isinstance(d, dict)
if sys.argv[1] != "--json":
    assert list(d) == ["n"] and type(d["n"]) is int' "$form" <"$D/json.out" 2>/dev/null; then
                parsed=1
                break
            fi
        done
        [ $parsed = 1 ] || fail "chat $form: no answer parsed as wanted; the last: $(cat "$D/json.out")"
    done
    # a schema keyword the engine does not understand is refused by name
    echo '{"type":"object","dependentRequired":{"a":["b"]}}' >"$D/pattern.json"
    tw chat --model coder --json-schema "$D/pattern.json" "hi" >/dev/null 2>"$D/pattern.err"
    [ $? = 1 ] || fail "a schema with dependentRequired should exit 1"
    grep -q "INVALID_ARGUMENT.*dependentRequired" "$D/pattern.err" || fail "dependentRequired: no reason given: $(cat "$D/pattern.err")"
fi

# Nothing listening: exit 3 with a clear message, within the timeout.
"$TW" --engine "ipc://$D/nobody" --timeout 300 health >/dev/null 2>"$D/down.err"
rc=$?
[ $rc = 3 ] || fail "unreachable engine exited $rc, want 3"
grep -q "cannot reach the engine" "$D/down.err" || fail "unreachable engine: unclear message"

# A daemon that does not stop on SIGTERM fails here, with its log, instead
# of holding the suite until its timeout.
kill -TERM "$DPID"
for _ in $(seq 1 120); do
    kill -0 "$DPID" 2>/dev/null || break
    sleep 0.25
done
kill -0 "$DPID" 2>/dev/null && fail "tokenwired still running 30 s after SIGTERM"
wait "$DPID"
rc=$?
DPID=""
[ $rc = 0 ] || fail "tokenwired exited $rc on SIGTERM"
echo "ok"
