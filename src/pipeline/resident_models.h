// Models kept loaded from one generation to the next, for callers that serve many requests with
// one set of weights (`vidax serve`, the Python `vidax.Pipeline`): the tokenizer and umT5, the
// DiT of a one-expert model and the VAE decoder, each loaded on first use and kept until
// clear(). A model is reloaded when asked for with other files or settings. Two-expert models
// (Wan 2.2 A14B) still load each expert per video (one expert resident at a time), and the
// image encoders (CLIP, the VAE encoder) load per video.
//
// Without ResidentModels (GenerateOptions::resident null) generate() loads each model for its
// phase and releases it before the next phase, so peak memory is the largest phase; with it the
// peak is the sum of the kept models (plan_generation's memory plan reports both).
//
// Thread safety: one generation at a time uses the models (the server runs one job at a time);
// holds() and loads() may be called from any thread meanwhile.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "core/exec_context.h"
#include "models/wan/dit.h"
#include "models/wan/t5_encoder.h"
#include "models/wan/tokenizer.h"
#include "models/wan/vae.h"
#include "pipeline/video_request.h"

namespace vidax {

struct GenerationPlan;

class ResidentModels {
 public:
  ResidentModels();
  ~ResidentModels();
  ResidentModels(const ResidentModels&) = delete;
  ResidentModels& operator=(const ResidentModels&) = delete;

  const wan::Tokenizer& tokenizer(const std::string& path);
  wan::T5Encoder& t5(const std::string& path, wan::Precision precision, const ExecContext& ctx);
  // open_dit's arguments (models/wan/dit_checkpoint.h).
  wan::WanDit& dit(const std::string& path, wan::Precision precision, const ExecContext& ctx,
                   int64_t weights_budget, bool keep_fp8, bool sharded = false,
                   bool keep_fp16 = false);
  wan::WanVae& vae_decoder(const std::string& path, wan::Precision precision);

  // Loads so far (tests: a second video must not load again).
  int loads() const { return loads_.load(); }
  // Whether the model of a plan phase ("encode text", "denoise", "decode") is loaded from
  // `path` (with any settings).
  bool holds(const std::string& phase, const std::string& path) const;
  void clear();

 private:
  template <typename T>
  struct Slot {
    std::string key;
    std::unique_ptr<T> model;
  };
  Slot<wan::Tokenizer> tokenizer_;
  Slot<wan::T5Encoder> t5_;
  Slot<wan::WanDit> dit_;
  Slot<wan::WanVae> vae_;
  std::atomic<int> loads_{0};
  mutable std::mutex keys_mutex_;  // guards the slots' keys (not the models) for holds()
};

// The memory check of a run whose models stay loaded (require_fits for the per-phase one): the
// phases' weights are held together, except those already loaded (they are in use, not in
// `available`), plus the largest phase's activations and what lives across phases. Throws
// InputError naming the sizes when it does not fit (available <= 0: no check).
void require_fits_resident(const GenerationPlan& plan, const ResidentModels& resident,
                           double available);

}  // namespace vidax
