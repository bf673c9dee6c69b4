#include "accel/kaleido.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "core/buffer.h"
#include "core/convert.h"
#include "core/error.h"
#include "kernels/cpu/amx_gemm.h"
#include "kernels/cpu/amx_reuse_gemm.h"
#include "kernels/cpu/channel_reuse.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/gemm.h"
#include "sparse/policy_options.h"

namespace vidax::accel {
namespace {

constexpr int64_t kGroup = kChannelGroup;  // channels per group: one AMX K step
constexpr int64_t kRowBlock = 32;          // rows per block of the delta kernel

// The (K, N) of each site for a config.
std::array<std::array<int64_t, 2>, wan::kLinearSites> site_shapes(const wan::DitConfig& c) {
  const int64_t d = c.dim, f = c.ffn_dim;
  return {{{d, 3 * d}, {d, d}, {d, d}, {d, d}, {d, f}, {f, d}}};
}

// One (branch, layer, site)'s kept state.
struct SiteState {
  int64_t rows = 0, k = 0, n = 0;
  bool bf16 = false, delta = false, valid = false;
  std::vector<BFloat16> x16;  // x_ref, bf16 compute
  std::vector<float> x32;     // x_ref, f32 compute
  Buffer<float> y;  // y_prev, pre-activation with bias, in the kernel's 32x32 blocks (delta;
                    // aligned, huge pages when large: the kernel streams it 4 KiB at a time)
  std::vector<float> sumsq;  // [k] per-channel sum of x^2 of the last call (its RMS: limits)
};

}  // namespace

class Kaleido::Hook : public wan::LinearHook {
 public:
  Hook(const wan::DitConfig& c, KaleidoOptions o) : cfg_(c), o_(std::move(o)) {
    for (auto& b : state_) b.resize(static_cast<size_t>(c.num_layers * wan::kLinearSites));
    counts_.resize(static_cast<size_t>(c.num_layers * wan::kLinearSites));
  }

