#include "models/wan/vae_random.h"

#include <cmath>
#include <map>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "models/wan/random_fill.h"
#include "models/wan/vae_tensors.h"

namespace vidax::wan {
namespace {

// SplitMix64: counter-based, so every element is independent of thread order.
inline uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t name_hash(const std::string& s) {  // FNV-1a: stable across standard libraries
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace

WeightFn random_vae_weights(const VaeConfig& config, DType dtype, uint64_t seed) {
  auto decls = std::make_shared<std::map<std::string, TensorDecl>>();
  for (auto& d : vae_tensor_decls(config)) decls->emplace(d.name, d);
  return [decls, dtype, seed](const std::string& name) -> Tensor {
    auto it = decls->find(name);
    VIDAX_CHECK(it != decls->end(), "no tensor ", name, " in the Wan VAE declaration");
    const TensorDecl& d = it->second;
    const uint64_t base = mix(seed ^ name_hash(name));
    float amplitude = 0.05f * std::sqrt(3.0f), offset = 0.0f;  // biases: std 0.05
    if (d.role == TensorRole::kConvWeight) {
      const double fan_in = static_cast<double>(d.shape.numel() / d.shape[0]);
      amplitude = static_cast<float>(std::sqrt(3.0 / fan_in));
    } else if (name.size() > 6 && name.compare(name.size() - 6, 6, ".gamma") == 0) {
      offset = 1.0f;
      amplitude = 0.1f * std::sqrt(3.0f);
    }
    return random_uniform_tensor(d.shape, dtype, base, offset, amplitude);
  };
}

void write_random_vae(const std::string& path, const VaeConfig& config, DType dtype,
                      uint64_t seed) {
  const WeightFn w = random_vae_weights(config, dtype, seed);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& d : vae_tensor_decls(config)) tensors.emplace_back(d.name, w(d.name));
  // Official constructor kwargs (dec_dim marks Wan 2.2), as the fixtures store them.
  nlohmann::json cfg = nlohmann::json::parse(config.to_json());
  cfg.erase("version");
  if (config.version == VaeVersion::kWan21) cfg.erase("dec_dim");
  cfg["attn_scales"] = nlohmann::json::array();
  write_safetensors(path, tensors,
                    {{"config", cfg.dump()},
                     {"producer", "vidax random_vae_weights seed " + std::to_string(seed)}});
}

}  // namespace vidax::wan
