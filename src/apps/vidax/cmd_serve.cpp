// `vidax serve`: the HTTP API and web page over one set of loaded models (serve/video_server.h).
//   vidax serve --model DIR [--host 127.0.0.1] [--port 8080] [--output-dir DIR] [--max-queue N]
// SIGINT / SIGTERM stop it gracefully (a running job is queued again for the next start); a
// second signal exits at once, removing the running job's temporaries.
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "apps/vidax/commands.h"
#include "apps/vidax/weight_args.h"
#include "core/error.h"
#include "io/temp_paths.h"
#include "models/wan/dit_checkpoint.h"
#include "serve/video_server.h"

namespace vidax::cli {
namespace {

struct ServeArgs {
  std::string model, dit, t5, vae, tokenizer, clip;
  std::string host = "127.0.0.1", output_dir = "vidax-videos", token_file;
  int port = 8080;
  int64_t max_queue = 16, max_body_mib = 32;
  std::string precision = "bf16", vae_precision, size, negative_prompt;
  int64_t frames = 0, steps = 0;
  double shift = 0, guide_scale = -1;
  std::string attention = "dense", accel = "none";
  WeightArgs residency;
  bool no_keep_models = false, no_hash = false, insecure = false;
  bool negative_given = false;
};

bool is_loopback(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

std::string read_token(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw_input_error("--token-file ", path, ": cannot read it");
  std::stringstream text;
  text << in.rdbuf();
  std::string token = text.str();
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' '))
    token.pop_back();
  if (token.size() < 16 || token.find_first_of(" \t\r\n") != std::string::npos)
    throw_input_error("--token-file ", path,
                      ": expected one line of at least 16 characters without spaces");
  return token;
}

}  // namespace

