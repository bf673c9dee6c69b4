#include "accel/step_method.h"

#include <cstdio>

#include "accel/dvg.h"
#include "accel/easycache.h"
#include "accel/hsa.h"
#include "accel/kaleido.h"
#include "accel/magcache.h"
#include "accel/teacache.h"
#include "core/error.h"

namespace vidax::accel {

StepMethod::StepMethod(RunInfo run) : run_(std::move(run)) {
  VIDAX_CHECK(run_.steps >= 1 && (run_.branches == 1 || run_.branches == 2),
              "step method: bad run info (steps ", run_.steps, ", branches ", run_.branches, ")");
  calls_.assign(static_cast<size_t>(run_.steps), {0, 0});
  work_.assign(static_cast<size_t>(run_.steps), {0.0, 0.0});
}

const std::vector<int64_t>* StepMethod::active_tokens(int) { return nullptr; }

void StepMethod::complete_prediction(int, Tensor&) {}

bool StepMethod::skip_step(int, const Tensor&) { return false; }

Tensor StepMethod::output(int step, int branch, const Tensor&) {
  VIDAX_CHECK(false, name(), ": asked for a cached output (step ", step, ", branch ", branch,
              ") it never offered");
  return {};
}

void StepMethod::observe(int, int, const Tensor&, const Tensor&) {}

std::optional<std::vector<std::array<bool, 2>>> StepMethod::planned_blocks() const {
  return std::nullopt;
}

std::optional<StageSwitch> StepMethod::stage_after(int, const Tensor&, const Tensor&, float) {
  return std::nullopt;
}

std::optional<StepReport> StepMethod::planned_report() const {
  const auto planned = planned_blocks();
  if (!planned) return std::nullopt;
  StepReport r;
  r.spec = name();
  int64_t full = 0, skipped = 0;
  for (const auto& step : *planned) {
    for (int b = 0; b < run_.branches; ++b) {
      const bool runs = step[static_cast<size_t>(b)];
      (b == 0 ? r.schedule_cond : r.schedule_uncond)
          .push_back(static_cast<char>(runs ? CallKind::kFull : CallKind::kBlocksSkipped));
      (runs ? full : skipped) += 1;
    }
  }
  r.dense_calls = static_cast<int64_t>(run_.steps) * run_.branches;
  r.model_calls = full + skipped;
  r.block_stack_runs = full;
  r.work_fraction = work_fraction(run_, full, skipped);
  return r;
}

namespace {

// A call whose blocks were reused costs its embeddings and head: that share of a whole forward.
double reused_blocks_work(const RunInfo& run) {
  const int64_t tokens = std::max<int64_t>(run.tokens, 1);
  const double whole = wan::WanDit::forward_flops(run.dit, tokens);
  return (whole - wan::WanDit::block_stack_flops(run.dit, tokens)) / whole;
}

class RecordingBlockHook : public wan::BlockStackHook {
 public:
  RecordingBlockHook(StepMethod* owner, BlockDecision decide)
      : owner_(owner), decide_(std::move(decide)) {}
  bool run_blocks(const wan::DitSample& s, std::span<const float> e,
                  std::span<const float> e0) override {
    const bool run = decide_(static_cast<int>(s.step), s.cfg_branch, e, e0);
    owner_->record(static_cast<int>(s.step), s.cfg_branch,
                   run ? CallKind::kFull : CallKind::kBlocksSkipped);
    return run;
  }

