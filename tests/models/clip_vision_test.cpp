// The CLIP image encoder against the official wan/modules/clip.py on random weights
// (tests/data/wan_i2v/clip_tiny.*): preprocessing, embeddings, every used block, the
// penultimate-layer features, a batch of two images of different sizes; the transformers layout
// (separate q/k/v) gives the same features; bf16 stays close.
#include <map>

#include "io/safetensors.h"
#include "models/clip/clip_checkpoint.h"
#include "models/clip/clip_vision.h"
#include "support/test_support.h"

namespace vidax::clip {
namespace {

using vidax::testing::all_close;

std::string data(const std::string& name) {
  return std::string(VIDAX_SOURCE_DIR) + "/tests/data/wan_i2v/" + name;
}

TEST(ClipVision, MatchesTheOfficialEncoderOnEveryIntermediate) {
  const auto ck = ClipCheckpoint::open(data("clip_tiny.weights.safetensors"));
  ck.require_loadable();
  EXPECT_EQ(ck.config_source(), "file metadata");
  EXPECT_EQ(ck.config().num_layers, 3);
  EXPECT_EQ(ck.config().tokens(), 17);
  ClipVisionEncoder enc(ck.config(), ck.loader(), ck.qkv(), wan::Precision::kFP32);
  const auto io = SafetensorsFile::open(data("clip_tiny.io.safetensors"));
  std::map<std::string, Tensor> got;
  const Tensor out = enc.encode({io.tensor("single.image")},
                                [&](const std::string& n, const Tensor& t) { got[n] = t.clone(); });
  EXPECT_TRUE(all_close(got.at("pixels"), io.tensor("single.pixels"), 1e-5, 1e-5, "pixels"));
  EXPECT_TRUE(all_close(got.at("embed"), io.tensor("single.embed"), 1e-5, 1e-5, "embed"));
  EXPECT_TRUE(all_close(got.at("block0"), io.tensor("single.block0"), 1e-5, 1e-5, "block0"));
  EXPECT_TRUE(all_close(got.at("block1"), io.tensor("single.block1"), 1e-5, 1e-5, "block1"));
  EXPECT_EQ(got.count("block2"), 0u);  // the last block is never run
  EXPECT_TRUE(all_close(out, io.tensor("single.out"), 1e-5, 1e-5, "out"));

  const Tensor pair = enc.encode({io.tensor("pair.image0"), io.tensor("pair.image1")});
  EXPECT_TRUE(all_close(pair, io.tensor("pair.out"), 1e-5, 1e-5, "pair"));

  ClipVisionEncoder bf16(ck.config(), ck.loader(), ck.qkv(), wan::Precision::kBF16);
  EXPECT_LT(vidax::testing::max_rel_diff(bf16.encode({io.tensor("single.image")}),
                                         io.tensor("single.out")),
            2e-2);
}

TEST(ClipVision, TransformersLayoutGivesTheSameFeatures) {
  // Rewrite the official file under transformers names (q/k/v split, position table [N, dim]).
  const auto src = SafetensorsFile::open(data("clip_tiny.weights.safetensors"));
  testing::TempDir dir;
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& entry : src.entries()) {
    const std::string& name = entry.name;
    if (!name.starts_with("visual.")) continue;
    const Tensor t = src.tensor(name);
    if (name.find("to_qkv") != std::string::npos) {
      const int64_t d = t.dim(0) / 3;
      const std::string base = name.substr(0, name.find("to_qkv"));
      const std::string suffix = name.substr(name.find("to_qkv") + 6);
      const char* parts[3] = {"to_q", "to_k", "to_v"};
      for (int p = 0; p < 3; ++p)
        tensors.emplace_back(
            "vision_model.x." + clip_official_to_transformers(base + parts[p] + suffix),
            t.slice(0, p * d, (p + 1) * d).contiguous());
    } else if (name == "visual.post_norm.weight" || name == "visual.post_norm.bias" ||
               name == "visual.head") {
      continue;
    } else {
      tensors.emplace_back(
          "vision_model.x." + clip_official_to_transformers(name),
          name == "visual.pos_embedding" ? t.reshape(Shape{t.dim(1), t.dim(2)}) : t);
    }
  }
  // The prefix "vision_model.x." stands for a checkpoint saved under a parent module.
  for (auto& [n, t] : tensors) n = n.substr(std::string("vision_model.x.").size());
  write_safetensors(dir.file("clip.safetensors"), tensors,
                    {{"config", src.metadata().at("config")}});
  const auto ck = ClipCheckpoint::open(dir.file("clip.safetensors"));
  ck.require_loadable();
  EXPECT_EQ(ck.layout(), ClipLayout::kTransformers);
  ClipVisionEncoder enc(ck.config(), ck.loader(), ck.qkv(), wan::Precision::kFP32);
  const auto io = SafetensorsFile::open(data("clip_tiny.io.safetensors"));
  EXPECT_TRUE(all_close(enc.encode({io.tensor("single.image")}), io.tensor("single.out"), 1e-5,
                        1e-5, "transformers layout"));
}

TEST(ClipVision, RefusesWhatItCannotRun) {
  EXPECT_THROW(
      ClipCheckpoint::open(std::string(VIDAX_FIXTURES_DIR) + "/wan/t5_tiny.weights.safetensors"),
      InputError);
  const auto ck = ClipCheckpoint::open(data("clip_tiny.weights.safetensors"));
  ClipVisionEncoder enc(ck.config(), ck.loader(), ck.qkv(), wan::Precision::kFP32);
  EXPECT_THROW(enc.forward(Tensor::zeros(Shape{1, 3, 55, 56})), InputError);
  EXPECT_THROW(enc.encode({}), InputError);
  EXPECT_THROW(
      clip_vision_config_from_json(R"({"hidden_size": 64, "num_attention_heads": 5})", "cfg"),
      InputError);
}

}  // namespace
}  // namespace vidax::clip
