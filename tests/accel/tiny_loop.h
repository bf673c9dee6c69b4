// The shared fixtures' tiny Wan 2.1 DiT (fp32) in the text2video loop of cfg_loop_tiny (noise,
// both contexts, seq_len; shift 5, guide 5), for the step-method tests: one model per test
// process, the latent after every step.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "accel/step_method.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "models/wan/dit_checkpoint.h"
#include "pipeline/denoise.h"
#include "support/test_support.h"

// Skips the calling test (with the fixture named) when the shared fixtures the loop reads are
// not there.
#define VIDAX_REQUIRE_TINY_LOOP()                                                \
  VIDAX_REQUIRE_FIXTURE(tiny_loop_weights_, "dit_t2v_tiny.weights.safetensors"); \
  VIDAX_REQUIRE_FIXTURE(tiny_loop_io_, "cfg_loop_tiny.io.safetensors")

namespace vidax::accel::tiny {

struct TinyLoop {
  std::unique_ptr<wan::WanDit> dit;
  SafetensorsFile io;
};

inline TinyLoop& tiny_loop() {
  static TinyLoop* loop = [] {
    const auto ck = wan::DitCheckpoint::open(std::string(VIDAX_FIXTURES_DIR) +
                                             "/wan/dit_t2v_tiny.weights.safetensors");
    ck.require_loadable();
    return new TinyLoop{
        std::make_unique<wan::WanDit>(ck.config(), ck.loader(), wan::Precision::kFP32),
        SafetensorsFile::open(std::string(VIDAX_FIXTURES_DIR) +
                              "/wan/cfg_loop_tiny.io.safetensors")};
  }();
  return *loop;
}

// What a step method made for this loop knows: 2 CFG branches, 18 tokens (latent [16, 3, 4, 6]).
inline RunInfo tiny_run_info(int steps, const std::string& sampler = "unipc") {
  RunInfo r;
  r.dit = tiny_loop().dit->config();
  r.steps = steps;
  r.branches = 2;
  r.tokens = 3 * 2 * 3;
  r.sampler = sampler;
  return r;
}

// The loop with `method` (null: dense); the latent after every step.
inline std::vector<Tensor> tiny_loop_latents(StepMethod* method, int steps,
                                             const std::string& sampler = "unipc") {
  TinyLoop& l = tiny_loop();
  DenoiseOptions opt;
  opt.sampler = sampler;
  opt.steps = steps;
  opt.shift = 5.0;
  opt.guide_scale = 5.0;
  opt.accel = method;
  std::vector<Tensor> latents;
  denoise(*l.dit, l.io.tensor("noise"), l.io.tensor("context"), l.io.tensor("context_null"),
          l.io.tensor("seq_len").data<int64_t>()[0], opt,
          [&](const DenoiseStep& s) { latents.push_back(s.latent.clone()); });
  return latents;
}

// The InputError message make_step_method(spec, run) raises, or "no error".
inline std::string spec_error(const std::string& spec, const RunInfo& run) {
  try {
    (void)make_step_method(spec, run);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace vidax::accel::tiny
