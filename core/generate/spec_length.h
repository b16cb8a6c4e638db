/* The adaptive draft length of speculative decoding (spec_length.c). */
#ifndef TW_GENERATE_SPEC_LENGTH_H
#define TW_GENERATE_SPEC_LENGTH_H

#include <stdbool.h>
#include <stdint.h>

#include "tw/spec.h"

typedef struct spec_length {
    uint32_t k;   /* the length of rounds outside probes */
    uint32_t max; /* 1..TW_SPEC_MAX_DRAFT */
    bool timed;   /* choose k by measured round times */
    /* Proposals kept and proposals judged (kept plus the first rejected
     * one), both decayed per round: their ratio estimates the chance that
     * a proposal is kept given that the ones before it were. */
    double hits, tries;
    double round_us[TW_SPEC_MAX_DRAFT + 1]; /* a round's time by its k; 0: not measured */
    uint32_t since_probe;                   /* rounds since a neighbour of k was tried */
    bool probe_up;                          /* which neighbour the next probe tries */
} spec_length;

/* start and max are clamped to 1..TW_SPEC_MAX_DRAFT, start to max. */
void spec_length_init(spec_length *l, uint32_t start, uint32_t max, bool timed);

/* The number of proposals for the next round: k, or now and then a
 * neighbour of it whose cost is due to be measured again. */
uint32_t spec_length_next(spec_length *l);

/* A finished round: k proposals (what was proposed, which may be fewer than
 * spec_length_next gave), `kept` of them accepted, round_us spent. */
void spec_length_observe(spec_length *l, uint32_t k, uint32_t kept, uint64_t round_us);

/* Expected tokens of a round of k proposals, each kept with probability a
 * given that the ones before it were: 1 + a + ... + a^k. */
double spec_length_yield(double a, uint32_t k);

#endif
