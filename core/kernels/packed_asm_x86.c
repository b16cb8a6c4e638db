/* The AVX2 batch kernels for Q4_0_R8 and Q8_0_R8, their registers
 * allocated by hand.
 *
 * The intrinsics kernels (packed_x86.c) are bound by the load ports, not by
 * their arithmetic: compiled, a Q4_0 block of 8 rows against eight
 * activations makes 154 memory operations, 65 of them stack traffic and
 * reloads of the activations' pointers, where the multiply pipes alone
 * would take 44 cycles. Here the activations come from their quad panel
 * (tw_act.quad), so one pointer walks four of them, and each block's
 * levels, the four activations' sums and their accumulators stay in the
 * sixteen vector registers: 45 memory operations per block and four
 * activations, 90 for eight. The arithmetic is the intrinsics kernels',
 * operation for operation (tw_r8_dot's bits).
 *
 * Q4_0: per activation, the eight steps' products summed in int16
 * (8 * 2 * 15 * 127 fits), widened by a multiply-add with ones, plus the
 * block's -8 times the activations' sum, converted, and one fused
 * multiply-add with the product of the two scales.
 *
 * Q8_0: the sign trick per step and activation (the levels' magnitudes
 * times the activation's values given the levels' signs, an int16 pair
 * sum that only just fits, so widened at once), four vector operations
 * per step and activation, which this core issues at about four a cycle
 * (a 2-core EPYC, one thread, 4864x896 against 16 activations in L2/L3:
 * 755 us against the intrinsics kernel's 904). */
#include "kernels/blocks.h"
#include "kernels/kernels_internal.h"
#include "kernels/simd_x86.h"

#ifdef TW_HAVE_X86

/* Bytes of a Q4_0_R8 block: the eight rows' f16 scales, then four 32-byte
 * nibble runs. */
#define Q4Q_BLOCK   (TW_R8_ROWS * 18)
#define Q4Q_STR_(x) #x
#define Q4Q_STR(x)  Q4Q_STR_(x)

/* Registers: ymm0-3 the int16 sums of activations 0-3, ymm4 / ymm5 a
 * run's low / high nibbles, ymm6 / ymm7 products, ymm8-11 the
 * accumulators, ymm12 int16 ones, ymm13 0x0F bytes, ymm14 the rows'
 * scales, ymm15 an activation's scale or offset. */
#define Q4Q_SUM_0 "%%ymm0"
#define Q4Q_SUM_1 "%%ymm1"
#define Q4Q_SUM_2 "%%ymm2"
#define Q4Q_SUM_3 "%%ymm3"
#define Q4Q_ACC_0 "%%ymm8"
#define Q4Q_ACC_1 "%%ymm9"
#define Q4Q_ACC_2 "%%ymm10"
#define Q4Q_ACC_3 "%%ymm11"

// clang-format off
/* Nibble run k of the block: steps k (low nibbles) and k + 4 (high). */
#define Q4Q_RUN(k)                                                                                 \
    "vmovdqu " Q4Q_STR(2 * TW_R8_ROWS + 32 * (k)) "(%[p]), %%ymm5\n\t"                             \
    "vpand %%ymm5, %%ymm13, %%ymm4\n\t"                                                            \
    "vpsrlw $4, %%ymm5, %%ymm5\n\t"                                                                \
    "vpand %%ymm5, %%ymm13, %%ymm5\n\t"

/* Activation t's products of run k: its four values of step k broadcast
 * against the low nibbles, of step k + 4 against the high ones; the first
 * run starts its sum, the later ones add to it. */
#define Q4Q_PRODUCTS(t, k)                                                                         \
    "vpbroadcastd " Q4Q_STR(32 * (t) + 4 * (k)) "(%[pa]), %%ymm6\n\t"                              \
    "vpmaddubsw %%ymm6, %%ymm4, %%ymm6\n\t"                                                        \
    "vpbroadcastd " Q4Q_STR(32 * (t) + 4 * (k) + 16) "(%[pa]), %%ymm7\n\t"                         \
    "vpmaddubsw %%ymm7, %%ymm5, %%ymm7\n\t"
