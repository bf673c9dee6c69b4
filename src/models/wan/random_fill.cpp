#include "models/wan/random_fill.h"

#include <algorithm>
#include <vector>

#include "core/convert.h"

namespace vidax::wan {
namespace {

inline uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

inline float uniform_pm1(uint64_t key) {  // uniform in [-1, 1)
  return static_cast<float>(static_cast<double>(splitmix(key) >> 40) * (2.0 / 16777216.0) - 1.0);
}

}  // namespace

uint64_t random_tensor_key(uint64_t seed, const std::string& name) {
  // FNV-1a rather than std::hash, whose value differs between standard libraries: the same seed
  // must give the same random model everywhere.
  uint64_t h = 0xcbf29ce484222325ull;
  for (const char c : name) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
  return splitmix(seed ^ h);
}

Tensor random_uniform_tensor(const Shape& shape, DType dtype, uint64_t key, float offset,
                             float amplitude) {
  Tensor out = Tensor::zeros(shape, dtype);
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
            offset + amplitude * uniform_pm1(key + static_cast<uint64_t>(begin + i));
      convert_floats(tmp.data(), DType::kF32,
                     static_cast<std::byte*>(out.raw_mutable_data()) +
                         begin * static_cast<int64_t>(dtype_size(dtype)),
                     dtype, static_cast<size_t>(len));
    }
  }
  return out;
}

}  // namespace vidax::wan
