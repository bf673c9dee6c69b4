// `vidax run t5`: the umT5 text encoder on ids/mask from a file or on a prompt (tokenized with
// the sentencepiece model); `vidax bench t5`: seconds per encode at umT5-XXL shapes.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>

#include <omp.h>
#include <nlohmann/json.hpp>

#include "apps/vidax/commands.h"
#include "core/memory_usage.h"
#include "io/prompt_file.h"
#include "io/safetensors.h"
#include "models/wan/t5_checkpoint.h"
#include "models/wan/t5_encoder.h"
#include "models/wan/t5_random.h"
#include "models/wan/tokenizer.h"

namespace vidax::cli {
namespace {

struct T5RunArgs {
  std::string weights, config, precision = "fp32", in, out, tokenizer, prompts_file;
  std::vector<std::string> prompts;
  int64_t max_len = 0;  // 0: the config's text_len (512)
  bool intermediates = true;
};

wan::T5Encoder load_t5(const T5RunArgs& a) {
  const wan::Precision p = wan::parse_precision(a.precision, "--precision");
  std::optional<wan::T5Config> override;
  if (!a.config.empty()) {
    std::ifstream in(a.config);
    if (!in) throw_input_error("--config: cannot read ", a.config);
    std::stringstream ss;
    ss << in.rdbuf();
    override = wan::t5_config_from_json(ss.str(), a.config);
  }
  const auto ck = wan::T5Checkpoint::open(a.weights, override);
  ck.require_loadable();
  return wan::T5Encoder(ck.config(), ck.loader(), p);
}

// The pipeline keeps each prompt's first mask.sum() rows, as T5EncoderModel.__call__ does:
// "context" for one prompt, "context.<b>" for each prompt of a batch.
void add_contexts(const Tensor& out, const Tensor& mask,
                  std::vector<std::pair<std::string, Tensor>>& outputs) {
  const Tensor m = mask.contiguous();
  const int64_t B = out.dim(0), L = out.dim(1);
  for (int64_t b = 0; b < B; ++b) {
    int64_t count = 0;
    for (int64_t i = 0; i < L; ++i)
      count +=
          m.dtype() == DType::kI64 ? m.data<int64_t>()[b * L + i] : m.data<int32_t>()[b * L + i];
    const Tensor context = out.select(0, b).slice(0, 0, count).contiguous();
    outputs.emplace_back(B == 1 ? "context" : "context." + std::to_string(b), context);
  }
}

void run_t5(const T5RunArgs& a) {
  const bool from_prompt = !a.prompts.empty() || !a.prompts_file.empty() || !a.tokenizer.empty();
  const bool from_file = !a.in.empty();
  if (from_file == from_prompt)
    throw_input_error(
        "run t5: give either --in FILE or --tokenizer T with --prompt TEXT / --prompts FILE");
  if (!a.prompts.empty() && !a.prompts_file.empty())
    throw_input_error("run t5: give the prompts with --prompt or with --prompts, not both");
  if (from_prompt && (a.tokenizer.empty() || (a.prompts.empty() && a.prompts_file.empty())))
    throw_input_error(
        "run t5: --prompt / --prompts needs --tokenizer (spiece.model or its folder) and text");
  if (a.max_len < 0) throw_input_error("--max-len: expected >= 1, got ", a.max_len);
  std::optional<wan::Tokenizer> tok;
  std::vector<std::string> prompts = a.prompts;
  if (!a.prompts_file.empty()) prompts = read_prompt_file(a.prompts_file);
  if (from_prompt) tok = wan::Tokenizer::open(a.tokenizer);  // fail fast, before the weights
  std::optional<SafetensorsFile> in;
  if (from_file) in = SafetensorsFile::open(a.in);

  wan::T5Encoder enc = load_t5(a);
  std::vector<std::pair<std::string, Tensor>> outputs;
  const wan::CaptureFn capture =
      a.intermediates ? wan::CaptureFn([&](const std::string& name, const Tensor& t) {
        if (name != "out") outputs.emplace_back(name, t.clone());
      })
                      : wan::CaptureFn();
  if (from_file) {
    for (const char* name : {"ids", "mask"})
      if (!in->contains(name))
        throw_input_error(a.in, ": missing input tensor '", name, "' ([B, L] or [L], I64)");
    Tensor ids = in->tensor("ids"), mask = in->tensor("mask");
    if (ids.rank() == 1) ids = ids.unsqueeze(0);  // [L] -> [1, L]: the reference's shapes
    if (mask.rank() == 1) mask = mask.unsqueeze(0);
    const Tensor out = enc.forward_batch(ids, mask, capture);  // [B, L, dim]
    outputs.emplace_back("out", out);
    add_contexts(out, mask, outputs);
  } else {
    const int64_t max_len = a.max_len > 0 ? a.max_len : enc.config().text_len;
    const auto B = static_cast<int64_t>(prompts.size());
    std::vector<wan::TokenizedText> texts;
    int64_t longest = 1;
    for (const std::string& p : prompts) {
      texts.push_back(tok->encode(p, max_len));
      longest = std::max(longest, texts.back().count);
    }
    // ids, mask [B, max_len] as the tokenizer pads them; the encoder runs on the longest
    // prompt's tokens only (the other rows' real tokens give the same context as at max_len,
    // see T5Encoder::encode).
    Tensor ids = Tensor::zeros(Shape{B, max_len}, DType::kI64);
    Tensor mask = Tensor::zeros(Shape{B, max_len}, DType::kI64);
    for (int64_t b = 0; b < B; ++b) {
      std::copy_n(texts[static_cast<size_t>(b)].ids.data<int64_t>(), max_len,
                  ids.mutable_data<int64_t>() + b * max_len);
      std::copy_n(texts[static_cast<size_t>(b)].mask.data<int64_t>(), max_len,
                  mask.mutable_data<int64_t>() + b * max_len);
    }
    const Tensor out = enc.forward_batch(ids.slice(1, 0, longest).contiguous(),
                                         mask.slice(1, 0, longest).contiguous(), capture);
    outputs.emplace_back("ids", ids);
    outputs.emplace_back("mask", mask);
    add_contexts(out, mask.slice(1, 0, longest).contiguous(), outputs);
  }
  write_safetensors(a.out, outputs,
                    {{"producer", "vidax run t5"}, {"config", enc.config().to_json()}});
}

struct T5BenchArgs {
  std::string weights, precision = "bf16";
  int64_t tokens = 512, vocab = 32128, iters = 2, warmup = 1;
  bool json = false;
};

void bench_t5(const T5BenchArgs& a) {
  const wan::Precision p = wan::parse_precision(a.precision, "--precision");
  if (a.tokens < 1) throw_input_error("--tokens: expected >= 1, got ", a.tokens);
  if (a.iters < 1 || a.warmup < 0) throw_input_error("--iters must be >= 1 and --warmup >= 0");
  if (a.vocab < 2) throw_input_error("--vocab: expected >= 2, got ", a.vocab);

  const auto t_load = std::chrono::steady_clock::now();
  std::optional<wan::T5Checkpoint> ck;
  wan::T5Config cfg = *wan::t5_preset("umt5-xxl");
  if (!a.weights.empty()) {
    ck = wan::T5Checkpoint::open(a.weights);
    ck->require_loadable();
    cfg = ck->config();
  } else {
    // The embedding is only gathered from (a few rows per prompt), so a smaller random table
    // measures the same work and spares ~2 GiB; the report states it.
    cfg.vocab = a.vocab;
  }
  {  // Refuse what cannot fit before spending minutes on the weights.
    const double need = static_cast<double>(wan::T5Encoder::weight_bytes(cfg, p) +
                                            wan::T5Encoder::activation_bytes(cfg, a.tokens));
    const double have =
        static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
    if (have > 0 && need > have)
      throw_input_error("bench t5: ", a.precision, " weights and ", a.tokens, " tokens need ~",
                        need / (1 << 30), " GiB; this machine has ", have / (1 << 30), " GiB");
  }
  wan::T5Encoder enc(cfg,
                     ck ? wan::WeightFn(ck->loader())
                        : wan::random_t5_weights(
                              cfg, p == wan::Precision::kBF16 ? DType::kBF16 : DType::kF32, 1234),
                     p);
  if (ck) ck->source().release_resident_pages();
  const double load_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count();

  // A prompt of `tokens` real tokens (ids spread over the vocabulary, </s> last): the trimmed
  // path for short prompts, the reference's padded length for --tokens 512.
  Tensor ids = Tensor::zeros(Shape{a.tokens}, DType::kI64);
  Tensor mask = Tensor::zeros(Shape{a.tokens}, DType::kI64);
  for (int64_t i = 0; i < a.tokens; ++i) {
    ids.mutable_data<int64_t>()[i] = i + 1 == a.tokens ? 1 : 2 + (i * 7919) % (cfg.vocab - 2);
    mask.mutable_data<int64_t>()[i] = 1;
  }
  for (int64_t i = 0; i < a.warmup; ++i) enc.forward(ids, mask);
  double total = 0, best = 1e30;
  for (int64_t i = 0; i < a.iters; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    enc.forward(ids, mask);
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    total += dt;
    best = std::min(best, dt);
  }
  const double seconds = total / static_cast<double>(a.iters);
  const double flops = wan::T5Encoder::forward_flops(cfg, a.tokens);
  wan::T5Config full = cfg;
  full.vocab = wan::t5_preset("umt5-xxl")->vocab;
  nlohmann::json j = {{"model", a.weights.empty() ? "umt5-xxl (random weights)" : a.weights},
                      {"vocab", cfg.vocab},
                      {"precision", a.precision},
                      {"tokens", a.tokens},
                      {"threads", omp_get_max_threads()},
                      {"iters", a.iters},
                      {"seconds_per_encode", seconds},
                      {"best_seconds", best},
                      {"load_seconds", load_s},
                      {"gflops_per_second", flops / seconds * 1e-9},
                      {"held_weight_bytes", enc.held_weight_bytes()},
                      {"weight_bytes_full_vocab", wan::T5Encoder::weight_bytes(full, p)},
                      {"peak_rss_bytes", peak_resident_bytes()}};
  if (a.json) {
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf("%s, vocab %lld, %s, %lld tokens, %d threads\n",
              j["model"].get<std::string>().c_str(), static_cast<long long>(cfg.vocab),
              a.precision.c_str(), static_cast<long long>(a.tokens), omp_get_max_threads());
  std::printf(
      "seconds per encode: %.3f (best %.3f, %lld iters after %lld warm-up) -> %.1f GFLOP/s\n",
      seconds, best, static_cast<long long>(a.iters), static_cast<long long>(a.warmup),
      flops / seconds * 1e-9);
  std::printf(
      "weights: %.2f GiB held (%.2f GiB with the full 256384-token embedding); peak RSS "
      "%.2f GiB; load %.1f s\n",
      static_cast<double>(enc.held_weight_bytes()) / (1 << 30),
      static_cast<double>(wan::T5Encoder::weight_bytes(full, p)) / (1 << 30),
      static_cast<double>(peak_resident_bytes()) / (1 << 30), load_s);
}

}  // namespace

void register_run_t5(CLI::App& run) {
  auto* cmd = run.add_subcommand(
      "t5",
      "umT5 text encoder: IN holds ids and mask ([B, L]), or tokenize --prompt with --tokenizer");
  auto a = std::make_shared<T5RunArgs>();
  cmd->add_option("--weights", a->weights, "umT5 checkpoint: file, *.index.json or folder")
      ->required();
  cmd->add_option("--config", a->config, "config JSON overriding the checkpoint's own config");
  cmd->add_option("--precision", a->precision, "fp32 | bf16 (default fp32)");
  cmd->add_option("--in", a->in, "input tensors: ids and mask, [B, L] or [L], I64");
  cmd->add_option("--tokenizer", a->tokenizer, "spiece.model or a folder holding it");
  cmd->add_option("--prompt", a->prompts,
                  "text to encode (with --tokenizer); repeat for a batch of prompts");
  cmd->add_option("--prompts", a->prompts_file, "a batch: one prompt per line of this file");
  cmd->add_option("--max-len", a->max_len, "tokenizer length incl. </s> (default text_len, 512)");
  cmd->add_option("--out", a->out,
                  "output: out [B, L, dim] (--in), context (one prompt) or context.<b> (a batch), "
                  "ids, mask, intermediates stacked on the batch")
      ->required();
  cmd->add_flag("!--no-intermediates", a->intermediates,
                "do not write embed / block<i>.* / rel_buckets");
  cmd->fallthrough();
  cmd->callback([=] { run_t5(*a); });
}

void register_bench_t5(CLI::App& bench) {
  auto* cmd = bench.add_subcommand("t5", "Time the umT5-XXL encoder (random weights by default)");
  auto a = std::make_shared<T5BenchArgs>();
  cmd->add_option("--weights", a->weights, "use a checkpoint instead of random weights");
  cmd->add_option("--tokens", a->tokens, "real tokens per encode (default 512)");
  cmd->add_option("--precision", a->precision, "fp32 | bf16 (default bf16)");
  cmd->add_option("--vocab", a->vocab,
                  "rows of the random embedding table (default 32128; only gathered from)");
  cmd->add_option("--iters", a->iters, "timed encodes (default 2)");
  cmd->add_option("--warmup", a->warmup, "untimed warm-up encodes (default 1)");
  cmd->add_flag("--json", a->json, "print one JSON object");
  cmd->fallthrough();
  cmd->callback([=] { bench_t5(*a); });
}

}  // namespace vidax::cli