#define Q4Q_START(t, k) Q4Q_PRODUCTS(t, k) "vpaddw %%ymm7, %%ymm6, " Q4Q_SUM_##t "\n\t"
#define Q4Q_ADD(t, k)                                                                              \
    Q4Q_PRODUCTS(t, k)                                                                             \
    "vpaddw %%ymm7, %%ymm6, %%ymm6\n\t"                                                            \
    "vpaddw %%ymm6, " Q4Q_SUM_##t ", " Q4Q_SUM_##t "\n\t"

/* Activation t's block dot into its accumulator: widened, plus -8 times
 * the activation's block sum, converted, times the rows' scales times its
 * own. */
#define Q4Q_SCALE(t, k)                                                                            \
    "vpmaddwd %%ymm12, " Q4Q_SUM_##t ", " Q4Q_SUM_##t "\n\t"                                       \
    "vpbroadcastd " Q4Q_STR(TW_QUAD_BNEG + 4 * (t)) "(%[pa]), %%ymm15\n\t"                         \
    "vpaddd %%ymm15, " Q4Q_SUM_##t ", " Q4Q_SUM_##t "\n\t"                                         \
    "vcvtdq2ps " Q4Q_SUM_##t ", " Q4Q_SUM_##t "\n\t"                                               \
    "vbroadcastss " Q4Q_STR(TW_QUAD_D + 4 * (t)) "(%[pa]), %%ymm15\n\t"                            \
    "vmulps %%ymm15, %%ymm14, %%ymm15\n\t"                                                         \
    "vfmadd231ps " Q4Q_SUM_##t ", %%ymm15, " Q4Q_ACC_##t "\n\t"
// clang-format on

/* Activation t's accumulator into its output row, ys bytes after t - 1's
 * (the last one moves y on by one row to reach it). */
#define Q4Q_STORE_0     "vmovups %%ymm8, (%[y])\n\t"
#define Q4Q_STORE_1     "vmovups %%ymm9, (%[y],%[ys])\n\t"
#define Q4Q_STORE_2     "vmovups %%ymm10, (%[y],%[ys],2)\n\t"
#define Q4Q_STORE_3     "add %[ys], %[y]\n\t vmovups %%ymm11, (%[y],%[ys],2)\n\t"
#define Q4Q_STORE(t, k) Q4Q_STORE_##t

/* The next row group's block, pf bytes on, into L1: the five lines that
 * hold it. */
#define Q4Q_PREFETCH                                                                               \
    "prefetcht0 (%[p],%[pf])\n\t"                                                                  \
    "prefetcht0 64(%[p],%[pf])\n\t"                                                                \
    "prefetcht0 128(%[p],%[pf])\n\t"                                                               \
    "prefetcht0 192(%[p],%[pf])\n\t"                                                               \
    "prefetcht0 256(%[p],%[pf])\n\t"

#define Q4Q_EACH_1(M, k) M(0, k)
#define Q4Q_EACH_2(M, k) Q4Q_EACH_1(M, k) M(1, k)
#define Q4Q_EACH_3(M, k) Q4Q_EACH_2(M, k) M(2, k)
#define Q4Q_EACH_4(M, k) Q4Q_EACH_3(M, k) M(3, k)

/* A group of eight rows (nb blocks of BLOCK bytes at p) against the TB
 * activations of the quad panel pa; their outputs at y, ys bytes apart.
 * CONSTS sets the type's constants besides the int16 ones (ymm12), STEPS
 * is a block's products into the sums, SCALE(t, 0) a sum into its
 * accumulator with the rows' scales in ymm14. */
