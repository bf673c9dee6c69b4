// Wan VAE behaviour that needs no fixture (tiny random models): streaming consistency, spatial
// tiling, input errors, checkpoint layouts and config inference, memory estimates.
#include <cmath>
#include <filesystem>

#include "core/page_buffer.h"
#include "io/safetensors.h"
#include "models/wan/vae.h"
#include "models/wan/vae_checkpoint.h"
#include "models/wan/vae_random.h"
#include "models/wan/vae_tensors.h"
#include "nn/conv3d.h"
#include "sampling/torch_randn.h"
#include "support/test_support.h"

namespace vidax::wan {
namespace {

using vidax::testing::all_close;
using vidax::testing::TempDir;

VaeConfig tiny(VaeVersion v) {
  VaeConfig c;
  c.version = v;
  c.dim = v == VaeVersion::kWan22 ? 4 : 8;
  c.dec_dim = 8;
  c.z_dim = v == VaeVersion::kWan22 ? 48 : 4;
  set_official_latent_stats(c);
  return c;
}

WanVae tiny_vae(VaeVersion v, Precision p = Precision::kFP32) {
  const VaeConfig c = tiny(v);
  return WanVae(c, random_vae_weights(c, DType::kF32, 9), p);
}

class VaeVersionTest : public ::testing::TestWithParam<VaeVersion> {};
}  // namespace
// Found by argument-dependent lookup (VaeVersion lives in vidax::wan): gtest would otherwise
// print the parameter as raw bytes.
void PrintTo(VaeVersion v, std::ostream* os) { *os << (v == VaeVersion::kWan22 ? "2.2" : "2.1"); }
namespace {

TEST_P(VaeVersionTest, StreamedFramesDoNotDependOnLaterLatents) {
  // Decoding the first 3 latent frames gives exactly the first frames of decoding all 5: the
  // carried state is complete and nothing looks ahead.
  WanVae vae = tiny_vae(GetParam());
  const int64_t z = vae.config().z_dim;
  const Tensor lat = torch_randn(3, Shape{z, 5, 3, 2});
  std::vector<int64_t> counts;
  Tensor all;
  {
    std::vector<Tensor> parts;
    vae.decode(lat, [&](const Tensor& f) {
      counts.push_back(f.dim(1));
      parts.push_back(f.clone());
    });
    all = vae.decode(lat);
    int64_t pos = 0;
    for (const Tensor& p : parts) {
      EXPECT_TRUE(all_close(p, all.slice(1, pos, pos + p.dim(1)).contiguous(), 0, 0, "sink chunk"));
      pos += p.dim(1);
    }
  }
  EXPECT_EQ(counts, (std::vector<int64_t>{1, 4, 4, 4, 4}));
  const Tensor head = vae.decode(lat.slice(1, 0, 3).contiguous());
  ASSERT_EQ(head.dim(1), 9);
  EXPECT_TRUE(all_close(head, all.slice(1, 0, 9).contiguous(), 0, 0, "prefix"));
}

TEST_P(VaeVersionTest, DecodingInPiecesAcrossCallsEqualsOneCall) {
  // A causal rollout decodes each chunk as it is made: pieces of 1, 2 and 2 latent frames with
  // the caches carried between calls give the frames of one call over all 5, untiled and tiled.
  WanVae vae = tiny_vae(GetParam());
  const int64_t z = vae.config().z_dim;
  const Tensor lat = torch_randn(4, Shape{z, 5, 2, 3});
  for (int64_t tile : {0, 2}) {
    VaeDecodeOptions whole_opt;
    whole_opt.tile_h = whole_opt.tile_w = tile;
    whole_opt.overlap = tile > 0 ? 1 : 0;
    const Tensor whole = vae.decode(lat, whole_opt);
    std::vector<Tensor> frames;
    int64_t f0 = 0;
    for (int64_t n : {1, 2, 2}) {
      VaeDecodeOptions o = whole_opt;
      o.continues = f0 > 0;
      o.more_follows = f0 + n < 5;
      vae.decode(
          lat.slice(1, f0, f0 + n).contiguous(),
          [&](const Tensor& f) { frames.push_back(f.clone()); }, o);
      f0 += n;
    }
    int64_t pos = 0;
    for (const Tensor& f : frames) {
      EXPECT_TRUE(all_close(f, whole.slice(1, pos, pos + f.dim(1)).contiguous(), 1e-6, 1e-6,
                            "tile " + std::to_string(tile) + " frame " + std::to_string(pos)));
      pos += f.dim(1);
    }
    EXPECT_EQ(pos, whole.dim(1));
  }
}

// Reusing pages between latent frames (core/page_buffer.h) changes no bit: every buffer is
// written before it is read whether its mapping is fresh or kept. Decode whole, tiled and in
// pieces across calls, and encode, in f32 and bf16, with reuse off and with room to keep all.
TEST_P(VaeVersionTest, PageReuseChangesNoBit) {
  const int64_t z = tiny(GetParam()).z_dim;
  const Tensor lat = torch_randn(6, Shape{z, 4, 3, 4});
  const Tensor video = torch_randn(7, Shape{3, 5, 16, 16});
  for (Precision p : {Precision::kFP32, Precision::kBF16}) {
    WanVae vae = tiny_vae(GetParam(), p);
    auto run = [&] {
      std::vector<std::vector<float>> out;
      out.push_back(vae.decode(lat).to_float_vector());
      out.push_back(vae.decode(lat, VaeDecodeOptions{2, 2, 1}).to_float_vector());
      std::vector<float> pieces;
      for (int64_t f0 : {0, 1, 3}) {
        VaeDecodeOptions o;
        o.continues = f0 > 0;
        o.more_follows = f0 < 3;
        vae.decode(
            lat.slice(1, f0, f0 == 1 ? 3 : f0 + 1).contiguous(),
            [&](const Tensor& f) {
              const std::vector<float> v = f.to_float_vector();
              pieces.insert(pieces.end(), v.begin(), v.end());
            },
            o);
      }
      out.push_back(pieces);
      out.push_back(vae.encode(video).to_float_vector());
      return out;
    };
    PageReuse::set(false);
    const auto plain = run();
    PageReuse::set(true, 4);
    const int64_t reused = PageReuse::stats().reused;
    const auto kept = run();
    EXPECT_GT(PageReuse::stats().reused, reused);
    PageReuse::set(true, 0);
    ASSERT_EQ(plain.size(), kept.size());
    for (size_t i = 0; i < plain.size(); ++i)
      EXPECT_EQ(plain[i], kept[i]) << "run " << i << (p == Precision::kBF16 ? " bf16" : " f32");
  }
}

TEST_P(VaeVersionTest, EncodeIsCausalToo) {
  WanVae vae = tiny_vae(GetParam());
  const int64_t s = vae.config().spatial_stride();
  Tensor video = torch_randn(4, Shape{3, 9, 2 * s, s});
  const Tensor mu9 = vae.encode(video);
  const Tensor mu5 = vae.encode(video.slice(1, 0, 5).contiguous());
  ASSERT_EQ(mu9.dim(1), 3);
  EXPECT_TRUE(all_close(mu5, mu9.slice(1, 0, 2).contiguous(), 0, 0, "encode prefix"));
}

// Decoder weights with the middle attention's output projection zeroed (the official
// initialisation): the attention block mixes every pixel of a frame, which no tiling can
// reproduce. With `center_only`, every 3x3 kernel keeps only its centre tap, which makes the
// whole decoder pixel-local, so tiling must then be exact.
WeightFn local_weights(const VaeConfig& c, bool center_only) {
  const WeightFn base = random_vae_weights(c, DType::kF32, 9);
  return [base, center_only](const std::string& n) {
    Tensor t = base(n);
    if (n.find("middle.1.proj.weight") != std::string::npos) return Tensor::zeros(t.shape());
    if (center_only && t.rank() >= 4 && t.dim(-1) == 3 && t.dim(-2) == 3) {
      float* p = t.mutable_data<float>();
      for (int64_t i = 0; i < t.numel(); ++i)
        if (i % 9 != 4) p[i] = 0.0f;  // keep [.., 1, 1]
    }
    return t;
  };
}

// Tiled decode through the sink, reassembled; also records the chunk sizes.
Tensor decode_tiled(WanVae& vae, const Tensor& lat, const VaeDecodeOptions& opt,
                    std::vector<int64_t>* counts) {
  std::vector<Tensor> parts;
  vae.decode(
      lat,
      [&](const Tensor& f) {
        if (counts) counts->push_back(f.dim(1));
        parts.push_back(f.clone());
      },
      opt);
  int64_t total = 0;
  for (const Tensor& p : parts) total += p.dim(1);
  Tensor out = Tensor::zeros(Shape{3, total, parts[0].dim(2), parts[0].dim(3)});
  int64_t pos = 0;
  for (const Tensor& p : parts) {
    for (int64_t ch = 0; ch < 3; ++ch)
      out.select(0, ch).slice(0, pos, pos + p.dim(1)).copy_from(p.select(0, ch).contiguous());
    pos += p.dim(1);
  }
  return out;
}

TEST_P(VaeVersionTest, TiledDecodeOfAPixelLocalDecoderIsExactAndStreams) {
  const VaeConfig c = tiny(GetParam());
  WanVae vae(c, local_weights(c, true), Precision::kFP32);
  const Tensor lat = torch_randn(5, Shape{c.z_dim, 3, 9, 7});
  const Tensor full = vae.decode(lat);
  std::vector<int64_t> counts;
  // Uneven spans (the last tile is pulled back), overlaps on both axes.
  const Tensor tiled = decode_tiled(vae, lat, VaeDecodeOptions{4, 3, 1}, &counts);
  EXPECT_EQ(counts, (std::vector<int64_t>{1, 4, 4}));
  // Only the blend's own rounding ((w1 x + w2 x) / (w1 + w2)) separates them.
  EXPECT_TRUE(all_close(tiled, full, 1e-5, 1e-5, "pixel-local tiled decode"));
  // One tile covering everything is the plain decode, bit for bit.
  EXPECT_TRUE(all_close(vae.decode(lat, VaeDecodeOptions{9, 7, 2}), full, 0, 0, "one tile"));
}

TEST_P(VaeVersionTest, TiledDecodeIsCloseToUntiled) {
  // A real conv stack: tiles see zero padding where the untiled decode sees the neighbouring
  // pixels, and the receptive field (~17 latent pixels for these depths) is wider than the
  // tiles here, so the result is close, not equal. The linear blend across the overlap hides
  // most of the seam; a wider overlap must help.
  const VaeConfig c = tiny(GetParam());
  WanVae vae(c, local_weights(c, false), Precision::kFP32);
  const Tensor lat = torch_randn(5, Shape{c.z_dim, 1, 16, 12});
  const std::vector<float> a = vae.decode(lat).to_float_vector();
  double mean = 0, var = 0;
  for (float v : a) mean += v;
  mean /= static_cast<double>(a.size());
  for (float v : a) var += (v - mean) * (v - mean);
  const double sd = std::sqrt(var / static_cast<double>(a.size()));
  auto mean_diff = [&](int64_t overlap) {
    const std::vector<float> b =
        decode_tiled(vae, lat, VaeDecodeOptions{10, 8, overlap}, nullptr).to_float_vector();
    double d = 0;
    for (size_t i = 0; i < a.size(); ++i) d += std::fabs(a[i] - b[i]);
    return d / static_cast<double>(a.size()) / sd;
  };
  const double narrow = mean_diff(1), wide = mean_diff(6);
  std::printf("tiled vs untiled, mean |diff| / sd: overlap 1: %.4f, overlap 6: %.4f\n", narrow,
              wide);
  EXPECT_GT(narrow, 0.0);
  EXPECT_LT(wide, narrow);
  EXPECT_LT(wide, 0.25);
}

TEST_P(VaeVersionTest, Bf16IsCloseToFp32) {
  WanVae f32 = tiny_vae(GetParam());
  WanVae b16 = tiny_vae(GetParam(), Precision::kBF16);
  const Tensor lat = torch_randn(6, Shape{f32.config().z_dim, 2, 3, 2});
  const Tensor a = f32.decode(lat), b = b16.decode(lat);
  EXPECT_TRUE(all_close(b, a, 0.05, 0.05, "bf16 decode"));
  // Widened bf16 convolutions (nn/conv3d.h) hold their kernels in f32.
  if (conv3d_widens_bf16()) {
    EXPECT_EQ(WanVae::weight_bytes(b16.config(), Precision::kBF16),
              WanVae::weight_bytes(f32.config(), Precision::kFP32));
  } else {
    EXPECT_LT(WanVae::weight_bytes(b16.config(), Precision::kBF16),
              WanVae::weight_bytes(f32.config(), Precision::kFP32));
  }
}

TEST_P(VaeVersionTest, BadInputsNameWhatIsWrong) {
  WanVae vae = tiny_vae(GetParam());
  const int64_t s = vae.config().spatial_stride();
  auto expect_error = [](const std::function<void()>& f, const std::string& needle) {
    try {
      f();
      ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error([&] { vae.encode(Tensor::zeros(Shape{3, 8, s, s})); }, "8 frames");
  expect_error([&] { vae.encode(Tensor::zeros(Shape{3, 5, s + 2, s})); }, "spatial stride");
  expect_error([&] { vae.encode(Tensor::zeros(Shape{4, 5, s, s})); }, "[3, T, H, W]");
  expect_error([&] { vae.encode(Tensor::zeros(Shape{3, 5, s, s}, DType::kI64)); }, "float");
  expect_error(
      [&] {
        vae.decode(Tensor::zeros(Shape{vae.config().z_dim + 1, 2, 2, 2}));
      },
      "latent: expected [");
  expect_error(
      [&] {
        vae.decode(Tensor::zeros(Shape{vae.config().z_dim, 2, 2, 2}), {3, 3, 3});
      },
      "overlap");
  expect_error([&] { vae.set_latent_stats({1.0f}, {1.0f}); }, "latent statistics");
  // Half-loaded models refuse the other direction (and never asked for its weights).
  const VaeConfig c = tiny(GetParam());
  const WeightFn w = random_vae_weights(c, DType::kF32, 9);
  WanVae dec_only(
      c,
      [&](const std::string& n) {
        EXPECT_TRUE(n.rfind("decoder.", 0) == 0 || n.rfind("conv2.", 0) == 0) << n;
        return w(n);
      },
      Precision::kFP32, VaeParts::kDecoder);
  expect_error([&] { dec_only.encode(Tensor::zeros(Shape{3, 5, s, s})); }, "without its encoder");
  WanVae enc_only(c, w, Precision::kFP32, VaeParts::kEncoder);
  expect_error(
      [&] {
        enc_only.decode(Tensor::zeros(Shape{c.z_dim, 2, 2, 2}));
      },
      "without its decoder");
}

INSTANTIATE_TEST_SUITE_P(Versions, VaeVersionTest,
                         ::testing::Values(VaeVersion::kWan21, VaeVersion::kWan22),
                         [](const auto& info) {
                           return info.param == VaeVersion::kWan22 ? std::string("Wan22")
                                                                   : std::string("Wan21");
                         });

TEST(VaeCheckpoint, RandomFileRoundTripsAndConfigIsInferred) {
  for (VaeVersion v : {VaeVersion::kWan21, VaeVersion::kWan22}) {
    TempDir dir;
    const VaeConfig c = tiny(v);
    write_random_vae(dir.file("vae.safetensors"), c, DType::kBF16, 3);
    auto ck = VaeCheckpoint::open(dir.file("vae.safetensors"));
    ck.require_loadable();
    EXPECT_EQ(ck.config().to_json(), c.to_json());
    // Without metadata the config is inferred from the shapes.
    auto f = SafetensorsFile::open(dir.file("vae.safetensors"));
    std::vector<std::pair<std::string, Tensor>> all;
    for (const auto& e : f.entries()) all.emplace_back(e.name, f.tensor(e.name));
    write_safetensors(dir.file("bare.safetensors"), all);
    auto bare = VaeCheckpoint::open(dir.file("bare.safetensors"));
    EXPECT_EQ(bare.config_source(), "inferred from tensor shapes");
    EXPECT_EQ(bare.config().to_json(), c.to_json());
    // Diffusers names (the conversion script's rules) and a ComfyUI-style prefix load too.
    std::vector<std::pair<std::string, Tensor>> diff, pref;
    for (const auto& [n, t] : all) {
      diff.emplace_back(vae_official_to_diffusers(n, c), t);
      pref.emplace_back("first_stage_model." + n, t);
    }
    write_safetensors(dir.file("diffusers.safetensors"), diff);
    write_safetensors(dir.file("prefixed.safetensors"), pref);
    auto dck = VaeCheckpoint::open(dir.file("diffusers.safetensors"));
    EXPECT_EQ(dck.layout(), VaeLayout::kDiffusers);
    EXPECT_EQ(dck.config().to_json(), c.to_json());
    dck.require_loadable();
    auto pck = VaeCheckpoint::open(dir.file("prefixed.safetensors"));
    EXPECT_EQ(pck.layout(), VaeLayout::kPrefixed);
    pck.require_loadable();
    EXPECT_TRUE(all_close(dck.get("decoder.head.2.weight").to(DType::kF32),
                          ck.get("decoder.head.2.weight").to(DType::kF32), 0, 0, "diffusers get"));
  }
}

TEST(VaeCheckpoint, MissingAndMisshapenTensorsAreNamed) {
  TempDir dir;
  const VaeConfig c = tiny(VaeVersion::kWan21);
  write_random_vae(dir.file("vae.safetensors"), c, DType::kF32, 3);
  auto f = SafetensorsFile::open(dir.file("vae.safetensors"));
  std::vector<std::pair<std::string, Tensor>> some;
  for (const auto& e : f.entries())
    if (e.name != "decoder.middle.1.proj.bias") some.emplace_back(e.name, f.tensor(e.name));
  write_safetensors(dir.file("missing.safetensors"), some, f.metadata());
  try {
    VaeCheckpoint::open(dir.file("missing.safetensors")).require_loadable();
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("decoder.middle.1.proj.bias"), std::string::npos)
        << e.what();
  }
  some.emplace_back("decoder.middle.1.proj.bias", Tensor::zeros(Shape{5}));
  write_safetensors(dir.file("shape.safetensors"), some, f.metadata());
  try {
    VaeCheckpoint::open(dir.file("shape.safetensors")).require_loadable();
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("has shape [5]"), std::string::npos) << e.what();
  }
  write_safetensors(dir.file("other.safetensors"), {{"blocks.0.x", Tensor::zeros(Shape{2})}});
  EXPECT_THROW(VaeCheckpoint::open(dir.file("other.safetensors")), InputError);
}

TEST(VaeConfig, PresetsAndEstimates) {
  const VaeConfig v21 = *vae_preset("wan2.1-vae"), v22 = *vae_preset("wan2.2-vae");
  EXPECT_EQ(v21.spatial_stride(), 8);
  EXPECT_EQ(v22.spatial_stride(), 16);
  EXPECT_EQ(v21.temporal_stride(), 4);
  EXPECT_EQ(v22.temporal_stride(), 4);
  EXPECT_EQ(v21.latent_mean.size(), 16u);
  EXPECT_EQ(v22.latent_std.size(), 48u);
  EXPECT_FLOAT_EQ(v21.latent_inv_std()[0], 1.0f / 2.8184f);
  // Wan2.1_VAE.pth has 126.9M parameters (508 MB in f32).
  EXPECT_NEAR(static_cast<double>(vae_parameter_count(v21)), 126.9e6, 0.2e6);
  EXPECT_EQ(WanVae::weight_bytes(v21, Precision::kFP32), 4 * vae_parameter_count(v21));
  EXPECT_EQ(WanVae::weight_bytes(v21, Precision::kFP32, VaeParts::kDecoder),
            4 * vae_decoder_parameter_count(v21));
  // Streaming decode: the estimate grows with the frame size, tiling lowers activations only.
  const int64_t small = WanVae::decode_peak_bytes(v21, 240, 416, Precision::kFP32);
  const int64_t big = WanVae::decode_peak_bytes(v21, 480, 832, Precision::kFP32);
  const int64_t big16 = WanVae::decode_peak_bytes(v21, 480, 832, Precision::kBF16);
  const int64_t tiled = WanVae::decode_peak_bytes(v21, 480, 832, Precision::kFP32, {32, 56, 4});
  EXPECT_LT(small, big);
  EXPECT_LT(big16, big);
  // Tiles keep their own carried frames (overlaps included) and cut only the activations.
  EXPECT_GT(tiled, big * 8 / 10);
  EXPECT_LT(tiled, big * 13 / 10);
  EXPECT_GT(WanVae::encode_peak_bytes(v21, 480, 832, Precision::kFP32), 0);
  // The bf16 832x480 decode (issue 3's "under 3 GiB"): carried state 1.75 GB untiled, x1.15
  // with 2x2 tiles; the estimate must stay under the target it is used to check.
  const int64_t b16_tiled = WanVae::decode_peak_bytes(v21, 480, 832, Precision::kBF16, {32, 56, 4});
  std::printf("decode estimate 832x480 bf16: untiled %.3f GB, 2x2 tiles %.3f GB\n", big16 / 1e9,
              b16_tiled / 1e9);
  EXPECT_LT(big16, int64_t{3} << 30);
  EXPECT_LT(b16_tiled, int64_t{3} << 30);
  EXPECT_FALSE(vae_preset("wan9-vae").has_value());
}

}  // namespace
}  // namespace vidax::wan
