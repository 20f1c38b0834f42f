// ftgen attention: where a planned fault lands. ftgen::plan_faults draws each fault's block, thread, key tile, bit
// or offset; this gives it a site the level covers (drawn from the seed) and an element of that site's fragment,
// for the benchmark executables (ftgen_attention_bench.h) and the library's fault injection alike.
#pragma once
#include <algorithm>
#include <vector>

#include "ftgen_attention.h"
#include "ftgen_ft.cuh"

namespace ftattn_faults {

// What the sites need of a variant.
struct Layout {
  int head_dim, block_m, block_n;
  int sites;  // bit set of the fault sites the level covers (FTGEN_ATTN_SITE_*)
  bool causal, decoupled;
};

// Each fault of `plan` given a site (`site_only` >= 0: that one; else drawn from the level's sites) and an element;
// `bit_given`: a bit was asked for (else a p16 fault's bit is taken within the 16-bit value). lq, lk: the query and
// key lengths; bh: batch * heads.
inline void assign_sites(std::vector<ftgen::FaultSpec>& plan, unsigned long long seed, const Layout& v, int site_only,
                         bool bit_given, int lq, int lk, long long bh) {
  std::vector<int> sites;
  for (int s = 0; s < 8; ++s)
    if (v.sites >> s & 1) sites.push_back(s);
  if (sites.empty()) sites.push_back(FTGEN_ATTN_SITE_QK);
  unsigned long long h = seed ^ 0xA77E57ull;
  const auto next = [&h](unsigned long long n) {
    h = h * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<int>((h >> 33) % (n ? n : 1));
  };
  const int d = v.head_dim;
  for (auto& f : plan) {
    const int site = site_only >= 0 ? site_only : sites[next(sites.size())];
    int elems = 2;
    if (v.decoupled) {
      // step 0: S (the product grid of S), 1: the softmax (8 rows per block), 2: O (the product grid of O)
      const bool soft = site != FTGEN_ATTN_SITE_QK && site != FTGEN_ATTN_SITE_O;
      f.step = site == FTGEN_ATTN_SITE_QK ? 0 : soft ? 1 : 2;
      const long long grid = site == FTGEN_ATTN_SITE_QK ? static_cast<long long>((lk + 15) / 16) * ((lq + 15) / 16) * bh
                             : soft ? static_cast<long long>((lq + 7) / 8) * bh
                                    : static_cast<long long>((d + 15) / 16) * ((lq + 15) / 16) * bh;
      f.block = static_cast<int>(f.block % grid);
      elems = site == FTGEN_ATTN_SITE_EXP || site == FTGEN_ATTN_SITE_P16 ? (lk + 31) / 32 : 1;
    } else {
      if (site == FTGEN_ATTN_SITE_QK || site == FTGEN_ATTN_SITE_EXP || site == FTGEN_ATTN_SITE_P16) elems = 4 * (v.block_n / 8);
      if (site == FTGEN_ATTN_SITE_O) elems = 4 * (d / 8);
      if (v.causal) {  // a causal block sees the tiles up to its last row
        const int bx = static_cast<int>(f.block % ((lq + v.block_m - 1) / v.block_m));
        const int tiles = (std::min((bx + 1) * v.block_m, lq) + v.block_n - 1) / v.block_n;
        f.step %= std::max(tiles, 1);
      }
    }
    f.elem = site * FTGEN_ATTN_ELEMS_PER_SITE + next(elems);
    if (site == FTGEN_ATTN_SITE_P16 && !bit_given) f.bit %= 16;
  }
}

}  // namespace ftattn_faults
