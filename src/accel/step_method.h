// Step methods (`--accel SPEC`): doing less work per denoising step by reusing what earlier
// steps computed. One interface for all of them, at the two hooks the denoising loop offers
// (docs/step-methods.md):
//  - the block-stack hook (wan::BlockStackHook, inside WanDit::forward): the method decides from
//    the time embedding whether the transformer blocks run or their kept residual is added
//    (TeaCache, MagCache);
//  - the call hook (pipeline/denoise.cpp, around the model calls of a step): the method may
//    replace a whole step's model calls by outputs it derives from earlier ones (EasyCache).
// The loop records what ran for every step and branch, so every method reports the same
// numbers: model calls, block-stack runs and the share of the dense FLOPs done.
// Not thread-safe: one method object serves one denoising loop at a time.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "accel/stage_switch.h"
#include "core/tensor.h"
#include "models/wan/dit.h"

namespace vidax::accel {

// What a step method knows of the run when it is made.
struct RunInfo {
  wan::DitConfig dit;              // the model (the first expert of two)
  int steps = 50;                  // scheduler steps
  int branches = 2;                // model calls per dense step: 2 with guidance, 1 without
  int64_t width = 0, height = 0;   // the video (chooses the I2V 480P / 720P tables)
  int64_t tokens = 0;              // patch tokens per call (for the work fraction)
  std::string sampler = "unipc";   // the scheduler (HSA's cached update needs euler)
  int sequence_parallel = 1;       // ring x ulysses ranks, and tp ranks, of the mesh: token-subset
  int tensor_parallel = 1;         // forwards (HSA) run in one process or under cfg only
  int cfg_parallel = 1;            // cfg ranks of the mesh
  LatentGrid latent{0, 0, 0};      // the full latent grid (F, H, W); 0: unknown
  uint64_t seed = 0;               // the run's noise seed (DVG draws its re-noise from it)
  bool image_conditioned = false;  // image-to-video (y or a replaced first frame)
};

// A change of the latent grid after a step (progressive resolution, accel/dvg.h): the loop takes
// the step's data prediction, resizes it to `grid`, restarts the sampler at the next step (with
// `shift` when > 0) and re-noises it with `noise` to that step's sigma (accel/stage_switch.h).
struct StageSwitch {
  LatentGrid grid{0, 0, 0};
  double shift = 0;  // 0: unchanged
  Tensor noise;      // [C, grid...] F32, fresh
};

// What ran for one branch of one step.
enum class CallKind : char {
  kFull = 'C',           // the model ran
  kBlocksSkipped = 'b',  // the model ran its embeddings and head; the blocks were reused
  kSkipped = '.',        // no model call: the output came from the method
  kPartial = 'p',        // the model ran on a subset of the tokens (HSA)
  kReduced = 'r',        // the model ran on a reduced latent grid (DVG)
  kReused = 'k',         // the model ran, reusing part of its linears' products (Kaleido)
};

// The run as the loop recorded it.
struct StepReport {
  std::string spec;  // canonical
  int64_t dense_calls = 0, model_calls = 0, block_stack_runs = 0;
  double work_fraction = 1;  // share of the dense run's DiT FLOPs that were done
  // One character per step (CallKind) for the conditional and unconditional branch.
  std::string schedule_cond, schedule_uncond;
  nlohmann::json details;  // method-specific (DVG: stages and its choice); null when none
  nlohmann::json to_json() const;
};

class StepMethod {
 public:
  virtual ~StepMethod() = default;
  virtual std::string name() const = 0;  // the canonical spec, e.g. "magcache:thresh=0.12,k=2"

  // The block-stack hook to install on the DiT (null: the blocks always run).
  virtual std::shared_ptr<wan::BlockStackHook> block_hook() { return nullptr; }
  // The block-linear hook to install on the DiT (null: the linears run as usual).
  virtual std::shared_ptr<wan::LinearHook> linear_hook() { return nullptr; }

  // Call hook, before the model calls of `step` on latent x [C, F, H, W]: true replaces every
  // branch's call by output(); the decision must be the same on every rank of a mesh.
  virtual bool skip_step(int step, const Tensor& x);
  virtual Tensor output(int step, int branch, const Tensor& x);
  // After a step whose calls ran: each branch's model output (every rank sees both).
  virtual void observe(int step, int branch, const Tensor& x, const Tensor& out);

