#include "models/wan/t5_random.h"

#include <cmath>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "io/safetensors.h"
#include "models/wan/random_fill.h"
#include "models/wan/t5_tensors.h"

namespace vidax::wan {

WeightFn random_t5_weights(const T5Config& config, DType dtype, uint64_t seed) {
  auto decls = std::make_shared<std::map<std::string, TensorDecl>>();
  for (auto& d : t5_tensor_decls(config)) decls->emplace(d.name, d);
  return [decls, dtype, seed](const std::string& name) -> Tensor {
    auto it = decls->find(name);
    VIDAX_CHECK(it != decls->end(), "no tensor ", name, " in the umT5 declaration");
    const TensorDecl& d = it->second;
    const float sqrt3 = std::sqrt(3.0f);  // uniform [-a, a] has std a / sqrt(3)
    float offset = 0.0f, amplitude = 0.0f;
    if (d.role == TensorRole::kVector) {  // T5LayerNorm weights
      offset = 1.0f;
      amplitude = 0.1f * sqrt3;
    } else if (name == "token_embedding.weight") {
      amplitude = sqrt3;
    } else if (name.find("pos_embedding") != std::string::npos) {
      amplitude = 0.5f * sqrt3;
    } else {
      amplitude = static_cast<float>(std::sqrt(3.0 / static_cast<double>(d.shape[1])));
    }
    return random_uniform_tensor(d.shape, dtype, random_tensor_key(seed, name), offset, amplitude);
  };
}

void write_random_t5_checkpoint(const std::string& path, const T5Config& config, DType dtype,
                                uint64_t seed) {
  const WeightFn w = random_t5_weights(config, dtype, seed);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const TensorDecl& d : t5_tensor_decls(config)) tensors.emplace_back(d.name, w(d.name));
  write_safetensors(path, tensors,
                    {{"config", config.to_json()}, {"producer", "vidax random umT5 weights"}});
}

}  // namespace vidax::wan
