// ComfyUI's "scaled fp8" checkpoints (e.g. `*_fp8_e4m3fn_scaled.safetensors`): a weight stored as
// F8_E4M3 (or E5M2) is paired with a one-element `<name minus .weight>.scale_weight`; the real
// weight is fp8 value x scale. A zero-length `scaled_fp8` tensor marks such files, and some also
// carry `.scale_input` tensors, which only ComfyUI's fp8 matmul path uses (it quantizes the
// activations with them and scales back, so dropping them leaves the product unchanged).
// Used by the generic Checkpoint for every model. Pure functions; thread-safe.
#pragma once

#include <optional>
#include <string>

#include "core/tensor.h"
#include "io/safetensors.h"

namespace vidax {

// "x.weight" -> "x.scale_weight"; nullopt for names not ending in ".weight".
std::optional<std::string> scale_weight_name(const std::string& weight_name);

// Names that belong to the scaled-fp8 machinery rather than to the model: the `scaled_fp8` marker
// (optionally under a prefix) and `*.scale_input`. Loaders neither report nor use them.
bool is_scaled_fp8_bookkeeping(const std::string& file_name);

// The tensor `file_name` of `source` as stored (zero-copy), except an fp8 tensor with a
// scale_weight, which is dequantized here to an owned F32 tensor. Throws InputError naming
// `path` when the scale does not hold exactly one value.
Tensor read_scaled_weight(const TensorSource& source, const std::string& file_name,
                          const std::string& path);

// The tensor `file_name` as stored when it is fp8 (zero-copy, F8_E4M3 or F8_E5M2) and its scale
// (its scale_weight, or 1 in an unscaled fp8 file); nullopt for any other dtype. The same errors
// as read_scaled_weight.
struct Fp8Tensor {
  Tensor codes;
  float scale = 1.0f;
};
std::optional<Fp8Tensor> read_fp8_weight(const TensorSource& source, const std::string& file_name,
                                         const std::string& path);

}  // namespace vidax
