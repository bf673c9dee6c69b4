// Wan 2.1 / 2.2 VAE against the reference fixtures (vae_tiny, vae22_tiny): encode intermediates,
// decode, round trip, the streaming sink, diffusers names, and input errors.
#include <filesystem>

#include "io/safetensors.h"
#include "models/wan/vae.h"
#include "models/wan/vae_checkpoint.h"
#include "support/test_support.h"

namespace vidax::wan {
namespace {

using vidax::testing::all_close;

constexpr double kTol = 1e-5;  // fixtures README section 4: VAE tensors

struct Case {
  const char* weights;
  const char* io;
};
// gtest prints parameters it cannot format as raw bytes; name the files instead.
void PrintTo(const Case& c, std::ostream* os) { *os << c.weights << " + " << c.io; }

class VaeFixtureTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    weights_ = vidax::testing::wan_fixture(GetParam().weights);
    io_path_ = vidax::testing::wan_fixture(GetParam().io);
    if (weights_.empty() || io_path_.empty())
      GTEST_SKIP() << "fixtures " << GetParam().weights << " / " << GetParam().io
                   << " not found under " << VIDAX_FIXTURES_DIR;
  }
  WanVae load(Precision p = Precision::kFP32) const {
    auto ck = VaeCheckpoint::open(weights_);
    ck.require_loadable();
    WanVae vae(ck.config(), ck.loader(), p);
    auto io = SafetensorsFile::open(io_path_);
    vae.set_latent_stats(io.tensor("scale_mean").to_float_vector(),
                         io.tensor("scale_inv_std").to_float_vector());
    return vae;
  }
  std::string weights_, io_path_;
};

TEST_P(VaeFixtureTest, EncodeMatchesReference) {
  WanVae vae = load();
  auto io = SafetensorsFile::open(io_path_);
  std::map<std::string, Tensor> got;
  const Tensor mu =
      vae.encode(io.tensor("video"), [&](const std::string& n, const Tensor& t) { got[n] = t; });
  for (const char* name : {"enc_out", "mu_raw", "log_var"}) {
    ASSERT_TRUE(got.count(name)) << name;
    EXPECT_TRUE(all_close(got[name], io.tensor(name), kTol, kTol, name));
  }
  EXPECT_TRUE(all_close(mu.unsqueeze(0), io.tensor("mu"), kTol, kTol, "mu"));
}

TEST_P(VaeFixtureTest, DecodeMatchesReference) {
  WanVae vae = load();
  auto io = SafetensorsFile::open(io_path_);
  Tensor post;
  std::vector<Tensor> chunks;
  vae.decode(
      io.tensor("z"), [&](const Tensor& f) { chunks.push_back(f.clone()); }, {},
      [&](const std::string& n, const Tensor& t) {
        if (n == "dec_post_quant_out") post = t;
      });
  ASSERT_TRUE(post.defined());
  EXPECT_TRUE(all_close(post, io.tensor("dec_post_quant_out"), kTol, kTol, "dec_post_quant_out"));
  // The sink sees 1 frame for latent frame 0, then 4 per latent frame, in order.
  const Tensor ref = io.tensor("dec_out").select(0, 0);  // [3, T, H, W]
  ASSERT_EQ(chunks.size(), static_cast<size_t>(io.tensor("z").dim(2)));
  int64_t pos = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    ASSERT_EQ(chunks[i].dim(1), i == 0 ? 1 : 4);
    EXPECT_TRUE(all_close(chunks[i], ref.slice(1, pos, pos + chunks[i].dim(1)).contiguous(), kTol,
                          kTol, "dec_out chunk " + std::to_string(i)));
    pos += chunks[i].dim(1);
  }
  EXPECT_EQ(pos, ref.dim(1));
  // The convenience overload concatenates the same frames.
  EXPECT_TRUE(all_close(vae.decode(io.tensor("z")).unsqueeze(0), io.tensor("dec_out"), kTol, kTol,
                        "dec_out"));
}

TEST_P(VaeFixtureTest, RoundTripMatchesReference) {
  WanVae vae = load();
  auto io = SafetensorsFile::open(io_path_);
  const Tensor recon = vae.decode(vae.encode(io.tensor("video")));
  EXPECT_TRUE(all_close(recon.unsqueeze(0), io.tensor("recon"), kTol, kTol, "recon"));
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, VaeFixtureTest,
    ::testing::Values(Case{"vae_tiny.weights.safetensors", "vae_tiny.io.safetensors"},
                      Case{"vae_tiny.diffusers.safetensors", "vae_tiny.io.safetensors"},
                      Case{"vae22_tiny.weights.safetensors", "vae22_tiny.io.safetensors"}),
    [](const auto& info) {
      std::string n = info.param.weights;
      for (char& c : n)
        if (!isalnum(static_cast<unsigned char>(c))) c = '_';
      return n;
    });

}  // namespace
}  // namespace vidax::wan
