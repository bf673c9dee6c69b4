// Configuration of the umT5 text encoder Wan uses (`wan/modules/t5.py` T5Encoder with
// shared_pos=False: every block has its own relative-position table). Built from a preset
// ("umt5-xxl"), from a config JSON (the official constructor kwargs as the fixtures store them,
// or a transformers `config.json` with d_model/d_kv/d_ff), or inferred from tensor shapes.
// Plain value type; thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/shape.h"

namespace vidax::wan {

struct T5Config {
  int64_t vocab = 256384;
  int64_t dim = 4096;
  int64_t dim_attn = 4096;  // heads * head_dim
  int64_t dim_ffn = 10240;
  int64_t num_heads = 64;
  int64_t num_layers = 24;
  int64_t num_buckets = 32;
  int64_t text_len = 512;  // the pipeline's padded prompt length (not a weight shape)

  int64_t head_dim() const { return dim_attn / num_heads; }
  // Throws InputError naming `source` if the combination is impossible.
  void validate(const std::string& source) const;
  std::string to_json() const;
};

// "umt5-xxl" (the encoder of every Wan 2.1 / 2.2 pipeline). nullopt if unknown.
std::optional<T5Config> t5_preset(const std::string& name);
std::vector<std::string> t5_preset_names();

// Parses official kwargs (`vocab`, `dim`, `dim_attn`, `dim_ffn`, `num_heads`, `num_layers`,
// `num_buckets`; `vocab_size`/`encoder_layers` of umt5_xxl() also accepted) or a transformers
// config.json (`d_model`, `d_kv`, `d_ff`, `num_heads`, `num_layers`, `vocab_size`,
// `relative_attention_num_buckets`). `source` names the file in errors.
T5Config t5_config_from_json(const std::string& json_text, const std::string& source);

// Infers the config from tensor shapes given by official names (nullopt for absent tensors):
// vocab and dim from the embedding, dim_attn from q, dim_ffn from fc1, heads and buckets from
// the relative-position table [num_buckets, heads], layers by counting blocks.
using T5ShapeLookup = std::function<std::optional<Shape>(const std::string& official_name)>;
T5Config infer_t5_config(const T5ShapeLookup& shape_of, const std::string& source);

}  // namespace vidax::wan
