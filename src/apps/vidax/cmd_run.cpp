// `vidax run <module>`: one module on tensors from a safetensors file, results to another.
//   run dit      one DiT forward pass (names as in the fixtures' io files)
//   run denoise  the reference sampling loop with classifier-free guidance
//   run noise    seeded Gaussian noise identical to torch.manual_seed + torch.randn on CPU
#include <cstdio>
#include <fstream>
#include <sstream>

#include "accel/step_method.h"
#include "apps/vidax/commands.h"
#include "apps/vidax/mesh_args.h"
#include "apps/vidax/weight_args.h"
#include "io/safetensors.h"
#include "models/wan/dit.h"
#include "models/wan/dit_checkpoint.h"
#include "pipeline/denoise.h"
#include "sampling/torch_randn.h"
#include "sparse/attention_policy.h"

namespace vidax::cli {
namespace {

struct DitArgs {
  std::string weights, config, precision = "fp32", attention = "dense";
  WeightArgs residency;
  MeshArgs mesh;
};

void add_dit_args(CLI::App* cmd, DitArgs& a) {
  cmd->add_option("--weights", a.weights, "DiT checkpoint: file, *.index.json or folder")
      ->required();
  cmd->add_option("--config", a.config, "config.json overriding the checkpoint's own config");
  cmd->add_option("--precision", a.precision, "fp32 | bf16 (default fp32)");
  cmd->add_option("--attention", a.attention,
                  "self-attention policy, as generate's (docs/sparse-attention.md; default dense)");
  add_weight_args(cmd, a.residency);
  add_mesh_args(cmd, a.mesh);
}

// Opens the checkpoint, checks the mesh against the model (before any weight is packed), then
// builds the model running under `mesh`.
wan::WanDit load_dit(const DitArgs& a, const dist::Mesh& mesh, bool has_cfg) {
  const wan::Precision p = wan::parse_precision(a.precision, "--precision");
  std::optional<wan::DitConfig> override;
  if (!a.config.empty()) {
    std::ifstream in(a.config);
    if (!in) throw_input_error("--config: cannot read ", a.config);
    std::stringstream ss;
    ss << in.rdbuf();
    override = wan::dit_config_from_json(ss.str(), a.config);
  }
  const int64_t budget = a.residency.budget_bytes();
  const auto ck =
      std::make_shared<const wan::DitCheckpoint>(wan::DitCheckpoint::open(a.weights, override));
  ck->require_loadable();
  check_mesh_for_model(mesh, ck->config().num_heads, has_cfg);
  std::shared_ptr<sparse::AttentionPolicy> policy = sparse::make_attention_policy(a.attention);
  if (mesh.spec().ring > 1 && policy->name() != "dense")
    throw_job_input_error("--attention ", a.attention, ": sparse attention runs under ulysses ",
                          "and cfg; ring attention is dense only (--mesh ", a.mesh.spec, ")");
  ExecContext ctx = cli_context();
  ctx.mesh = &mesh;
  wan::WanDit model = wan::open_dit(ck, p, ctx, budget, a.residency.keep_fp8, a.residency.sharded(),
                                    a.residency.keep_fp16);
  if (policy->name() != "dense") model.set_attention(std::move(policy));
  return model;
}

Tensor require(const SafetensorsFile& f, const std::string& name, const std::string& what) {
  if (!f.contains(name))
    throw_input_error(f.path(), ": missing input tensor '", name, "' (", what, ")");
  return f.tensor(name);
}

int64_t scalar_int(const Tensor& t, const std::string& label) {
  if (t.numel() != 1) throw_input_error(label, ": expected one value, got shape ", t.shape().str());
  if (t.dtype() == DType::kI64) return t.contiguous().data<int64_t>()[0];
  if (t.dtype() == DType::kI32) return t.contiguous().data<int32_t>()[0];
  return static_cast<int64_t>(t.to_float_vector()[0]);
}

// Accepts a leading batch dimension of 1 ([1, C, F, H, W], [1, L, D]) as PyTorch code often
// saves tensors that way.
Tensor drop_batch_dim(const Tensor& t, int rank) {
  if (t.rank() == rank + 1 && t.dim(0) == 1) return t.select(0, 0);
  return t;
}

void run_dit(const DitArgs& a, const std::string& in_path, const std::string& out_path) {
  const auto mesh = make_mesh(a.mesh);
  if (mesh->spec().cfg > 1)
    throw_job_input_error("--mesh: run dit runs single forward passes; cfg=", mesh->spec().cfg,
                          " needs run denoise or generate");
  auto in = SafetensorsFile::open(in_path);
  wan::WanDit model = load_dit(a, *mesh, false);
  // A single sample uses plain names; a batch uses x.0, x.1, ... (and context.<i>, ...).
  std::vector<std::string> suffixes;
  if (in.contains("x")) {
    suffixes.push_back("");
  } else {
    for (int i = 0; in.contains("x." + std::to_string(i)); ++i)
      suffixes.push_back("." + std::to_string(i));
  }
  if (suffixes.empty())
    throw_input_error(in_path, ": missing input tensor 'x' [C, F, H, W] (or x.0, x.1, ...)");
  const Tensor t_all = require(in, "t", "timestep: [1], [B], [seq_len] or [B, seq_len]");
  const int64_t seq_len =
      in.contains("seq_len") ? scalar_int(in.tensor("seq_len"), in_path + ": seq_len") : 0;
  std::vector<std::pair<std::string, Tensor>> outputs;
  const int64_t batch = static_cast<int64_t>(suffixes.size());
  for (int64_t b = 0; b < batch; ++b) {
    const std::string& sfx = suffixes[static_cast<size_t>(b)];
    wan::DitSample s;
    s.x = drop_batch_dim(in.tensor("x" + sfx), 4);
    s.context =
        drop_batch_dim(require(in, in.contains("context" + sfx) ? "context" + sfx : "context",
                               "text context [L, text_dim]"),
                       2);
    if (in.contains("y" + sfx) || in.contains("y"))
      s.y = drop_batch_dim(in.tensor(in.contains("y" + sfx) ? "y" + sfx : "y"), 4);
    if (in.contains("clip_fea" + sfx) || in.contains("clip_fea"))
      s.clip_fea = in.tensor(in.contains("clip_fea" + sfx) ? "clip_fea" + sfx : "clip_fea");
    // t: one value for all, one per sample [B], or per token [B, seq_len] / [seq_len].
    Tensor t = t_all.contiguous();
    if (t.rank() == 2) {
      if (t.dim(0) != batch)
        throw_input_error(in_path, ": t has shape ", t.shape().str(), ", expected [", batch,
                          ", seq_len]");
      t = t.select(0, b).contiguous();
    } else if (t.rank() == 1 && t.dim(0) == batch && batch > 1) {
      t = t.slice(0, b, b + 1).contiguous();
    }
    s.t = t;
    s.seq_len = seq_len;
    outputs.emplace_back("out" + sfx, model.forward(s));
  }
  if (is_output_rank())
    write_safetensors(out_path, outputs,
                      {{"producer", "vidax run dit"}, {"mesh", mesh->spec().str()}});
}

void run_denoise(const DitArgs& a, const std::string& in_path, const std::string& out_path,
                 const DenoiseOptions& opt, const std::string& accel_spec, bool save_steps) {
  const auto mesh = make_mesh(a.mesh);
  auto in = SafetensorsFile::open(in_path);
  const Tensor noise = drop_batch_dim(require(in, "noise", "initial latent [C, F, H, W]"), 4);
  const Tensor context = drop_batch_dim(require(in, "context", "text context [L, text_dim]"), 2);
  Tensor context_null;
  if (in.contains("context_null")) {
    context_null = drop_batch_dim(in.tensor("context_null"), 2);
  } else if (opt.guide_scale != 1.0) {
    throw_input_error(in_path,
                      ": missing 'context_null' (the negative-prompt context) needed for "
                      "classifier-free guidance with --guide-scale ",
                      opt.guide_scale, " (use --guide-scale 1 to sample without guidance)");
  }
  if (!is_float(noise.dtype()) || noise.rank() != 4)
    throw_input_error(in_path, ": 'noise' must be a float latent [C, F, H, W], got ",
                      noise.describe());
  const int64_t seq_len =
      in.contains("seq_len") ? scalar_int(in.tensor("seq_len"), in_path + ": seq_len") : 0;
  wan::WanDit model = load_dit(a, *mesh, context_null.defined() && opt.guide_scale != 1.0);
  ExecContext ctx = cli_context();
  ctx.mesh = mesh.get();
  // The step method sees the model and the latent's geometry (pixels at the VAE's stride 8).
  accel::RunInfo run;
  run.dit = model.config();
  run.steps = opt.steps;
  run.branches = context_null.defined() ? 2 : 1;
  run.height = noise.dim(2) * 8;
  run.width = noise.dim(3) * 8;
  run.tokens = noise.dim(1) * noise.dim(2) * noise.dim(3) / run.dit.patch_volume();
  run.sampler = opt.sampler;
  run.latent = {noise.dim(1), noise.dim(2), noise.dim(3)};
  run.sequence_parallel = mesh->spec().ring * mesh->spec().ulysses;
  run.tensor_parallel = mesh->spec().tp;
  run.cfg_parallel = mesh->spec().cfg;
  const std::unique_ptr<accel::StepMethod> method = accel::make_step_method(accel_spec, run);
  DenoiseOptions options = opt;
  options.accel = method.get();
  const bool out_rank = is_output_rank();
  std::vector<std::pair<std::string, Tensor>> outputs;
  Tensor final_latent = denoise(
      model, noise, context, context_null, seq_len, options,
      [&](const DenoiseStep& s) {
        if (!out_rank) return;
        std::fprintf(stderr, "step %d/%d  t=%lld  %.2f s\n", s.index + 1, opt.steps,
                     static_cast<long long>(s.timestep), s.seconds);
        if (save_steps)
          outputs.emplace_back("step" + std::to_string(s.index) + ".latent", s.latent.clone());
      },
      ctx);
  outputs.emplace_back("final_latent", final_latent);
  std::string accel_report = "{\"spec\": \"none\"}";
  if (method) {
    const accel::StepReport r = method->report();
    accel_report = r.to_json().dump();
    if (out_rank)
      std::fprintf(stderr,
                   "%s: %lld of %lld block-stack runs, %lld model calls, %.1f%% of the work\n",
                   r.spec.c_str(), static_cast<long long>(r.block_stack_runs),
                   static_cast<long long>(r.dense_calls), static_cast<long long>(r.model_calls),
                   100.0 * r.work_fraction);
  }
  if (out_rank)
    write_safetensors(out_path, outputs,
                      {{"producer", "vidax run denoise"},
                       {"sampler", opt.sampler},
                       {"accel", accel_report},
                       {"mesh", mesh->spec().str()}});
}

}  // namespace

void register_run(CLI::App& app) {
  CLI::App* run = app.add_subcommand("run", "Run one module on tensors from a safetensors file");
  run->require_subcommand(1);
  run->fallthrough();
  register_run_vae(run);

  {
    auto* cmd = run->add_subcommand(
        "dit", "One DiT forward pass: IN holds x, t, context, seq_len (+ y, clip_fea)");
    auto a = std::make_shared<DitArgs>();
    auto in = std::make_shared<std::string>(), out = std::make_shared<std::string>();
    add_dit_args(cmd, *a);
    cmd->add_option("--in", *in, "input tensors (.safetensors)")->required();
    cmd->add_option("--out", *out, "output file for 'out' [C_out, F, H, W]")->required();
    cmd->fallthrough();
    cmd->callback([=] { run_dit(*a, *in, *out); });
  }
  {
    auto* cmd = run->add_subcommand(
        "denoise", "The reference sampling loop with CFG from noise, context, context_null");
    auto a = std::make_shared<DitArgs>();
    auto in = std::make_shared<std::string>(), out = std::make_shared<std::string>();
    auto opt = std::make_shared<DenoiseOptions>();
    auto steps_out = std::make_shared<bool>(true);
    add_dit_args(cmd, *a);
    cmd->add_option("--in", *in, "input tensors: noise, context, context_null, seq_len")
        ->required();
    cmd->add_option("--out", *out, "output: final_latent and step<k>.latent")->required();
    cmd->add_option("--sampler", opt->sampler, "unipc | dpm++ | euler (default unipc)");
    cmd->add_option("--steps", opt->steps, "sampling steps (default 50)");
    cmd->add_option("--shift", opt->shift, "sigma shift (default 5.0)");
    cmd->add_option("--guide-scale", opt->guide_scale,
                    "classifier-free guidance scale (default 5.0)");
    cmd->add_flag("!--no-step-latents", *steps_out, "do not write step<k>.latent");
    auto accel_spec = std::make_shared<std::string>("none");
    cmd->add_option("--accel", *accel_spec,
                    "step method: none | teacache[:..] | magcache[:..] | easycache[:..] | "
                    "hsa[:..] (docs/step-methods.md; default none)");
    cmd->fallthrough();
    cmd->callback([=] { run_denoise(*a, *in, *out, *opt, *accel_spec, *steps_out); });
  }
  {
    auto* cmd = run->add_subcommand(
        "noise", "Seeded noise equal to torch.manual_seed(S); torch.randn(shape)");
    auto seed = std::make_shared<int64_t>(0);
    auto shape = std::make_shared<std::string>(), out = std::make_shared<std::string>();
    cmd->add_option("--seed", *seed, "seed")->required();
    cmd->add_option("--shape", *shape, "comma-separated extents, e.g. 16,5,30,52")->required();
    cmd->add_option("--out", *out, "output file holding 'noise'")->required();
    cmd->fallthrough();
    cmd->callback([=] {
      if (*seed < 0) throw_input_error("--seed: expected a non-negative integer, got ", *seed);
      const auto dims = parse_int_list(*shape, "--shape");
      if (dims.size() > 8) throw_input_error("--shape: at most 8 dimensions, got ", dims.size());
      const Shape s(dims);
      if (s.numel() > (int64_t{1} << 34)) throw_input_error("--shape: ", s.str(), " is too large");
      write_safetensors(*out, {{"noise", torch_randn(static_cast<uint64_t>(*seed), s)}},
                        {{"producer", "vidax run noise"}, {"seed", std::to_string(*seed)}});
    });
  }
  register_run_t5(*run);
}

}  // namespace vidax::cli
