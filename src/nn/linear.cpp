#include "nn/linear.h"

#include <cstring>

#include "core/convert.h"
#include "core/error.h"

namespace vidax {
namespace {

// [begin, end) of rank `shard.rank` over n features; n must divide by the tp degree.
std::pair<int64_t, int64_t> shard_range(const std::string& what, int64_t n, TpShard shard) {
  if (n % shard.size != 0)
    throw_input_error(what, ": ", n, " features do not divide into tp=", shard.size, " shards");
  const int64_t per = n / shard.size;
  return {per * shard.rank, per * (shard.rank + 1)};
}

// Stacks [N_i, K] weights (any float dtype, views allowed) into one [sum N_i, K] in `dtype`.
Tensor stack_rows(const std::string& name, const std::vector<Tensor>& parts, DType dtype) {
  if (parts.size() == 1) return parts.front();
  int64_t rows = 0;
  const int64_t k = parts.front().dim(1);
  for (const auto& p : parts) {
    if (p.rank() != 2 || p.dim(1) != k)
      throw_input_error(name, ": fused parts must be [N, ", k, "], got ", p.describe());
    rows += p.dim(0);
  }
  Tensor out = Tensor::zeros(Shape{rows, k}, dtype);
  auto* dst = static_cast<std::byte*>(out.raw_mutable_data());
  for (const auto& p : parts) {
    const Tensor c = p.contiguous();
    convert_floats(c.raw_data(), c.dtype(), dst, dtype, static_cast<size_t>(c.numel()));
    dst += static_cast<size_t>(c.numel()) * dtype_size(dtype);
  }
  return out;
}

Tensor stack_vectors(const std::vector<Tensor>& parts) {
  if (parts.empty()) return {};
  std::vector<float> all;
  for (const auto& p : parts) {
    auto v = p.to_float_vector();
    all.insert(all.end(), v.begin(), v.end());
  }
  return Tensor::from_floats(all, Shape{static_cast<int64_t>(all.size())});
}

}  // namespace

namespace {

// Stacks kept code parts [N_i, K] (fp8 or fp16; views allowed) into one [sum N_i, K] and the
// per-row scales.
Tensor stack_codes(const std::string& name, const std::vector<Tensor>& parts,
                   const std::vector<float>& scales, std::vector<float>& row_scale) {
  int64_t rows = 0;
  const int64_t k = parts.front().dim(1);
  for (const auto& p : parts) {
    if (p.rank() != 2 || p.dim(1) != k || p.dtype() != parts.front().dtype())
      throw_input_error(name, ": fused kept parts must be [N, ", k, "] of one dtype, got ",
                        p.describe());
    rows += p.dim(0);
  }
  Tensor out = Tensor::zeros(Shape{rows, k}, parts.front().dtype());
  auto* dst = static_cast<std::byte*>(out.raw_mutable_data());
  row_scale.clear();
  for (size_t i = 0; i < parts.size(); ++i) {
    const Tensor c = parts[i].contiguous();
    std::memcpy(dst, c.raw_data(), c.nbytes());
    dst += c.nbytes();
    row_scale.insert(row_scale.end(), static_cast<size_t>(c.dim(0)), scales[i]);
  }
  return out;
}

}  // namespace

Linear Linear::build(const std::string& name, const std::vector<Tensor>& weights,
                     const std::vector<Tensor>& biases, DType compute, GemmEpilogue epilogue,
                     LinearSplit split, TpShard shard, const std::vector<float>& fp8_scales,
                     bool presliced) {
  VIDAX_CHECK(!weights.empty() && (biases.empty() || biases.size() == weights.size()), name, ": ",
              weights.size(), " weights, ", biases.size(), " biases");
  VIDAX_CHECK(shard.size >= 1 && shard.rank >= 0 && shard.rank < shard.size, name, ": tp rank ",
              shard.rank, " of ", shard.size);
  VIDAX_CHECK(fp8_scales.empty() || fp8_scales.size() == weights.size(), name, ": ",
              fp8_scales.size(), " fp8 scales for ", weights.size(), " parts");
  for (const auto& w : weights)
    if (w.rank() != 2) throw_input_error(name, ": expected a [N, K] weight, got ", w.describe());
  // This rank's slice of every part (views of the source tensors), and of the biases; a row
  // split under tp keeps its bias out of the GEMM, for after the reduction.
  const bool sliced = shard.size > 1 && split != LinearSplit::kReplicated;
  const bool row = sliced && split == LinearSplit::kRow;
  if (row && weights.size() != 1) throw_input_error(name, ": a row-split linear has one weight");
  if (row && epilogue != GemmEpilogue::kNone)
    throw_input_error(name, ": a row-split linear cannot fuse an activation (it acts on the sum)");
  std::vector<Tensor> parts, b_parts;
  for (size_t i = 0; i < weights.size(); ++i) {
    const Tensor& w = weights[i];
    if (!sliced || presliced) {
      parts.push_back(w);
      if (!biases.empty()) b_parts.push_back(biases[i]);
    } else if (!row) {
      const auto [b, e] = shard_range(name, w.dim(0), shard);
      parts.push_back(w.slice(0, b, e));
      if (!biases.empty()) b_parts.push_back(biases[i].contiguous().slice(0, b, e));
    } else {
      const auto [b, e] = shard_range(name, w.dim(1), shard);
      parts.push_back(w.slice(1, b, e).contiguous());
    }
  }
  const Tensor gemm_bias = row ? Tensor() : stack_vectors(b_parts);
  Linear out;
  if (fp8_scales.empty()) {
    out =
        Linear(PackedLinear(stack_rows(name, parts, compute), gemm_bias, compute, epilogue), split);
  } else {  // the codes stay as stored (fp8, or fp16), each part with its own scale
    std::vector<float> row_scale;
    const Tensor codes = stack_codes(name, parts, fp8_scales, row_scale);
    out = Linear(PackedLinear::kept(codes, std::move(row_scale), gemm_bias, compute, epilogue),
                 split);
  }
  if (row && !biases.empty()) out.bias_after_reduce_ = biases.front().to_float_vector();
  return out;
}

std::vector<float> shard_vector(const std::vector<float>& v, TpShard shard) {
  if (shard.size == 1 || v.empty()) return v;
  const auto [b, e] = shard_range("norm weight", static_cast<int64_t>(v.size()), shard);
  return {v.begin() + b, v.begin() + e};
}

}  // namespace vidax
