// Option strings of attention policies ("density=0.1,warmup=0.25") and small helpers the
// policies share: dense attention probabilities of one query row (the ground truth estimators are
// compared against) and masks replicated over the heads of a group.
// Pure functions / a value type; thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/cpu/block_mask.h"
#include "sparse/attention_policy.h"

namespace vidax::sparse {

// "k=v,k=v" parsed once; getters check range and remember which keys were read so that
// finish() can reject the ones nobody asked for. Every error names `policy` and the key.
class PolicyOptions {
 public:
  // `flag` names the command-line option in errors ("--attention", "--accel").
  PolicyOptions(std::string policy, std::string_view options, std::string flag = "--attention");

  bool has(const std::string& key) const { return values_.count(key) != 0; }
  // Values must lie in [lo, hi]; `def` is returned when the key is absent.
  double number(const std::string& key, double def, double lo, double hi);
  int64_t integer(const std::string& key, int64_t def, int64_t lo, int64_t hi);
  std::string text(const std::string& key, const std::string& def);
  // Throws InputError on any key that no getter asked for.
  void finish() const;
  const std::string& policy() const { return policy_; }

 private:
  std::string policy_, flag_;
  std::map<std::string, std::string> values_;
  std::set<std::string> used_;
};

// Softmax(q_i . k_j / sqrt(d)) over every key j (frame-major order) for frame-major query row
// `query` of `head`: probs[tokens]. Scores in f32, exponent sums in double.
void dense_attention_row(const AttentionCall& call, int64_t head, int64_t query, float* probs);

// A mask with `heads` copies of head 0 of `one` (rows built).
BlockMask replicate_mask(const BlockMask& one, int64_t heads);

// Throws InputError unless the call is well formed (grid, heads, q/k pointers, stride).
void validate_call(const AttentionCall& call, const char* policy);

// Deterministic 64-bit mixer (splitmix64) for reproducible sampling keyed by (layer, step, ...).
uint64_t mix64(uint64_t x);

}  // namespace vidax::sparse
