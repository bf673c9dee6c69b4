// Image to video through the real binary: `vidax random-model --model i2v|flf2v|ti2v
// [--experts]` writes the same tiny random model in the official, diffusers and ComfyUI layouts
// (CLIP included), `vidax generate --image` runs each, `vidax inspect` names the CLIP files, and
// the user's input errors end in one line with nothing written.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "io/image_reader.h"
#include "support/test_support.h"

namespace vidax {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using vidax::testing::TempDir;
using Result = vidax::testing::CommandResult;
using vidax::testing::expect_one_line_error;
using vidax::testing::run_vidax;

std::string tokenizer() {
  return std::string(VIDAX_SOURCE_DIR) + "/tests/data/tokenizer/spiece.model";
}
std::string image(const std::string& name) {
  return std::string(VIDAX_SOURCE_DIR) + "/tests/data/wan_i2v/images/" + name;
}

struct Kind {
  const char* model;  // random-model --model
  bool experts;
  const char* task;    // the plan's task
  const char* family;  // the sidecar's model family
};

void PrintTo(const Kind& k, std::ostream* os) { *os << k.model << (k.experts ? " --experts" : ""); }

// The 5 PNG frames of a folder as pixels (RGB8, one vector).
std::vector<uint8_t> frames_of(const std::string& dir) {
  std::vector<uint8_t> all;
  for (int i = 0; i < 5; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "/frame_%05d.png", i);
    const RgbImage im = read_image(dir + name);
    all.insert(all.end(), im.rgb.begin(), im.rgb.end());
  }
  return all;
}

class ImageToVideoCli : public ::testing::TestWithParam<Kind> {};

TEST_P(ImageToVideoCli, EveryLayoutRunsAndOfficialEqualsDiffusers) {
  const Kind k = GetParam();
  TempDir dir;
  std::map<std::string, std::vector<uint8_t>> frames;
  for (const std::string layout : {"official", "diffusers", "comfyui"}) {
    const std::string model = dir.file("m_" + layout);
    const Result w =
        run_vidax("random-model " + model + " --layout " + layout + " --model " + k.model +
                  (k.experts ? " --experts" : "") + " --tokenizer " + tokenizer() + " --seed 5");
    ASSERT_EQ(w.code, 0) << w.out;
    std::string cmd = "generate --model " + model + " --prompt 'a cat' --image " +
                      image("photo.png") + " --size 64x64 --frames 5 --steps 2 --seed 3 --no-hash";
    if (layout == "comfyui") cmd += " --tokenizer " + tokenizer();
    if (std::string(k.model) == "flf2v") cmd += " --last-image " + image("photo.jpg");
    const Result g = run_vidax(cmd + " -o " + dir.file("out_" + layout + "/"));
    ASSERT_EQ(g.code, 0) << layout << ": " << g.out;
    frames[layout] = frames_of(dir.file("out_" + layout));
    std::ifstream in(dir.file("out_" + layout + ".json"));
    const json side = json::parse(in);
    EXPECT_EQ(side["task"], k.task) << layout;
    EXPECT_EQ(side["model_family"], k.family) << layout;
    EXPECT_EQ(side["plan"]["files"]["layout"], layout);
  }
  // The same weights under official and diffusers names (f32 DiT, CLIP and VAE, bf16 umT5 in
  // both): byte-identical frames.
  EXPECT_EQ(frames["official"], frames["diffusers"]);
  // ComfyUI stores the DiT in bf16 and umT5 / CLIP in fp16, so the frames move by rounding
  // (mean ~0.6 of 255 levels measured); a tensor mapped to the wrong place would give noise
  // (~60 levels).
  ASSERT_EQ(frames["official"].size(), frames["comfyui"].size());
  double diff = 0;
  for (size_t i = 0; i < frames["official"].size(); ++i)
    diff += std::abs(int(frames["official"][i]) - int(frames["comfyui"][i]));
  EXPECT_LT(diff / static_cast<double>(frames["official"].size()), 3.0);
}

