// `vidax random-model DIR --layout official|diffusers|comfyui --tokenizer spiece.model
// [--model t2v|i2v|flf2v|ti2v] [--experts]`: writes a tiny random Wan model folder (with a tiny
// CLIP for i2v / flf2v) in a published layout, for smoke tests of a setup and for the
// end-to-end tests of `vidax generate` (no 20 GB download needed).
#include "apps/vidax/commands.h"
#include "models/wan/tokenizer.h"
#include "pipeline/random_model.h"

namespace vidax::cli {

void register_random_model(CLI::App& app) {
  struct Args {
    std::string dir, layout = "official", tokenizer, model = "t2v";
    uint64_t seed = 0;
    int64_t heads = 1;
    bool experts = false, causal = false;
    std::string preset;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("random-model",
                                 "Write a tiny random Wan model folder in a published layout");
  cmd->add_option("dir", a->dir, "output folder")->required();
  cmd->add_option("--layout", a->layout,
                  "official | diffusers | comfyui | self-forcing (default official)");
  cmd->add_option("--tokenizer", a->tokenizer, "spiece.model to ship with the model")->required();
  cmd->add_option("--seed", a->seed, "weight seed (default 0)");
  cmd->add_option("--model", a->model,
                  "t2v | i2v | flf2v | ti2v (default t2v): Wan 2.1 T2V, Wan 2.1 I2V / FLF2V with "
                  "a tiny CLIP, Wan 2.2 TI2V-5B; i2v with --experts is Wan 2.2 I2V A14B");
  cmd->add_option("--heads", a->heads,
                  "DiT attention heads: 1, 2 or 4 (default 1; more heads allow --mesh ulysses)");
  cmd->add_flag("--experts", a->experts,
                "two DiT experts (high and low noise) in the layout's Wan 2.2 A14B places");
  cmd->add_flag("--causal", a->causal,
                "a causal DiT for `generate --rollout` (Self-Forcing's folder with --layout "
                "self-forcing; else marked \"causal\" in the DiT's config)");
  cmd->add_option("--preset", a->preset,
                  "real-size random weights for this DiT preset (e.g. wan2.1-t2v-14b: 40 GB with "
                  "umT5-XXL and the VAE; official layout, safetensors), instead of a tiny model");
  cmd->callback([a] {
    if (!a->preset.empty()) {
      if (a->layout != "official")
        throw_input_error("--preset: real-size models are written in the official layout only");
      write_full_size_random_model(a->dir, a->preset, a->tokenizer, a->experts, a->seed);
      std::printf("wrote a real-size random %s model%s (official layout) to %s\n",
                  a->preset.c_str(), a->experts ? " with two experts" : "", a->dir.c_str());
      return;
    }
    // The T5 vocabulary must cover every id the tokenizer can produce.
    const auto tokenizer = wan::Tokenizer::open(a->tokenizer);
    RandomModelSpec spec = tiny_random_model_spec(tokenizer.vocab_size(), a->model, a->experts);
    spec.seed = a->seed;
    if (a->heads != 1 && a->heads != 2 && a->heads != 4)
      throw_input_error(
          "--heads: expected 1, 2 or 4 (the DiT's 128 channels in heads of an even "
          "width that RoPE's three axes split), got ",
          a->heads);
    spec.dit.num_heads = a->heads;
    spec.dit.causal = a->causal;
    if (a->layout == "self-forcing" && !a->causal)
      throw_input_error("--layout self-forcing: writes a causal model; add --causal");
    write_random_model(a->dir, a->layout, spec, tokenizer.path());
    const std::string what = a->experts
                                 ? (a->model == "i2v" ? "Wan 2.2 I2V A14B-form (two experts)"
                                                      : "Wan 2.2 T2V A14B-form (two experts)")
                             : a->model == "ti2v" ? "Wan 2.2 TI2V-5B-form"
                                                  : "Wan 2.1 " + spec.dit.kind_name();
    const std::string causal = a->causal ? " causal (Self-Forcing-form)" : "";
    std::printf("wrote a tiny random%s %s model (%s layout) to %s\n", causal.c_str(), what.c_str(),
                a->layout.c_str(), a->dir.c_str());
  });
}

}  // namespace vidax::cli
