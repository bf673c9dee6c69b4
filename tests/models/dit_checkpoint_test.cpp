// Checkpoint layouts as users download them: ComfyUI prefix, sharded index folders, diffusers
// folders with config.json, fp16 / fp8 weights, and clear errors for broken files.
#include <filesystem>
#include <fstream>
#include <set>

#include "core/convert.h"
#include "io/safetensors.h"
#include "models/wan/dit.h"
#include "models/wan/dit_checkpoint.h"
#include "models/wan/dit_tensors.h"
#include "support/test_support.h"

namespace vidax::wan {
namespace {

using vidax::testing::all_close;
using vidax::testing::TempDir;

using Named = std::vector<std::pair<std::string, Tensor>>;

Named read_all(const std::string& path) {
  auto f = SafetensorsFile::open(path);
  Named out;
  for (const auto& e : f.entries()) out.emplace_back(e.name, f.tensor(e.name));
  return out;
}

Tensor run_call0(const DitCheckpoint& ck, const SafetensorsFile& io) {
  ck.require_loadable();
  WanDit model(
      ck.config(), [&](const std::string& n) { return ck.get(n); }, Precision::kFP32);
  DitSample s;
  s.x = io.tensor("x");
  s.context = io.tensor("context");
  s.t = io.tensor("call0.t");
  return model.forward(s);
}

void write_text(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

class DitCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    weights_ = vidax::testing::wan_fixture("dit_t2v_tiny.weights.safetensors");
    io_path_ = vidax::testing::wan_fixture("dit_t2v_tiny.io.safetensors");
    if (weights_.empty() || io_path_.empty()) GTEST_SKIP() << "t2v fixtures not found";
    config_ = SafetensorsFile::open(weights_).metadata().at("config");
  }
  std::string weights_, io_path_, config_;
};

TEST_F(DitCheckpointTest, ComfyUIPrefixIsDetectedAndMatches) {
  TempDir dir;
  Named prefixed;
  for (auto& [n, t] : read_all(weights_)) prefixed.emplace_back("model.diffusion_model." + n, t);
  write_safetensors(dir.file("wan2.1_t2v_1.3B_fp32.safetensors"), prefixed,
                    SafetensorsFile::open(weights_).metadata());
  auto ck = DitCheckpoint::open(dir.file("wan2.1_t2v_1.3B_fp32.safetensors"));
  EXPECT_EQ(ck.layout(), DitLayout::kComfyUI);
  auto io = SafetensorsFile::open(io_path_);
  EXPECT_TRUE(all_close(run_call0(ck, io), io.tensor("call0.out"), 1e-4, 1e-4, "comfyui"));
}

TEST_F(DitCheckpointTest, ShardedOfficialFolderWithConfigJson) {
  TempDir dir;
  Named all = read_all(weights_), a, b;
  std::string map;
  for (size_t i = 0; i < all.size(); ++i) {
    const bool first = i < all.size() / 2;
    (first ? a : b).push_back(all[i]);
    map += (map.empty() ? "" : ",") + std::string("\"") + all[i].first + "\":\"" +
           (first ? "m-00001-of-00002.safetensors" : "m-00002-of-00002.safetensors") + "\"";
  }
  write_safetensors(dir.file("m-00001-of-00002.safetensors"), a);
  write_safetensors(dir.file("m-00002-of-00002.safetensors"), b);
  write_text(dir.file("m.safetensors.index.json"),
             "{\"metadata\":{},\"weight_map\":{" + map + "}}");
  // The official repositories ship config.json with model_type and the constructor kwargs.
  std::string cfg = config_;
  cfg.insert(cfg.find('{') + 1, "\"model_type\": \"t2v\", ");
  write_text(dir.file("config.json"), cfg);
  auto ck = DitCheckpoint::open(dir.path());
  EXPECT_EQ(ck.layout(), DitLayout::kOfficial);
  EXPECT_EQ(ck.config().text_len, 16);
  EXPECT_NE(ck.config_source().find("config.json"), std::string::npos);
  auto io = SafetensorsFile::open(io_path_);
  EXPECT_TRUE(all_close(run_call0(ck, io), io.tensor("call0.out"), 1e-4, 1e-4, "sharded"));
}

TEST_F(DitCheckpointTest, DiffusersFolderWithDiffusersConfig) {
  const std::string diffusers = vidax::testing::wan_fixture("dit_t2v_tiny.diffusers.safetensors");
  if (diffusers.empty()) GTEST_SKIP() << "diffusers fixture not found";
  TempDir dir;
  std::filesystem::copy_file(diffusers, dir.file("diffusion_pytorch_model.safetensors"));
  // A diffusers WanTransformer3DModel config.json (text_len is not a diffusers key: 512 there).
  write_text(dir.file("config.json"),
             R"({"_class_name": "WanTransformer3DModel", "patch_size": [1, 2, 2],
                 "num_attention_heads": 2, "attention_head_dim": 128, "in_channels": 16,
                 "out_channels": 16, "text_dim": 64, "freq_dim": 256, "ffn_dim": 512,
                 "num_layers": 2, "cross_attn_norm": true, "qk_norm": "rms_norm_across_heads",
                 "eps": 1e-06, "image_dim": null, "added_kv_proj_dim": null,
                 "rope_max_seq_len": 1024})");
  auto ck = DitCheckpoint::open(dir.path());
  EXPECT_EQ(ck.layout(), DitLayout::kDiffusers);
  EXPECT_EQ(ck.config().dim, 256);
  EXPECT_EQ(ck.config().num_heads, 2);
  EXPECT_EQ(ck.config().text_len, 512);
  ck.require_loadable();
}

