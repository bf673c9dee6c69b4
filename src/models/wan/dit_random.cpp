#include "models/wan/dit_random.h"

#include <algorithm>
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
  std::vector<LazyTensor> tensors;
  if (dtype == DType::kF8E4M3) {
    const WeightFn w = random_dit_weights(config, DType::kF32, seed);
    const std::string prefix = "model.diffusion_model.";
    for (const TensorDecl& d : dit_tensor_decls(config)) {
      const bool linear = d.shape.rank() == 2 && ends_with(d.name, ".weight");
      if (!linear) {
        tensors.push_back({prefix + d.name, d.shape, DType::kBF16,
                           [w, name = d.name] { return w(name).to(DType::kBF16); }});
        continue;
      }
      // The scale is computed from the tensor once more when its codes are written.
      auto scale_of = [](const Tensor& t) {
        float m = 0;
        const float* p = t.data<float>();
        for (int64_t i = 0; i < t.numel(); ++i) m = std::max(m, std::fabs(p[i]));
        return m > 0 ? m / 448.0f : 1.0f;
      };
      tensors.push_back({prefix + d.name, d.shape, DType::kF8E4M3, [w, name = d.name, scale_of] {
                           const Tensor f = w(name);
                           const float scale = scale_of(f);
                           Tensor q = Tensor::zeros(f.shape(), DType::kF8E4M3);
                           auto* dst = static_cast<uint8_t*>(q.raw_mutable_data());
                           const float* src = f.data<float>();
#pragma omp parallel for schedule(static)
                           for (int64_t i = 0; i < f.numel(); ++i)
                             dst[i] = f32_to_f8e4m3(src[i] / scale);
                           return q;
                         }});
      const std::string base = d.name.substr(0, d.name.size() - 7);  // minus ".weight"
      tensors.push_back(
          {prefix + base + ".scale_weight", Shape{1}, DType::kF32, [w, name = d.name, scale_of] {
             return Tensor::from_floats(std::vector<float>{scale_of(w(name))}, Shape{1});
           }});
    }
    tensors.push_back({"scaled_fp8", Shape{0}, DType::kF8E4M3,
                       [] { return Tensor::zeros(Shape{0}, DType::kF8E4M3); }});
    write_safetensors_lazy(
        path, tensors,
        {{"config", config.to_json()}, {"producer", "vidax random DiT weights, scaled fp8"}});
    return;
  }
  const WeightFn w = random_dit_weights(config, dtype, seed);
  for (const TensorDecl& d : dit_tensor_decls(config))
    tensors.push_back({d.name, d.shape, dtype, [w, name = d.name] { return w(name); }});
  write_safetensors_lazy(path, tensors,
                         {{"config", config.to_json()}, {"producer", "vidax random DiT weights"}});
}

}  // namespace vidax::wan
