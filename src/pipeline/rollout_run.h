// One `generate --rollout` video (pipeline/text_to_video.h GenerateOptions::rollout): the causal
// rollout (pipeline/causal_rollout.h) chunk by chunk, each chunk decoded by the VAE with its
// causal caches carried from the previous chunk and written as soon as it is made. Private to
// generate_batch (generate_run.cpp).
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "io/video_writer.h"
#include "models/wan/dit.h"
#include "models/wan/vae.h"
#include "pipeline/progress.h"
#include "pipeline/text_to_video.h"

namespace vidax {

// Fills r.frames, r.chunks, the timings and r.interrupted (options.cancelled turned true: the
// chunks finished before it are written, the rest is not). Throws Cancelled when it turned true
// before the first chunk was written (there is nothing to publish).
void run_rollout(const GenerateOptions& options, const GenerationPlan& plan, wan::WanDit& dit,
                 wan::WanVae& vae, const Tensor& context, uint64_t seed, VideoWriter* writer,
                 GenerationResult& r, Progress& progress);

}  // namespace vidax