TEST_F(DitCheckpointTest, DiffusersNamesMatchTheConversionScript) {
  const std::string diffusers = vidax::testing::wan_fixture("dit_t2v_tiny.diffusers.safetensors");
  if (diffusers.empty()) GTEST_SKIP() << "diffusers fixture not found";
  auto file = SafetensorsFile::open(diffusers);
  std::set<std::string> expected;
  for (const auto& e : file.entries()) expected.insert(e.name);
  std::set<std::string> mapped;
  for (const auto& [n, t] : read_all(weights_)) mapped.insert(official_to_diffusers(n));
  EXPECT_EQ(mapped, expected);
  EXPECT_EQ(official_to_diffusers("blocks.3.norm3.weight"), "blocks.3.norm2.weight");
  EXPECT_EQ(official_to_diffusers("head.modulation"), "scale_shift_table");
  EXPECT_EQ(official_to_diffusers("blocks.0.modulation"), "blocks.0.scale_shift_table");
  EXPECT_EQ(official_to_diffusers("blocks.0.cross_attn.k_img.weight"),
            "blocks.0.attn2.add_k_proj.weight");
  EXPECT_EQ(official_to_diffusers("img_emb.proj.4.bias"),
            "condition_embedder.image_embedder.norm2.bias");
}

// fp16 weights are converted once at load; the result equals running f16-rounded f32 weights.
TEST_F(DitCheckpointTest, Fp16WeightsAreConvertedAtLoad) {
  TempDir dir;
  Named f16;
  for (auto& [n, t] : read_all(weights_)) f16.emplace_back(n, t.to(DType::kF16));
  write_safetensors(dir.file("w16.safetensors"), f16, SafetensorsFile::open(weights_).metadata());
  auto ck16 = DitCheckpoint::open(dir.file("w16.safetensors"));
  auto ck32 = DitCheckpoint::open(weights_);
  auto io = SafetensorsFile::open(io_path_);
  WanDit rounded(
      ck32.config(),
      [&](const std::string& n) { return ck32.get(n).to(DType::kF16).to(DType::kF32); },
      Precision::kFP32);
  DitSample s;
  s.x = io.tensor("x");
  s.context = io.tensor("context");
  s.t = io.tensor("call0.t");
  EXPECT_TRUE(all_close(run_call0(ck16, io), rounded.forward(s), 1e-5, 1e-5, "f16 weights"));
}

// ComfyUI scaled fp8: e4m3 weights times a per-tensor scale_weight.
TEST_F(DitCheckpointTest, ScaledFp8WeightsAreDequantized) {
  TempDir dir;
  Named fp8;
  const float scale = 0.01f;
  for (auto& [n, t] : read_all(weights_)) {
    const std::string name = "model.diffusion_model." + n;
    if (n == "blocks.0.ffn.0.weight") {
      // Quantize w / scale to e4m3 by nearest-value search over the 256 codes.
      const auto v = t.to_float_vector();
      Tensor q = Tensor::zeros(t.shape(), DType::kF8E4M3);
      auto* qp = static_cast<uint8_t*>(q.raw_mutable_data());
      for (size_t i = 0; i < v.size(); ++i) {
        int best = 0;
        for (int c = 0; c < 256; ++c) {
          const float f = f8e4m3_to_f32(static_cast<uint8_t>(c));
          if (std::isfinite(f) &&
              std::fabs(f - v[i] / scale) <
                  std::fabs(f8e4m3_to_f32(static_cast<uint8_t>(best)) - v[i] / scale))
            best = c;
        }
        qp[i] = static_cast<uint8_t>(best);
      }
      fp8.emplace_back(name, q);
      fp8.emplace_back("model.diffusion_model.blocks.0.ffn.0.scale_weight",
                       Tensor::from_floats(std::vector<float>{scale}, Shape{1}));
    } else {
      fp8.emplace_back(name, t);
    }
  }
  fp8.emplace_back("scaled_fp8", Tensor::zeros(Shape{0}, DType::kF8E4M3));
  write_safetensors(dir.file("fp8.safetensors"), fp8, SafetensorsFile::open(weights_).metadata());
  auto ck = DitCheckpoint::open(dir.file("fp8.safetensors"));
  ck.require_loadable();
  EXPECT_TRUE(ck.unexpected().empty());
  const Tensor w = ck.get("blocks.0.ffn.0.weight");
  ASSERT_EQ(w.dtype(), DType::kF32);
  // Dequantized value = code * scale, within e4m3 resolution of the original.
  EXPECT_TRUE(all_close(w, SafetensorsFile::open(weights_).tensor("blocks.0.ffn.0.weight"),
                        0.5 * scale, 0.07, "fp8"));

  // The same file without the scale: its fp8 values would be off by 1 / scale; refused by name.
  Named unscaled;
  for (auto& [n, t] : fp8)
    if (n != "model.diffusion_model.blocks.0.ffn.0.scale_weight") unscaled.emplace_back(n, t);
  write_safetensors(dir.file("noscale.safetensors"), unscaled,
                    SafetensorsFile::open(weights_).metadata());
  auto bad = DitCheckpoint::open(dir.file("noscale.safetensors"));
  try {
    (void)bad.get("blocks.0.ffn.0.weight");
    FAIL() << "an fp8 weight without its scale in a scaled-fp8 file was accepted";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("noscale.safetensors"), std::string::npos) << msg;
    EXPECT_NE(msg.find("blocks.0.ffn.0.scale_weight' is missing"), std::string::npos) << msg;
  }
}

