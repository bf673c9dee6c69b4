#include "models/clip/clip_random.h"

#include <cmath>
#include <map>
#include <memory>

#include "core/error.h"
#include "models/clip/clip_tensors.h"
#include "models/wan/random_fill.h"

namespace vidax::clip {

wan::WeightFn random_clip_weights(const ClipVisionConfig& config, DType dtype, uint64_t seed) {
  auto decls = std::make_shared<std::map<std::string, TensorDecl>>();
  for (auto& d : clip_vision_tensor_decls(config, QkvStorage::kFused)) decls->emplace(d.name, d);
  const auto dim = static_cast<double>(config.dim);
  return [decls, dtype, seed, dim](const std::string& name) -> Tensor {
    const auto it = decls->find(name);
    VIDAX_CHECK(it != decls->end(), "no tensor ", name, " in the CLIP vision declaration");
    const TensorDecl& d = it->second;
    const double sqrt3 = std::sqrt(3.0);  // uniform [-a, a] has std a / sqrt(3)
    double offset = 0, amplitude = 0;
    const bool norm = name.find("norm") != std::string::npos;
    if (name == "visual.cls_embedding" || name == "visual.pos_embedding") {
      amplitude = sqrt3 / std::sqrt(dim);
    } else if (norm && name.ends_with(".weight")) {
      offset = 1.0;
      amplitude = 0.1 * sqrt3;
    } else if (name.ends_with(".bias")) {
      amplitude = 0.05 * sqrt3;
    } else {  // [out, in] or the patch convolution [dim, 3, p, p]
      const double fan_in = static_cast<double>(d.shape.numel() / d.shape[0]);
      amplitude = sqrt3 / std::sqrt(fan_in);
    }
    return wan::random_uniform_tensor(d.shape, dtype, wan::random_tensor_key(seed, name),
                                      static_cast<float>(offset), static_cast<float>(amplitude));
  };
}

wan::WeightFn split_qkv_weights(const ClipVisionConfig& config, const wan::WeightFn& fused) {
  const int64_t dim = config.dim;
  return [fused, dim](const std::string& name) -> Tensor {
    for (const auto& [part, index] :
         {std::pair{"attn.to_q.", 0}, std::pair{"attn.to_k.", 1}, std::pair{"attn.to_v.", 2}}) {
      const size_t at = name.find(part);
      if (at == std::string::npos) continue;
      const std::string fused_name =
          name.substr(0, at) + "attn.to_qkv." + name.substr(at + std::string(part).size());
      const Tensor all = fused(fused_name);  // [3 dim, dim] or [3 dim]
      return all.slice(0, index * dim, (index + 1) * dim).contiguous();
    }
    return fused(name);
  };
}

}  // namespace vidax::clip