  // Token subsets (HSA): the tokens whose outputs `step` computes (null: all of them), whether
  // the model must keep its self-attention key/value store for that, and the step's
  // CFG-combined prediction [C, F, H, W] to complete in place (the rows of the tokens not
  // computed are 0 until then).
  virtual const std::vector<int64_t>* active_tokens(int step);
  virtual bool needs_kv_store() const { return false; }
  virtual void complete_prediction(int step, Tensor& prediction);

  // The loop moved to another model (the other expert of two): block-stack residuals kept by
  // the previous one are gone, so the next call of each branch must run the blocks.
  virtual void on_model_change() {}

  // When the whole schedule is known before running (MagCache): per step, per branch (cond,
  // uncond), whether the block stack runs. nullopt: decided at run time.
  virtual std::optional<std::vector<std::array<bool, 2>>> planned_blocks() const;
  // The whole run's report as planned, when it is known before running (by default from
  // planned_blocks()); what `--dry-run` prints.
  virtual std::optional<StepReport> planned_report() const;

  // Progressive resolution: the latent the loop starts from, given the run's noise [C, F, H, W]
  // (the noise itself: no change; or noise on a smaller grid), and after `step` (its
  // CFG-combined prediction of latent x at noise level sigma) a switch to another grid, or
  // nullopt. The run must end on the full grid. Decisions must be the same on every rank (they
  // see the same latent and prediction).
  virtual Tensor start_latent(const Tensor& noise) { return noise; }
  virtual std::optional<StageSwitch> stage_after(int step, const Tensor& x,
                                                 const Tensor& prediction, float sigma);

  // Bytes the method keeps during the denoise phase beyond the model's own (for plans); bf16:
  // the model computes in bf16.
  virtual double state_bytes(bool bf16) const {
    (void)bf16;
    return 0;
  }

  // Method-specific facts for the report (StepReport::details).
  virtual nlohmann::json details() const { return nullptr; }

  // Bookkeeping, filled by the loop and the hooks.
  // `work`: the call's share of a whole forward's FLOPs (negative: the kind's own, 1 for a run,
  // the embeddings and head for reused blocks, 0 for a skip).
  void record(int step, int branch, CallKind kind, double work = -1);
  // The record of (step, from) copied to (step, to): under --mesh cfg=2 a rank runs one branch
  // and the block-stack decision of the other is the same by construction.
  void copy_record(int step, int from, int to);
  StepReport report() const;
  const RunInfo& run() const { return run_; }

 protected:
  explicit StepMethod(RunInfo run);
  RunInfo run_;

 private:
  std::vector<std::array<char, 2>> calls_;   // per step: CallKind per branch (0: not recorded)
  std::vector<std::array<double, 2>> work_;  // per step and branch: share of a whole forward
};

// A block-stack hook that asks `decide(step, branch, e, e0)` and records the call in `owner`
// (run: kFull, else kBlocksSkipped): the hook of every method that decides per call.
using BlockDecision =
    std::function<bool(int step, int branch, std::span<const float> e, std::span<const float> e0)>;
std::shared_ptr<wan::BlockStackHook> recording_block_hook(StepMethod* owner, BlockDecision decide);

// A number as specs print it ("%.10g": 0.12, 1e+09).
std::string spec_number(double v);

// The method names make_step_method knows ("none" first).
const std::vector<std::string>& step_method_names();

// `spec`: "none" (nullptr), "teacache[:...]", "magcache[:...]", "easycache[:...]", "hsa[:...]",
// "dvg[:...]", "kaleido[:...]"
// (docs/step-methods.md lists the options). InputError naming --accel and the option on a bad
// spec or when the method has no published table for this model and none was given.
std::unique_ptr<StepMethod> make_step_method(const std::string& spec, const RunInfo& run);

// The share of the dense DiT FLOPs a schedule does: a full call costs forward_flops, a call
// whose blocks were skipped forward_flops - block_stack_flops, a skipped call nothing.
double work_fraction(const RunInfo& run, int64_t full_calls, int64_t block_skipped_calls);

// The model families with published TeaCache / MagCache tables: "t2v-1.3b", "t2v-14b",
// "i2v-480p", "i2v-720p"; "auto" picks one from the DiT config and the video size (Wan 2.1
// T2V by width, Wan 2.1 I2V by area: 480P up to 832x480), "" when none applies.
std::string published_family(const std::string& requested, const RunInfo& run);

}  // namespace vidax::accel