// clang-format off
#define QUAD_KERNEL(name, TB, PF, BLOCK, CONSTS, STEPS, SCALE)                                     \
    TW_AVX2 static void name(const uint8_t *p, size_t nb, const uint8_t *pa, float *y, size_t ys,  \
                             size_t pf)                                                            \
    {                                                                                              \
        const uint8_t *end = p + nb * (BLOCK);                                                     \
        __asm__ volatile(                                                                          \
            "vpcmpeqw %%ymm12, %%ymm12, %%ymm12\n\t"                                               \
            "vpsrlw $15, %%ymm12, %%ymm12\n\t"                                                     \
            CONSTS                                                                                 \
            "vxorps %%xmm8, %%xmm8, %%xmm8\n\t"                                                    \
            "vxorps %%xmm9, %%xmm9, %%xmm9\n\t"                                                    \
            "vxorps %%xmm10, %%xmm10, %%xmm10\n\t"                                                 \
            "vxorps %%xmm11, %%xmm11, %%xmm11\n\t"                                                 \
            "1:\n\t" PF                                                                            \
            STEPS                                                                                  \
            "vcvtph2ps (%[p]), %%ymm14\n\t"                                                        \
            Q4Q_EACH_##TB(SCALE, 0)                                                                \
            "add $" Q4Q_STR(BLOCK) ", %[p]\n\t"                                                    \
            "add $" Q4Q_STR(TW_QUAD_BLOCK) ", %[pa]\n\t"                                           \
            "cmp %[end], %[p]\n\t"                                                                \
            "jb 1b\n\t"                                                                           \
            Q4Q_EACH_##TB(Q4Q_STORE, 0)                                                            \
            "vzeroupper\n\t"                                                                      \
            : [p] "+r"(p), [pa] "+r"(pa), [y] "+r"(y)                                              \
            : [end] "r"(end), [ys] "r"(ys), [pf] "r"(pf)                                           \
            : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9",      \
              "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "memory", "cc");               \
    }

/* Q4_0: 0x0F bytes in ymm13; a block is four nibble runs. */
#define Q4Q_CONSTS                                                                                 \
    "vpcmpeqw %%ymm13, %%ymm13, %%ymm13\n\t"                                                       \
    "vpsrlw $12, %%ymm13, %%ymm13\n\t"                                                             \
    "vpackuswb %%ymm13, %%ymm13, %%ymm13\n\t"
#define Q4Q_STEPS(TB)                                                                              \
    Q4Q_RUN(0) Q4Q_EACH_##TB(Q4Q_START, 0)                                                         \
    Q4Q_RUN(1) Q4Q_EACH_##TB(Q4Q_ADD, 1)                                                           \
    Q4Q_RUN(2) Q4Q_EACH_##TB(Q4Q_ADD, 2)                                                           \
    Q4Q_RUN(3) Q4Q_EACH_##TB(Q4Q_ADD, 3)
#define Q4Q_KERNEL(name, TB, PF)                                                                   \
    QUAD_KERNEL(name, TB, PF, Q4Q_BLOCK, Q4Q_CONSTS, Q4Q_STEPS(TB), Q4Q_SCALE)
// clang-format on

/* A type's eight kernels: K_1..K_4 for 1-4 activations, and the same
 * fetching the next row group (K_1_pf..K_4_pf). */
