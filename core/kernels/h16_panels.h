/* Half-precision (F16 / BF16) batch products in the form of a blocked
 * matrix multiply: a panel of PR rows, widened to f32 and turned so that
 * each column's PR weights lie side by side (PR / lanes vectors), meets up
 * to PT activations at a time, each activation value broadcast against the
 * panel's column. Every output is one multiply-add chain in column order,
 * starting from zero and carried through y between column blocks, so it
 * has the same bits whatever the row range, the batch grouping and the
 * vector width (the AVX2 and AVX-512 panels agree bit for bit, and with a
 * scalar fmaf loop); they differ from decode's two-accumulator rows in the
 * last bits, as sgemm's do.
 *
 * Against the batch tiles (each output a dot product of a row and an
 * activation), a step loads PR / lanes weight vectors and PT broadcasts for
 * PR / lanes x PT multiply-adds, and the activations are read once per
 * panel instead of once per tile of rows; against dequantized tiles through
 * sgemm it skips the f32 copy of the weights and sgemm's own packing. */
#ifndef TW_KERNELS_H16_PANELS_H
#define TW_KERNELS_H16_PANELS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels_internal.h"

/* Columns of one block: a panel of 32 rows (AVX-512) takes 32 KiB of f32,
 * 24 rows (AVX2) 24 KiB, within L1 beside the PT activations' columns.
 * 128, 192, 384 and 512 read no faster on an Emerald Rapids Xeon. */
#define TW_PANEL_KC 256
/* The widest panel, 32 rows of a block, is what TW_PANELS_SCRATCH_BYTES
 * promises room for. */
_Static_assert(TW_PANELS_SCRATCH_BYTES >= TW_PANEL_KC * 32 * sizeof(float),
               "panel scratch smaller than a block of 32 rows");

/* Activations of one pass over the weights: a pass's output rows (a task's
 * up to 256 rows) and activation columns (one column block) then take
 * 128 KiB each, within a 512 KiB L2 (Zen 2) beside the panel, however long
 * the prompt, where a 512-token pass would need 512 KiB of each. The
 * weights are widened again for each pass (about 7% of a pass on the
 * Emerald Rapids Xeon), and the start-up measurement, a 128-token product,
 * times what prompts of every length then run. */
#define TW_PANEL_NB 128

/* Runs TILE(wp, kc, x, x_stride, y, y_stride, first, nr, TB) with TB the
 * group size tb (1..PT, PT at most 12) as a constant, so the tile's loops
 * over the group unroll; sizes past PT never come, and their cases are
 * clamped to PT only so that they compile. */
#define TW_PANEL_CASE(TILE, n, PT, wp, kc, x, xs, y, ys, first, nr)                                \
    case n:                                                                                        \
        TILE(wp, kc, x, xs, y, ys, first, nr, (n) > (PT) ? (PT) : (n));                            \
        break;
#define TW_PANEL_SWITCH(TILE, tb, PT, ...)                                                         \
    switch (tb) {                                                                                  \
        TW_PANEL_CASE(TILE, 12, PT, __VA_ARGS__)                                                   \
        TW_PANEL_CASE(TILE, 11, PT, __VA_ARGS__)                                                   \
        TW_PANEL_CASE(TILE, 10, PT, __VA_ARGS__)                                                   \
        TW_PANEL_CASE(TILE, 9, PT, __VA_ARGS__)                                                    \
        TW_PANEL_CASE(TILE, 8, PT, __VA_ARGS__)                                                    \
        TW_PANEL_CASE(TILE, 7, PT, __VA_ARGS__)                                                    \
        TW_PANEL_CASE(TILE, 6, PT, __VA_ARGS__)                                                    \
        TW_PANEL_CASE(TILE, 5, PT, __VA_ARGS__)                                                    \
        TW_PANEL_CASE(TILE, 4, PT, __VA_ARGS__)                                                    \
        TW_PANEL_CASE(TILE, 3, PT, __VA_ARGS__)                                                    \
        TW_PANEL_CASE(TILE, 2, PT, __VA_ARGS__)                                                    \
    default:                                                                                       \
        TW_PANEL_CASE(TILE, 1, PT, __VA_ARGS__)                                                    \
    }

/* The next panel a block's products read: its rows, columns and where
 * they start (nr 0: none). */
typedef struct tw_panel_next {
    const uint16_t *h;
    size_t nr, kc;
} tw_panel_next;