  bool forward(const wan::LinearCall& call) override {
    if (o_.thresh <= 0 || !o_.sites[static_cast<size_t>(call.site)]) return false;
    const PackedLinear& lin = *call.linear;
    const bool bf16 = lin.compute_dtype() == DType::kBF16;
    const AmxPackedWeight* amx = bf16 ? lin.amx_weight() : nullptr;
    const bool delta = o_.exec == "delta" || (o_.exec == "auto" && amx != nullptr);
    if (delta && amx == nullptr)
      throw_input_error(
          "--accel kaleido: exec=delta needs the AMX-BF16 GEMM (this machine or "
          "--precision does not run it); use exec=emulate or auto");
    const int64_t rows = call.rows, k = lin.in_features(), n = lin.out_features();
    SiteState& st =
        state_[static_cast<size_t>(call.cfg_branch == 1 ? 1 : 0)]
              [static_cast<size_t>(call.layer * wan::kLinearSites + static_cast<int>(call.site))];
    ReuseCounts& cnt =
        counts_[static_cast<size_t>(call.layer * wan::kLinearSites + static_cast<int>(call.site))];
    const int64_t groups = (k + kGroup - 1) / kGroup, blocks = (rows + kRowBlock - 1) / kRowBlock;
    const double call_flops = 2.0 * static_cast<double>(rows * k * n);
    cnt.flops += call_flops;
    cnt.groups += rows * groups;
    cnt.tiles += blocks * groups;

    const bool refresh = o_.refresh > 0 && call.step % o_.refresh == 0;
    const bool first = !st.valid || st.rows != rows || st.k != k || st.n != n || st.bf16 != bf16 ||
                       st.delta != delta || refresh;
    if (first) {  // everything computed; the state starts here
      st = SiteState{};
      st.rows = rows, st.k = k, st.n = n, st.bf16 = bf16, st.delta = delta, st.valid = true;
      st.sumsq.resize(static_cast<size_t>(k));
    } else {  // the allowance: thresh x each channel's RMS over the last call's rows
      limit_.resize(static_cast<size_t>(k));
      for (int64_t c = 0; c < k; ++c)
        limit_[static_cast<size_t>(c)] =
            static_cast<float>(o_.thresh) *
            std::sqrt(st.sumsq[static_cast<size_t>(c)] / static_cast<float>(rows));
    }
    if (delta) {
      // One fused kernel: decisions, delta, x_ref and y_prev updates, the skipped tiles.
      if (first) {
        st.x16.resize(static_cast<size_t>(rows * k));
        const auto kept = static_cast<size_t>(amx_reuse_kept_elements(rows, *amx));
        st.y.resize(kept);
        std::fill(st.y.data(), st.y.data() + kept, 0.f);  // the padding is read, never output
      }
      AmxReuseState rs;
      rs.ref = st.x16.data();
      rs.kept = st.y.data();
      rs.limit = first ? nullptr : limit_.data();
      rs.sumsq = st.sumsq.data();
      rs.first = first;
      AmxReuseOutput out;
      out.f32 = call.y16 != nullptr ? nullptr : call.y;
      out.bf16 = call.y16;
      const AmxReuseCounts rc = call.x_bf16
                                    ? amx_gemm_bf16_reuse(static_cast<const BFloat16*>(call.x),
                                                          rows, k, *amx, lin.epilogue(), rs, out)
                                    : amx_gemm_bf16_reuse(static_cast<const float*>(call.x), rows,
                                                          k, *amx, lin.epilogue(), rs, out);
      if (!first) {
        cnt.groups_reused += rc.groups_reused;
        cnt.tiles_skipped += rc.steps_skipped;
        cnt.flops_saved += rc.flops_skipped;
        flops_saved_[static_cast<size_t>(call.cfg_branch == 1 ? 1 : 0)] += rc.flops_skipped;
      }
      return true;
    }
    // Emulation: the values the linear consumes, in its dtype.
    xin16_.clear();
    const BFloat16* x16 = nullptr;
    const float* x32 = nullptr;
    if (bf16) {
      if (call.x_bf16) {
        x16 = static_cast<const BFloat16*>(call.x);
      } else {
        xin16_.resize(static_cast<size_t>(rows * k));
        convert_floats(call.x, DType::kF32, xin16_.data(), DType::kBF16, xin16_.size());
        x16 = xin16_.data();
      }
    } else {
      VIDAX_CHECK(!call.x_bf16, "kaleido: bf16 input to an f32 linear");
      x32 = static_cast<const float*>(call.x);
    }
    if (first) {
      if (bf16) {
        st.x16.assign(x16, x16 + rows * k);
        channel_sumsq(x16, rows, k, st.sumsq.data());
      } else {
        st.x32.assign(x32, x32 + rows * k);
        channel_sumsq(x32, rows, k, st.sumsq.data());
      }
      return false;  // the linear runs as usual on x (= x_ref)
    }
    // Which (row, group) pairs moved beyond the allowance; x_ref follows them.
    changed_.resize(static_cast<size_t>(rows * groups));
    const int64_t reused = bf16 ? channel_group_update(x16, st.x16.data(), rows, k, limit_.data(),
                                                       changed_.data(), st.sumsq.data())
                                : channel_group_update(x32, st.x32.data(), rows, k, limit_.data(),
                                                       changed_.data(), st.sumsq.data());
    cnt.groups_reused += reused;
    // What the delta path would skip: a group for a 32-row block when none of its rows moved.
    mask_.assign(static_cast<size_t>(blocks * groups), 0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t g = 0; g < groups; ++g)
        mask_[static_cast<size_t>((r / kRowBlock) * groups + g)] |=
            changed_[static_cast<size_t>(r * groups + g)];
    double saved = 0;
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t brows = std::min(kRowBlock, rows - b * kRowBlock);
      for (int64_t g = 0; g < groups; ++g)
        if (mask_[static_cast<size_t>(b * groups + g)] == 0) {
          ++cnt.tiles_skipped;
          saved += 2.0 * static_cast<double>(brows * std::min(kGroup, k - g * kGroup) * n);
        }
    }
    cnt.flops_saved += saved;
    flops_saved_[static_cast<size_t>(call.cfg_branch == 1 ? 1 : 0)] += saved;

