// Tiny model files for pipeline tests, written with the random writers: a umT5 of width 32 (the
// text_dim of every tiny DiT here) and a Wan 2.2-style model (48-channel VAE, TI2V DiT).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "io/safetensors.h"
#include "models/wan/dit_random.h"
#include "models/wan/dit_tensors.h"
#include "models/wan/t5_random.h"
#include "models/wan/vae_random.h"
#include "pipeline/text_to_video.h"
#include "support/test_support.h"

namespace vidax::testing {

// umT5 (vocab 300, width 32, one layer) at `path`.
inline void write_tiny_t5(const std::string& path) {
  wan::T5Config t5;
  t5.vocab = 300, t5.dim = 32, t5.dim_attn = 32, t5.dim_ffn = 64, t5.num_heads = 2;
  t5.num_layers = 1;
  wan::write_random_t5_checkpoint(path, t5, DType::kF32, 1);
}

inline std::string tiny_tokenizer() {
  return std::string(VIDAX_SOURCE_DIR) + "/tests/data/tokenizer/spiece.model";
}

// Wan 2.2 TI2V-style files in `dir` (t5, vae, dit .safetensors) and options naming them.
inline GenerateOptions wan22_files(const TempDir& dir, int64_t dit_text_len = 512) {
  write_tiny_t5(dir.file("t5.safetensors"));
  wan::VaeConfig vae = *wan::vae_preset("wan2.2-vae");
  vae.dim = 8, vae.dec_dim = 16;
  wan::write_random_vae(dir.file("vae.safetensors"), vae, DType::kF32, 2);
  wan::DitConfig dit;
  dit.kind = wan::DitKind::kTI2V;
  dit.in_dim = dit.out_dim = 48;
  dit.dim = 128, dit.ffn_dim = 128, dit.num_heads = 1, dit.num_layers = 1, dit.text_dim = 32;
  dit.text_len = dit_text_len;
  const auto w = wan::random_dit_weights(dit, DType::kF32, 3);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& d : wan::dit_tensor_decls(dit)) tensors.emplace_back(d.name, w(d.name));
  write_safetensors(dir.file("dit.safetensors"), tensors, {{"config", dit.to_json()}});
  GenerateOptions o;
  o.files.dit = dir.file("dit.safetensors");
  o.files.t5 = dir.file("t5.safetensors");
  o.files.vae = dir.file("vae.safetensors");
  o.files.tokenizer = tiny_tokenizer();
  o.files.layout = "explicit";
  o.prompt = "x";
  return o;
}

}  // namespace vidax::testing
