#include "sparse/pbsa.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/dtype.h"
#include "core/error.h"
#include "sparse/policy_options.h"

namespace vidax::sparse {

std::string PbsaOptions::spec() const {
  std::ostringstream s;
  s << "pbsa:window=" << window_frames << ",sink=" << sink_frames << ",persist=" << persist_frames
    << ",density=" << density << ",block=" << block << ",samples=" << samples << ",decay=" << decay;
  return s.str();
}

bool is_pbsa_spec(const std::string& spec) { return spec == "pbsa" || spec.rfind("pbsa:", 0) == 0; }

PbsaOptions parse_pbsa_spec(const std::string& spec) {
  if (!is_pbsa_spec(spec)) throw_input_error("--attention: '", spec, "' is not a pbsa spec");
  PolicyOptions o("pbsa", spec.size() > 5 ? std::string_view(spec).substr(5) : "");
  PbsaOptions p;
  p.window_frames = o.integer("window", p.window_frames, 1, 100000);
  p.sink_frames = o.integer("sink", p.sink_frames, 0, 100000);
  p.persist_frames = o.integer("persist", p.persist_frames, 0, 100000);
  p.density = o.number("density", p.density, 0.0, 1.0);
  p.block = o.integer("block", p.block, 16, 1 << 20);
  p.samples = o.integer("samples", p.samples, 0, 1 << 20);
  p.decay = o.number("decay", p.decay, 0.0, 1.0);
  o.finish();
  return p;
}

namespace {

inline float load(float x) { return x; }
inline float load(BFloat16 x) { return bf16_to_f32(x.bits); }

// q . k over n values in 16 independent lanes (so the compiler vectorises it), then summed.
template <typename K>
float lane_dot(const float* q, const K* k, int64_t n) {
  constexpr int64_t kLanes = 16;
  float acc[kLanes] = {};
  int64_t d = 0;
  for (; d + kLanes <= n; d += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) acc[l] += q[d + l] * load(k[d + l]);
  float sum = 0;
  for (; d < n; ++d) sum += q[d] * load(k[d]);
  for (float a : acc) sum += a;
  return sum;
}

template <typename K>
void key_mass(const float* q, int64_t q_stride, int64_t q_rows, const K* k, int64_t k_stride,
              int64_t keys, int64_t heads, int64_t hd, float scale, int64_t samples, double* mass) {
  const int64_t n = std::min(samples, q_rows);
  std::vector<float> scores(static_cast<size_t>(keys));
  for (int64_t s = 0; s < n; ++s) {
    const int64_t i = (2 * s + 1) * q_rows / (2 * n);  // the middle of each of n stretches
    for (int64_t h = 0; h < heads; ++h) {
      const float* qi = q + i * q_stride + h * hd;
      float top = -INFINITY;
      for (int64_t j = 0; j < keys; ++j) {
        const float dot = lane_dot(qi, k + j * k_stride + h * hd, hd);
        scores[static_cast<size_t>(j)] = dot * scale;
        top = std::max(top, dot * scale);
      }
      double sum = 0;
      for (int64_t j = 0; j < keys; ++j) sum += std::exp(static_cast<double>(scores[j] - top));
      for (int64_t j = 0; j < keys; ++j)
        mass[j] += std::exp(static_cast<double>(scores[static_cast<size_t>(j)] - top)) / sum;
    }
  }
}

}  // namespace

void sampled_key_mass(const float* q, int64_t q_stride, int64_t q_rows, const float* k,
                      int64_t k_stride, int64_t keys, int64_t heads, int64_t head_dim, float scale,
                      int64_t samples, double* mass) {
  key_mass(q, q_stride, q_rows, k, k_stride, keys, heads, head_dim, scale, samples, mass);
}

void sampled_key_mass(const float* q, int64_t q_stride, int64_t q_rows, const BFloat16* k,
                      int64_t k_stride, int64_t keys, int64_t heads, int64_t head_dim, float scale,
                      int64_t samples, double* mass) {
  key_mass(q, q_stride, q_rows, k, k_stride, keys, heads, head_dim, scale, samples, mass);
}

template <typename K>
BlockMask pbsa_mask(const float* q, int64_t q_stride, const BlockPartition& q_blocks, const K* k,
                    int64_t k_stride, const std::vector<PbsaKeyBlock>& keys, int64_t heads,
                    int64_t hd, double density) {
  const int64_t nq = q_blocks.blocks(), nk = static_cast<int64_t>(keys.size());
  BlockMask mask(heads, nq, nk);
  std::vector<int64_t> optional;  // key blocks chosen per query block
  for (int64_t b = 0; b < nk; ++b)
    if (!keys[static_cast<size_t>(b)].always) optional.push_back(b);
  const auto keep =
      static_cast<int64_t>(std::ceil(density * static_cast<double>(optional.size()) - 1e-9));
  // Mean-pooled keys of the optional blocks, [optional][heads][hd].
  std::vector<float> kmean(optional.size() * static_cast<size_t>(heads * hd), 0.0f);
  for (size_t o = 0; o < optional.size(); ++o) {
    const PbsaKeyBlock& kb = keys[static_cast<size_t>(optional[o])];
    float* m = kmean.data() + o * static_cast<size_t>(heads * hd);
    for (int64_t r = kb.begin; r < kb.begin + kb.rows; ++r)
      for (int64_t c = 0; c < heads * hd; ++c) m[c] += load(k[r * k_stride + c]);
    for (int64_t c = 0; c < heads * hd; ++c) m[c] /= static_cast<float>(kb.rows);
  }
  std::vector<float> qmean(static_cast<size_t>(heads * hd));
  std::vector<std::pair<float, int64_t>> ranked(optional.size());
  for (int64_t qb = 0; qb < nq; ++qb) {
    std::fill(qmean.begin(), qmean.end(), 0.0f);
    for (int64_t r = q_blocks.begin(qb); r < q_blocks.begin(qb) + q_blocks.size(qb); ++r)
      for (int64_t c = 0; c < heads * hd; ++c) qmean[static_cast<size_t>(c)] += q[r * q_stride + c];
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t b = 0; b < nk; ++b)
        if (keys[static_cast<size_t>(b)].always) mask.set(h, qb, b, TileClass::kFull);
      for (size_t o = 0; o < optional.size(); ++o) {
        const float* m = kmean.data() + o * static_cast<size_t>(heads * hd) + h * hd;
        const float dot = lane_dot(qmean.data() + h * hd, m, hd);
        ranked[o] = {std::isnan(dot) ? -INFINITY : dot, optional[o]};
      }
      std::partial_sort(ranked.begin(), ranked.begin() + keep, ranked.end(),
                        [](const auto& a, const auto& b) {
                          return a.first != b.first ? a.first > b.first : a.second < b.second;
                        });
      for (int64_t i = 0; i < keep; ++i)
        mask.set(h, qb, ranked[static_cast<size_t>(i)].second, TileClass::kFull);
    }
  }
  mask.build_rows();
  return mask;
}

template BlockMask pbsa_mask<float>(const float*, int64_t, const BlockPartition&, const float*,
                                    int64_t, const std::vector<PbsaKeyBlock>&, int64_t, int64_t,
                                    double);
template BlockMask pbsa_mask<BFloat16>(const float*, int64_t, const BlockPartition&,
                                       const BFloat16*, int64_t, const std::vector<PbsaKeyBlock>&,
                                       int64_t, int64_t, double);

}  // namespace vidax::sparse