    // Emulation: the linear on x_ref, whose moved groups were just updated.
    const void* xr =
        bf16 ? static_cast<const void*>(st.x16.data()) : static_cast<const void*>(st.x32.data());
    if (call.y16 != nullptr)
      lin.forward_bf16_out(xr, rows, call.y16);
    else
      lin.forward(xr, rows, call.y);
    return true;
  }

  // The FLOPs the linears saved for `branch` since the last take, and reset.
  double take_saved(int branch) {
    const double s = flops_saved_[static_cast<size_t>(branch)];
    flops_saved_[static_cast<size_t>(branch)] = 0;
    return s;
  }
  void clear() {
    for (auto& b : state_)
      for (SiteState& s : b) s = SiteState{};
  }
  const ReuseCounts& counts(int layer, wan::LinearSite site) const {
    return counts_.at(static_cast<size_t>(layer * wan::kLinearSites + static_cast<int>(site)));
  }
  bool any_delta() const {
    for (const auto& b : state_)
      for (const SiteState& s : b)
        if (s.valid && s.delta) return true;
    return false;
  }

 private:
  wan::DitConfig cfg_;
  KaleidoOptions o_;
  std::array<std::vector<SiteState>, 2> state_;
  std::vector<ReuseCounts> counts_;
  std::array<double, 2> flops_saved_{0, 0};
  std::vector<BFloat16> xin16_;
  std::vector<uint8_t> changed_, mask_;
  std::vector<float> limit_;
};

Kaleido::Kaleido(RunInfo run, KaleidoOptions o)
    : StepMethod(std::move(run)), o_(std::move(o)), hook_(std::make_shared<Hook>(run_.dit, o_)) {}

Kaleido::~Kaleido() = default;

std::string Kaleido::name() const {
  std::string s = "kaleido:thresh=" + spec_number(o_.thresh);
  bool all = true;
  for (const bool b : o_.sites) all = all && b;
  if (!all) {
    std::string ops;
    for (int i = 0; i < wan::kLinearSites; ++i) {
      if (!o_.sites[static_cast<size_t>(i)]) continue;
      if (!ops.empty()) ops.push_back('/');
      ops.append(wan::linear_site_name(static_cast<wan::LinearSite>(i)));
    }
    s += ",ops=" + ops;
  }
  if (o_.refresh > 0) s += ",refresh=" + std::to_string(o_.refresh);
  if (o_.exec != "auto") s += ",exec=" + o_.exec;
  return s;
}

std::shared_ptr<wan::LinearHook> Kaleido::linear_hook() { return hook_; }

void Kaleido::on_model_change() { hook_->clear(); }

void Kaleido::observe(int step, int branch, const Tensor&, const Tensor&) {
  const double saved = hook_->take_saved(branch);
  if (saved <= 0) {
    record(step, branch, CallKind::kFull);
    return;
  }
  const double whole = wan::WanDit::forward_flops(run_.dit, std::max<int64_t>(run_.tokens, 1));
  record(step, branch, CallKind::kReused, std::max(0.0, 1.0 - saved / whole));
}

const ReuseCounts& Kaleido::counts(int layer, wan::LinearSite site) const {
  return hook_->counts(layer, site);
}

