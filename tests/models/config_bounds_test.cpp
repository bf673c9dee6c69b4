// Hostile or malformed configs and shapes end in InputError, never in a division by zero, an
// overflow or an endless allocation (found by review: SIGFPE on zero extents / num_heads 0).
#include <optional>

#include "core/error.h"
#include "io/safetensors.h"
#include "models/wan/dit_checkpoint.h"
#include "models/wan/dit_config.h"
#include "models/wan/t5_checkpoint.h"
#include "models/wan/t5_config.h"
#include "models/wan/t5_tensors.h"
#include "models/wan/vae_config.h"
#include "support/test_support.h"

namespace vidax::wan {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(ConfigBounds, VaeInferenceRejectsZeroExtents) {
  const std::string err = error_of([] {
    infer_vae_config(
        [](const std::string& name) -> std::optional<Shape> {
          if (name == "encoder.conv1.weight") return Shape{0, 3, 3, 3, 3};
          if (name == "conv2.weight") return Shape{16, 16, 1, 1, 1};
          return std::nullopt;
        },
        "zero.safetensors");
  });
  EXPECT_NE(err.find("encoder.conv1.weight"), std::string::npos) << err;
  // A stage narrower than the stem would give dim_mult 0 and divide by it.
  const std::string narrow = error_of([] {
    infer_vae_config(
        [](const std::string& name) -> std::optional<Shape> {
          if (name == "encoder.conv1.weight") return Shape{8, 3, 3, 3, 3};
          if (name == "conv2.weight") return Shape{16, 16, 1, 1, 1};
          if (name == "encoder.downsamples.0.residual.0.gamma") return Shape{8, 1, 1, 1};
          if (name == "encoder.downsamples.0.residual.2.weight" ||
              name == "encoder.downsamples.2.residual.2.weight")
            return Shape{4, 8, 3, 3, 3};
          if (name == "encoder.downsamples.1.resample.1.weight") return Shape{8, 8, 3, 3};
          if (name == "decoder.conv1.weight") return Shape{8, 16, 3, 3, 3};
          return std::nullopt;
        },
        "narrow.safetensors");
  });
  EXPECT_NE(narrow, "");
}

TEST(ConfigBounds, T5JsonRejectsZeroHeadsAndAbsurdSizes) {
  EXPECT_NE(error_of([] {
              t5_config_from_json(R"({"d_model": 64, "num_heads": 0})", "c.json");
            }).find("num_heads"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              t5_config_from_json(R"({"d_model": 64, "num_heads": 4, "d_kv": 4611686018427387904})",
                                  "c.json");
            }).find("d_kv"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              t5_config_from_json(
                  R"({"dim": 64, "dim_attn": 64, "num_heads": 4, "num_layers": 1000000000})",
                  "c.json");
            }),
            "");
}

TEST(ConfigBounds, DitAndVaeJsonRejectAbsurdSizes) {
  EXPECT_NE(error_of([] {
              dit_config_from_json(R"({"dim": 1536, "num_heads": 12, "num_layers": 1000000000})",
                                   "config.json");
            }).find("exceed"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              vae_config_from_json(R"({"dim": 96, "z_dim": 16, "dim_mult": [1, 2, 4, 100000]})",
                                   "vae.json");
            }),
            "");
}

TEST(ConfigBounds, NonFloatFp8ScaleIsAnInputError) {
  // A ComfyUI-style scaled fp8 T5 whose scale_weight is an integer tensor.
  T5Config c;
  c.vocab = 8, c.dim = 8, c.dim_attn = 8, c.dim_ffn = 8, c.num_heads = 2, c.num_layers = 1;
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& d : t5_tensor_decls(c)) {
    const std::string name = t5_official_to_transformers(d.name);
    tensors.emplace_back(name, Tensor::zeros(d.shape, DType::kF8E4M3));
    tensors.emplace_back(name.substr(0, name.size() - 6) + "scale_weight",
                         Tensor::zeros(Shape{1}, DType::kI64));
  }
  testing::TempDir dir;
  write_safetensors(dir.file("t5_fp8.safetensors"), tensors);
  const std::string err = error_of([&] {
    const auto ck = T5Checkpoint::open(dir.file("t5_fp8.safetensors"));
    ck.get("blocks.0.attn.q.weight");
  });
  EXPECT_NE(err.find("scale_weight"), std::string::npos) << err;
}

}  // namespace
}  // namespace vidax::wan
