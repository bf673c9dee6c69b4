// The Wan VAE on the command line:
//   run vae-encode  video -> mu (+ mu_raw, log_var, enc_out), names as in the fixtures' io files
//   run vae-decode  z -> dec_out (+ dec_post_quant_out), streamed frame chunk by frame chunk
//   bench vae       real-size random (or given) weights: seconds per frame and peak RSS
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <omp.h>
#include <nlohmann/json.hpp>

#include "apps/vidax/commands.h"
#include "core/memory_usage.h"
#include "core/page_buffer.h"
#include "io/safetensors.h"
#include "models/wan/vae.h"
#include "models/wan/vae_checkpoint.h"
#include "models/wan/vae_random.h"
#include "sampling/torch_randn.h"

namespace vidax::cli {
namespace {

struct VaeArgs {
  std::string weights, config, precision = "fp32";
  int64_t tile_h = 0, tile_w = 0, overlap = 0;
};

void add_vae_args(CLI::App* cmd, VaeArgs& a, bool decode) {
  cmd->add_option("--weights", a.weights,
                  "VAE checkpoint: official names (Wan2.1_VAE / Wan2.2_VAE, ComfyUI) or diffusers "
                  "AutoencoderKLWan; file, *.index.json or folder")
      ->required();
  cmd->add_option("--config", a.config, "config.json overriding the checkpoint's own config");
  cmd->add_option("--precision", a.precision, "fp32 | bf16 (default fp32)");
  if (decode) {
    cmd->add_option("--tile-h", a.tile_h, "decode in tiles this many latent rows high (0: off)");
    cmd->add_option("--tile-w", a.tile_w, "decode in tiles this many latent columns wide (0: off)");
    cmd->add_option("--overlap", a.overlap, "tile overlap in latent pixels (default 0)");
  }
}

std::optional<wan::VaeConfig> read_config(const std::string& path) {
  if (path.empty()) return std::nullopt;
  std::ifstream in(path);
  if (!in) throw_input_error("--config: cannot read ", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return wan::vae_config_from_json(ss.str(), path);
}

// The scale_mean / scale_inv_std of an io file override the config's statistics.
void apply_scale(wan::WanVae& vae, const SafetensorsFile& in) {
  const bool m = in.contains("scale_mean"), s = in.contains("scale_inv_std");
  if (m != s)
    throw_input_error(in.path(), ": give both 'scale_mean' and 'scale_inv_std' or neither");
  if (m) {
    try {
      vae.set_latent_stats(in.tensor("scale_mean").to_float_vector(),
                           in.tensor("scale_inv_std").to_float_vector());
    } catch (const InputError& e) {
      throw_input_error(in.path(), ": ", e.what());
    }
  }
}

void run_vae(const VaeArgs& a, const std::string& in_path, const std::string& out_path,
             bool encode) {
  const wan::Precision p = wan::parse_precision(a.precision, "--precision");
  auto in = SafetensorsFile::open(in_path);
  const char* input = encode ? "video" : "z";
  if (!in.contains(input))
    throw_input_error(in_path, ": missing input tensor '", input, "' (",
                      encode ? "video [1, 3, T, H, W] or [3, T, H, W] in [-1, 1]"
                             : "latent [1, z, F, h, w] or [z, F, h, w]",
                      ")");
  auto ck = wan::VaeCheckpoint::open(a.weights, read_config(a.config));
  ck.require_loadable();
  wan::WanVae vae(ck.config(), ck.loader(), p,
                  encode ? wan::VaeParts::kEncoder : wan::VaeParts::kDecoder);
  apply_scale(vae, in);
  std::vector<std::pair<std::string, Tensor>> outputs;
  const auto capture = [&](const std::string& n, const Tensor& t) { outputs.emplace_back(n, t); };
  const Tensor x = in.tensor(input);
  if (encode) {
    const Tensor mu = vae.encode(x, capture);
    outputs.emplace_back("mu", mu.unsqueeze(0));
  } else {
    wan::VaeDecodeOptions opt{a.tile_h, a.tile_w, a.overlap};
    Tensor out;
    int64_t pos = 0;
    vae.decode(
        x,
        [&](const Tensor& f) {
          if (!out.defined()) {
            const int64_t nf = x.dim(x.rank() - 3);
            out = Tensor::zeros(
                Shape{1, 3, 1 + vae.config().temporal_stride() * (nf - 1), f.dim(2), f.dim(3)});
          }
          for (int64_t c = 0; c < 3; ++c)
            out.select(0, 0)
                .select(0, c)
                .slice(0, pos, pos + f.dim(1))
                .copy_from(f.select(0, c).contiguous());
          pos += f.dim(1);
          std::fprintf(stderr, "decoded %lld frames\n", static_cast<long long>(pos));
        },
        opt, capture);
    outputs.emplace_back("dec_out", out);
  }
  write_safetensors(out_path, outputs,
                    {{"producer", encode ? "vidax run vae-encode" : "vidax run vae-decode"},
                     {"config", ck.config().to_json()}});
}

// --- bench ---

struct BenchArgs {
  std::string version = "2.1", weights, size = "832x480", precision = "fp32", tile;
  int64_t frames = 17, overlap = 1;
  bool encode = false, json = false;
};

void bench_vae(const BenchArgs& a) {
  const wan::Precision p = wan::parse_precision(a.precision, "--precision");
  const auto [width, height] = parse_size(a.size, "--size");
  if (a.version != "2.1" && a.version != "2.2")
    throw_input_error("--version: expected 2.1 or 2.2, got '", a.version, "'");
  wan::VaeDecodeOptions opt;
  if (!a.tile.empty()) {
    const auto [tw, th] = parse_size(a.tile, "--tile");
    opt = {th, tw, a.overlap};
  }
  const auto t_load = std::chrono::steady_clock::now();
  std::optional<wan::VaeCheckpoint> ck;
  wan::VaeConfig cfg;
  wan::WeightFn weights;
  if (!a.weights.empty()) {
    ck = wan::VaeCheckpoint::open(a.weights);
    ck->require_loadable();
    cfg = ck->config();
    weights = ck->loader();
  } else {
    cfg = *wan::vae_preset(a.version == "2.2" ? "wan2.2-vae" : "wan2.1-vae");
    weights = wan::random_vae_weights(cfg, DType::kF32, 77);
  }
  const int64_t ss = cfg.spatial_stride(), ts = cfg.temporal_stride();
  if (width % ss != 0 || height % ss != 0)
    throw_input_error("--size: ", a.size, " must be multiples of ", ss, " for the Wan ",
                      cfg.version_name(), " VAE");
  if (a.frames < 1 || (a.frames - 1) % ts != 0)
    throw_input_error("--frames: ", a.frames, " must be ", ts, "k+1");
  const int64_t estimate = a.encode ? wan::WanVae::encode_peak_bytes(cfg, height, width, p)
                                    : wan::WanVae::decode_peak_bytes(cfg, height, width, p, opt);
  wan::WanVae vae(cfg, weights, p, a.encode ? wan::VaeParts::kEncoder : wan::VaeParts::kDecoder);
  weights = nullptr;
  const double load_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count();
  const size_t rss_after_load = peak_resident_bytes();

  const int64_t lat_f = (a.frames - 1) / ts + 1;
  const PageReuse::Stats reuse_before = PageReuse::stats();
  double seconds = 0, first_chunk = 0;
  const auto t0 = std::chrono::steady_clock::now();
  if (a.encode) {
    Tensor video = torch_randn(5, Shape{3, a.frames, height, width});
    float* v = video.mutable_data<float>();
    for (int64_t i = 0; i < video.numel(); ++i) v[i] = std::tanh(0.5f * v[i]);
    const auto s0 = std::chrono::steady_clock::now();
    vae.encode(video);
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count();
  } else {
    const Tensor z = torch_randn(5, Shape{cfg.z_dim, lat_f, height / ss, width / ss});
    int64_t chunks = 0;
    vae.decode(
        z,
        [&](const Tensor&) {
          if (chunks++ == 0)
            first_chunk =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        },
        opt);
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  nlohmann::json j = {{"version", cfg.version_name()},
                      {"mode", a.encode ? "encode" : "decode"},
                      {"precision", a.precision},
                      {"frames", a.frames},
                      {"latent_frames", lat_f},
                      {"size", a.size},
                      {"tile", a.tile},
                      {"overlap", a.tile.empty() ? 0 : a.overlap},
                      {"threads", omp_get_max_threads()},
                      {"seconds", seconds},
                      {"seconds_per_frame", seconds / static_cast<double>(a.frames)},
                      {"load_seconds", load_s},
                      {"weight_bytes", vae.weight_bytes()},
                      {"peak_rss_bytes", peak_resident_bytes()},
                      {"rss_after_load_bytes", rss_after_load},
                      {"estimated_peak_bytes", estimate}};
  if (!a.encode) j["seconds_to_first_frame"] = first_chunk;
  // What the page reuse did (VIDAX_PAGE_REUSE; docs/vae.md): buffers served from kept mappings,
  // new mappings made, kept ones given back to stay under the limit.
  const PageReuse::Stats reuse = PageReuse::stats();
  j["page_reuse"] = {{"reused", reuse.reused - reuse_before.reused},
                     {"mapped", reuse.mapped - reuse_before.mapped},
                     {"given_back", reuse.given_back - reuse_before.given_back}};
  if (a.json) {
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf("%s\n", j.dump(2).c_str());
}

}  // namespace

void register_run_vae(CLI::App* run) {
  for (const bool encode : {true, false}) {
    auto* cmd = run->add_subcommand(
        encode ? "vae-encode" : "vae-decode",
        encode ? "VAE encode: IN holds video (+ scale_mean, scale_inv_std); OUT gets mu, mu_raw, "
                 "log_var, enc_out"
               : "VAE decode: IN holds z (+ scale_mean, scale_inv_std); OUT gets dec_out (raw, "
                 "unclamped) and dec_post_quant_out");
    auto a = std::make_shared<VaeArgs>();
    auto in = std::make_shared<std::string>(), out = std::make_shared<std::string>();
    add_vae_args(cmd, *a, !encode);
    cmd->add_option("--in", *in, "input tensors (.safetensors)")->required();
    cmd->add_option("--out", *out, "output file (.safetensors)")->required();
    cmd->fallthrough();
    cmd->callback([=] { run_vae(*a, *in, *out, encode); });
  }
}

void register_bench_vae(CLI::App* bench) {
  auto* cmd = bench->add_subcommand(
      "vae", "Time the Wan VAE decode (or --encode) at real size; seconds per frame, peak RSS");
  auto a = std::make_shared<BenchArgs>();
  cmd->add_option("--version", a->version, "2.1 | 2.2 (random weights; default 2.1)");
  cmd->add_option("--weights", a->weights, "use a checkpoint instead of random weights");
  cmd->add_option("--frames", a->frames, "video frames, 4k+1 (default 17)");
  cmd->add_option("--size", a->size, "WIDTHxHEIGHT in pixels (default 832x480)");
  cmd->add_option("--precision", a->precision, "fp32 | bf16 (default fp32)");
  cmd->add_option("--tile", a->tile, "decode tiles WIDTHxHEIGHT in latent pixels, e.g. 32x32");
  cmd->add_option("--overlap", a->overlap, "tile overlap in latent pixels (default 1)");
  cmd->add_flag("--encode", a->encode, "time encode instead of decode");
  cmd->add_flag("--json", a->json, "print one JSON object on one line");
  cmd->fallthrough();
  cmd->callback([=] { bench_vae(*a); });
}

}  // namespace vidax::cli
