// Generation configurations for `vidax eval`, written as spec strings:
//   "default"                           the model's defaults
//   "steps=10,shift=3"                  the defaults with these keys changed
//   "default,sampler=euler,steps=8"     the same ("default" may lead the list)
//   "steps=10,attention=svg:density=0.2,warmup=0.25"
//                                       `attention` and `accel` take the rest of the spec up to
//                                       the other one (their specs have commas of their own),
//                                       so they come last
//   "accel=magcache:thresh=0.24,k=6,attention=window:3,8,8"
// Keys: steps, shift, guide, sampler, precision, size (WxH), frames, accel, attention. A key is a
// row of one table (config_spec.cpp), so a new acceleration knob is one more row. Every
// configuration resolves to a full EvalConfig whose canonical() text (every key, sorted, shortest
// numbers) is what the reference cache is keyed on and what decides that two specs are the same
// configuration.
//
// Pure functions; safe to call from any number of threads.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "pipeline/text_to_video.h"

namespace vidax::eval {

struct EvalConfig {
  int steps = 50;
  double shift = 5.0;
  double guide = 5.0;
  std::string sampler = "unipc";
  std::string precision = "bf16";  // DiT, text encoder and VAE
  int64_t width = 832, height = 480, frames = 81;
  std::string accel = "none";  // step method (accel/step_method.h; checked against the model
                               // when the run is planned)
  std::string attention = "dense";

  // "frames=17,guide=5,precision=fp32,sampler=unipc,shift=5,size=256x256,steps=20,attention=dense"
  // (`accel=...` before `attention` when a step method is set)
  std::string canonical() const;
  bool operator==(const EvalConfig& other) const { return canonical() == other.canonical(); }
};

// vidax-tiny's defaults: the demo's settings (src/apps/vidax/cmd_demo.cpp): 256x256, 17 frames,
// 20 UniPC steps, shift 5, guide 5, fp32.
EvalConfig tiny_defaults();
// The official Wan 2.1 T2V defaults (832x480, 81 frames, 50 UniPC steps, shift 5, guide 5) in
// vidax's default precision, bf16.
EvalConfig wan21_defaults();

// The names of the keys, in canonical order.
std::vector<std::string> config_keys();

// Parses `spec` on top of `defaults`. InputError ("<flag>: ...") naming the key for an unknown
// key, a missing '=', a repeated key or a bad value, and for an empty spec.
EvalConfig parse_config_spec(std::string_view spec, const EvalConfig& defaults,
                             const std::string& flag);

// Sets the generation fields the configuration owns (size, frames, denoise options, precision
// of DiT / T5 / VAE, attention); leaves the rest of `options` alone.
void apply_config(const EvalConfig& config, GenerateOptions& options);

}  // namespace vidax::eval
