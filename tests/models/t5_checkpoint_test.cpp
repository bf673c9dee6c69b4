// umT5 checkpoints as users download them: official names, diffusers' text_encoder folder
// (transformers names, config.json, sharded index), ComfyUI fp16 and scaled-fp8 files, config
// inference, random checkpoints, and clear errors for broken files.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>

#include "core/convert.h"
#include "io/safetensors.h"
#include "models/wan/t5_checkpoint.h"
#include "models/wan/t5_encoder.h"
#include "models/wan/t5_random.h"
#include "models/wan/t5_tensors.h"
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

void write_text(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// transformers' config.json for the tiny fixture model.
constexpr const char* kHfConfig =
    R"({"architectures": ["UMT5EncoderModel"], "model_type": "umt5", "vocab_size": 256,
        "d_model": 32, "d_kv": 8, "d_ff": 64, "num_heads": 4, "num_layers": 2,
        "relative_attention_num_buckets": 32, "relative_attention_max_distance": 128,
        "feed_forward_proj": "gated-gelu", "dense_act_fn": "gelu_new"})";

class T5CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    weights_ = vidax::testing::wan_fixture("t5_tiny.weights.safetensors");
    io_path_ = vidax::testing::wan_fixture("t5_tiny.io.safetensors");
    if (weights_.empty() || io_path_.empty()) GTEST_SKIP() << "t5_tiny fixtures not found";
  }

  Tensor run(const T5Checkpoint& ck, Precision p = Precision::kFP32) const {
    ck.require_loadable();
    T5Encoder enc(ck.config(), ck.loader(), p);
    auto io = SafetensorsFile::open(io_path_);
    return enc.forward(io.tensor("ids"), io.tensor("mask")).reshape(Shape{1, 12, 32});
  }
  Tensor reference() const { return SafetensorsFile::open(io_path_).tensor("out"); }

  // The fixture under transformers names, each tensor passed through `convert`.
  Named transformers_named(
      const std::function<Tensor(const std::string&, const Tensor&)>& convert = nullptr) const {
    Named out;
    for (auto& [n, t] : read_all(weights_))
      out.emplace_back(t5_official_to_transformers(n), convert ? convert(n, t) : t);
    return out;
  }

  std::string weights_, io_path_;
};

TEST_F(T5CheckpointTest, RenameTableCoversEveryDeclaredTensor) {
  T5Config c;
  c.num_layers = 3;
  std::set<std::string> seen;
  for (const auto& d : t5_tensor_decls(c)) {
    const std::string hf = t5_official_to_transformers(d.name);
    EXPECT_NE(hf, d.name) << "no transformers name for " << d.name;
    EXPECT_TRUE(seen.insert(hf).second) << "two tensors map to " << hf;
  }
  EXPECT_EQ(t5_official_to_transformers("blocks.2.ffn.gate.0.weight"),
            "encoder.block.2.layer.1.DenseReluDense.wi_0.weight");
  EXPECT_EQ(t5_official_to_transformers("blocks.2.pos_embedding.embedding.weight"),
            "encoder.block.2.layer.0.SelfAttention.relative_attention_bias.weight");
}

TEST_F(T5CheckpointTest, OfficialNamesWithoutMetadataInferTheConfig) {
  TempDir dir;
  write_safetensors(dir.file("t5.safetensors"), read_all(weights_));  // no metadata
  auto ck = T5Checkpoint::open(dir.file("t5.safetensors"));
  EXPECT_EQ(ck.layout(), T5Layout::kOfficial);
  EXPECT_EQ(ck.config_source(), "inferred from tensor shapes");
  EXPECT_EQ(ck.config().to_json(), T5Checkpoint::open(weights_).config().to_json());
  EXPECT_TRUE(all_close(run(ck), reference(), 1e-5, 1e-5, "inferred"));
}

TEST_F(T5CheckpointTest, DiffusersTextEncoderFolderShardedWithConfigJson) {
  TempDir dir;
  Named all = transformers_named(), a, b;
  std::string map;
  for (size_t i = 0; i < all.size(); ++i) {
    const bool first = i < all.size() / 2;
    (first ? a : b).push_back(all[i]);
    map += (map.empty() ? "\"" : ",\"") + all[i].first + "\":\"model-0000" + (first ? "1" : "2") +
           "-of-00002.safetensors\"";
  }
  write_safetensors(dir.file("model-00001-of-00002.safetensors"), a);
  write_safetensors(dir.file("model-00002-of-00002.safetensors"), b);
  write_text(dir.file("model.safetensors.index.json"),
             "{\"metadata\":{},\"weight_map\":{" + map + "}}");
  write_text(dir.file("config.json"), kHfConfig);
  auto ck = T5Checkpoint::open(dir.path());
  EXPECT_EQ(ck.layout(), T5Layout::kTransformers);
  EXPECT_NE(ck.config_source().find("config.json"), std::string::npos);
  EXPECT_TRUE(ck.unexpected().empty());
  EXPECT_TRUE(all_close(run(ck), reference(), 1e-5, 1e-5, "diffusers sharded"));
}

