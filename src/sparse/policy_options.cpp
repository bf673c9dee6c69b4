#include "sparse/policy_options.h"

#include <charconv>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace vidax::sparse {

PolicyOptions::PolicyOptions(std::string policy, std::string_view options, std::string flag)
    : policy_(std::move(policy)), flag_(std::move(flag)) {
  size_t pos = 0;
  while (pos < options.size()) {
    size_t end = options.find(',', pos);
    if (end == std::string_view::npos) end = options.size();
    const std::string_view item = options.substr(pos, end - pos);
    const size_t eq = item.find('=');
    if (item.empty() || eq == std::string_view::npos || eq == 0 || eq + 1 == item.size())
      throw_input_error(flag_, " ", policy_, ": option '", item,
                        "' must be key=value (options are separated by commas)");
    std::string key(item.substr(0, eq));
    if (values_.count(key))
      throw_input_error(flag_, " ", policy_, ": option '", key, "' given twice");
    values_.emplace(std::move(key), std::string(item.substr(eq + 1)));
    pos = end + 1;
    if (end + 1 == options.size())
      throw_input_error(flag_, " ", policy_, ": trailing comma in '", options, "'");
  }
}

double PolicyOptions::number(const std::string& key, double def, double lo, double hi) {
  used_.insert(key);
  const auto it = values_.find(key);
  if (it == values_.end()) return def;
  const std::string& s = it->second;
  double v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || !std::isfinite(v))
    throw_input_error(flag_, " ", policy_, ": ", key, "='", s, "' is not a number");
  if (v < lo || v > hi)
    throw_input_error(flag_, " ", policy_, ": ", key, "=", s, " must be in [", lo, ", ", hi, "]");
  return v;
}

int64_t PolicyOptions::integer(const std::string& key, int64_t def, int64_t lo, int64_t hi) {
  used_.insert(key);
  const auto it = values_.find(key);
  if (it == values_.end()) return def;
  const std::string& s = it->second;
  int64_t v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size())
    throw_input_error(flag_, " ", policy_, ": ", key, "='", s, "' is not an integer");
  if (v < lo || v > hi)
    throw_input_error(flag_, " ", policy_, ": ", key, "=", s, " must be in [", lo, ", ", hi, "]");
  return v;
}

std::string PolicyOptions::text(const std::string& key, const std::string& def) {
  used_.insert(key);
  const auto it = values_.find(key);
  return it == values_.end() ? def : it->second;
}

void PolicyOptions::finish() const {
  for (const auto& [key, value] : values_)
    if (!used_.count(key)) {
      std::string known;
      for (const auto& k : used_) known += (known.empty() ? "" : ", ") + k;
      throw_input_error(flag_, " ", policy_, ": unknown option '", key, "' (known: ", known, ")");
    }
}

void validate_call(const AttentionCall& call, const char* policy) {
  validate_grid(call.grid, policy);
  if (call.heads <= 0 || call.head_dim <= 0)
    throw_input_error(policy, ": attention call needs heads and head_dim > 0, got ", call.heads,
                      " x ", call.head_dim);
  if (call.q == nullptr || call.k == nullptr)
    throw_input_error(policy, ": attention call carries no queries/keys");
  if (call.stride < call.heads * call.head_dim)
    throw_input_error(policy, ": q/k row stride ", call.stride,
                      " is below heads * head_dim = ", call.heads * call.head_dim);
}

void dense_attention_row(const AttentionCall& call, int64_t head, int64_t query, float* probs) {
  const int64_t n = call.grid.tokens(), d = call.head_dim;
  const float* q = call.q + query * call.stride + head * d;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n; ++j) {
    const float* k = call.k + j * call.stride + head * d;
    float s = 0;
    for (int64_t c = 0; c < d; ++c) s += q[c] * k[c];
    probs[j] = s * scale;
    mx = std::max(mx, probs[j]);
  }
  double sum = 0;
  for (int64_t j = 0; j < n; ++j) {
    probs[j] = std::exp(probs[j] - mx);
    sum += probs[j];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t j = 0; j < n; ++j) probs[j] *= inv;
}

BlockMask replicate_mask(const BlockMask& one, int64_t heads) {
  BlockMask m(heads, one.q_blocks(), one.k_blocks());
  for (int64_t qb = 0; qb < one.q_blocks(); ++qb)
    for (int64_t kb = 0; kb < one.k_blocks(); ++kb) {
      const TileClass c = one.get(0, qb, kb);
      if (c == TileClass::kSkip) continue;
      for (int64_t h = 0; h < heads; ++h) m.set(h, qb, kb, c);
    }
  m.build_rows();
  return m;
}

uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace vidax::sparse
