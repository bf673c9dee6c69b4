// `vidax inspect` on PyTorch .pth checkpoints: the same report as for safetensors for a DiT, a
// generic summary for other models, one-line errors for hostile files.
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "io/pth_test_util.h"
#include "io/safetensors.h"
#include "io/safetensors_test_util.h"
#include "io/torch_checkpoint.h"
#include "support/test_support.h"

namespace vidax {
namespace {

namespace pk = testing::pk;
using testing::TempDir;
using Result = vidax::testing::CommandResult;
using vidax::testing::run_vidax;

std::vector<std::string> lines_without_file(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("file:", 0) != 0) out.push_back(line);
  }
  return out;
}

TEST(CliInspectPth, DitPthReportsLikeSafetensors) {
  VIDAX_REQUIRE_FIXTURE(weights, "dit_t2v_tiny.weights.safetensors");
  TempDir dir;
  // The same tensors as an official-layout .pth and as a metadata-free safetensors file, so both
  // infer the config from shapes.
  const SafetensorsFile src = SafetensorsFile::open(weights);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const TensorEntry& e : src.entries()) tensors.emplace_back(e.name, src.tensor(e.name));
  write_torch_checkpoint(dir.file("dit.pth"), tensors);
  write_safetensors(dir.file("dit.safetensors"), tensors);
  const Result pth = run_vidax("inspect " + dir.file("dit.pth"));
  const Result st = run_vidax("inspect " + dir.file("dit.safetensors"));
  ASSERT_EQ(pth.code, 0) << pth.out;
  ASSERT_EQ(st.code, 0) << st.out;
  EXPECT_NE(pth.out.find("layout:      official"), std::string::npos) << pth.out;
  EXPECT_NE(pth.out.find("missing: 0"), std::string::npos) << pth.out;
  EXPECT_EQ(lines_without_file(pth.out), lines_without_file(st.out)) << pth.out << "\n" << st.out;
}

TEST(CliInspectPth, RunDitFromPthWeightsMatchesFixture) {
  // The whole loader path (TensorSource -> DitCheckpoint -> WanDit) from a .pth file.
  VIDAX_REQUIRE_FIXTURE(weights, "dit_t2v_tiny.weights.safetensors");
  VIDAX_REQUIRE_FIXTURE(io_path, "dit_t2v_tiny.io.safetensors");
  TempDir dir;
  const SafetensorsFile src = SafetensorsFile::open(weights);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const TensorEntry& e : src.entries()) tensors.emplace_back(e.name, src.tensor(e.name));
  write_torch_checkpoint(dir.file("dit.pth"), tensors);
  // A .pth has no metadata; like an official Wan folder, config.json sits beside the weights
  // (text_len cannot be inferred from tensor shapes).
  std::string config = src.metadata().at("config");
  config.insert(1, "\"model_type\": \"" + src.metadata().at("model_type") + "\", ");
  testing::write_bytes(dir.file("config.json"), config);
  const SafetensorsFile io = SafetensorsFile::open(io_path);
  write_safetensors(dir.file("in.safetensors"), {{"x", io.tensor("x")},
                                                 {"t", io.tensor("call0.t")},
                                                 {"context", io.tensor("context")},
                                                 {"seq_len", io.tensor("seq_len")}});
  const Result r = run_vidax("run dit --weights " + dir.file("dit.pth") + " --in " +
                             dir.file("in.safetensors") + " --out " + dir.file("out.safetensors"));
  ASSERT_EQ(r.code, 0) << r.out;
  const SafetensorsFile out = SafetensorsFile::open(dir.file("out.safetensors"));
  EXPECT_TRUE(testing::all_close(out.tensor("out"), io.tensor("call0.out"), 1e-4, 1e-4, "pth"));
}

TEST(CliInspectPth, OtherModelsGetAGenericSummary) {
  TempDir dir;
  const std::string path = dir.file("models_t5_tiny.pth");
  write_torch_checkpoint(path, {{"token_embedding.weight", Tensor::zeros({10, 4}, DType::kBF16)},
                                {"blocks.0.attn.q.weight", Tensor::zeros({4, 4}, DType::kBF16)},
                                {"norm.weight", Tensor::zeros({4})}});
  const Result r = run_vidax("inspect " + path);
  ASSERT_EQ(r.code, 0) << r.out;
  for (const std::string phrase :
       {"format:      pytorch, 1 file(s)", "not a Wan model (generic summary)",
        "tensors:     3, 60 parameters", "BF16", "56 params", "F32", "token_embedding.weight",
        "[10, 4]"}) {
    EXPECT_NE(r.out.find(phrase), std::string::npos) << phrase << " in:\n" << r.out;
  }
  // The real torch.save file too.
  const Result real =
      run_vidax("inspect " + std::string(VIDAX_SOURCE_DIR) + "/tests/data/pth/parameters.pth");
  ASSERT_EQ(real.code, 0) << real.out;
  EXPECT_NE(real.out.find("tensors:     2, 8 parameters"), std::string::npos) << real.out;
}

TEST(CliInspectPth, HostileFilesGiveOneLineErrors) {
  TempDir dir;
  const std::string evil = dir.file("evil.pth");
  testing::write_bytes(
      evil, testing::make_pth(
                pk::state_dict({{"w", pk::global("os", "system") +
                                          pk::tuple({pk::str("echo pwned")}) + pk::op('R')}}),
                {}));
  const std::string legacy = dir.file("legacy.pth");
  testing::write_bytes(legacy, std::string("\x80\x02\x8a\x0a", 4) + std::string(64, 'x'));
  for (const auto& [path, needle] : std::vector<std::pair<std::string, std::string>>{
           {evil, "global 'os.system' is not allowed"}, {legacy, "legacy PyTorch checkpoint"}}) {
    const Result r = run_vidax("inspect " + path);
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
    EXPECT_NE(r.out.find(path), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(needle), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("pwned"), std::string::npos) << r.out;
  }
}

}  // namespace
}  // namespace vidax