 private:
  StepMethod* owner_;
  BlockDecision decide_;
};

}  // namespace

std::shared_ptr<wan::BlockStackHook> recording_block_hook(StepMethod* owner, BlockDecision decide) {
  return std::make_shared<RecordingBlockHook>(owner, std::move(decide));
}

std::string spec_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

void StepMethod::record(int step, int branch, CallKind kind, double work) {
  VIDAX_CHECK(step >= 0 && step < run_.steps && (branch == 0 || branch == 1),
              "step method: record of step ", step, " branch ", branch, " outside the run");
  if (work < 0)
    work = kind == CallKind::kBlocksSkipped ? reused_blocks_work(run_)
           : kind == CallKind::kSkipped     ? 0.0
                                            : 1.0;
  calls_[static_cast<size_t>(step)][static_cast<size_t>(branch)] = static_cast<char>(kind);
  work_[static_cast<size_t>(step)][static_cast<size_t>(branch)] = work;
}

void StepMethod::copy_record(int step, int from, int to) {
  const char c = calls_.at(static_cast<size_t>(step)).at(static_cast<size_t>(from));
  if (c != 0)
    record(step, to, static_cast<CallKind>(c),
           work_[static_cast<size_t>(step)][static_cast<size_t>(from)]);
}

StepReport StepMethod::report() const {
  StepReport r;
  r.spec = name();
  int64_t calls = 0, stack_runs = 0;
  double work = 0;
  for (size_t s = 0; s < calls_.size(); ++s) {
    for (int b = 0; b < run_.branches; ++b) {
      const char c = calls_[s][static_cast<size_t>(b)];
      (b == 0 ? r.schedule_cond : r.schedule_uncond).push_back(c == 0 ? '?' : c);
      calls += c != 0 && c != static_cast<char>(CallKind::kSkipped);
      stack_runs +=
          c == static_cast<char>(CallKind::kFull) || c == static_cast<char>(CallKind::kPartial) ||
          c == static_cast<char>(CallKind::kReduced) || c == static_cast<char>(CallKind::kReused);
      work += work_[s][static_cast<size_t>(b)];
    }
  }
  r.dense_calls = static_cast<int64_t>(run_.steps) * run_.branches;
  r.model_calls = calls;
  r.block_stack_runs = stack_runs;
  r.work_fraction = work / static_cast<double>(r.dense_calls);
  r.details = details();
  return r;
}

nlohmann::json StepReport::to_json() const {
  nlohmann::json j = {{"spec", spec},
                      {"dense_calls", dense_calls},
                      {"model_calls", model_calls},
                      {"block_stack_runs", block_stack_runs},
                      {"work_fraction", work_fraction},
                      {"schedule_cond", schedule_cond},
                      {"schedule_uncond", schedule_uncond}};
  if (!details.is_null()) j["details"] = details;
  return j;
}

double work_fraction(const RunInfo& run, int64_t full_calls, int64_t block_skipped_calls) {
  return (static_cast<double>(full_calls) +
          static_cast<double>(block_skipped_calls) * reused_blocks_work(run)) /
         (static_cast<double>(run.steps) * run.branches);
}

std::string published_family(const std::string& requested, const RunInfo& run) {
  if (requested != "auto") return requested;
  const wan::DitConfig& c = run.dit;
  if (c.kind == wan::DitKind::kT2V && c.in_dim == 16) {
    if (c.dim == 1536) return "t2v-1.3b";
    if (c.dim == 5120) return "t2v-14b";
    return "";
  }
  if (c.image_branch() && c.flf_pos_tokens == 0)
    return run.width * run.height <= 832 * 480 ? "i2v-480p" : "i2v-720p";
  return "";
}

const std::vector<std::string>& step_method_names() {
  static const std::vector<std::string> names = {"none", "teacache", "magcache", "easycache",
                                                 "hsa",  "dvg",      "kaleido"};
  return names;
}

std::unique_ptr<StepMethod> make_step_method(const std::string& spec, const RunInfo& run) {
  const size_t colon = spec.find(':');
  const std::string name = spec.substr(0, colon);
  const std::string options = colon == std::string::npos ? "" : spec.substr(colon + 1);
  if (name == "none" || name.empty()) {
    if (!options.empty()) throw_input_error("--accel none: takes no options, got '", options, "'");
    return nullptr;
  }
  if (name == "teacache") return make_teacache(options, run);
  if (name == "magcache") return make_magcache(options, run);
  if (name == "easycache") return make_easycache(options, run);
  if (name == "hsa") return make_hsa(options, run);
  if (name == "dvg") return make_dvg(options, run);
  if (name == "kaleido") return make_kaleido(options, run);
  throw_input_error("--accel: unknown method '", name,
                    "' (expected none, teacache, magcache, easycache, hsa, dvg or kaleido; see "
                    "docs/step-methods.md)");
}

}  // namespace vidax::accel
