// The options every command that builds a DiT takes for where its weights live
// (docs/weights.md): --weights resident|sharded, --weights-budget SIZE, --keep-fp8 and
// --keep-fp16.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

namespace vidax::cli {

struct WeightArgs {
  std::string budget;  // --weights-budget, as given
  bool keep_fp8 = false;
  bool keep_fp16 = false;  // with --precision fp32 only (open_dit refuses it otherwise)
  std::string mode;        // --weights resident | sharded; empty: not given (resident)
  // --weights sharded; InputError naming the flag for another value.
  bool sharded() const;
  // The budget in bytes, 0 without the flag; InputError naming the flag on a bad size.
  int64_t budget_bytes() const;
};

// `note` is appended to the budget's help (what this command does beyond the model's stream).
void add_weight_args(CLI::App* cmd, WeightArgs& a, const std::string& note = "");

}  // namespace vidax::cli
