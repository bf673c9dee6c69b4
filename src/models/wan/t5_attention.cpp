#include "models/wan/t5_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/buffer.h"
#include "core/error.h"
#include "kernels/cpu/elementwise.h"

namespace vidax::wan {
namespace {

void validate(const T5AttentionDims& d) {
  if (d.tokens <= 0 || d.heads <= 0 || d.head_dim <= 0)
    throw_input_error("t5_attention: tokens, heads and head_dim must be positive, got ", d.tokens,
                      ", ", d.heads, ", ", d.head_dim);
  const int64_t row = d.heads * d.head_dim;
  if (d.q_stride < row || d.k_stride < row || d.v_stride < row || d.out_stride < row)
    throw_input_error("t5_attention: row strides must be >= heads * head_dim = ", row);
}

std::vector<int64_t> valid_keys(const uint8_t* key_valid, int64_t tokens) {
  std::vector<int64_t> keys;
  keys.reserve(static_cast<size_t>(tokens));
  for (int64_t j = 0; j < tokens; ++j)
    if (key_valid == nullptr || key_valid[j] != 0) keys.push_back(j);
  if (keys.empty())
    throw_input_error("t5_attention: every key is masked (the attention mask has no 1)");
  return keys;
}

}  // namespace

int64_t t5_relative_bucket(int64_t rel, int64_t num_buckets, int64_t max_distance) {
  const int64_t half = num_buckets / 2;  // per direction
  int64_t bucket = rel > 0 ? half : 0;
  const int64_t distance = rel < 0 ? -rel : rel;
  const int64_t max_exact = half / 2;
  if (distance < max_exact) return bucket + distance;
  // float32 throughout, as torch evaluates log(tensor.float() / int) / python_float * int.
  const float scaled = std::log(static_cast<float>(distance) / static_cast<float>(max_exact)) /
                       static_cast<float>(std::log(static_cast<double>(max_distance) /
                                                   static_cast<double>(max_exact))) *
                       static_cast<float>(half - max_exact);
  const int64_t large = max_exact + static_cast<int64_t>(scaled);  // scaled >= 0: truncation
  return bucket + std::min(large, half - 1);
}

void t5_attention(const float* q, const float* k, const float* v, float* out, const float* bias,
                  const uint8_t* key_valid, const T5AttentionDims& d) {
  validate(d);
  const std::vector<int64_t> keys = valid_keys(key_valid, d.tokens);
  const int64_t nk = static_cast<int64_t>(keys.size());
  const int64_t hd = d.head_dim, L = d.tokens;
#pragma omp parallel
  {
    // Per head: K transposed to [head_dim, nk] so the score loop runs over keys (independent
    // lanes, vectorizable without reassociating sums); V gathered to [nk, head_dim].
    Buffer<float> kt(static_cast<size_t>(hd * nk)), vh(static_cast<size_t>(nk * hd));
    Buffer<float> s(static_cast<size_t>(nk)), acc(static_cast<size_t>(hd));
#pragma omp for schedule(dynamic, 1)
    for (int64_t h = 0; h < d.heads; ++h) {
      for (int64_t jj = 0; jj < nk; ++jj) {
        const float* kr = k + keys[static_cast<size_t>(jj)] * d.k_stride + h * hd;
        const float* vr = v + keys[static_cast<size_t>(jj)] * d.v_stride + h * hd;
        for (int64_t c = 0; c < hd; ++c) kt.data()[c * nk + jj] = kr[c];
        std::copy(vr, vr + hd, vh.data() + jj * hd);
      }
      const float* bh = bias + h * (2 * L - 1);
      for (int64_t i = 0; i < L; ++i) {
        const float* qi = q + i * d.q_stride + h * hd;
        float* sc = s.data();
        std::fill(sc, sc + nk, 0.0f);
        for (int64_t c = 0; c < hd; ++c) {
          const float qc = qi[c];
          const float* kc = kt.data() + c * nk;
          for (int64_t jj = 0; jj < nk; ++jj) sc[jj] += qc * kc[jj];
        }
        float mx = -std::numeric_limits<float>::infinity();
        for (int64_t jj = 0; jj < nk; ++jj) {
          sc[jj] += bh[keys[static_cast<size_t>(jj)] - i + L - 1];
          mx = std::max(mx, sc[jj]);
        }
        for (int64_t jj = 0; jj < nk; ++jj) sc[jj] -= mx;
        exp_f32(sc, sc, nk);
        float sum = 0.0f;
        for (int64_t jj = 0; jj < nk; ++jj) sum += sc[jj];
        float* a = acc.data();
        std::fill(a, a + hd, 0.0f);
        for (int64_t jj = 0; jj < nk; ++jj) {
          const float p = sc[jj];
          const float* vr = vh.data() + jj * hd;
          for (int64_t c = 0; c < hd; ++c) a[c] += p * vr[c];
        }
        const float inv = 1.0f / sum;
        float* o = out + i * d.out_stride + h * hd;
        for (int64_t c = 0; c < hd; ++c) o[c] = a[c] * inv;
      }
    }
  }
}

void t5_attention_reference(const float* q, const float* k, const float* v, float* out,
                            const float* bias, const uint8_t* key_valid, const T5AttentionDims& d) {
  validate(d);
  const std::vector<int64_t> keys = valid_keys(key_valid, d.tokens);
  const int64_t hd = d.head_dim, L = d.tokens;
  std::vector<double> s(keys.size());
  for (int64_t h = 0; h < d.heads; ++h) {
    for (int64_t i = 0; i < L; ++i) {
      double mx = -std::numeric_limits<double>::infinity();
      for (size_t jj = 0; jj < keys.size(); ++jj) {
        const int64_t j = keys[jj];
        double dot = 0;
        for (int64_t c = 0; c < hd; ++c)
          dot += static_cast<double>(q[i * d.q_stride + h * hd + c]) *
                 static_cast<double>(k[j * d.k_stride + h * hd + c]);
        s[jj] = dot + static_cast<double>(bias[h * (2 * L - 1) + j - i + L - 1]);
        mx = std::max(mx, s[jj]);
      }
      double sum = 0;
      for (double& x : s) sum += (x = std::exp(x - mx));
      for (int64_t c = 0; c < hd; ++c) {
        double a = 0;
        for (size_t jj = 0; jj < keys.size(); ++jj)
          a += s[jj] * static_cast<double>(v[keys[jj] * d.v_stride + h * hd + c]);
        out[i * d.out_stride + h * hd + c] = static_cast<float>(a / sum);
      }
    }
  }
}

}  // namespace vidax::wan
