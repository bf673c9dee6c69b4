// `vidax plan`: the topology planner (plan/planner.h). Picks the mesh, weight mode and placement
// of a request on a topology (a preset, a JSON file, or `local`: this machine, measured) and
// writes the plan file `vidax generate --plan` runs, plus an MPI rankfile.
#include <omp.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>

#include "apps/vidax/commands.h"
#include "core/error.h"
#include "io/atomic_file.h"
#include "models/clip/clip_checkpoint.h"
#include "models/wan/dit_checkpoint.h"
#include "models/wan/dit_config.h"
#include "models/wan/t5_checkpoint.h"
#include "models/wan/vae_checkpoint.h"
#include "pipeline/model_defaults.h"
#include "pipeline/model_files.h"
#include "plan/local_topology.h"
#include "plan/planner.h"

namespace vidax::cli {
namespace {

struct PlanArgs {
  std::string model, size = "832x480", topology, precision = "bf16", attention = "dense";
  std::string weights = "any", output, rankfile, comm, mesh, write_topology;
  std::string accel = "none", sampler = "unipc", vae_precision;
  int64_t frames = 81, text_tokens = 0, vae_tile = 0;
  std::optional<int64_t> steps;  // default: the model family's
  int devices = 0;
  int64_t layers = 0;
  double density = 0, device_memory_gib = 0;
  bool no_guidance = false, json = false, explain = false, image = false;
};

wan::DitConfig model_config(const std::string& model) {
  if (auto preset = wan::dit_preset(model)) return *preset;
  std::error_code ec;
  if (!std::filesystem::exists(model, ec)) {
    std::string names;
    for (const auto& n : wan::dit_preset_names()) {
      if (!names.empty()) names += ", ";
      names += n;
    }
    throw_input_error("--model: \"", model, "\" is neither a model folder nor a preset (", names,
                      ")");
  }
  if (model.size() > 5 && model.substr(model.size() - 5) == ".json") {  // a DiT config.json
    std::ifstream in(model);
    std::ostringstream text;
    text << in.rdbuf();
    if (!in && !in.eof()) throw_input_error("--model: cannot read ", model);
    return wan::dit_config_from_json(text.str(), model);
  }
  std::string dit = model;
  if (std::filesystem::is_directory(model, ec)) dit = resolve_model_files(model, {}, false).dit;
  if (dit.empty()) throw_input_error("--model: no DiT checkpoint found in ", model);
  return wan::DitCheckpoint::open(dit).config();
}

// The text encoder, VAE and (image branch) CLIP the phases are priced with: a model folder's own
// files where it has them, else the family's published models (umT5-XXL, the Wan 2.1 or 2.2
// VAE, ViT-H/14). Returns whether the folder holds two DiT experts (Wan 2.2 A14B).
bool phase_models(const std::string& model, plan::PlanRequest& r) {
  r.t5 = wan::t5_preset("umt5-xxl");
  r.vae = wan::vae_preset(r.config.kind == wan::DitKind::kTI2V ? "wan2.2-vae" : "wan2.1-vae");
  if (r.config.image_branch()) r.clip = clip::clip_vision_preset("vit-h-14");
  std::error_code ec;
  if (!std::filesystem::is_directory(model, ec)) return false;
  const ModelFiles files = resolve_model_files(model, {}, false);
  if (!files.t5.empty()) r.t5 = wan::T5Checkpoint::open(files.t5).config();
  if (!files.vae.empty()) r.vae = wan::VaeCheckpoint::open(files.vae).config();
  if (!files.clip.empty() && r.config.image_branch())
    r.clip = clip::ClipCheckpoint::open(files.clip).config();
  return !files.dit_low.empty();
}

// The attention policy's share of the dense FLOPs: --attention-density, else its density=
// option, else 1 (dense, or a policy whose density is only known at run time).
double attention_density(const PlanArgs& a) {
  if (a.density > 0) {
    if (a.density > 1) throw_input_error("--attention-density: expected a share in (0, 1]");
    return a.density;
  }
  const auto pos = a.attention.find("density=");
  if (pos == std::string::npos) return 1.0;
  try {
    const double d = std::stod(a.attention.substr(pos + 8));
    if (d > 0 && d <= 1) return d;
  } catch (const std::exception&) {
  }
  throw_input_error("--attention: density= expects a share in (0, 1]");
}

void write_text(const std::string& path, const std::string& text) {
  AtomicFile f(path);
  f.write_all(text.data(), text.size());
  f.commit();
}

void run_plan(const PlanArgs& a) {
  plan::PlanRequest r;
  r.model = a.model;
  r.config = model_config(a.model);
  if (a.layers < 0 || a.layers > 1000) throw_input_error("--layers: expected 1..1000");
  if (a.layers > 0) r.config.num_layers = a.layers;
  const auto [w, h] = parse_size(a.size, "--size");
  r.width = w;
  r.height = h;
  r.frames = a.frames;
  if (a.steps && *a.steps < 1) throw_input_error("--steps: expected >= 1, got ", *a.steps);
  r.guided = !a.no_guidance;
  r.precision = wan::parse_precision(a.precision, "--precision");
  r.attention = a.attention;
  r.attention_density = attention_density(a);
  if (a.sampler != "unipc" && a.sampler != "dpm++" && a.sampler != "euler")
    throw_input_error("--sampler: expected unipc, dpm++ or euler, got '", a.sampler, "'");
  r.accel = a.accel;
  r.sampler = a.sampler;
  if (a.weights == "any") {
    r.weight_modes = {"resident", "sharded"};
  } else if (a.weights == "resident" || a.weights == "sharded") {
    r.weight_modes = {a.weights};
  } else {
    throw_input_error("--weights: expected resident, sharded or any, got \"", a.weights, "\"");
  }
  if (a.devices < 0) throw_input_error("--devices: expected a positive count");
  r.devices = a.devices;
  if (!a.mesh.empty()) r.only_mesh = dist::parse_mesh_spec(a.mesh, "--mesh");
  const bool two_experts = phase_models(a.model, r);
  // The latent geometry from the VAE the phases use (Wan 2.2's: 16x spatial, 48 channels).
  r.vae_stride_t = r.vae->temporal_stride();
  r.vae_stride_hw = r.vae->spatial_stride();
  r.z_dim = r.vae->z_dim;
  // The family's own step count (Wan 2.1 I2V and the Wan 2.2 A14B experts sample 40) unless given.
  r.steps = a.steps ? *a.steps : model_defaults(r.config, *r.vae, two_experts).steps;
  if (a.text_tokens < 0 || a.text_tokens > r.t5->text_len)
    throw_input_error("--text-tokens: expected 1..", r.t5->text_len, ", got ", a.text_tokens);
  r.text_tokens = a.text_tokens > 0 ? a.text_tokens : r.t5->text_len;
  r.vae_precision = a.vae_precision.empty()
                        ? r.precision
                        : wan::parse_precision(a.vae_precision, "--vae-precision");
  if (a.vae_tile < 0) throw_input_error("--vae-tile: expected >= 0, got ", a.vae_tile);
  r.vae_tile = a.vae_tile;
  if (a.image && r.config.kind == wan::DitKind::kT2V)
    throw_input_error("--image: ", a.model, " is a text-to-video model (no image conditioning)");
  r.image = r.config.kind == wan::DitKind::kI2V || a.image;
  plan::Topology topo;
  if (a.topology == "local" || a.topology == "cpu:local" || a.topology == "builtin:cpu:local") {
    if (a.devices < 1) throw_input_error("--devices: the local topology needs the process count");
    plan::LocalCalibration cal;
    cal.processes = a.devices;
    cal.config = r.config;
    cal.precision = r.precision;
    const int64_t tokens = plan::plan_geometry(r).tokens;
    cal.tokens = tokens;
    cal.width = r.width;
    cal.height = r.height;
    cal.vae = r.vae;
    cal.vae_precision = r.vae_precision;
    // A rank's rows under each sequence split (ring x ulysses divides the process count): the
    // block is timed at each, the finest split's rows being the topology's own shares.
    cal.rows = (tokens + a.devices - 1) / a.devices;
    for (int sp = 1; sp < a.devices; ++sp)
      if (a.devices % sp == 0) cal.rows_set.push_back((tokens + sp - 1) / sp);
    if (!a.comm.empty()) {
      std::ifstream in(a.comm);
      if (!in) throw_input_error("--comm: cannot read ", a.comm);
      std::ostringstream s;
      s << in.rdbuf();
      cal.comm_json = s.str();
    }
    topo = plan::local_topology(cal);
  } else {
    if (!a.comm.empty()) throw_input_error("--comm: only with --topology local");
    topo = plan::load_topology(a.topology);
  }
  if (a.device_memory_gib < 0) throw_input_error("--device-memory: expected GiB > 0");
  if (a.device_memory_gib > 0) topo.device.memory_bytes = a.device_memory_gib * 1073741824.0;
  if (!a.write_topology.empty()) write_text(a.write_topology, plan::topology_to_json(topo) + "\n");
  const plan::Plan p = plan::make_plan(r, topo);
  if (!a.output.empty()) write_text(a.output, p.to_json(a.explain).dump(2) + "\n");
  if (!a.rankfile.empty()) write_text(a.rankfile, p.rankfile(omp_get_num_procs()));
  if (a.json) {
    std::printf("%s\n", p.to_json(a.explain).dump(2).c_str());
  } else {
    std::printf("%s", p.to_text(a.explain).c_str());
    if (!a.output.empty()) std::printf("plan written to %s\n", a.output.c_str());
  }
}

}  // namespace

void register_plan(CLI::App& app) {
  auto a = std::make_shared<PlanArgs>();
  auto* cmd = app.add_subcommand(
      "plan", "Choose the mesh and placement of a request on a topology (the AoiZora planner)");
  cmd->add_option("--model", a->model,
                  "model folder, DiT checkpoint, DiT config.json or preset (wan2.1-t2v-14b, ...)")
      ->required();
  cmd->add_option("--topology", a->topology,
                  "preset (tpu-v5e-2x4, h100-nvswitch-x8, ..., local) or a topology JSON file")
      ->required();
  cmd->add_option("--layers", a->layers,
                  "plan for this many blocks of the model's size (as bench dit --layers)");
  cmd->add_option("--frames", a->frames, "video frames, 4k+1 (default 81)");
  cmd->add_option("--size", a->size, "WIDTHxHEIGHT (default 832x480)");
  cmd->add_option("--steps", a->steps, "denoising steps (default: the model family's, 50 or 40)");
  cmd->add_option("--devices", a->devices,
                  "devices (processes) to use; default all of the topology; required for local");
  cmd->add_option("--precision", a->precision, "bf16 (default) | fp32");
  cmd->add_option("--attention", a->attention, "attention policy spec (dense by default)");
  cmd->add_option("--attention-density", a->density,
                  "the policy's share of the dense attention FLOPs (default: its density= or 1)");
  cmd->add_option("--accel", a->accel,
                  "step method (as generate's --accel): refuses the meshes it cannot run on; a "
                  "fixed schedule (magcache) scales the denoise time");
  cmd->add_option("--sampler", a->sampler, "unipc (default) | dpm++ | euler (for --accel hsa)");
  cmd->add_flag("--no-guidance", a->no_guidance, "no classifier-free guidance (one forward/step)");
  cmd->add_option("--weights", a->weights, "resident | sharded | any (default: any)");
  cmd->add_option("--text-tokens", a->text_tokens,
                  "tokens of the longest prompt, for the text phase (default: the encoder's 512, "
                  "to which the official code pads every prompt)");
  cmd->add_option("--vae-precision", a->vae_precision,
                  "bf16 | fp32 for the VAE phases (default: as --precision; the official VAE "
                  "runs in fp32)");
  cmd->add_option("--vae-tile", a->vae_tile,
                  "as generate --vae-tile: decode in tiles dealt to every rank (default: untiled, "
                  "rank 0 alone)");
  cmd->add_flag("--image", a->image,
                "TI2V: the request conditions on an image (its VAE encode is priced; I2V models "
                "always are)");
  cmd->add_option("--mesh", a->mesh,
                  "predict this mesh only (cfg=C,ring=R,ulysses=U,tp=T) instead of searching");
  cmd->add_option("--comm", a->comm,
                  "local only: JSON of `mpirun -n N vidax bench comm --json` (latency, bandwidth)");
  cmd->add_option("--device-memory", a->device_memory_gib,
                  "GiB each device holds, instead of the topology's figure");
  cmd->add_option("--write-topology", a->write_topology,
                  "write the topology used (e.g. the measured local one) as a topology file");
  cmd->add_flag("--json", a->json, "print the plan as JSON");
  cmd->add_flag("--explain", a->explain, "list every candidate: its estimate and its fate");
  cmd->add_option("-o,--output", a->output, "write the plan file (for generate --plan)");
  cmd->add_option("--rankfile", a->rankfile, "write an Open MPI rankfile of the placement");
  cmd->callback([a] { run_plan(*a); });
}

}  // namespace vidax::cli