#define QUAD_KERNELS(K, KERNEL, PF)                                                                \
    KERNEL(K##_1, 1, "")                                                                           \
    KERNEL(K##_2, 2, "")                                                                           \
    KERNEL(K##_3, 3, "")                                                                           \
    KERNEL(K##_4, 4, "")                                                                           \
    KERNEL(K##_1_pf, 1, PF)                                                                        \
    KERNEL(K##_2_pf, 2, PF)                                                                        \
    KERNEL(K##_3_pf, 3, PF)                                                                        \
    KERNEL(K##_4_pf, 4, PF)

QUAD_KERNELS(q4q, Q4Q_KERNEL, Q4Q_PREFETCH)

/* Bytes of a Q8_0_R8 block: the eight rows' f16 scales, then eight
 * 32-byte steps of four signed levels per row. */
#define Q8Q_BLOCK (TW_R8_ROWS * 34)

/* Registers: ymm0-3 the int32 sums of activations 0-3, ymm4 / ymm5 an
 * even step's levels and their magnitudes, ymm13 / ymm14 an odd step's,
 * ymm6 / ymm7 an activation's values and products, ymm8-11 the
 * accumulators, ymm12 int16 ones, ymm14 the rows' scales after the last
 * step, ymm15 an activation's scale. */
#define Q8Q_Q_EVEN  "%%ymm4"
#define Q8Q_QA_EVEN "%%ymm5"
#define Q8Q_Q_ODD   "%%ymm13"
#define Q8Q_QA_ODD  "%%ymm14"
#define Q8Q_PAR_0   EVEN
#define Q8Q_PAR_1   ODD
#define Q8Q_PAR_2   EVEN
#define Q8Q_PAR_3   ODD
#define Q8Q_PAR_4   EVEN
#define Q8Q_PAR_5   ODD
#define Q8Q_PAR_6   EVEN
#define Q8Q_PAR_7   ODD
#define Q8Q_CAT_(a, b) a##b
#define Q8Q_CAT(a, b)  Q8Q_CAT_(a, b)
#define Q8Q_Q(k)       Q8Q_CAT(Q8Q_Q_, Q8Q_PAR_##k)
#define Q8Q_QA(k)      Q8Q_CAT(Q8Q_QA_, Q8Q_PAR_##k)
#define Q8Q_T_0        "%%ymm6"
#define Q8Q_T_1        "%%ymm7"
#define Q8Q_T_2        "%%ymm6"
#define Q8Q_T_3        "%%ymm7"
#define Q8Q_T(t)       Q8Q_T_##t

// clang-format off
/* Step k's levels and, for the unsigned operand, their magnitudes. */
#define Q8Q_STEP(k)                                                                                \
    "vmovdqu " Q4Q_STR(2 * TW_R8_ROWS + 32 * (k)) "(%[p]), " Q8Q_Q(k) "\n\t"                       \
    "vpsignb " Q8Q_Q(k) ", " Q8Q_Q(k) ", " Q8Q_QA(k) "\n\t"

/* Activation t's products of step k: its four values broadcast, given the
 * levels' signs, against the magnitudes, the int16 pair sums widened by a
 * multiply-add with ones; the first step starts its sum, the later ones
 * add to it. */
#define Q8Q_PRODUCTS(t, k)                                                                         \
    "vpbroadcastd " Q4Q_STR(32 * (t) + 4 * (k)) "(%[pa]), " Q8Q_T(t) "\n\t"                        \
    "vpsignb " Q8Q_Q(k) ", " Q8Q_T(t) ", " Q8Q_T(t) "\n\t"                                         \
    "vpmaddubsw " Q8Q_T(t) ", " Q8Q_QA(k) ", " Q8Q_T(t) "\n\t"
#define Q8Q_START(t, k) Q8Q_PRODUCTS(t, k) "vpmaddwd %%ymm12, " Q8Q_T(t) ", " Q4Q_SUM_##t "\n\t"
#define Q8Q_ADD(t, k)                                                                              \
    Q8Q_PRODUCTS(t, k)                                                                             \
    "vpmaddwd %%ymm12, " Q8Q_T(t) ", " Q8Q_T(t) "\n\t"                                             \
    "vpaddd " Q8Q_T(t) ", " Q4Q_SUM_##t ", " Q4Q_SUM_##t "\n\t"

/* Activation t's block dot into its accumulator: converted, times the
 * rows' scales times its own. */
#define Q8Q_SCALE(t, k)                                                                            \
    "vcvtdq2ps " Q4Q_SUM_##t ", " Q4Q_SUM_##t "\n\t"                                               \
    "vbroadcastss " Q4Q_STR(TW_QUAD_D + 4 * (t)) "(%[pa]), %%ymm15\n\t"                            \
    "vmulps %%ymm15, %%ymm14, %%ymm15\n\t"                                                         \
    "vfmadd231ps " Q4Q_SUM_##t ", %%ymm15, " Q4Q_ACC_##t "\n\t"

/* The next row group's block, pf bytes on, into L1: five lines from it on
 * (the next block's fetch goes on from there). */
#define Q8Q_PREFETCH Q4Q_PREFETCH

/* A Q8_0 block's eight steps for TB activations: STEP(k) loads step k,
 * START(t, 0) begins activation t's sum with step 0, ADD(t, k) adds step k. */
#define Q8_BLOCK_STEPS(TB, STEP, START, ADD)                                                       \
    STEP(0) Q4Q_EACH_##TB(START, 0)                                                                \
    STEP(1) Q4Q_EACH_##TB(ADD, 1)                                                                  \
    STEP(2) Q4Q_EACH_##TB(ADD, 2)                                                                  \
    STEP(3) Q4Q_EACH_##TB(ADD, 3)                                                                  \
    STEP(4) Q4Q_EACH_##TB(ADD, 4)                                                                  \
    STEP(5) Q4Q_EACH_##TB(ADD, 5)                                                                  \
    STEP(6) Q4Q_EACH_##TB(ADD, 6)                                                                  \
    STEP(7) Q4Q_EACH_##TB(ADD, 7)
#define Q8Q_STEPS(TB) Q8_BLOCK_STEPS(TB, Q8Q_STEP, Q8Q_START, Q8Q_ADD)
#define Q8Q_KERNEL(name, TB, PF) QUAD_KERNEL(name, TB, PF, Q8Q_BLOCK, "", Q8Q_STEPS(TB), Q8Q_SCALE)
// clang-format on

QUAD_KERNELS(q8q, Q8Q_KERNEL, Q8Q_PREFETCH)

/* With AVX-VNNI (VEX-encoded vpdpbusd, on cores that have it without
 * AVX-512): each product adds straight into its activation's int32 sum, in
 * place of the multiply, the int16 add and the widening with ones, so a
 * Q4_0 block takes 8 multiply-adds an activation where the kernels above
 * take 8 + 8 + 1, and a Q8_0 step 2 vector operations an activation where
 * they take 4. The sums are exact either way (no int16 step saturates
 * above), so the outputs are the same bits. */

/* Q4_0's registers here: ymm0-3 the int32 sums of activations 0-3 over
 * the low nibbles, ymm4-7 over the high ones (two chains of four
 * multiply-adds a block each, where one chain of eight would wait on the
 * instruction's latency), ymm8-11 the accumulators, ymm12 0x0F bytes,
 * ymm13 / ymm14 a run's low / high nibbles (ymm14 the rows' scales after
 * the last run), ymm15 a broadcast. */
#define Q4V_LO_0 "%%ymm0"
#define Q4V_LO_1 "%%ymm1"
#define Q4V_LO_2 "%%ymm2"
#define Q4V_LO_3 "%%ymm3"
#define Q4V_HI_0 "%%ymm4"
#define Q4V_HI_1 "%%ymm5"
#define Q4V_HI_2 "%%ymm6"
#define Q4V_HI_3 "%%ymm7"

// clang-format off
#define Q4V_CONSTS                                                                                 \
    "vpcmpeqw %%ymm12, %%ymm12, %%ymm12\n\t"                                                       \
    "vpsrlw $12, %%ymm12, %%ymm12\n\t"                                                             \
    "vpackuswb %%ymm12, %%ymm12, %%ymm12\n\t"
#define Q4V_RUN(k)                                                                                 \
    "vmovdqu " Q4Q_STR(2 * TW_R8_ROWS + 32 * (k)) "(%[p]), %%ymm14\n\t"                            \
    "vpand %%ymm14, %%ymm12, %%ymm13\n\t"                                                          \
    "vpsrlw $4, %%ymm14, %%ymm14\n\t"                                                              \
    "vpand %%ymm14, %%ymm12, %%ymm14\n\t"
/* Activation t's products of run k into its two sums. */
#define Q4V_PRODUCTS(t, k)                                                                         \
    "vpbroadcastd " Q4Q_STR(32 * (t) + 4 * (k)) "(%[pa]), %%ymm15\n\t"                             \
    "%{vex%} vpdpbusd %%ymm15, %%ymm13, " Q4V_LO_##t "\n\t"                                       \
    "vpbroadcastd " Q4Q_STR(32 * (t) + 4 * (k) + 16) "(%[pa]), %%ymm15\n\t"                        \
    "%{vex%} vpdpbusd %%ymm15, %%ymm14, " Q4V_HI_##t "\n\t"
#define Q4V_START(t, k)                                                                            \
    "vpxor " Q4V_LO_##t ", " Q4V_LO_##t ", " Q4V_LO_##t "\n\t"                                     \
    "vpxor " Q4V_HI_##t ", " Q4V_HI_##t ", " Q4V_HI_##t "\n\t" Q4V_PRODUCTS(t, k)
/* Activation t's block dot into its accumulator: the two sums added, plus
 * -8 times the activation's block sum, converted, times the rows' scales
 * times its own. */
#define Q4V_SCALE(t, k)                                                                            \
    "vpaddd " Q4V_HI_##t ", " Q4V_LO_##t ", " Q4V_LO_##t "\n\t"                                    \
    "vpbroadcastd " Q4Q_STR(TW_QUAD_BNEG + 4 * (t)) "(%[pa]), %%ymm15\n\t"                         \
    "vpaddd %%ymm15, " Q4V_LO_##t ", " Q4V_LO_##t "\n\t"                                           \
    "vcvtdq2ps " Q4V_LO_##t ", " Q4V_LO_##t "\n\t"                                                 \
    "vbroadcastss " Q4Q_STR(TW_QUAD_D + 4 * (t)) "(%[pa]), %%ymm15\n\t"                            \
    "vmulps %%ymm15, %%ymm14, %%ymm15\n\t"                                                         \
    "vfmadd231ps " Q4V_LO_##t ", %%ymm15, " Q4Q_ACC_##t "\n\t"
#define Q4V_STEPS(TB)                                                                              \
    Q4V_RUN(0) Q4Q_EACH_##TB(Q4V_START, 0)                                                         \
    Q4V_RUN(1) Q4Q_EACH_##TB(Q4V_PRODUCTS, 1)                                                      \
    Q4V_RUN(2) Q4Q_EACH_##TB(Q4V_PRODUCTS, 2)                                                      \
    Q4V_RUN(3) Q4Q_EACH_##TB(Q4V_PRODUCTS, 3)
#define Q4V_KERNEL(name, TB, PF)                                                                   \
    QUAD_KERNEL(name, TB, PF, Q4Q_BLOCK, Q4V_CONSTS, Q4V_STEPS(TB), Q4V_SCALE)

/* Q8_0's registers here: ymm0-3 the int32 sums of activations 0-3 over the
 * even steps, ymm4-7 over the odd ones (two chains of four again), ymm8-11
 * the accumulators, ymm12 an activation's values, ymm14 / ymm15 a step's
 * levels and their magnitudes (the rows' scales and a broadcast after the
 * last step). */
#define Q8V_SUM_0_EVEN "%%ymm0"
#define Q8V_SUM_1_EVEN "%%ymm1"
#define Q8V_SUM_2_EVEN "%%ymm2"
#define Q8V_SUM_3_EVEN "%%ymm3"
#define Q8V_SUM_0_ODD  "%%ymm4"
#define Q8V_SUM_1_ODD  "%%ymm5"
#define Q8V_SUM_2_ODD  "%%ymm6"
#define Q8V_SUM_3_ODD  "%%ymm7"
#define Q8V_SUM(t, k)  Q8Q_CAT(Q8V_SUM_##t##_, Q8Q_PAR_##k)

// clang-format off
#define Q8V_STEP(k)                                                                                \
    "vmovdqu " Q4Q_STR(2 * TW_R8_ROWS + 32 * (k)) "(%[p]), %%ymm14\n\t"                            \
    "vpsignb %%ymm14, %%ymm14, %%ymm15\n\t"
/* Activation t's values of step k, given the levels' signs, against their
 * magnitudes, into its sum of the step's parity. */
#define Q8V_PRODUCTS(t, k)                                                                         \
    "vpbroadcastd " Q4Q_STR(32 * (t) + 4 * (k)) "(%[pa]), %%ymm12\n\t"                             \
    "vpsignb %%ymm14, %%ymm12, %%ymm12\n\t"                                                        \
    "%{vex%} vpdpbusd %%ymm12, %%ymm15, " Q8V_SUM(t, k) "\n\t"
#define Q8V_START(t, k)                                                                            \
    "vpxor " Q8V_SUM_##t##_EVEN ", " Q8V_SUM_##t##_EVEN ", " Q8V_SUM_##t##_EVEN "\n\t"             \
    "vpxor " Q8V_SUM_##t##_ODD ", " Q8V_SUM_##t##_ODD ", " Q8V_SUM_##t##_ODD "\n\t"                \
    Q8V_PRODUCTS(t, k)
/* The two sums added, converted, times the rows' scales times its own. */
#define Q8V_SCALE(t, k)                                                                            \
    "vpaddd " Q8V_SUM_##t##_ODD ", " Q8V_SUM_##t##_EVEN ", " Q8V_SUM_##t##_EVEN "\n\t"             \
    "vcvtdq2ps " Q8V_SUM_##t##_EVEN ", " Q8V_SUM_##t##_EVEN "\n\t"                                 \
    "vbroadcastss " Q4Q_STR(TW_QUAD_D + 4 * (t)) "(%[pa]), %%ymm15\n\t"                            \
    "vmulps %%ymm15, %%ymm14, %%ymm15\n\t"                                                         \
    "vfmadd231ps " Q8V_SUM_##t##_EVEN ", %%ymm15, " Q4Q_ACC_##t "\n\t"
#define Q8V_STEPS(TB) Q8_BLOCK_STEPS(TB, Q8V_STEP, Q8V_START, Q8V_PRODUCTS)
#define Q8V_KERNEL(name, TB, PF) QUAD_KERNEL(name, TB, PF, Q8Q_BLOCK, "", Q8V_STEPS(TB), Q8V_SCALE)
// clang-format on

QUAD_KERNELS(q4v, Q4V_KERNEL, Q4Q_PREFETCH)
QUAD_KERNELS(q8v, Q8V_KERNEL, Q8Q_PREFETCH)

typedef void (*quad_fn)(const uint8_t *p, size_t nb, const uint8_t *pa, float *y, size_t ys,
                        size_t pf);

/* The packed drivers' order (packed_x86.c): a chunk of activations against
 * each row group while the group is in L1, the quads of the chunk in turn.
 * Unlike those drivers, the group's first pass always fetches the next
 * group's blocks: these kernels leave the load ports room for it, and a
 * second quad re-reading the group breaks the stream the hardware
 * prefetcher follows (24M Q8_0 target, AVX2, one thread: verifying 2-4
 * rows took 50-110 us less of ~1000-1500, 5 rows ~400 us less; qwen2-0.5b
 * Q4_0, 4 streams: 2.55-2.63x one stream's tokens/s against 2.13-2.26x).
 * plain and fetching: the kernels for 1-4 activations. */
TW_AVX2 static void quads_drive(const quad_fn *plain, const quad_fn *fetching, tw_type type,
                                const uint8_t *w, size_t row_bytes, size_t rows, size_t cols,
                                const tw_act *acts, size_t n_act, float *y, size_t y_stride)
{
    const size_t nb = cols / TW_QK8_0, groups = rows / TW_R8_ROWS;
    const size_t ys = y_stride * sizeof(float);
    for (size_t t0 = 0; t0 < n_act; t0 += TW_R8_ACT_CHUNK) {
        const size_t t1 = n_act - t0 < TW_R8_ACT_CHUNK ? n_act : t0 + TW_R8_ACT_CHUNK;
        for (size_t g = 0; g < groups; g++) {
            const uint8_t *p = w + g * TW_R8_ROWS * row_bytes;
            const bool pf = g + 1 < groups;
            for (size_t t = t0; t < t1; t += TW_QUAD_ACTS) {
                const size_t tb = t1 - t < TW_QUAD_ACTS ? t1 - t : TW_QUAD_ACTS;
                const quad_fn fn = pf && t == t0 ? fetching[tb - 1] : plain[tb - 1];
                fn(p, nb, acts[t].quad, y + g * TW_R8_ROWS + t * y_stride, ys,
                   TW_R8_ROWS * row_bytes);
            }
        }
    }
    tw_rows_r8_tail(type, w, row_bytes, rows, groups * TW_R8_ROWS, cols, acts, n_act, y,
                    y_stride);
}

/* The entry point of a type's kernels K (q4q, q8q) for its packed type. */
#define QUADS_ENTRY(name, K, type)                                                                 \
    TW_AVX2 void name(const uint8_t *w, size_t row_bytes, size_t rows, size_t cols,                \
                      const tw_act *acts, size_t n_act, float *y, size_t y_stride)                 \
    {                                                                                              \
        static const quad_fn plain[] = {K##_1, K##_2, K##_3, K##_4};                               \
        static const quad_fn fetching[] = {K##_1_pf, K##_2_pf, K##_3_pf, K##_4_pf};               \
        quads_drive(plain, fetching, type, w, row_bytes, rows, cols, acts, n_act, y, y_stride);    \
    }
QUADS_ENTRY(tw_rows_q4_quads_avx2, q4q, TW_TYPE_Q4_0_R8)
QUADS_ENTRY(tw_rows_q8_quads_avx2, q8q, TW_TYPE_Q8_0_R8)
QUADS_ENTRY(tw_rows_q4_quads_avxvnni, q4v, TW_TYPE_Q4_0_R8)
QUADS_ENTRY(tw_rows_q8_quads_avxvnni, q8v, TW_TYPE_Q8_0_R8)

#endif
