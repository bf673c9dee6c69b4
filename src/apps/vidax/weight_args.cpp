#include "apps/vidax/weight_args.h"

#include "core/byte_size.h"
#include "core/error.h"

namespace vidax::cli {

int64_t WeightArgs::budget_bytes() const {
  return budget.empty() ? 0 : parse_byte_size(budget, "--weights-budget");
}

bool WeightArgs::sharded() const {
  if (!mode.empty() && mode != "resident" && mode != "sharded")
    throw_input_error("--weights: expected resident or sharded, got '", mode, "'");
  return mode == "sharded";
}

void add_weight_args(CLI::App* cmd, WeightArgs& a, const std::string& note) {
  // `run dit`, `run denoise` and `bench dit` already use --weights for the checkpoint file.
  const std::string mode_help =
      "resident (default) | sharded: under mpirun, each process keeps 1/N of every DiT block "
      "and gathers a block before using it, the next one meanwhile (FSDP-style; "
      "docs/weights.md)";
  if (cmd->get_option_no_throw("--weights") == nullptr)
    cmd->add_option("--weights,--weights-mode", a.mode, mode_help);
  else
    cmd->add_option("--weights-mode", a.mode, mode_help);
  cmd->add_option("--weights-budget", a.budget,
                  "keep the DiT's packed weights under SIZE (e.g. 8GiB): blocks beyond it are "
                  "streamed from the checkpoint at every forward" +
                      note + " (docs/weights.md)");
  cmd->add_flag("--keep-fp8", a.keep_fp8,
                "keep the DiT's fp8 weights (ComfyUI fp8 / scaled-fp8 files) fp8 in memory, "
                "widened per tile on AMX, per call elsewhere: half the memory of bf16 "
                "(docs/weights.md)");
  cmd->add_flag("--keep-fp16", a.keep_fp16,
                "with --precision fp32, keep the DiT's fp16 weights fp16 in memory, widened to f32 "
                "per call: half the memory of f32 (docs/weights.md)");
}

}  // namespace vidax::cli
