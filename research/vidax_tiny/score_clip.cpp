// Scores generated clips with the synthetic world's prompt-adherence analyzer (docs/
// synthetic-world.md) until `vidax eval` exists. Reads raw RGB24 frames (as `ffmpeg -f rawvideo
// -pix_fmt rgb24` writes them) and the caption, prints the per-attribute verdicts.
//   score_clip FRAMES.rgb WIDTH HEIGHT "caption"
// Built by research/vidax_tiny/score.sh against the release libraries; not part of the build.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "synth/analyzer.h"

int main(int argc, char** argv) {
  if (argc != 5) {
    std::cerr << "usage: score_clip FRAMES.rgb WIDTH HEIGHT caption\n";
    return 2;
  }
  try {
    std::ifstream in(argv[1], std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const int64_t w = std::atoll(argv[2]), h = std::atoll(argv[3]);
    const int64_t frame = w * h * 3;
    if (frame <= 0 || bytes.empty() || bytes.size() % static_cast<size_t>(frame) != 0)
      vidax::throw_input_error(argv[1], ": not a whole number of ", w, "x", h, " RGB24 frames");
    const int64_t f = static_cast<int64_t>(bytes.size()) / frame;
    vidax::Tensor t = vidax::Tensor::zeros({f, h, w, 3}, vidax::DType::kU8);  // [F, H, W, 3]
    std::copy(bytes.begin(), bytes.end(), t.mutable_data<uint8_t>());
    const auto expected = vidax::synth::parse_caption(argv[4]);
    const auto s = vidax::synth::score(expected, t);
    vidax::synth::SceneAttributes found;
    found.background = s.analysis.background;
    for (const auto& o : s.analysis.objects) found.objects.push_back(o.attributes);
    // "fills:" gives each found object's shape and median bounding-box fill, which decides the
    // shape (square ~1, circle ~pi/4, triangle ~1/2).
    std::string fills;
    for (const auto& o : s.analysis.objects) {
      char one[48];
      std::snprintf(one, sizeof one, " %s %.3f",
                    std::string(vidax::synth::shape_name(o.attributes.shape)).c_str(), o.fill);
      fills += one;
    }
    std::printf(
        "color %d shape %d motion %d background %d count %d overall %d  found: %s  fills:%s\n",
        s.color, s.shape, s.motion, s.background, s.count, s.overall,
        vidax::synth::describe(found).c_str(), fills.c_str());
  } catch (const std::exception& e) {
    std::cerr << "score_clip: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