TEST_F(T5CheckpointTest, TiedEmbeddingUnderEitherNameAndAPrefix) {
  TempDir dir;
  // encoder.embed_tokens.weight only.
  Named only_embed;
  for (auto& [n, t] : transformers_named())
    only_embed.emplace_back(n == "shared.weight" ? "encoder.embed_tokens.weight" : n, t);
  write_safetensors(dir.file("a.safetensors"), only_embed);
  EXPECT_TRUE(all_close(run(T5Checkpoint::open(dir.file("a.safetensors"))), reference(), 1e-5, 1e-5,
                        "embed_tokens"));
  // Both copies, under a prefix (a text encoder saved out of a bigger file).
  Named both;
  for (auto& [n, t] : transformers_named()) {
    both.emplace_back("text_encoders.umt5xxl.transformer." + n, t);
    if (n == "shared.weight")
      both.emplace_back("text_encoders.umt5xxl.transformer.encoder.embed_tokens.weight", t);
  }
  write_safetensors(dir.file("b.safetensors"), both);
  auto ck = T5Checkpoint::open(dir.file("b.safetensors"));
  EXPECT_TRUE(ck.unexpected().empty());
  EXPECT_TRUE(all_close(run(ck), reference(), 1e-5, 1e-5, "prefixed"));
}

// ComfyUI umt5_xxl_fp16: transformers names, F16 tensors. Exact against the reference run on
// the same f16-rounded weights; close to the f32 reference.
TEST_F(T5CheckpointTest, ComfyUiFp16) {
  TempDir dir;
  write_safetensors(
      dir.file("umt5_xxl_fp16.safetensors"),
      transformers_named([](const std::string&, const Tensor& t) { return t.to(DType::kF16); }));
  auto ck = T5Checkpoint::open(dir.file("umt5_xxl_fp16.safetensors"));
  EXPECT_EQ(ck.layout(), T5Layout::kTransformers);
  EXPECT_EQ(ck.config_source(), "inferred from tensor shapes");
  const auto ck32 = T5Checkpoint::open(weights_);
  T5Encoder rounded(
      ck32.config(),
      [&](const std::string& n) { return ck32.get(n).to(DType::kF16).to(DType::kF32); },
      Precision::kFP32);
  auto io = SafetensorsFile::open(io_path_);
  const Tensor expected =
      rounded.forward(io.tensor("ids"), io.tensor("mask")).reshape(Shape{1, 12, 32});
  EXPECT_TRUE(all_close(run(ck), expected, 1e-5, 1e-5, "f16 weights"));
  EXPECT_TRUE(all_close(run(ck), reference(), 5e-3, 5e-3, "f16 vs f32 reference"));
}

// Nearest e4m3 code of every value (brute force over the 256 codes).
Tensor quantize_e4m3(const Tensor& t, float scale) {
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
  return q;
}

// ComfyUI umt5_xxl_fp8_e4m3fn_scaled: projection weights e4m3 with a per-tensor scale_weight
// (max |w| / 448, e4m3's largest value), the rest f16, a `scaled_fp8` marker and scale_input
// tensors that only ComfyUI's fp8 matmul uses.
TEST_F(T5CheckpointTest, ComfyUiScaledFp8) {
  TempDir dir;
  Named file;
  std::map<std::string, Tensor> dequantized;  // official name -> what get() must return
  for (auto& [n, t] : read_all(weights_)) {
    const std::string hf = t5_official_to_transformers(n);
    const bool projection =
        n.find(".attn.") != std::string::npos || n.find(".ffn.") != std::string::npos;
    if (!projection) {
      file.emplace_back(hf, t.to(DType::kF16));
      dequantized[n] = t.to(DType::kF16).to(DType::kF32);
      continue;
    }
    const auto v = t.to_float_vector();
    float mx = 0;
    for (float x : v) mx = std::max(mx, std::fabs(x));
    const float scale = mx / 448.0f;
    const Tensor q = quantize_e4m3(t, scale);
    file.emplace_back(hf, q);
    const std::string stem = hf.substr(0, hf.size() - std::string(".weight").size());
    file.emplace_back(stem + ".scale_weight",
                      Tensor::from_floats(std::vector<float>{scale}, Shape{1}));
    file.emplace_back(stem + ".scale_input",
                      Tensor::from_floats(std::vector<float>{1.0f}, Shape{1}));
    Tensor d = q.to(DType::kF32);
    for (int64_t i = 0; i < d.numel(); ++i) d.mutable_data<float>()[i] *= scale;
    dequantized[n] = d;
  }
  file.emplace_back("scaled_fp8", Tensor::zeros(Shape{0}, DType::kF8E4M3));
  file.emplace_back("spiece_model", Tensor::zeros(Shape{16}, DType::kU8));  // the tokenizer
  write_safetensors(dir.file("umt5_fp8.safetensors"), file);
  auto ck = T5Checkpoint::open(dir.file("umt5_fp8.safetensors"));
  ck.require_loadable();
  EXPECT_TRUE(ck.unexpected().empty());
  const Tensor w = ck.get("blocks.1.ffn.fc2.weight");
  ASSERT_EQ(w.dtype(), DType::kF32);
  EXPECT_TRUE(all_close(w, dequantized["blocks.1.ffn.fc2.weight"], 0, 0, "dequantized"));
  // Exact against a run on the dequantized weights...
  const auto ck32 = T5Checkpoint::open(weights_);
  T5Encoder on_dequantized(
      ck32.config(), [&](const std::string& n) { return dequantized.at(n); }, Precision::kFP32);
  auto io = SafetensorsFile::open(io_path_);
  EXPECT_TRUE(all_close(
      run(ck),
      on_dequantized.forward(io.tensor("ids"), io.tensor("mask")).reshape(Shape{1, 12, 32}), 1e-5,
      1e-5, "fp8"));
  // ...and near the f32 reference: e4m3 keeps 3 mantissa bits (relative step 2^-3, rounding
  // error up to 6%, ~2.5% rms per weight); through seven quantized projections per block, two
  // blocks and the unscaled softmax (which amplifies logit errors) the output moves by 7% of its
  // rms here (measured 0.070), far below the ~100% a wrong scale or layout gives.
  const auto out = run(ck).to_float_vector(), ref = reference().to_float_vector();
  double err = 0, norm = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    err += (out[i] - ref[i]) * (out[i] - ref[i]);
    norm += ref[i] * ref[i];
  }
  EXPECT_LT(std::sqrt(err / norm), 0.15) << "relative rms error";
}

