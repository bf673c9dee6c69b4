// Wan DiT parity with the official PyTorch code (fixtures in ../shared/fixtures/wan): every
// stored intermediate of every call, from the official, diffusers and bf16 weight files.
#include <cmath>
#include <map>

#include "io/safetensors.h"
#include "models/wan/dit.h"
#include "models/wan/dit_checkpoint.h"
#include "models/wan/dit_random.h"
#include "support/test_support.h"

namespace vidax::wan {
namespace {

using vidax::testing::all_close;

constexpr double kTol = 1e-4;  // fixtures README: 1e-4 + 1e-4*|ref| for an f32 DiT

struct Captured {
  std::map<std::string, Tensor> values;
  Tensor out;
};

Captured run_call(WanDit& model, const SafetensorsFile& io, const std::string& call) {
  DitSample s;
  s.x = io.tensor("x");
  s.context = io.tensor("context");
  s.seq_len = io.tensor("seq_len").contiguous().data<int64_t>()[0];
  s.t = io.tensor(call + ".t");
  if (io.contains("y")) s.y = io.tensor("y");
  if (io.contains("clip_fea")) s.clip_fea = io.tensor("clip_fea");
  Captured c;
  c.out = model.forward(
      s, [&](const std::string& name, const Tensor& v) { c.values[name] = v.clone(); });
  return c;
}

// Compares every intermediate the io file stores for `call`, then the output `out_name`.
void expect_call_matches(WanDit& model, const SafetensorsFile& io, const std::string& call,
                         const std::string& out_name, double tol) {
  Captured got = run_call(model, io, call);
  int compared = 0;
  for (const auto& e : io.entries()) {
    const std::string prefix = call + ".";
    if (e.name.rfind(prefix, 0) != 0) continue;
    const std::string key = e.name.substr(prefix.size());
    if (key == "t" || key.rfind("out", 0) == 0) continue;
    auto it = got.values.find(key);
    ASSERT_NE(it, got.values.end()) << "model did not produce intermediate " << key;
    EXPECT_EQ(it->second.shape(), e.shape) << e.name;
    EXPECT_TRUE(all_close(it->second, io.tensor(e.name), tol, tol, e.name));
    ++compared;
  }
  EXPECT_GE(compared, 5) << "too few intermediates compared for " << call;
  EXPECT_TRUE(
      all_close(got.out, io.tensor(call + "." + out_name), tol, tol, call + "." + out_name));
}

WanDit load(const DitCheckpoint& ck, Precision p) {
  ck.require_loadable();
  return WanDit(
      ck.config(), [&](const std::string& n) { return ck.get(n); }, p);
}

TEST(WanDit, T2VOfficialWeightsMatchEveryIntermediate) {
  VIDAX_REQUIRE_FIXTURE(weights, "dit_t2v_tiny.weights.safetensors");
  VIDAX_REQUIRE_FIXTURE(io_path, "dit_t2v_tiny.io.safetensors");
  auto ck = DitCheckpoint::open(weights);
  EXPECT_EQ(ck.layout(), DitLayout::kOfficial);
  EXPECT_EQ(ck.config().text_len, 16);
  WanDit model = load(ck, Precision::kFP32);
  auto io = SafetensorsFile::open(io_path);
  expect_call_matches(model, io, "call0", "out", kTol);
  expect_call_matches(model, io, "call1", "out", kTol);
}

TEST(WanDit, T2VDiffusersLayoutMatches) {
  VIDAX_REQUIRE_FIXTURE(weights, "dit_t2v_tiny.diffusers.safetensors");
  VIDAX_REQUIRE_FIXTURE(io_path, "dit_t2v_tiny.io.safetensors");
  // The file keeps the official kwargs as metadata "source_config" (text_len 16).
  auto ck = DitCheckpoint::open(weights);
  EXPECT_EQ(ck.layout(), DitLayout::kDiffusers);
  EXPECT_EQ(ck.config().text_len, 16);
  // Inference from the diffusers tensor shapes agrees on everything shapes can tell.
  auto src = TensorSource::open(weights);
  DitConfig inferred = infer_dit_config(
      [&](const std::string& n) -> std::optional<Shape> {
        const std::string d = official_to_diffusers(n);
        if (!src.contains(d)) return std::nullopt;
        return src.entry(d).shape;
      },
      weights);
  inferred.text_len = ck.config().text_len;
  EXPECT_EQ(inferred.to_json(), ck.config().to_json());
  WanDit model = load(ck, Precision::kFP32);
  auto io = SafetensorsFile::open(io_path);
  expect_call_matches(model, io, "call0", "out", kTol);
  expect_call_matches(model, io, "call1", "out", kTol);
}

TEST(WanDit, T2VBf16WeightFileMatchesOutBf16w) {
  VIDAX_REQUIRE_FIXTURE(weights, "dit_t2v_tiny.bf16.safetensors");
  VIDAX_REQUIRE_FIXTURE(io_path, "dit_t2v_tiny.io.safetensors");
  auto ck = DitCheckpoint::open(weights);
  WanDit model = load(ck, Precision::kFP32);  // bf16 weights upcast, f32 math
  auto io = SafetensorsFile::open(io_path);
  for (const char* call : {"call0", "call1"}) {
    Captured got = run_call(model, io, call);
    EXPECT_TRUE(all_close(got.out, io.tensor(std::string(call) + ".out_bf16w"), kTol, kTol, call));
  }
}

// bf16 precision (bf16 GEMM and attention inputs, f32 accumulation and residual) against the
// f32 reference on bf16 weights. Documented tolerance: max |diff| <= 3% of max |ref|.
TEST(WanDit, T2VBf16PrecisionStaysNearReference) {
  VIDAX_REQUIRE_FIXTURE(weights, "dit_t2v_tiny.bf16.safetensors");
  VIDAX_REQUIRE_FIXTURE(io_path, "dit_t2v_tiny.io.safetensors");
  auto ck = DitCheckpoint::open(weights);
  WanDit model = load(ck, Precision::kBF16);
  auto io = SafetensorsFile::open(io_path);
  for (const char* call : {"call0", "call1"}) {
    Captured got = run_call(model, io, call);
    const auto ref = io.tensor(std::string(call) + ".out_bf16w").to_float_vector();
    const auto out = got.out.to_float_vector();
    double max_ref = 0, max_diff = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      max_ref = std::max(max_ref, std::fabs(static_cast<double>(ref[i])));
      max_diff = std::max(max_diff, std::fabs(static_cast<double>(out[i]) - ref[i]));
    }
    EXPECT_LE(max_diff, 0.03 * max_ref)
        << call << ": max diff " << max_diff << " max |ref| " << max_ref;
    EXPECT_GT(max_diff, 0.0) << "bf16 path produced bit-identical f32 results; is it really bf16?";
  }
}

TEST(WanDit, I2VMatchesEveryIntermediate) {
  VIDAX_REQUIRE_FIXTURE(weights, "dit_i2v_tiny.bf16.safetensors");
  VIDAX_REQUIRE_FIXTURE(io_path, "dit_i2v_tiny.io.safetensors");
  auto ck = DitCheckpoint::open(weights);
  EXPECT_EQ(ck.config().kind, DitKind::kI2V);
  WanDit model = load(ck, Precision::kFP32);
  auto io = SafetensorsFile::open(io_path);
  expect_call_matches(model, io, "call0", "out", kTol);
  expect_call_matches(model, io, "call1", "out", kTol);
}

TEST(WanDit, TI2VPerTokenTimestepsMatch) {
  VIDAX_REQUIRE_FIXTURE(weights, "dit_t2v_tiny.weights.safetensors");
  VIDAX_REQUIRE_FIXTURE(io_path, "dit_ti2v_tiny.io.safetensors");
  DitConfig cfg = DitCheckpoint::open(weights).config();
  cfg.kind = DitKind::kTI2V;  // same tensors as t2v; Wan 2.2 forward
  auto ck = DitCheckpoint::open(weights, cfg);
  WanDit model = load(ck, Precision::kFP32);
  auto io = SafetensorsFile::open(io_path);
  expect_call_matches(model, io, "call0", "out", kTol);  // t = [1, 18] per token
  expect_call_matches(model, io, "call1", "out", kTol);  // scalar t expanded per token
}

// Regression: on the bf16 path the FFN input pointer must survive the cross-attention
// projections (they once reallocated the shared bf16 scratch when the image tokens outnumbered
// everything before). dim > clip_dim and many image tokens make that reallocation happen.
TEST(WanDit, Bf16I2VWithManyImageTokensMatchesFp32) {
  DitConfig c;
  c.kind = DitKind::kI2V;
  c.dim = 128, c.num_heads = 1, c.ffn_dim = 128, c.num_layers = 2, c.text_len = 16;
  c.text_dim = 32, c.freq_dim = 32, c.in_dim = 36, c.clip_dim = 64;
  const auto weights = random_dit_weights(c, DType::kF32, 7);
  WanDit f32(c, weights, Precision::kFP32), b16(c, weights, Precision::kBF16);
  DitSample s;
  s.x = vidax::testing::random_tensor(Shape{16, 1, 2, 2}, 1);
  s.y = vidax::testing::random_tensor(Shape{20, 1, 2, 2}, 2);
  s.clip_fea = vidax::testing::random_tensor(Shape{1, 600, 64}, 3);
  s.context = vidax::testing::random_tensor(Shape{5, 32}, 4);
  s.t = Tensor::from_floats(std::vector<float>{500.0f}, Shape{1});
  const Tensor ref = f32.forward(s);
  const Tensor first = b16.forward(s), second = b16.forward(s);
  EXPECT_TRUE(all_close(first, second, 0, 0, "bf16 first vs second call"));
  const auto r = ref.to_float_vector(), g = first.to_float_vector();
  double max_ref = 0, max_diff = 0;
  for (size_t i = 0; i < r.size(); ++i) {
    max_ref = std::max(max_ref, std::fabs(static_cast<double>(r[i])));
    max_diff = std::max(max_diff, std::fabs(static_cast<double>(g[i]) - r[i]));
  }
  EXPECT_LE(max_diff, 0.03 * max_ref) << "max diff " << max_diff << " max |ref| " << max_ref;
}

TEST(WanDit, NonFloatInputsAreInputErrors) {
  DitConfig c;
  c.dim = 128, c.num_heads = 1, c.ffn_dim = 128, c.num_layers = 1, c.text_len = 8;
  c.text_dim = 16, c.freq_dim = 16;
  WanDit model(c, random_dit_weights(c, DType::kF32, 1), Precision::kFP32);
  DitSample s;
  s.x = Tensor::zeros(Shape{16, 1, 2, 2}, DType::kI64);
  s.context = vidax::testing::random_tensor(Shape{3, 16}, 2);
  s.t = Tensor::from_floats(std::vector<float>{1.0f}, Shape{1});
  EXPECT_THROW(model.forward(s), InputError);
  s.x = vidax::testing::random_tensor(Shape{16, 1, 2, 2}, 1);
  s.context = Tensor::zeros(Shape{3, 16}, DType::kI32);
  EXPECT_THROW(model.forward(s), InputError);
  s.context = vidax::testing::random_tensor(Shape{3, 16}, 2);
  s.t = Tensor::from_floats(std::vector<float>{std::nanf("")}, Shape{1});
  EXPECT_THROW(model.forward(s), InputError);
}

TEST(WanDit, ConfigInferredFromShapesMatchesMetadata) {
  VIDAX_REQUIRE_FIXTURE(weights, "dit_i2v_tiny.bf16.safetensors");
  auto ck = DitCheckpoint::open(weights);
  auto src = TensorSource::open(weights);
  DitConfig inferred = infer_dit_config(
      [&](const std::string& n) -> std::optional<Shape> {
        if (!src.contains(n)) return std::nullopt;
        return src.entry(n).shape;
      },
      weights);
  EXPECT_EQ(inferred.to_json(), ck.config().to_json());
}

}  // namespace
}  // namespace vidax::wan
