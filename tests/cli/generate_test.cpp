// End to end: `vidax random-model` writes a tiny random Wan 2.1 T2V model in each published
// layout (official .pth files, diffusers folders, ComfyUI fp16/bf16 files); `vidax generate`
// turns a prompt into a real video, checked with ffprobe; the sidecar must describe the run.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "support/test_support.h"

namespace vidax {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using vidax::testing::TempDir;
using Result = vidax::testing::CommandResult;
using vidax::testing::run_shell;
inline Result vidax(const std::string& args) { return vidax::testing::run_vidax(args); }

std::string tokenizer() {
  return std::string(VIDAX_SOURCE_DIR) + "/tests/data/tokenizer/spiece.model";
}

// Builds the model folder once per layout per test process.
std::string model_dir(const std::string& layout) {
  static TempDir root;
  const std::string dir = root.file(layout);
  if (!fs::exists(dir)) {
    const Result r = vidax("random-model " + dir + " --layout " + layout + " --tokenizer " +
                           tokenizer() + " --seed 3");
    EXPECT_EQ(r.code, 0) << r.out;
  }
  return dir;
}

std::string model_args(const std::string& layout) {
  std::string a = "--model " + model_dir(layout);
  if (layout == "comfyui") a += " --tokenizer " + tokenizer();
  return a;
}

json ffprobe(const std::string& path) {
  const Result r = run_shell(
      "ffprobe -v error -count_frames -show_entries "
      "stream=codec_name,width,height,pix_fmt,r_frame_rate,nb_read_frames -of json " +
      path);
  EXPECT_EQ(r.code, 0) << r.out;
  return json::parse(r.out, nullptr, false);
}

bool is_hex_digest(const json& v) {
  if (!v.is_string() || v.get<std::string>().size() != 64) return false;
  for (char c : v.get<std::string>())
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

class Generate : public ::testing::TestWithParam<std::string> {};

TEST_P(Generate, WritesAnMp4AndACompleteSidecar) {
  const std::string layout = GetParam();
  TempDir out;
  ::setenv("XDG_CACHE_HOME", out.file("cache").c_str(), 1);
  const Result r = vidax("generate " + model_args(layout) +
                         " --prompt 'a red square moves to the left' --size 64x32 --frames 9"
                         " --steps 2 --seed 7 --json -o " +
                         out.file("clip.mp4"));
  ASSERT_EQ(r.code, 0) << r.out;

  const json probe = ffprobe(out.file("clip.mp4"));
  ASSERT_TRUE(probe.contains("streams") && probe["streams"].size() == 1) << probe.dump();
  const json& s = probe["streams"][0];
  EXPECT_EQ(s["codec_name"], "h264");
  EXPECT_EQ(s["pix_fmt"], "yuv420p");
  EXPECT_EQ(s["width"], 64);
  EXPECT_EQ(s["height"], 32);
  EXPECT_EQ(s["r_frame_rate"], "16/1");
  EXPECT_EQ(s["nb_read_frames"], "9");

  std::ifstream in(out.file("clip.mp4.json"));
  ASSERT_TRUE(in.good()) << "no sidecar";
  const json side = json::parse(in);
  EXPECT_EQ(side["prompt"], "a red square moves to the left");
  EXPECT_NE(side["negative_prompt"].get<std::string>().find("色调艳丽"), std::string::npos)
      << "the official default negative prompt";
  EXPECT_EQ(side["seed"], 7);
  EXPECT_EQ(side["size"], json({64, 32}));
  EXPECT_EQ(side["frames"], 9);
  EXPECT_EQ(side["fps"], 16.0);
  EXPECT_EQ(side["steps"], 2);
  EXPECT_EQ(side["sampler"], "unipc");
  EXPECT_EQ(side["shift"], 5.0);
  EXPECT_EQ(side["guide_scale"], 5.0);
  EXPECT_EQ(side["precision"], "bf16");
  EXPECT_EQ(side["plan"]["files"]["layout"], layout);
  EXPECT_EQ(side["plan"]["tokens"], 3 * 2 * 4);  // latent [16, 3, 4, 8], patch (1, 2, 2)
  for (const char* part : {"dit", "t5", "vae", "tokenizer"}) {
    ASSERT_TRUE(side["model_sha256"].contains(part)) << part;
    ASSERT_FALSE(side["model_sha256"][part].empty()) << part;
    for (const auto& [file, digest] : side["model_sha256"][part].items())
      EXPECT_TRUE(is_hex_digest(digest)) << part << " " << file;
  }
  for (const char* t : {"encode_text_seconds", "denoise_seconds", "seconds_per_step",
                        "decode_seconds", "total_seconds"})
    EXPECT_GT(side["timings"][t].get<double>(), 0.0) << t;
  EXPECT_TRUE(side["command"].is_array());
  // Only the two finished files: no temporaries left behind.
  int entries = 0;
  for (const auto& e : fs::directory_iterator(out.path()))
    if (e.path().filename() != "cache") ++entries;
  EXPECT_EQ(entries, 2);
  ::unsetenv("XDG_CACHE_HOME");
}

INSTANTIATE_TEST_SUITE_P(Layouts, Generate, ::testing::Values("official", "diffusers", "comfyui"));

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The 5 PNG frames of two output folders are byte-identical (and exist).
void expect_same_frames(const std::string& a_dir, const std::string& b_dir) {
  for (int i = 0; i < 5; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "/frame_%05d.png", i);
    const std::string a = read_file(a_dir + name);
    ASSERT_FALSE(a.empty()) << a_dir << name;
    EXPECT_EQ(a, read_file(b_dir + name)) << b_dir << name;
  }
}

TEST(GenerateEndToEnd, OfficialAndDiffusersLayoutsGiveTheSameFrames) {
  // Same random weights stored under two layouts (f32 DiT and VAE, bf16 T5 in both): the
  // loaders must map every tensor to the same place, so the PNG frames are byte-identical.
  TempDir out;
  for (const char* layout : {"official", "diffusers"}) {
    const Result r = vidax("generate " + model_args(layout) +
                           " --prompt 'a blue circle grows' --size 64x64 --frames 5 --steps 2"
                           " --seed 11 --no-hash -o " +
                           out.file(std::string(layout) + "/"));
    ASSERT_EQ(r.code, 0) << r.out;
  }
  expect_same_frames(out.file("official"), out.file("diffusers"));
  // A different seed gives a different video.
  const Result r = vidax("generate " + model_args("official") +
                         " --prompt 'a blue circle grows' --size 64x64 --frames 5 --steps 2"
                         " --seed 12 --no-hash -o " +
                         out.file("other/"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(read_file(out.file("official/frame_00004.png")),
            read_file(out.file("other/frame_00004.png")));
}

// --weights-budget: the random model's DiT keeps ~656 KiB of embeddings and head and ~394 KiB per
// block in bf16; 1.2 MiB holds one block, so both stream through a window of one at every step.
// The frames are the resident run's, byte for byte, and the plan shows the budget.
TEST(GenerateEndToEnd, AWeightsBudgetGivesTheSameFrames) {
  TempDir out;
  const std::string common = "generate " + model_args("official") +
                             " --prompt 'a blue circle grows' --size 64x64 --frames 5 --steps 2"
                             " --seed 11 --no-hash ";
  ASSERT_EQ(vidax(common + "-o " + out.file("resident/")).code, 0);
  const Result r = vidax(common + "--weights-budget 1.2MiB -o " + out.file("streamed/"));
  ASSERT_EQ(r.code, 0) << r.out;
  expect_same_frames(out.file("resident"), out.file("streamed"));
  // The sidecar records the stream: 2 blocks used at each of 2 steps x 2 branches, each read
  // once; the reads counted in this video's denoise may be one fewer (block 0's first read can
  // end before the denoise starts counting) or one more (the loader runs ahead into the next
  // forward): which, timing decides.
  const auto sidecar = nlohmann::json::parse(read_file(out.file("streamed.json")));
  EXPECT_EQ(sidecar["weights_budget_bytes"], static_cast<int64_t>(1.2 * (1 << 20)));
  EXPECT_EQ(sidecar["weight_stream"]["streamed_blocks"], 2) << sidecar.dump();
  EXPECT_EQ(sidecar["weight_stream"]["uses"].get<int>(), 8) << sidecar.dump();
  EXPECT_GE(sidecar["weight_stream"]["loads"].get<int>(), 7) << sidecar.dump();
  EXPECT_LE(sidecar["weight_stream"]["loads"].get<int>(), 9) << sidecar.dump();
  const Result plan = vidax(common + "--weights-budget 1.2MiB --dry-run --json");
  ASSERT_EQ(plan.code, 0) << plan.out;
  const auto j = nlohmann::json::parse(plan.out.substr(plan.out.find('{')));
  for (const auto& phase : j["memory"]["phases"]) {
    if (phase["phase"] == "denoise") {
      EXPECT_LE(phase["weight_bytes"].get<double>(), 1.2 * (1 << 20)) << plan.out;
    }
  }
}

// A two-expert folder (Wan 2.2 A14B form: high and low-noise DiTs of one config, different
// weights) in each layout, written once per test process.
std::string experts_dir(const std::string& layout) {
  static TempDir root;
  const std::string dir = root.file(layout);
  if (!fs::exists(dir)) {
    const Result r = vidax("random-model " + dir + " --experts --layout " + layout +
                           " --tokenizer " + tokenizer() + " --seed 3");
    EXPECT_EQ(r.code, 0) << r.out;
  }
  return dir;
}

// The plan takes the Wan 2.2 T2V A14B defaults (40 steps, shift 12, guide 4 high / 3 low,
// boundary 875, 1280x720, 81 frames at 16 fps); 6 steps at shift 12 have timesteps 999, 983, 959,
// 922 (high-noise expert) and 856, 705 (low-noise); the official and diffusers layouts give the
// same frames; the sidecar says which expert ran how many steps.
TEST(GenerateEndToEnd, TwoExpertFoldersInEveryLayout) {
  const Result plan = vidax("generate --model " + experts_dir("official") +
                            " --prompt 'a red square' --dry-run --json");
  ASSERT_EQ(plan.code, 0) << plan.out;
  const json p = json::parse(plan.out.substr(plan.out.find('{')));
  EXPECT_EQ(p["family"], "Wan 2.2 T2V A14B") << plan.out;
  EXPECT_EQ(p["denoise"]["steps"], 40);
  EXPECT_EQ(p["denoise"]["shift"], 12.0);
  EXPECT_EQ(p["experts"]["guide_scale_high"], 4.0);
  EXPECT_EQ(p["experts"]["guide_scale_low"], 3.0);
  EXPECT_EQ(p["experts"]["boundary_timestep"], 875.0);
  EXPECT_EQ(p["video"]["width"], 1280);
  EXPECT_EQ(p["video"]["height"], 720);
  EXPECT_EQ(p["video"]["frames"], 81);

  TempDir out;
  const std::string request =
      " --prompt 'a blue circle grows' --size 64x64 --frames 5 --steps 6 --seed 11 --no-hash -o ";
  for (const std::string layout : {"official", "diffusers", "comfyui"}) {
    std::string args = "generate --model " + experts_dir(layout);
    if (layout == "comfyui") args += " --tokenizer " + tokenizer();
    const Result r = vidax(args + request + out.file(layout + "/"));
    ASSERT_EQ(r.code, 0) << layout << "\n" << r.out;
    const json side = json::parse(read_file(out.file(layout + ".json")));
    EXPECT_EQ(side["experts"]["high_noise_steps"], 4) << layout << side.dump();
    EXPECT_EQ(side["experts"]["low_noise_steps"], 2) << layout << side.dump();
    EXPECT_EQ(side["model_family"], "Wan 2.2 T2V A14B");
  }
  expect_same_frames(out.file("official"), out.file("diffusers"));
  // The experts are different networks: the frames differ from a run with the high-noise
  // expert alone (--dit names it, without --dit-low).
  const Result one =
      vidax("generate --model " + experts_dir("official") + " --dit " + experts_dir("official") +
            "/high_noise_model" + request + out.file("high_only/"));
  ASSERT_EQ(one.code, 0) << one.out;
  EXPECT_NE(read_file(out.file("official/frame_00004.png")),
            read_file(out.file("high_only/frame_00004.png")));
  // inspect describes the folder.
  const Result ins = vidax("inspect " + experts_dir("diffusers"));
  ASSERT_EQ(ins.code, 0) << ins.out;
  for (const char* needle : {"two DiT experts", "boundary:     0.875 (model_index.json)",
                             "transformer_2", "problems:     high noise 0, low noise 0"})
    EXPECT_NE(ins.out.find(needle), std::string::npos) << needle << "\n" << ins.out;
}

TEST(GenerateEndToEnd, MismatchedExpertsAreRefused) {
  TempDir dir;
  const std::string model = dir.file("model"), other = dir.file("other");
  ASSERT_EQ(vidax("random-model " + model + " --experts --tokenizer " + tokenizer()).code, 0);
  ASSERT_EQ(vidax("random-model " + other + " --heads 2 --tokenizer " + tokenizer()).code, 0);
  fs::copy_file(other + "/diffusion_pytorch_model.safetensors",
                model + "/low_noise_model/diffusion_pytorch_model.safetensors",
                fs::copy_options::overwrite_existing);
  fs::copy_file(other + "/config.json", model + "/low_noise_model/config.json",
                fs::copy_options::overwrite_existing);
  const std::string out = dir.file("out.mp4");
  const Result r =
      vidax("generate --model " + model + " --prompt x --size 64x64 --frames 5 -o " + out);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("mismatched expert files"), std::string::npos) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  EXPECT_FALSE(fs::exists(out));
  fs::remove_all(model + "/low_noise_model");
  const Result half = vidax("generate --model " + model + " --prompt x -o " + out);
  EXPECT_NE(half.out.find("low_noise_model/ is missing"), std::string::npos) << half.out;
  const Result low_only =
      vidax("generate --dit-low " + other + " --prompt x --model " + other + " -o " + out);
  EXPECT_NE(low_only.out.find("--dit-low: the low-noise expert needs --dit"), std::string::npos)
      << low_only.out;
  EXPECT_FALSE(fs::exists(out));
}

TEST(GenerateEndToEnd, DryRunPrintsThePlanAndWritesNothing) {
  TempDir out;
  const Result r =
      vidax("generate " + model_args("official") +
            " --prompt x --size 832x480 --frames 81 --dry-run -o " + out.file("never.mp4"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("tokens 32760"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("estimated peak"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("decode"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(out.file("never.mp4")));
  const Result j = vidax("generate " + model_args("official") +
                         " --prompt x --size 832x480 --frames 81 --dry-run --json");
  ASSERT_EQ(j.code, 0) << j.out;
  const json plan = json::parse(j.out, nullptr, false);
  ASSERT_FALSE(plan.is_discarded()) << j.out;
  EXPECT_EQ(plan["latent"], json({16, 21, 60, 104}));
  EXPECT_EQ(plan["memory"]["phases"].size(), 3u);
}

TEST(GenerateEndToEnd, InspectRecognisesEveryComponentInEveryLayout) {
  const std::string off = model_dir("official"), dif = model_dir("diffusers");
  const std::pair<std::string, std::string> cases[] = {
      {off + "/models_t5_umt5-xxl-enc-bf16.pth", "umT5 text encoder, 2 layers, dim 64"},
      {off + "/Wan2.1_VAE.pth", "Wan 2.1 VAE, base width 8, z_dim 16"},
      {off + "/diffusion_pytorch_model.safetensors", "Wan DiT t2v, 2 layers, dim 128"},
      {dif + "/text_encoder", "umT5 text encoder"},
      {dif + "/vae", "Wan 2.1 VAE"},
      {dif + "/transformer", "Wan DiT t2v"},
      {model_dir("comfyui") + "/text_encoders/umt5_tiny_fp16.safetensors", "umT5 text encoder"}};
  for (const auto& [path, needle] : cases) {
    const Result r = vidax("inspect " + path);
    EXPECT_EQ(r.code, 0) << path << "\n" << r.out;
    EXPECT_NE(r.out.find(needle), std::string::npos) << path << "\n" << r.out;
  }
}

void expect_error(const std::string& args, const std::string& needle) {
  const Result r = vidax(args);
  EXPECT_EQ(r.code, 1) << args << "\n" << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  EXPECT_NE(r.out.find(needle), std::string::npos) << "expected '" << needle << "' in " << r.out;
}

TEST(GenerateEndToEnd, BadRequestsAreRefusedUpFrontAndLeaveNothing) {
  TempDir out;
  const std::string m = "generate " + model_args("official") + " --prompt x ";
  expect_error(m + "--frames 8 -o " + out.file("a.mp4"), "5 or 9");
  expect_error(m + "--size 70x64 -o " + out.file("a.mp4"), "width 64 or 80");
  expect_error(m + "--size 64x64 --frames 5 -o " + out.file("a.avi"), "a.avi");
  expect_error(m + "--size 64x64 --frames 5 -o " + out.file("no/such/dir/a.mp4"), "a.mp4");
  expect_error(m + "--steps 0", "--steps");
  expect_error(m + "--sampler heun", "--sampler");
  expect_error("generate --prompt x --dit " + out.file("missing.safetensors"), "--t5");
  expect_error("generate --model " + out.path() + " --prompt x", "no diffusion transformer");
  EXPECT_TRUE(fs::is_empty(out.path()));
}

TEST(GenerateEndToEnd, PromptsFileRendersEachLineAsItsOwnRunWould) {
  TempDir out;
  {
    std::ofstream f(out.file("prompts.txt"));
    f << "a blue circle grows\n\na red square moves to the left\r\n";
  }
  const std::string m = "generate " + model_args("official") +
                        " --size 64x64 --frames 5 --steps 2 --no-hash --seed 11 ";
  const Result dry = vidax(m + "--prompts " + out.file("prompts.txt") + " --dry-run --json");
  ASSERT_EQ(dry.code, 0) << dry.out;
  EXPECT_EQ(json::parse(dry.out)["prompts"].size(), 2u);
  const Result r =
      vidax(m + "--prompts " + out.file("prompts.txt") + " --json -o " + out.file("batch/"));
  ASSERT_EQ(r.code, 0) << r.out;
  const json results = json::parse(r.out);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[1]["prompt"], "a red square moves to the left");
  EXPECT_EQ(results[1]["seed"], 12);
  EXPECT_EQ(results[1]["output"], out.file("batch_002/"));
  const json side = json::parse(std::ifstream(out.file("batch_002.json")));
  EXPECT_EQ(side["batch"]["count"], 2);
  // Prompt i with seed 11 + i, run alone, gives the same PNG frames byte for byte.
  const char* prompts[] = {"'a blue circle grows'", "'a red square moves to the left'"};
  for (int i = 0; i < 2; ++i) {
    const std::string alone = out.file("alone" + std::to_string(i) + "/");
    const Result one = vidax("generate " + model_args("official") +
                             " --size 64x64 --frames 5 --steps 2 --no-hash --seed " +
                             std::to_string(11 + i) + " --prompt " + prompts[i] + " -o " + alone);
    ASSERT_EQ(one.code, 0) << one.out;
    expect_same_frames(out.file("batch_00" + std::to_string(i + 1)), alone);
  }
  // Errors name the flag or the file, before any work.
  TempDir none;
  expect_error(m + "--prompt x --prompts " + out.file("prompts.txt") + " -o " + none.file("a/"),
               "--prompts");
  expect_error(m + "--prompts " + none.file("missing.txt") + " -o " + none.file("a/"),
               "missing.txt");
  EXPECT_TRUE(fs::is_empty(none.path()));
}

TEST(GenerateEndToEnd, LateFailuresLeaveNothingAndOddPromptsWork) {
  TempDir out;
  const std::string m = "generate " + model_args("official") +
                        " --size 64x64 --frames 5 --steps 1 --no-hash --prompt ";
  // A folder where the MP4 should go: refused before any work.
  std::filesystem::create_directories(out.file("taken.mp4"));
  expect_error(m + "x -o " + out.file("taken.mp4"), "taken.mp4");
  // The sidecar cannot be renamed into place (a folder has its name): the finished video is
  // taken back out, so neither appears.
  std::filesystem::create_directories(out.file("clip.mp4.json/inside"));
  const Result late = vidax(m + "x -o " + out.file("clip.mp4"));
  EXPECT_EQ(late.code, 1) << late.out;
  EXPECT_FALSE(fs::exists(out.file("clip.mp4")));
  for (const auto& e : fs::directory_iterator(out.path()))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
  // A prompt that is not valid UTF-8 still gives a video; the sidecar stores U+FFFD.
  const Result odd = vidax(m + "\"$(printf 'a cat \\377')\" -o " + out.file("odd.mp4"));
  ASSERT_EQ(odd.code, 0) << odd.out;
  std::ifstream in(out.file("odd.mp4.json"));
  const json side = json::parse(in);
  EXPECT_EQ(side["prompt"], "a cat \xEF\xBF\xBD");
}

TEST(GenerateEndToEnd, DemoRunsAModelFolderAtTheTinyGeometry) {
  // `vidax demo` on any official-layout folder (here random weights; the README runs it on the
  // shipped models/vidax-tiny): 256x256, 17 frames, plus the README's PNG strip.
  TempDir out;
  const Result r = vidax("demo --model " + model_dir("official") + " --steps 2 -o " +
                         out.file("demo.mp4") + " --strip " + out.file("strip.png"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("denoise"), std::string::npos) << "the progress display: " << r.out;
  const json probe = ffprobe(out.file("demo.mp4"));
  ASSERT_EQ(probe["streams"].size(), 1u) << probe.dump();
  EXPECT_EQ(probe["streams"][0]["width"], 256);
  EXPECT_EQ(probe["streams"][0]["height"], 256);
  EXPECT_EQ(probe["streams"][0]["nb_read_frames"], "17");
  EXPECT_TRUE(fs::exists(out.file("demo.mp4.json")));
  const Result strip = run_shell("ffprobe -v error -show_entries stream=width,height -of csv=p=0 " +
                                 out.file("strip.png"));
  EXPECT_EQ(strip.out, "1280,256\n");  // frames 0, 4, 8, 12, 16 side by side
  expect_error("demo --model " + out.file("nowhere") + " -o " + out.file("x.mp4"), "nowhere");
}

TEST(GenerateEndToEnd, DemoWithWindowAttentionOnVidaxTiny) {
  // The shipped vidax-tiny (grid 5 x 16 x 16) with sliding-tile attention, a dense warm-up
  // schedule and the first-frame sink; the sidecar records the canonical spec.
  const std::string tiny = std::string(VIDAX_SOURCE_DIR) + "/models/vidax-tiny";
  if (!fs::exists(tiny + "/config.json")) GTEST_SKIP() << "no " << tiny;
  TempDir out;
  const Result r = vidax("demo --model " + tiny +
                         " --steps 2 --attention 'dense@steps=0;window:3,8,8:tile=1,8,8:sink' -o " +
                         out.file("w.mp4"));
  ASSERT_EQ(r.code, 0) << r.out;
  std::ifstream in(out.file("w.mp4.json"));
  const json side = json::parse(in);
  EXPECT_EQ(side["attention"], "dense@steps=0;window:3,8,8:tile=1,8,8:sink");
  const json probe = ffprobe(out.file("w.mp4"));
  EXPECT_EQ(probe["streams"][0]["nb_read_frames"], "17");
  expect_error("demo --model " + tiny + " --attention window:3,8 -o " + out.file("x.mp4"),
               "--attention window");
  EXPECT_FALSE(fs::exists(out.file("x.mp4")));
}

TEST(GenerateEndToEnd, InterruptLeavesNoPartialFile) {
  TempDir out;
  const std::string cmd = std::string(VIDAX_BINARY) + " generate " + model_args("official") +
                          " --prompt x --size 128x128 --frames 17 --steps 1000 --no-hash -o " +
                          out.file("long.mp4");
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", ("exec " + cmd + " >/dev/null 2>&1").c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  // Wait until the writer's temporary exists (the run is then well under way), then Ctrl-C.
  bool started = false;
  for (int i = 0; i < 600 && !started; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    for (const auto& e : fs::directory_iterator(out.path()))
      started |= e.path().filename().string().find(".tmp.") != std::string::npos;
  }
  EXPECT_TRUE(started) << "the run never created its temporary output";
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGINT) << "status " << status;
  EXPECT_TRUE(fs::is_empty(out.path())) << "something was left behind";
}

}  // namespace
}  // namespace vidax
