// Dataset export and reload, the `vidax synth` command (through the real binary), and the
// Python reader when numpy is available.
#include "synth/dataset.h"

#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>

#include "core/error.h"
#include "support/test_support.h"
#include "synth/analyzer.h"

namespace vidax::synth {
namespace {

using vidax::testing::TempDir;
using Result = vidax::testing::CommandResult;
using vidax::testing::count_lines;
using vidax::testing::expect_one_line_error;
inline Result run(const std::string& cmd) { return vidax::testing::run_shell(cmd); }
inline Result vidax(const std::string& args) { return vidax::testing::run_vidax(args); }

TEST(Dataset, ExportAndReloadRoundTrip) {
  TempDir dir;
  DatasetOptions o;
  o.out_dir = dir.file("ds");
  o.count = 7;
  o.seed = 40;
  o.geometry = {64, 48, 5};
  o.shard_size = 3;
  o.preview = 2;
  const DatasetSummary sum = write_dataset(o);
  EXPECT_EQ(sum.clips, 7);
  EXPECT_EQ(sum.files.size(), 5u);  // 3 shards, preview, manifest
  EXPECT_EQ(sum.files.back(), "manifest.json");

  const SynthDataset d = SynthDataset::open(o.out_dir);
  ASSERT_EQ(d.size(), 7);
  EXPECT_EQ(d.layout(), Layout::kRandom);
  EXPECT_EQ(d.geometry().width, 64);
  EXPECT_EQ(d.geometry().frames, 5);
  for (int64_t i = 0; i < d.size(); ++i) {
    const SceneSpec s = sample_scene(40 + static_cast<uint64_t>(i));
    EXPECT_EQ(d.seed(i), s.seed);
    EXPECT_EQ(d.caption(i), caption(s));
    const Tensor clip = d.clip(i);
    ASSERT_EQ(clip.shape(), (Shape{5, 48, 64, 3}));
    EXPECT_EQ(fnv1a64(clip), fnv1a64(render_rgb8(s, o.geometry))) << i;
  }
  EXPECT_THROW(d.clip(7), InputError);

  std::ifstream png(dir.file("ds/preview.png"), std::ios::binary);
  char sig[8] = {};
  png.read(sig, 8);
  EXPECT_EQ(std::string(sig + 1, 3), "PNG");
}

TEST(Dataset, BadOptionsAreInputErrors) {
  TempDir dir;
  DatasetOptions o;
  o.out_dir = dir.file("ds");
  o.count = 0;
  EXPECT_THROW(write_dataset(o), InputError);
  o.count = 1;
  o.geometry = {100, 64, 17};
  EXPECT_THROW(write_dataset(o), InputError);
  o.geometry = {64, 64, 6};
  EXPECT_THROW(write_dataset(o), InputError);
  o.geometry = {64, 64, 5};
  o.shard_size = 0;
  EXPECT_THROW(write_dataset(o), InputError);
  EXPECT_THROW(SynthDataset::open(dir.path()), InputError);  // no manifest
}

TEST(Dataset, ManifestOnlyAppearsWhenComplete) {
  TempDir dir;
  std::ofstream(dir.file("manifest.json")) << "{\"format\": \"vidax-synth\"}";
  EXPECT_THROW(SynthDataset::open(dir.path()), InputError);
}

TEST(SynthCli, WritesADatasetTheLibraryReads) {
  TempDir dir;
  const Result r = vidax("synth --out " + dir.file("ds") +
                         " --count 3 --seed 9 --size 64x32 --frames 9 --preview 1");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("wrote 3 clips"), std::string::npos) << r.out;
  const SynthDataset d = SynthDataset::open(dir.file("ds"));
  ASSERT_EQ(d.size(), 3);
  EXPECT_EQ(fnv1a64(d.clip(2)), fnv1a64(render_rgb8(sample_scene(11), {64, 32, 9})));
  struct stat st {};
  EXPECT_EQ(::stat(dir.file("ds/preview.png").c_str(), &st), 0);
}

TEST(SynthCli, CanonicalLayoutIsRecordedAndRendered) {
  TempDir dir;
  const Result r = vidax("synth --out " + dir.file("ds") +
                         " --count 4 --seed 21 --size 64x64 --frames 5 --layout canonical");
  ASSERT_EQ(r.code, 0) << r.out;
  const SynthDataset d = SynthDataset::open(dir.file("ds"));
  EXPECT_EQ(d.layout(), Layout::kCanonical);
  for (int64_t i = 0; i < d.size(); ++i) {
    const SceneSpec s = sample_scene(21 + static_cast<uint64_t>(i), Layout::kCanonical);
    EXPECT_EQ(d.caption(i), caption(s));
    EXPECT_EQ(fnv1a64(d.clip(i)), fnv1a64(render_rgb8(s, {64, 64, 5}))) << i;
  }
  const Result bad = vidax("synth --out " + dir.file("bad") + " --count 1 --layout grid");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.out.find("--layout: expected random, canonical or large, got 'grid'"),
            std::string::npos)
      << bad.out;
  struct stat st {};
  EXPECT_NE(::stat(dir.file("bad/manifest.json").c_str(), &st), 0);
}

TEST(SynthCli, AnalyzesGroundTruth) {
  const Result r = vidax("synth --analyze-ground-truth --count 12 --size 128x128 --frames 9");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("analyzer on 12 ground-truth clips"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("overall 100.0%"), std::string::npos) << r.out;
}

TEST(SynthCli, BadInputGivesOneLineErrors) {
  TempDir dir;
  const std::string out = " --out " + dir.file("ds");
  expect_one_line_error("synth --count 0" + out, "--count");
  expect_one_line_error("synth --count 2 --size 256" + out, "--size");
  expect_one_line_error("synth --count 2 --size 250x256" + out, "multiples of 16");
  expect_one_line_error("synth --count 2 --frames 16" + out, "4k+1");
  expect_one_line_error("synth --count 2", "--out");
  expect_one_line_error("synth --analyze-ground-truth --count 2 --perturb smear", "--perturb");
  // A folder under a regular file cannot be created.
  std::ofstream(dir.file("file")) << "x";
  expect_one_line_error("synth --count 1 --size 32x32 --frames 1 --out " + dir.file("file/ds"),
                        "--out");
  if (::geteuid() != 0) {  // root writes anywhere
    ::mkdir(dir.file("ro").c_str(), 0555);
    expect_one_line_error("synth --count 1 --size 32x32 --frames 1 --out " + dir.file("ro"),
                          "not writable");
  }
}

// research/vidax_tiny/dataset.py --self-test: the Python reader loads a dataset written by the
// binary and checks every clip's checksum against the manifest (needs python3 with numpy).
TEST(SynthCli, PythonReaderSelfTest) {
  std::string python;
  for (const char* p : {"/usr/bin/python3", "python3"})
    if (run(std::string(p) + " -c 'import numpy'").code == 0) {
      python = p;
      break;
    }
  if (python.empty()) GTEST_SKIP() << "no python3 with numpy";
  const Result r = run(python + " " + VIDAX_SOURCE_DIR +
                       "/research/vidax_tiny/dataset.py --self-test " + VIDAX_BINARY);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("self-test passed"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace vidax::synth
