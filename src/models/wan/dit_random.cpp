#include "models/wan/dit_random.h"

#include <cmath>
#include <functional>
#include <map>
#include <memory>

#include "core/convert.h"
#include "models/wan/dit_tensors.h"

namespace vidax::wan {
namespace {

// SplitMix64: a counter-based generator, so every element is independent of thread order.
inline uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

inline float uniform_pm1(uint64_t key) {  // uniform in [-1, 1)
  return static_cast<float>(static_cast<double>(splitmix(key) >> 40) * (2.0 / 16777216.0) - 1.0);
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

WeightFn random_dit_weights(const DitConfig& config, DType dtype, uint64_t seed) {
  auto decls = std::make_shared<std::map<std::string, TensorDecl>>();
  for (auto& d : dit_tensor_decls(config)) decls->emplace(d.name, d);
  return [decls, dtype, seed](const std::string& name) -> Tensor {
    auto it = decls->find(name);
    VIDAX_CHECK(it != decls->end(), "no tensor ", name, " in the Wan DiT declaration");
    const TensorDecl& d = it->second;
    const uint64_t base = splitmix(seed ^ std::hash<std::string>{}(name));
    float amplitude = 0.05f * std::sqrt(3.0f);  // biases: std 0.05
    float offset = 0.0f;
    if (d.role != TensorRole::kVector) {
      const double fan_in = static_cast<double>(d.shape.numel() / d.shape[0]);
      amplitude = static_cast<float>(std::sqrt(3.0 / fan_in));  // uniform with var 1/fan_in
    } else if (ends_with(name, "modulation")) {
      amplitude = 0.1f * std::sqrt(3.0f);
    } else if (name.find("norm") != std::string::npos && ends_with(name, ".weight")) {
      offset = 1.0f;
      amplitude = 0.1f * std::sqrt(3.0f);
    }
    Tensor out = Tensor::zeros(d.shape, dtype);
    const int64_t n = out.numel();
    constexpr int64_t kChunk = 1 << 16;
#pragma omp parallel
    {
      std::vector<float> tmp(kChunk);
#pragma omp for schedule(static)
      for (int64_t begin = 0; begin < n; begin += kChunk) {
        const int64_t len = std::min(kChunk, n - begin);
        for (int64_t i = 0; i < len; ++i)
          tmp[static_cast<size_t>(i)] =
              offset + amplitude * uniform_pm1(base + static_cast<uint64_t>(begin + i));
        convert_floats(tmp.data(), DType::kF32,
                       static_cast<std::byte*>(out.raw_mutable_data()) +
                           begin * static_cast<int64_t>(dtype_size(dtype)),
                       dtype, static_cast<size_t>(len));
      }
    }
    return out;
  };
}

}  // namespace vidax::wan