nlohmann::json Kaleido::details() const {
  nlohmann::json layers = nlohmann::json::array();
  ReuseCounts total;
  for (int l = 0; l < run_.dit.num_layers; ++l) {
    nlohmann::json row = {{"layer", l}};
    for (int s = 0; s < wan::kLinearSites; ++s) {
      if (!o_.sites[static_cast<size_t>(s)]) continue;
      const ReuseCounts& c = counts(l, static_cast<wan::LinearSite>(s));
      if (c.groups == 0) continue;
      row[wan::linear_site_name(static_cast<wan::LinearSite>(s))] = {
          {"reused", static_cast<double>(c.groups_reused) / static_cast<double>(c.groups)},
          {"skipped", c.flops > 0 ? c.flops_saved / c.flops : 0.0}};
      total.groups += c.groups, total.groups_reused += c.groups_reused;
      total.flops += c.flops, total.flops_saved += c.flops_saved;
    }
    layers.push_back(row);
  }
  return {{"exec", o_.thresh <= 0       ? "off"
                   : hook_->any_delta() ? "delta"
                                        : "emulate"},
          {"reused", total.groups > 0 ? static_cast<double>(total.groups_reused) /
                                            static_cast<double>(total.groups)
                                      : 0.0},
          {"linear_flops_skipped", total.flops > 0 ? total.flops_saved / total.flops : 0.0},
          {"layers", layers}};
}

double Kaleido::state_bytes(bool bf16) const {
  if (o_.thresh <= 0) return 0;
  const bool delta = bf16 && o_.exec != "emulate" && amx_bf16_usable();
  return state_bytes(run_.dit, run_.tokens, bf16, delta, o_.sites);
}

double Kaleido::state_bytes(const wan::DitConfig& c, int64_t tokens, bool bf16, bool delta,
                            const std::array<bool, wan::kLinearSites>& sites) {
  const auto shapes = site_shapes(c);
  double per_token = 0;
  for (int s = 0; s < wan::kLinearSites; ++s) {
    if (!sites[static_cast<size_t>(s)]) continue;
    per_token += static_cast<double>(shapes[static_cast<size_t>(s)][0]) * (bf16 ? 2 : 4);
    if (delta) per_token += static_cast<double>(shapes[static_cast<size_t>(s)][1]) * 4;
  }
  return 2.0 * static_cast<double>(c.num_layers) * static_cast<double>(tokens) * per_token;
}

std::unique_ptr<StepMethod> make_kaleido(const std::string& options, const RunInfo& run) {
  sparse::PolicyOptions o("kaleido", options, "--accel");
  KaleidoOptions k;
  k.thresh = o.number("thresh", k.thresh, 0.0, 100.0);
  k.refresh = static_cast<int>(o.integer("refresh", 0, 0, 100000));
  k.exec = o.text("exec", "auto");
  if (k.exec != "auto" && k.exec != "delta" && k.exec != "emulate")
    throw_input_error("--accel kaleido: exec='", k.exec, "' must be auto, delta or emulate");
  if (o.has("ops")) {
    k.sites.fill(false);
    std::stringstream in(o.text("ops", ""));
    std::string item;
    while (std::getline(in, item, '/')) {
      bool found = false;
      for (int s = 0; s < wan::kLinearSites; ++s)
        if (item == wan::linear_site_name(static_cast<wan::LinearSite>(s))) {
          k.sites[static_cast<size_t>(s)] = true;
          found = true;
        }
      if (!found)
        throw_input_error("--accel kaleido: ops: unknown linear '", item,
                          "' (expected qkv, o, cross_q, cross_o, ffn_in, ffn_out joined by '/')");
    }
  }
  o.finish();
  if (k.exec == "delta" && !amx_bf16_usable())
    throw_input_error(
        "--accel kaleido: exec=delta needs AMX-BF16, which this machine does not "
        "have (use exec=emulate or auto)");
  if (run.sequence_parallel > 1 || run.tensor_parallel > 1 || run.cfg_parallel > 1)
    throw_input_error(
        "--accel kaleido: runs in one process (its reuse decisions and counts are "
        "per rank)");
  return std::make_unique<Kaleido>(run, k);
}

}  // namespace vidax::accel
