// Kaleido, channel-wise reuse in the linear layers (a seed method; shared/research/step-methods.md
// section 2.10, after the paper's abstract: its code is not public). Across denoising steps the
// input of a block linear changes little in most channels; the product of those channels is
// reused from the previous step and only the changed channels are computed:
//   y = y_prev + (x - x_ref)[changed] . W[:, changed]^T        (pre-activation; bias in y_prev)
// where x_ref holds, per token and channel, the input value the kept product y_prev was computed
// from (updated only where recomputed, so the error stays within the threshold: no drift).
// Channels come in groups of 32 (one AMX K step): a token's group is reused when every one of
// its channels moved by at most thresh x that channel's RMS over the tokens of the previous call.
//
// Execution ("exec="):
//  - delta (AMX-BF16 machines, bf16 precision): the product above on the AMX tiles, skipping
//    every (32-token block, channel group) that no token of the block changed, with the
//    decisions, x_ref and y_prev updates fused into the GEMM (kernels/cpu/amx_reuse_gemm.h):
//    real savings, counted in the work;
//  - emulate (anywhere): the same numbers by running the linear on x_ref with the changed
//    groups updated (x_ref . W^T = y_prev + delta . W^T): no savings, the work it reports is
//    what the delta path would do;
//  - auto (default): delta where the linear runs on the AMX kernel, else emulate.
// The first call of each linear (and every `refresh` steps) computes everything. State per CFG
// branch, layer and linear: x_ref (the compute dtype) and, on the delta path, y_prev (f32).
//
// Spec: kaleido[:thresh=0.05][,ops=qkv/o/cross_q/cross_o/ffn_in/ffn_out][,refresh=0]
//                [,exec=auto|delta|emulate]
// thresh=0 reuses nothing: the linears run as usual (the dense run, bit for bit). One process
// only (reuse decisions are per rank's rows and heads).
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "accel/step_method.h"

namespace vidax::accel {

struct KaleidoOptions {
  double thresh = 0.05;
  std::array<bool, wan::kLinearSites> sites{true, true, true, true, true, true};
  int refresh = 0;  // every `refresh` steps all channels are recomputed (0: never)
  std::string exec = "auto";
};

// Per (layer, linear) counters.
struct ReuseCounts {
  int64_t groups = 0, groups_reused = 0;  // (token, channel group) pairs
  int64_t tiles = 0, tiles_skipped = 0;   // (32-token block, channel group) pairs
  double flops = 0, flops_saved = 0;      // of the linear (2 x rows x K x N per call)
};

class Kaleido : public StepMethod {
 public:
  Kaleido(RunInfo run, KaleidoOptions o);
  ~Kaleido() override;
  std::string name() const override;
  std::shared_ptr<wan::LinearHook> linear_hook() override;
  void observe(int step, int branch, const Tensor& x, const Tensor& out) override;
  void on_model_change() override;
  nlohmann::json details() const override;
  double state_bytes(bool bf16) const override;

  // Bytes the state holds for `tokens` tokens (both branches), with bf16 or f32 inputs and y_prev
  // (delta) or not: for plans.
  static double state_bytes(const wan::DitConfig& c, int64_t tokens, bool bf16, bool delta,
                            const std::array<bool, wan::kLinearSites>& sites);
  const ReuseCounts& counts(int layer, wan::LinearSite site) const;

  class Hook;

 private:
  KaleidoOptions o_;
  std::shared_ptr<Hook> hook_;
};

std::unique_ptr<StepMethod> make_kaleido(const std::string& options, const RunInfo& run);

}  // namespace vidax::accel
