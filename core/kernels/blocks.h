/* GGUF (ggml) quantized block layouts. The structs mirror the bytes on disk;
 * every block size is even and the only multi-byte fields are f16 scales, so
 * a row is readable in place when the tensor data is 2-byte aligned (GGUF
 * aligns tensor data to 32 bytes). */
#ifndef TW_KERNELS_BLOCKS_H
#define TW_KERNELS_BLOCKS_H

#include <stdint.h>

#define TW_QK8_0 32
#define TW_QK4_0 32
#define TW_QK_K 256
#define TW_K_SCALE_SIZE 12

/* 32 values: x = d * qs[i] */
typedef struct tw_block_q8_0 {
    uint16_t d;
    int8_t qs[TW_QK8_0];
} tw_block_q8_0;

/* 32 values: byte j holds element j (low nibble) and j + 16 (high nibble);
 * x = d * (nibble - 8) */
typedef struct tw_block_q4_0 {
    uint16_t d;
    uint8_t qs[TW_QK4_0 / 2];
} tw_block_q4_0;

/* 32 values: bit j of qh is bit 4 of element j; low nibbles as in Q4_0;
 * x = d * (q - 16) */
typedef struct tw_block_q5_0 {
    uint16_t d;
    uint8_t qh[4];
    uint8_t qs[16];
} tw_block_q5_0;

/* Like Q5_0 with an f16 offset instead of the -16: x = d * q + m */
typedef struct tw_block_q5_1 {
    uint16_t d;
    uint16_t m;
    uint8_t qh[4];
    uint8_t qs[16];
} tw_block_q5_1;

/* 256 values in 8 sub-blocks of 32, each with a 6-bit scale and a 6-bit
 * min packed into `scales`: x = d * sc * q - dmin * m, q in [0, 15].
 * Within each 64-value group, qs[32] holds the first 32 values in the low
 * nibbles and the next 32 in the high nibbles. */
typedef struct tw_block_q4_k {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[TW_K_SCALE_SIZE];
    uint8_t qs[TW_QK_K / 2];
} tw_block_q4_k;

/* Like Q4_K with a fifth bit per value in qh: bit 2g (low half) and
 * 2g + 1 (high half) of qh[l] for value l of 64-value group g. */
typedef struct tw_block_q5_k {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[TW_K_SCALE_SIZE];
    uint8_t qh[TW_QK_K / 8];
    uint8_t qs[TW_QK_K / 2];
} tw_block_q5_k;

/* 256 values in 16 sub-blocks of 16 with signed 8-bit scales:
 * x = d * scales[s] * (q - 32), q 6 bits: 4 in ql, 2 in qh. */
typedef struct tw_block_q6_k {
    uint8_t ql[TW_QK_K / 2];
    uint8_t qh[TW_QK_K / 4];
    int8_t scales[TW_QK_K / 16];
    uint16_t d;
} tw_block_q6_k;