void register_serve(CLI::App& app, int argc, char** argv) {
  auto a = std::make_shared<ServeArgs>();
  auto* cmd = app.add_subcommand(
      "serve", "HTTP API, job queue and web page for text/image to video (docs/serve.md)");
  cmd->add_option("--model", a->model, "model folder (as vidax generate --model)");
  cmd->add_option("--dit", a->dit, "diffusion transformer file/folder (overrides --model)");
  cmd->add_option("--t5", a->t5, "umT5 text encoder file/folder (overrides --model)");
  cmd->add_option("--vae", a->vae, "VAE file/folder (overrides --model)");
  cmd->add_option("--tokenizer", a->tokenizer, "spiece.model or the folder holding it");
  cmd->add_option("--clip", a->clip, "CLIP image encoder (Wan 2.1 I2V / FLF2V)");
  cmd->add_option("--host", a->host, "address to listen on (default 127.0.0.1, loopback only)");
  cmd->add_option("--port", a->port, "TCP port (default 8080; 0: any free port, printed)");
  cmd->add_option("--output-dir", a->output_dir,
                  "where videos, sidecars and job records live (default vidax-videos)");
  cmd->add_option("--max-queue", a->max_queue,
                  "jobs that may wait; more get HTTP 429 (default 16)");
  cmd->add_option("--max-body-mib", a->max_body_mib, "largest request body in MiB (default 32)");
  cmd->add_option("--token-file", a->token_file,
                  "require 'Authorization: Bearer TOKEN' (TOKEN: the file's one line)");
  cmd->add_flag("--insecure", a->insecure,
                "allow a non-loopback --host without --token-file (anyone reaching it can use it)");
  cmd->add_option("--precision", a->precision, "bf16 | fp32 for the DiT and T5 (default bf16)");
  cmd->add_option("--vae-precision", a->vae_precision, "bf16 | fp32 (default: as --precision)");
  cmd->add_option("--size", a->size, "default WIDTHxHEIGHT of requests (default: the model's)");
  cmd->add_option("--frames", a->frames, "default frame count of requests (default: the model's)");
  cmd->add_option("--steps", a->steps, "default steps of requests (default: the model's)");
  cmd->add_option("--shift", a->shift, "default sigma shift (default: the model's)");
  cmd->add_option("--guide-scale", a->guide_scale, "default guide scale (default: the model's)");
  auto* negative = cmd->add_option("--negative-prompt", a->negative_prompt,
                                   "default negative prompt (default: the official one)");
  cmd->add_option("--attention", a->attention, "default attention policy (default dense)");
  cmd->add_option("--accel", a->accel, "default step method (default none)");
  add_weight_args(cmd, a->residency);
  cmd->add_flag("--no-keep-models", a->no_keep_models,
                "load each model per job instead of keeping them loaded (less memory when idle)");
  cmd->add_flag("--no-hash", a->no_hash, "skip the SHA-256 of the model files in sidecars");
  const std::vector<std::string> command_line(argv, argv + argc);
  cmd->callback([a, negative, command_line] {
    a->negative_given = negative->count() > 0;
    serve::ServeOptions s;
    s.host = a->host;
    if (a->port < 0 || a->port > 65535)
      throw_input_error("--port: expected 0..65535, got ", a->port);
    s.port = a->port;
    s.output_dir = a->output_dir;
    if (a->max_queue < 1 || a->max_queue > 100000)
      throw_input_error("--max-queue: expected 1..100000, got ", a->max_queue);
    s.max_queue = static_cast<size_t>(a->max_queue);
    if (a->max_body_mib < 1 || a->max_body_mib > 1024)
      throw_input_error("--max-body-mib: expected 1..1024, got ", a->max_body_mib);
    s.max_body_bytes = static_cast<size_t>(a->max_body_mib) << 20;
    if (!a->token_file.empty()) s.token = read_token(a->token_file);
    if (!is_loopback(a->host) && s.token.empty() && !a->insecure)
      throw_input_error("--host ", a->host, " is reachable from other machines: give ",
                        "--token-file FILE (or --insecure to serve without authentication)");
    GenerateOptions& o = s.base;
    ModelFiles given;
    given.dit = a->dit;
    given.t5 = a->t5;
    given.vae = a->vae;
    given.tokenizer = a->tokenizer;
    given.clip = a->clip;
    o.files = resolve_model_files(a->model, given);
    o.precision = wan::parse_precision(a->precision, "--precision");
    o.vae_precision = a->vae_precision.empty()
                          ? o.precision
                          : wan::parse_precision(a->vae_precision, "--vae-precision");
    if (!a->size.empty()) {
      const auto [w, h] = parse_size(a->size, "--size");
      o.width = w;
      o.height = h;
    }
    if (a->frames != 0) o.frames = a->frames;
    if (a->steps != 0) {
      if (a->steps < 1 || a->steps > 1000) throw_input_error("--steps: expected 1..1000");
      o.denoise.steps = static_cast<int>(a->steps);
    }
    o.denoise_given.steps = a->steps != 0;
    if (a->shift != 0) {
      if (!(a->shift > 0)) throw_input_error("--shift: expected a positive number");
      o.denoise.shift = a->shift;
    }
    o.denoise_given.shift = a->shift != 0;
    if (a->guide_scale != -1) {
      if (!(a->guide_scale >= 0)) throw_input_error("--guide-scale: expected a number >= 0");
      o.denoise.guide_scale = a->guide_scale;
    }
    o.denoise_given.guide_scale = a->guide_scale != -1;
    if (a->negative_given) o.negative_prompt = a->negative_prompt;
    o.attention = a->attention;
    o.accel = a->accel;
    if (a->residency.sharded())
      throw_input_error("--weights sharded: vidax serve runs one process (nothing to shard over)");
    o.weights_budget = a->residency.budget_bytes();
    o.keep_fp8 = a->residency.keep_fp8;
    o.keep_fp16 = a->residency.keep_fp16;
    wan::check_keep_fp16(o.keep_fp16, o.precision);  // at start, not at every job
    o.hash_models = !a->no_hash;
    o.ctx = cli_context();
    s.keep_models = !a->no_keep_models;
    s.command_line = command_line;

    // Every thread started from here (the HTTP pool, the job worker) inherits this mask: the
    // signals reach only the waiting thread below.
    sigset_t signals;
    sigemptyset(&signals);
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGUSR2}) sigaddset(&signals, sig);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    signal(SIGPIPE, SIG_IGN);  // a client that goes away must not end the server
    // glibc gives each new thread that allocates its own arena, which keeps what it freed: with
    // a pool of HTTP threads that is ~0.5 MiB of resident memory per thread that ever served a
    // request. Four arenas keep the idle level flat (the models' and activations' buffers are
    // large blocks outside the arenas either way).
    mallopt(M_ARENA_MAX, 4);

    serve::VideoServer server(s);
    const int port = server.bind();
    std::fprintf(
        stderr, "vidax serve: listening on http://%s:%d/ (videos in %s)\n",
        a->host.find(':') != std::string::npos ? ("[" + a->host + "]").c_str() : a->host.c_str(),
        port, s.output_dir.c_str());
    std::fflush(stderr);
    std::thread waiter([&server, signals] {
      int sig = 0;
      sigwait(&signals, &sig);
      if (sig == SIGUSR2) return;  // the server ended on its own
      std::fprintf(stderr, "vidax serve: stopping (signal %d); a running job is queued again\n",
                   sig);
      // Repeated until run() has returned (SIGUSR2): a stop that arrives while the listener is
      // still starting would otherwise be lost. A second signal exits at once.
      for (;;) {
        server.stop();
        const timespec wait{0, 100'000'000};
        siginfo_t info{};
        const int got = sigtimedwait(&signals, &info, &wait);
        if (got == SIGUSR2) return;
        if (got > 0) {
          remove_registered_temp_paths();
          _exit(128 + got);
        }
      }
    });
    server.run();
    // Wake the waiter (SIGUSR2 is in its set, blocked everywhere else).
    pthread_kill(waiter.native_handle(), SIGUSR2);
    waiter.join();
  });
}

}  // namespace vidax::cli
