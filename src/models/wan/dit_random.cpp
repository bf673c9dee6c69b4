#include "models/wan/dit_random.h"

#include <cmath>
#include <functional>
#include <map>
#include <memory>

#include "io/safetensors.h"
#include "models/wan/dit_tensors.h"
#include "models/wan/random_fill.h"

namespace vidax::wan {
namespace {

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
    const uint64_t base = random_tensor_key(seed, name);
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
    return random_uniform_tensor(d.shape, dtype, base, offset, amplitude);
  };
}

void write_random_dit_checkpoint(const std::string& path, const DitConfig& config, DType dtype,
                                 uint64_t seed) {
  const WeightFn w = random_dit_weights(config, dtype, seed);
  std::vector<LazyTensor> tensors;
  for (const TensorDecl& d : dit_tensor_decls(config))
    tensors.push_back({d.name, d.shape, dtype, [w, name = d.name] { return w(name); }});
  write_safetensors_lazy(path, tensors,
                         {{"config", config.to_json()}, {"producer", "vidax random DiT weights"}});
}

}  // namespace vidax::wan