/* Q8_0_R8, Q4_0_R8 and Q5_0_R8 (not file layouts; tw_pack_rows makes them
 * at load): Q8_0 / Q4_0 / Q5_0 rows packed eight to a group, so that a kernel holds
 * eight rows in the eight int32 lanes of one vector and sums each row's
 * block dot in its own lane. Group g (rows 8g..8g+7) occupies the bytes of
 * its eight rows, from 8g * row_bytes, block after block, 8 blocks' bytes
 * per block: the eight rows' f16 scales, then for each 4-byte run k of a
 * block's values (after its scale) the eight rows' run k, row after row.
 * Q8_0's run k is columns 4k..4k+3; Q4_0's, bytes 4k..4k+3 of qs, holds
 * columns 4k..4k+3 in its low nibbles and 16 + 4k.. in its high ones.
 * Q5_0's run 0 is its qh with the bits reordered, bit 8j + k holding the
 * fifth bit of column 4k + j (so one shift and mask give a 4-column step's
 * four bits at bit 4 of their bytes); its runs 1..4 are Q4_0's runs 0..3.
 * Rows past the last whole group stay plain rows at r * row_bytes.
 *
 * Q4_K_R8, Q4_K rows packed the same way, 1152 bytes (eight blocks' worth)
 * per 256 columns of a group: the eight rows' f16 d, their f16 dmin; then
 * the 6-bit scales and mins of sub-blocks j = 0..7, whose low 4 bits take
 * 64 bytes (byte 8j + r: row r's scale in the low nibble, its min in the
 * high one) and whose top 2 bits take 32 (the 32-bit little-endian word
 * 4j: bits 4r..4r+3 for row r, the scale's two bits under the min's); then
 * for each 64-column group g = 0..3 of the block, its 32 qs bytes in eight
 * 4-byte runs k, the eight rows' run k after one another. Run k holds
 * columns 64g + 4k.. + 3 (sub-block 2g) in its low nibbles and 64g + 32 +
 * 4k.. (sub-block 2g + 1) in its high ones.
 *
 * Q5_K_R8, Q5_K rows packed as Q4_K_R8 with their fifth bits, 1408 bytes
 * per 256 columns of a group: d, dmin and the scales' two planes as in
 * Q4_K_R8 (128 bytes), then for each 64-column group g = 0..3, 320 bytes:
 * the fifth bits of sub-blocks 2g and 2g + 1 and then g's 256 bytes of qs
 * runs as Q4_K_R8 holds them, so that a row group is read front to back.
 * A sub-block's fifth bits take 32 bytes, the eight rows' 4-byte words,
 * bit 8c + k of row r's holding the fifth bit of its column 4k + c of the
 * sub-block (bit j of qh byte 4k + c for sub-block j), Q5_0_R8's order, so
 * a step's four bits come to bit 4 of their bytes by one shift and mask.
 *
 * Q5_1_R8, Q5_1 rows packed as Q5_0_R8 with the eight rows' f16 offsets m
 * after their f16 scales d, 192 bytes per 32 columns of a group: d at 0, m
 * at 16, the reordered qh at 32, the nibble runs from 64.
 *
 * Q6_K_R8, Q6_K rows packed the same way, 1680 bytes per 256 columns of a
 * group: the eight rows' f16 d; their int8 sub-block scales in pairs (16
 * bytes per pair p: row r's scales 2p and 2p + 1 at 2r, 2r + 1); then for
 * each half h = 0..1 of the block and 4-column step k = 0..7, 96 bytes:
 * the eight rows' 4-byte runs of ql bytes 64h + 4k.., of ql bytes
 * 64h + 32 + 4k.. and of qh bytes 32h + 4k... Their nibbles and bit pairs
 * give columns 128h + 4k.. (low nibbles of the first run, qh bits 0-1),
 * + 32 (second run, bits 2-3), + 64 (first run's high nibbles, bits 4-5)
 * and + 96 (second run's, bits 6-7), as in Q6_K. */
#define TW_R8_ROWS 8
/* Bytes of a Q6_K_R8 group's block and where its parts start. */
#define TW_R8Q6_BLOCK (TW_R8_ROWS * 210)
#define TW_R8Q6_SC    16
#define TW_R8Q6_Q     144
/* Bytes of a Q4_K_R8 group's block: where its parts start. */
#define TW_R8K_BLOCK  (TW_R8_ROWS * 144)
#define TW_R8K_DMIN   16
#define TW_R8K_SC_LO  32
#define TW_R8K_SC_HI  96
#define TW_R8K_QS     128
/* Q5_K_R8: a group's block, and where 64-column group g's part starts. */
#define TW_R8K5_BLOCK (TW_R8_ROWS * 176)
#define TW_R8K5_G(g)  (128 + 320 * (g))

_Static_assert(sizeof(tw_block_q8_0) == 34, "q8_0 block size");
_Static_assert(sizeof(tw_block_q4_0) == 18, "q4_0 block size");
_Static_assert(sizeof(tw_block_q5_0) == 22, "q5_0 block size");
_Static_assert(sizeof(tw_block_q5_1) == 24, "q5_1 block size");
_Static_assert(sizeof(tw_block_q4_k) == 144, "q4_K block size");
_Static_assert(sizeof(tw_block_q5_k) == 176, "q5_K block size");
_Static_assert(sizeof(tw_block_q6_k) == 210, "q6_K block size");

/* Unpacks the 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K block. */
static inline void tw_k_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *m)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

#endif
