/* Hostile bytes as a sequence's saved state (tw_seq_state_import, what the
 * persistent state store hands back after its checksum, which whoever can
 * write the store's folder can also compute), then a decode step from it.
 *
 * Selector byte 0 (even): the bytes are the whole blob, header and all.
 * Odd: the header is a real one for the hybrid test model (attention and
 * DeltaNet layers) with the token count taken from the next byte, and the
 * bytes fill its body, so that values of every kind (NaN, infinities,
 * huge Q8 scales, garbage recurrent state) reach the forward pass. Either
 * way an import that succeeds must leave a sequence that decodes without a
 * sanitizer report, and one that fails must leave it as it was. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tw/model.h"
#include "tw/seq_state.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_TOKENS 24

static tw_model *model;
static tw_seq *seq;
static float *logits;
static uint8_t *blob;
static const uint8_t *header; /* a real export's first bytes */

/* The blob's header as core/model/state_io.c lays it out: the format at
 * byte 8, the token count at 40 and the body bytes at 48, in 64 bytes. */
#define HEADER_LEN 64u

static void setup(void)
{
    tw_err err;
    tw_model_opts opts = {.max_context = MAX_TOKENS, .max_batch = 1, .max_chunk = 8};
    if (tw_model_load(TW_FUZZ_DATA_DIR "/golden/qwen3_5_mix", &opts, &model, &err) != TW_OK ||
        tw_seq_create(model, 0, &seq, &err) != TW_OK)
        abort();
    const tw_model_info *mi = tw_model_get_info(model);
    logits = malloc(mi->vocab_size * sizeof *logits);
    size_t cap = 0;
    if (!logits || tw_seq_state_size(model, MAX_TOKENS, TW_SEQ_STATE_F32, &cap, &err) != TW_OK)
        abort();
    blob = malloc(cap);
    uint8_t *hdr = malloc(cap);
    size_t written = 0;
    if (!blob || !hdr ||
        tw_seq_state_export(seq, 0, TW_SEQ_STATE_F32, hdr, cap, &written, &err) != TW_OK)
        abort();
    if (written < HEADER_LEN)
        abort();
    header = hdr;
}

/* The body size a blob of n tokens in format fmt has, from the library. */
static size_t body_size(size_t n, tw_seq_state_format fmt)
{
    size_t total = 0;
    tw_err err;
    if (tw_seq_state_size(model, n, fmt, &total, &err) != TW_OK)
        abort();
    return total - HEADER_LEN;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!model)
        setup();
    if (size < 1)
        return 0;
    tw_err err;
    const uint8_t mode = data[0];
    data++;
    size--;
    size_t len = 0;
    uint8_t *in = NULL;
    if ((mode & 1) == 0) {
        in = malloc(size ? size : 1); /* exactly size bytes, for ASan */
        memcpy(in, data, size);
        len = size;
    } else {
        if (size < 1)
            return 0;
        static const tw_seq_state_format fmts[] = {TW_SEQ_STATE_F32, TW_SEQ_STATE_Q8,
                                                   TW_SEQ_STATE_F16};
        const tw_seq_state_format fmt = fmts[(mode >> 1) % 3];
        const size_t n = data[0] % (MAX_TOKENS + 1);
        data++;
        size--;
        const size_t body = body_size(n, fmt);
        len = HEADER_LEN + body;
        in = blob;
        memcpy(in, header, HEADER_LEN);
        uint32_t f = (uint32_t)fmt;
        uint64_t n64 = n, b64 = body;
        memcpy(in + 8, &f, 4); /* the layout tw/seq_state.h's exporter writes */
        memcpy(in + 40, &n64, 8);
        memcpy(in + 48, &b64, 8);
        for (size_t i = 0; i < body; i++)
            in[HEADER_LEN + i] = size ? data[i % size] : 0;
    }
    const size_t before = tw_seq_len(seq);
    size_t got = 0;
    tw_status st = tw_seq_state_import(seq, in, len, &got, &err);
    if (st != TW_OK) {
        if (tw_seq_len(seq) != before)
            abort(); /* a refused blob changed the sequence */
    } else {
        if (got != tw_seq_len(seq))
            abort();
        if (got < MAX_TOKENS) {
            const uint32_t tok = 1;
            if (tw_model_forward(model, NULL, seq, &tok, 1, logits, TW_LOGITS_LAST, &err) !=
                TW_OK)
                abort();
        }
    }
    if (in != blob)
        free(in);
    tw_seq_reset(seq);
    return 0;
}
