#include "apps/vidax/weight_args.h"

#include "core/byte_size.h"

namespace vidax::cli {

int64_t WeightArgs::budget_bytes() const {
  return budget.empty() ? 0 : parse_byte_size(budget, "--weights-budget");
}

void add_weight_args(CLI::App* cmd, WeightArgs& a, const std::string& note) {
  cmd->add_option("--weights-budget", a.budget,
                  "keep the DiT's packed weights under SIZE (e.g. 8GiB): blocks beyond it are "
                  "streamed from the checkpoint at every forward" +
                      note + " (docs/weights.md)");
  cmd->add_flag("--keep-fp8", a.keep_fp8,
                "keep the DiT's fp8 weights (ComfyUI fp8 / scaled-fp8 files) fp8 in memory, "
                "widened per call: half the memory of bf16 (docs/weights.md)");
}

}  // namespace vidax::cli