INSTANTIATE_TEST_SUITE_P(Kinds, ImageToVideoCli,
                         ::testing::Values(Kind{"i2v", false, "i2v", "Wan 2.1 I2V 14B"},
                                           Kind{"flf2v", false, "flf2v", "Wan 2.1 FLF2V 14B"},
                                           Kind{"ti2v", false, "ti2v", "Wan 2.2 TI2V 5B"},
                                           Kind{"i2v", true, "i2v", "Wan 2.2 I2V A14B"}),
                         [](const ::testing::TestParamInfo<Kind>& info) {
                           return std::string(info.param.model) +
                                  (info.param.experts ? "_experts" : "");
                         });

TEST(ImageToVideoCli, InspectNamesTheClipEncoderInEveryLayout) {
  TempDir dir;
  const std::map<std::string, std::string> clip_file = {
      {"official", "/models_clip_open-clip-xlm-roberta-large-vit-huge-14.pth"},
      {"diffusers", "/image_encoder"},
      {"comfyui", "/clip_vision/clip_vision_h_tiny.safetensors"}};
  for (const auto& [layout, file] : clip_file) {
    const std::string model = dir.file(layout);
    ASSERT_EQ(run_vidax("random-model " + model + " --layout " + layout +
                        " --model i2v --tokenizer " + tokenizer())
                  .code,
              0);
    const Result r = run_vidax("inspect " + model + file);
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("CLIP vision encoder"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("width 128, 2 heads"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("17 tokens"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("missing tensors: 0"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("unexpected tensors: 0"), std::string::npos) << r.out;
  }
}

TEST(ImageToVideoCli, BadInputIsOneLineAndWritesNothing) {
  TempDir dir, out;
  const std::string i2v = dir.file("i2v"), t2v = dir.file("t2v");
  ASSERT_EQ(run_vidax("random-model " + i2v + " --model i2v --tokenizer " + tokenizer()).code, 0);
  ASSERT_EQ(run_vidax("random-model " + t2v + " --tokenizer " + tokenizer()).code, 0);
  const std::string args =
      " --prompt x --size 64x64 --frames 5 --steps 1 --no-hash -o " + out.file("v.mp4");
  // A T2V checkpoint given --image.
  expect_one_line_error("generate --model " + t2v + " --image " + image("photo.png") + args,
                        "text-to-video model");
  // An I2V checkpoint without an image, and without its CLIP file.
  expect_one_line_error("generate --model " + i2v + args, "--image");
  fs::remove(i2v + "/models_clip_open-clip-xlm-roberta-large-vit-huge-14.pth");
  expect_one_line_error("generate --model " + i2v + " --image " + image("photo.png") + args,
                        "--clip");
  ASSERT_EQ(run_vidax("random-model " + i2v + " --model i2v --tokenizer " + tokenizer()).code, 0);
  // A truncated image, a missing one, and an area too small for one latent patch.
  {
    std::ifstream src(image("photo.jpg"), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(src)), {});
    std::ofstream(dir.file("cut.jpg"), std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  }
  expect_one_line_error("generate --model " + i2v + " --image " + dir.file("cut.jpg") + args,
                        "cut.jpg");
  expect_one_line_error("generate --model " + i2v + " --image " + dir.file("none.png") + args,
                        "none.png");
  // A PNG whose first IDAT claims 4 GiB: FFmpeg's own "chunk too big" warning stays off stderr.
  {
    const char png[] =
        "\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR\x00\x00\x00\x10\x00\x00\x00\x10\x08\x02"
        "\x00\x00\x00\x90\x91\x68\x36\xff\xff\xff\xffIDAT";
    std::ofstream(dir.file("huge_chunk.png"), std::ios::binary).write(png, sizeof png - 1);
  }
  expect_one_line_error("generate --model " + i2v + " --image " + dir.file("huge_chunk.png") + args,
                        "huge_chunk.png: invalid or truncated PNG");
  expect_one_line_error("generate --model " + i2v + " --image " + image("photo.png") +
                            " --prompt x --size 8x8 --frames 5 --steps 1 -o " + out.file("v.mp4"),
                        "--size");
  // random-model's own flags.
  expect_one_line_error("random-model " + dir.file("x") + " --model s2v --tokenizer " + tokenizer(),
                        "--model");
  expect_one_line_error(
      "random-model " + dir.file("x") + " --model ti2v --experts --tokenizer " + tokenizer(),
      "--experts");
  EXPECT_TRUE(fs::is_empty(out.path()));
}

}  // namespace
}  // namespace vidax
