#include "io/comfy_fp8.h"

#include <string_view>
#include <vector>

namespace vidax {
namespace {

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::optional<std::string> scale_weight_name(const std::string& weight_name) {
  constexpr std::string_view kSuffix = ".weight";
  if (weight_name.size() <= kSuffix.size() || !ends_with(weight_name, kSuffix)) return std::nullopt;
  return weight_name.substr(0, weight_name.size() - kSuffix.size()) + ".scale_weight";
}

bool is_scaled_fp8_bookkeeping(const std::string& file_name) {
  return file_name == "scaled_fp8" || ends_with(file_name, ".scaled_fp8") ||
         ends_with(file_name, ".scale_input");
}

std::optional<Fp8Tensor> read_fp8_weight(const TensorSource& source, const std::string& file_name,
                                         const std::string& path) {
  Tensor t = source.tensor(file_name);
  if (t.dtype() != DType::kF8E4M3 && t.dtype() != DType::kF8E5M2) return std::nullopt;
  const auto scale_name = scale_weight_name(file_name);
  if (!scale_name || !source.contains(*scale_name)) {
    // An unscaled fp8 file (values as stored) is fine; a scaled one missing a scale is not:
    // its values would be off by the missing factor.
    if (scale_name)
      for (const std::string& n : source.names())
        if (n == "scaled_fp8" || ends_with(n, ".scaled_fp8"))
          throw_input_error(path, ": '", file_name, "' is fp8 in a scaled-fp8 file (it has '", n,
                            "') but its scale '", *scale_name, "' is missing");
    return Fp8Tensor{t, 1.0f};
  }
  const Tensor scale_tensor = source.tensor(*scale_name);
  if (!is_float(scale_tensor.dtype()))
    throw_input_error(path, ": '", *scale_name, "' has dtype ",
                      std::string(dtype_name(scale_tensor.dtype())),
                      ", expected a float scale (F32, BF16 or F16)");
  const std::vector<float> scale = scale_tensor.to_float_vector();
  if (scale.size() != 1)
    throw_input_error(path, ": '", *scale_name, "' must hold one value, has ", scale.size());
  return Fp8Tensor{t, scale[0]};
}

Tensor read_scaled_weight(const TensorSource& source, const std::string& file_name,
                          const std::string& path) {
  const std::optional<Fp8Tensor> fp8 = read_fp8_weight(source, file_name, path);
  if (!fp8) return source.tensor(file_name);
  if (fp8->scale == 1.0f && !source.contains(scale_weight_name(file_name).value_or("")))
    return fp8->codes;  // unscaled: converted by whoever reads it, as stored
  Tensor f = fp8->codes.to(DType::kF32);
  float* p = f.mutable_data<float>();
  const int64_t n = f.numel();
  const float scale = fp8->scale;
#pragma omp parallel for schedule(static) if (n > (int64_t{1} << 20))
  for (int64_t i = 0; i < n; ++i) p[i] *= scale;
  return f;
}

}  // namespace vidax
