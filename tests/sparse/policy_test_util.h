// Shared by the policy tests: an AttentionCall over owned random or constructed q/k, and the
// token-level expansion of a plan (which frame-major (query, key) pairs a head attends).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "sparse/attention_policy.h"

namespace vidax::sparse::testing {

struct CallData {
  std::vector<float> q, k;  // [tokens, heads, head_dim]
  AttentionCall call;

  CallData(TokenGrid grid, int64_t heads, int64_t head_dim) {
    const auto n = static_cast<size_t>(grid.tokens() * heads * head_dim);
    q.assign(n, 0.0f);
    k.assign(n, 0.0f);
    call.grid = grid;
    call.heads = heads;
    call.head_dim = head_dim;
    call.stride = heads * head_dim;
    call.q = q.data();
    call.k = k.data();
  }
  void randomize(uint32_t seed, float scale = 1.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, scale);
    for (auto& v : q) v = nd(rng);
    for (auto& v : k) v = nd(rng);
  }
  float* qrow(int64_t token, int64_t head) {
    return q.data() + (token * call.heads + head) * call.head_dim;
  }
  float* krow(int64_t token, int64_t head) {
    return k.data() + (token * call.heads + head) * call.head_dim;
  }
};

// keep[query * tokens + key] over frame-major indices for model head `head` of the plan
// (dense groups: all ones). Empty when the head is in no group.
inline std::vector<uint8_t> expand_head(const AttentionPlan& plan, int64_t head, int64_t tokens) {
  for (const auto& g : plan.groups)
    for (size_t i = 0; i < g.heads.size(); ++i) {
      if (g.heads[i] != head) continue;
      std::vector<uint8_t> keep(static_cast<size_t>(tokens * tokens), g.dense ? 1 : 0);
      if (g.dense) return keep;
      const auto& b = g.layout.blocks;
      for (int64_t qb = 0; qb < b.blocks(); ++qb) {
        const auto row = g.mask.row(static_cast<int64_t>(i), qb);
        for (size_t t = 0; t < row.key_blocks.size(); ++t) {
          const int64_t kb = row.key_blocks[t];
          for (int64_t p = b.begin(qb); p < b.begin(qb) + b.size(qb); ++p)
            for (int64_t r = b.begin(kb); r < b.begin(kb) + b.size(kb); ++r) {
              bool on = true;
              if (row.boundary[t]) {
                uint8_t v = 0;
                g.predicate(static_cast<int64_t>(i), p, 1, r, 1, &v);
                on = v != 0;
              }
              if (on)
                keep[static_cast<size_t>(g.layout.original(p) * tokens + g.layout.original(r))] = 1;
            }
        }
      }
      return keep;
    }
  return {};
}

// Every head in exactly one group, each group's mask sized to its layout.
inline bool plan_is_well_formed(const AttentionPlan& plan, int64_t heads) {
  std::vector<int> seen(static_cast<size_t>(heads), 0);
  for (const auto& g : plan.groups) {
    for (const int64_t h : g.heads) {
      if (h < 0 || h >= heads) return false;
      ++seen[static_cast<size_t>(h)];
    }
    if (!g.dense && (g.mask.heads() != static_cast<int64_t>(g.heads.size()) ||
                     g.mask.q_blocks() != g.layout.blocks.blocks() || !g.mask.rows_built()))
      return false;
  }
  for (const int s : seen)
    if (s != 1) return false;
  return true;
}

}  // namespace vidax::sparse::testing