TEST_F(DitCheckpointTest, ProblemsAreReportedByName) {
  TempDir dir;
  Named all = read_all(weights_), broken;
  for (auto& [n, t] : all) {
    if (n == "blocks.1.cross_attn.norm_k.weight") continue;  // missing
    if (n == "head.head.bias")
      broken.emplace_back(n, Tensor::zeros(Shape{65}));  // wrong shape
    else
      broken.emplace_back(n, t);
  }
  broken.emplace_back("blocks.7.self_attn.q.weight_extra", Tensor::zeros(Shape{2}));  // unexpected
  write_safetensors(dir.file("broken.safetensors"), broken,
                    SafetensorsFile::open(weights_).metadata());
  auto ck = DitCheckpoint::open(dir.file("broken.safetensors"));
  ASSERT_EQ(ck.missing().size(), 1u);
  EXPECT_EQ(ck.missing()[0], "blocks.1.cross_attn.norm_k.weight");
  ASSERT_EQ(ck.unexpected().size(), 1u);
  EXPECT_EQ(ck.unexpected()[0], "blocks.7.self_attn.q.weight_extra");
  ASSERT_EQ(ck.shape_mismatches().size(), 1u);
  try {
    ck.require_loadable();
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("broken.safetensors"), std::string::npos) << msg;
    EXPECT_NE(msg.find("head.head.bias"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[65]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[64]"), std::string::npos) << msg;
  }
  // Integer weights are refused with the dtype named.
  Named ints = all;
  for (auto& [n, t] : ints)
    if (n == "blocks.0.modulation") t = Tensor::zeros(t.shape(), DType::kI32);
  write_safetensors(dir.file("ints.safetensors"), ints, SafetensorsFile::open(weights_).metadata());
  try {
    DitCheckpoint::open(dir.file("ints.safetensors")).require_loadable();
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("blocks.0.modulation (I32)"), std::string::npos)
        << e.what();
  }
}

TEST(DitConfigTest, PresetsHaveThePublishedSizes) {
  const auto small = dit_preset("wan2.1-t2v-1.3b");
  ASSERT_TRUE(small);
  // Wan2.1-T2V-1.3B: 1,418,996,800 parameters in the official state_dict.
  EXPECT_NEAR(static_cast<double>(dit_parameter_count(*small)), 1.419e9, 0.01e9);
  const auto big = dit_preset("wan2.1-t2v-14b");
  ASSERT_TRUE(big);
  EXPECT_NEAR(static_cast<double>(dit_parameter_count(*big)), 14.29e9, 0.1e9);
  const auto i2v = dit_preset("wan2.1-i2v-14b");
  ASSERT_TRUE(i2v);
  EXPECT_EQ(i2v->kind, DitKind::kI2V);
  EXPECT_EQ(i2v->in_dim, 36);
  EXPECT_FALSE(dit_preset("wan9"));
}

TEST(DitConfigTest, BadConfigJsonIsNamed) {
  EXPECT_THROW(dit_config_from_json("{not json", "cfg.json"), InputError);
  EXPECT_THROW(dit_config_from_json(R"({"dim": 100, "num_heads": 3})", "cfg.json"), InputError);
  EXPECT_THROW(dit_config_from_json(R"({"model_type": "v2v"})", "cfg.json"), InputError);
  EXPECT_THROW(dit_config_from_json(R"({"model_type": "s2v"})", "cfg.json"), InputError);
  // First-last-frame: the image branch with a position table for two images' CLIP tokens.
  const DitConfig flf = dit_config_from_json(R"({"model_type": "flf2v"})", "cfg.json");
  EXPECT_EQ(flf.kind, DitKind::kI2V);
  EXPECT_EQ(flf.flf_pos_tokens, 514);
  EXPECT_EQ(flf.kind_name(), "flf2v");
  EXPECT_THROW(dit_config_from_json(R"({"patch_size": ["1", "2", "2"]})", "cfg.json"), InputError);
  EXPECT_THROW(dit_config_from_json(R"({"window_size": [null, null]})", "cfg.json"), InputError);
  try {
    dit_config_from_json(R"({"dim": "big"})", "my/config.json");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("my/config.json"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("'dim'"), std::string::npos);
  }
}

}  // namespace
}  // namespace vidax::wan
