// Writes a small seed corpus for safetensors_fuzz with the real writer: every dtype, scalars,
// empty tensors, metadata, several tensors per file. Usage: safetensors_fuzz_seeds <folder>.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "io/safetensors.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <output folder>\n", argv[0]);
    return 2;
  }
  using vidax::DType;
  using vidax::Tensor;
  const std::string dir = argv[1];
  try {
    int n = 0;
    auto out = [&](const std::vector<std::pair<std::string, Tensor>>& tensors,
                   const std::map<std::string, std::string>& metadata = {}) {
      vidax::write_safetensors(dir + "/generated_" + std::to_string(n++) + ".safetensors", tensors,
                               metadata);
    };
    for (DType d : {DType::kF32, DType::kBF16, DType::kF16, DType::kF8E4M3, DType::kF8E5M2,
                    DType::kI64, DType::kI32}) {
      Tensor t = Tensor::zeros({2, 3}, d);
      std::memset(t.raw_mutable_data(), 0x3c, t.nbytes());
      out({{std::string(vidax::dtype_name(d)), t}});
    }
    out({{"scalar", Tensor::zeros(vidax::Shape{}, DType::kI64)},
         {"empty", Tensor::zeros({0, 4}, DType::kBF16)},
         {"vector", Tensor::zeros({5}, DType::kF16)}});
    out({{"blocks.0.self_attn.q.weight", Tensor::zeros({4, 4})},
         {"blocks.0.self_attn.q.bias", Tensor::zeros({4})},
         {"patch_embedding.weight", Tensor::zeros({2, 1, 1, 2, 2}, DType::kBF16)}},
        {{"format", "pt"}, {"config", "{\"dim\": 4, \"num_heads\": 2}"}});
    out({}, {{"only", "metadata"}});
    std::printf("wrote %d seeds to %s\n", n, dir.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