static inline tw_panel_next tw_panel_next_of(const uint16_t *h, size_t re, size_t rows, size_t cols,
                                             size_t r0, size_t k0, size_t PR, size_t KC)
{
    tw_panel_next nx = {0};
    if (r0 + PR < rows) {
        nx.h = h + (r0 + PR) * re + k0;
        nx.nr = rows - r0 - PR < PR ? rows - r0 - PR : PR;
        nx.kc = cols - k0 < KC ? cols - k0 : KC;
    } else if (k0 + KC < cols) {
        nx.h = h + k0 + KC;
        nx.nr = rows < PR ? rows : PR;
        nx.kc = cols - k0 - KC < KC ? cols - k0 - KC : KC;
    }
    return nx;
}

/* Asks for the next panel's rows in L2 ahead of its packing, group g of
 * `groups` asking for row g (the last group for every row left). A
 * panel's rows are PR streams a row apart, more than the hardware
 * prefetchers follow, so unasked each line came from memory while the core
 * waited (packing took 12% of a 128-token product on a Zen 3 EPYC); asked
 * all at once, the requests queue behind one another. */
static inline void tw_panel_prefetch(tw_panel_next nx, size_t re, size_t g, size_t groups)
{
    const size_t r1 = g + 1 == groups ? nx.nr : g + 1;
    for (size_t r = g; r < r1 && r < nx.nr; r++)
        for (size_t c = 0; c < nx.kc; c += 32)
            __builtin_prefetch(nx.h + r * re + c, 0, 2);
}

/* Runs the products of one ISA's panels: PACK(h, row_elems, nr, kc, wp,
 * is_bf16) widens and turns rows [0, nr) of columns [0, kc) of h into wp
 * (zeros for rows past nr), and TILE (see TW_PANEL_SWITCH) runs a group of
 * activations against the panel, KC columns a block (at most TW_PANEL_KC).
 * The next panel's rows are fetched while a panel's groups run. A batch
 * goes TW_PANEL_NB activations at a time. */
#define TW_PANELS_DRIVER(ATTR, name, PACK, TILE, PR, PT, KC, is_bf16)                              \
    _Static_assert((KC) <= TW_PANEL_KC, "a panel block past the scratch");                         \
    ATTR static void panels_block_##name(const uint16_t *h, size_t re, size_t rows, size_t cols,   \
                                         const float *x, size_t n, float *y, size_t y_stride,      \
                                         float *wp)                                                \
    {                                                                                              \
        /* near-equal groups: the first n_big take tb_big activations, the rest one less */        \
        const size_t groups = (n + (PT)-1) / (PT);                                                 \
        const size_t tb_big = (n + groups - 1) / groups;                                           \
        const size_t n_big = n - groups * (tb_big - 1);                                            \
        for (size_t k0 = 0; k0 < cols; k0 += (KC)) {                                               \
            const size_t kc = cols - k0 < (KC) ? cols - k0 : (KC);                                 \
            for (size_t r0 = 0; r0 < rows; r0 += (PR)) {                                           \
                const size_t nr = rows - r0 < (PR) ? rows - r0 : (PR);                             \
                PACK(h + r0 * re + k0, re, nr, kc, wp, is_bf16);                                   \
                const tw_panel_next nx = tw_panel_next_of(h, re, rows, cols, r0, k0, PR, KC);      \
                for (size_t g = 0, t = 0; g < groups; g++) {                                       \
                    const size_t tb = g < n_big ? tb_big : tb_big - 1;                             \
                    tw_panel_prefetch(nx, re, g, groups);                                          \
                    TW_PANEL_SWITCH(TILE, tb, PT, wp, kc, x + t * cols + k0, cols,                 \
                                    y + t * y_stride + r0, y_stride, k0 == 0, nr);                 \
                    t += tb;                                                                       \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    ATTR static void panels_##name(const uint8_t *w, size_t row_bytes, size_t rows, size_t cols,   \
                                   const float *x, size_t n, float *y, size_t y_stride, float *wp) \
    {                                                                                              \
        const uint16_t *h = (const uint16_t *)(const void *)w;                                     \
        for (size_t t0 = 0; t0 < n; t0 += TW_PANEL_NB)                                             \
            panels_block_##name(h, row_bytes / 2, rows, cols, x + t0 * cols,                       \
                                n - t0 < TW_PANEL_NB ? n - t0 : TW_PANEL_NB, y + t0 * y_stride,    \
                                y_stride, wp);                                                     \
    }

#endif