TEST_F(T5CheckpointTest, ProblemsAreReportedByName) {
  TempDir dir;
  auto expect_error = [&](const Named& tensors, const std::string& needle) {
    write_safetensors(dir.file("bad.safetensors"), tensors,
                      SafetensorsFile::open(weights_).metadata());
    try {
      T5Checkpoint::open(dir.file("bad.safetensors")).require_loadable();
      ADD_FAILURE() << "expected InputError mentioning " << needle;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("bad.safetensors"), std::string::npos) << e.what();
    }
  };
  Named missing, wrong_shape, extra = read_all(weights_), wrong_dtype;
  for (auto& [n, t] : read_all(weights_)) {
    if (n != "blocks.1.ffn.fc1.weight") missing.emplace_back(n, t);
    wrong_shape.emplace_back(n, n == "blocks.0.attn.o.weight" ? Tensor::zeros(Shape{32, 31}) : t);
    wrong_dtype.emplace_back(n, n == "norm.weight" ? Tensor::zeros(Shape{32}, DType::kI64) : t);
  }
  extra.emplace_back("decoder.block.0.layer.0.SelfAttention.q.weight", Tensor::zeros(Shape{2, 2}));
  expect_error(missing, "blocks.1.ffn.fc1.weight");
  expect_error(wrong_shape, "blocks.0.attn.o.weight");
  expect_error(extra, "decoder.block.0.layer.0.SelfAttention.q.weight");
  expect_error(wrong_dtype, "norm.weight (I64)");
  write_safetensors(dir.file("dit.safetensors"),
                    {{"blocks.0.self_attn.q.weight", Tensor::zeros(Shape{2, 2})}});
  try {
    T5Checkpoint::open(dir.file("dit.safetensors"));
    ADD_FAILURE() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("not a umT5"), std::string::npos) << e.what();
  }
  // Config JSON errors name the key.
  EXPECT_THROW(t5_config_from_json(R"({"d_model": 32, "num_heads": "four"})", "c.json"),
               InputError);
  EXPECT_THROW(t5_config_from_json(R"({"dim": 32, "num_heads": 5})", "c.json"), InputError);
}

TEST(T5Random, CheckpointRoundTripsAndMatchesTheWeightFunction) {
  TempDir dir;
  T5Config c;
  c.vocab = 100, c.dim = 32, c.dim_attn = 48, c.dim_ffn = 40, c.num_heads = 6, c.num_layers = 2;
  write_random_t5_checkpoint(dir.file("r.safetensors"), c, DType::kBF16, 9);
  auto ck = T5Checkpoint::open(dir.file("r.safetensors"));
  ck.require_loadable();
  EXPECT_EQ(ck.config().to_json(), c.to_json());
  EXPECT_EQ(ck.get("blocks.1.attn.q.weight").dtype(), DType::kBF16);
  const WeightFn w = random_t5_weights(c, DType::kBF16, 9);
  EXPECT_TRUE(all_close(ck.get("blocks.1.attn.q.weight"), w("blocks.1.attn.q.weight"), 0, 0));
  // Different seeds give different weights; norms sit near 1.
  EXPECT_FALSE(all_close(random_t5_weights(c, DType::kF32, 10)("blocks.1.attn.q.weight"),
                         w("blocks.1.attn.q.weight"), 1e-3, 0));
  for (float v : w("norm.weight").to_float_vector()) EXPECT_NEAR(v, 1.0f, 0.2f);
}

}  // namespace
}  // namespace vidax::wan
