// vidax-tiny's default generation settings, shared by `vidax demo` and `vidax eval` so the two
// cannot drift apart: the training geometry of docs/vidax-tiny.md (256x256, 17 frames =
// 1,280 latent tokens), 20 UniPC steps, shift 5, guide 5, fp32 (tiny GEMMs: f32 costs nothing
// and matches training), and the empty negative prompt (the unconditional branch was trained on
// "").
#pragma once

#include <cstdint>

namespace vidax::tiny {

inline constexpr const char* kDemoPrompt =
    "a red square moves to the left on a dark blue background";
inline constexpr int64_t kSize = 256;
inline constexpr int64_t kFrames = 17;
inline constexpr int kSteps = 20;
inline constexpr double kShift = 5.0;
inline constexpr double kGuideScale = 5.0;
inline constexpr const char* kNegativePrompt = "";

}  // namespace vidax::tiny
