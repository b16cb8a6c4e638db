/* Cache sizes from the CPU itself, for machines whose sysfs has no
 * cpu0/cache directory (some hypervisors leave it out): CPUID's
 * deterministic cache leaves (4 on Intel, 0x8000001D on AMD), then AMD's
 * older per-core leaves for L1d and L2. */
#include "tw/hw.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define TW_HW_CPUID 1
#endif

int tw_hw_cache_from_cpuid(uint32_t eax, uint32_t ebx, uint32_t ecx, unsigned *level,
                           uint64_t *bytes)
{
    const unsigned type = eax & 0x1F;
    *level = (eax >> 5) & 0x7;
    /* ways x partitions x line size x sets, each field one less than it says */
    *bytes = (uint64_t)(((ebx >> 22) & 0x3FF) + 1) * (((ebx >> 12) & 0x3FF) + 1) *
             ((ebx & 0xFFF) + 1) * ((uint64_t)ecx + 1);
    return type <= 3 ? (int)type : 0;
}

#ifdef TW_HW_CPUID
static void set_level(tw_hw_info *hw, unsigned level, uint64_t bytes)
{
    uint64_t *field = level == 1   ? &hw->l1d_bytes
                      : level == 2 ? &hw->l2_bytes
                      : level == 3 ? &hw->l3_bytes
                                   : NULL;
    if (field && *field == 0)
        *field = bytes;
}

/* Walks a deterministic cache leaf's subleaves until the null entry. */
static void walk_leaf(tw_hw_info *hw, unsigned leaf)
{
    for (unsigned sub = 0; sub < 16; sub++) {
        unsigned a, b, c, d, level;
        uint64_t bytes;
        __cpuid_count(leaf, sub, a, b, c, d);
        (void)d;
        int type = tw_hw_cache_from_cpuid(a, b, c, &level, &bytes);
        if (type == 0)
            break;
        if (type != 2) /* 1: data, 3: unified; 2 is an instruction cache */
            set_level(hw, level, bytes);
    }
}

void tw_hw_cpuid_caches(tw_hw_info *hw)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d))
        return;
    const unsigned max_basic = a;
    const bool amd = b == 0x68747541u; /* "Auth" of AuthenticAMD */
    const unsigned max_ext = __get_cpuid_max(0x80000000u, NULL);
    if (!amd && max_basic >= 4)
        walk_leaf(hw, 4);
    if (amd && max_ext >= 0x8000001Du)
        walk_leaf(hw, 0x8000001Du);
    if (!amd || max_ext < 0x80000006u)
        return;
    /* Per core, so as cpu0 sees it. This leaf's L3 field is left alone: on a
     * part of several core complexes it gives all of their L3s together,
     * not the one a core shares. */
    __cpuid(0x80000005u, a, b, c, d);
    set_level(hw, 1, (uint64_t)(c >> 24) << 10);
    __cpuid(0x80000006u, a, b, c, d);
    set_level(hw, 2, (uint64_t)(c >> 16) << 10);
}
#else
void tw_hw_cpuid_caches(tw_hw_info *hw)
{
    (void)hw;
}
#endif
