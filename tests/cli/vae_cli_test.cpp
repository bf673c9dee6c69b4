// `vidax run vae-encode / vae-decode` and `vidax bench vae` through the real binary: fixture
// outputs, and one-line errors for bad input.
#include <sys/wait.h>

#include <cstdio>

#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "support/test_support.h"

namespace vidax {
namespace {

using vidax::testing::all_close;
using vidax::testing::TempDir;
std::pair<int, std::string> run_vidax(const std::string& args) {
  const auto r = vidax::testing::run_vidax(args);
  return {r.code, r.out};
}

TEST(VaeCli, EncodeAndDecodeMatchFixtures) {
  VIDAX_REQUIRE_FIXTURE(weights, "vae_tiny.weights.safetensors");
  VIDAX_REQUIRE_FIXTURE(io_path, "vae_tiny.io.safetensors");
  TempDir dir;
  auto io = SafetensorsFile::open(io_path);
  auto [code, out] = run_vidax("run vae-encode --weights " + weights + " --in " + io_path +
                               " --out " + dir.file("enc.safetensors"));
  ASSERT_EQ(code, 0) << out;
  auto enc = SafetensorsFile::open(dir.file("enc.safetensors"));
  for (const char* n : {"mu", "mu_raw", "log_var", "enc_out"})
    EXPECT_TRUE(all_close(enc.tensor(n), io.tensor(n), 1e-5, 1e-5, n));
  std::tie(code, out) = run_vidax("run vae-decode --weights " + weights + " --in " + io_path +
                                  " --out " + dir.file("dec.safetensors"));
  ASSERT_EQ(code, 0) << out;
  auto dec = SafetensorsFile::open(dir.file("dec.safetensors"));
  for (const char* n : {"dec_out", "dec_post_quant_out"})
    EXPECT_TRUE(all_close(dec.tensor(n), io.tensor(n), 1e-5, 1e-5, n));
}

TEST(VaeCli, BadInputIsOneLine) {
  VIDAX_REQUIRE_FIXTURE(weights, "vae_tiny.weights.safetensors");
  VIDAX_REQUIRE_FIXTURE(io22, "vae22_tiny.io.safetensors");
  TempDir dir;
  write_safetensors(dir.file("v8.safetensors"), {{"video", Tensor::zeros(Shape{3, 8, 32, 32})}});
  const std::pair<std::string, std::string> cases[] = {
      {"run vae-encode --weights " + weights + " --in " + dir.file("v8.safetensors") + " --out " +
           dir.file("o.safetensors"),
       "8 frames"},
      {"run vae-decode --weights " + weights + " --in " + dir.file("v8.safetensors") + " --out " +
           dir.file("o.safetensors"),
       "missing input tensor 'z'"},
      {"run vae-decode --weights " + weights + " --in " + io22 + " --out " +
           dir.file("o.safetensors"),
       "latent statistics"},
      {"run vae-encode --weights " + dir.file("v8.safetensors") + " --in " + io22 + " --out " +
           dir.file("o.safetensors"),
       "not a Wan VAE checkpoint"},
      {"bench vae --size 100x64 --frames 5", "multiples of 8"},
      {"bench vae --frames 6", "4k+1"},
      {"bench vae --version 3", "2.1 or 2.2"},
  };
  for (const auto& [args, needle] : cases) {
    const auto [code, out] = run_vidax(args);
    EXPECT_EQ(code, 1) << args << "\n" << out;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << args << "\n" << out;
    EXPECT_NE(out.find(needle), std::string::npos) << args << "\n" << out;
  }
}

TEST(VaeCli, BenchPrintsJson) {
  const auto [code, out] = run_vidax("bench vae --size 32x32 --frames 5 --precision bf16 --json");
  ASSERT_EQ(code, 0) << out;
  for (const char* key : {"\"seconds_per_frame\"", "\"peak_rss_bytes\"", "\"frames\":5",
                          "\"page_reuse\"", "\"seconds\"", "\"estimated_peak_bytes\""})
    EXPECT_NE(out.find(key), std::string::npos) << key << " in " << out;
}

// VIDAX_PAGE_REUSE: off keeps nothing, a slack keeps buffers between latent frames, anything
// else is a one-line error naming the variable.
TEST(VaeCli, PageReuseSettingIsCheckedAndReported) {
  const std::string bench = std::string(" ") + VIDAX_BINARY +
                            " bench vae --size 32x32 --frames 9 --precision bf16 --json 2>&1";
  const vidax::testing::CommandResult bad =
      vidax::testing::run_shell("VIDAX_PAGE_REUSE=lots" + bench);
  EXPECT_EQ(bad.code, 1) << bad.out;
  EXPECT_EQ(std::count(bad.out.begin(), bad.out.end(), '\n'), 1) << bad.out;
  EXPECT_NE(bad.out.find("VIDAX_PAGE_REUSE: expected off, on or a fraction"), std::string::npos)
      << bad.out;
  for (const std::string setting : {"off", "1"}) {
    const vidax::testing::CommandResult r =
        vidax::testing::run_shell("VIDAX_PAGE_REUSE=" + setting + bench);
    ASSERT_EQ(r.code, 0) << r.out;
    const auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
    EXPECT_GT(j["page_reuse"]["mapped"].get<int>(), 0) << r.out;
    if (setting == "off") {
      EXPECT_EQ(j["page_reuse"]["reused"].get<int>(), 0) << r.out;
    } else {
      EXPECT_GT(j["page_reuse"]["reused"].get<int>(), 0) << r.out;
    }
  }
}

}  // namespace
}  // namespace vidax
