#include "models/wan/t5_config.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/config_json.h"

namespace vidax::wan {

namespace {
constexpr int64_t kMaxT5Width = 65536;
constexpr int64_t kMaxT5Heads = 1024;
}  // namespace

void T5Config::validate(const std::string& source) const {
  auto require = [&](bool ok, const char* what) {
    if (!ok) throw_input_error(source, ": invalid umT5 config ", to_json(), ": ", what);
  };
  require(vocab > 0 && dim > 0 && dim_ffn > 0 && num_layers > 0, "sizes must be positive");
  require(num_heads > 0 && dim_attn > 0 && dim_attn % num_heads == 0,
          "dim_attn must be a positive multiple of num_heads");
  // Bidirectional buckets: half per direction, half of those exact, so at least 4 in all.
  require(num_buckets >= 4 && num_buckets % 4 == 0, "num_buckets must be a multiple of 4 (>= 4)");
  require(text_len > 0, "text_len must be positive");
  // Bounds that keep every product below int64 overflow and refuse absurd files before any
  // allocation (umT5-XXL: vocab 256384, dim 4096, ffn 10240, 64 heads, 24 layers).
  require(vocab <= (int64_t{1} << 22) && dim <= kMaxT5Width && dim_attn <= kMaxT5Width &&
              dim_ffn <= 4 * kMaxT5Width && num_heads <= kMaxT5Heads && num_layers <= 256 &&
              num_buckets <= 1024 && text_len <= 65536,
          "sizes exceed what any umT5 model uses");
}

std::string T5Config::to_json() const {
  nlohmann::json j = {{"vocab", vocab},
                      {"dim", dim},
                      {"dim_attn", dim_attn},
                      {"dim_ffn", dim_ffn},
                      {"num_heads", num_heads},
                      {"num_layers", num_layers},
                      {"num_buckets", num_buckets},
                      {"text_len", text_len}};
  return j.dump();
}

std::optional<T5Config> t5_preset(const std::string& name) {
  if (name == "umt5-xxl") return T5Config{};
  return std::nullopt;
}

std::vector<std::string> t5_preset_names() { return {"umt5-xxl"}; }

T5Config t5_config_from_json(const std::string& json_text, const std::string& source) {
  nlohmann::json j = parse_config_object(json_text, source);
  T5Config c;
  if (j.contains("d_model")) {  // transformers UMT5Config / T5Config
    c.vocab = config_int(j, {"vocab_size"}, c.vocab, source);
    c.dim = config_int(j, {"d_model"}, c.dim, source);
    c.num_heads = config_int(j, {"num_heads"}, c.num_heads, source);
    if (c.num_heads <= 0 || c.num_heads > kMaxT5Heads)
      throw_input_error(source, ": num_heads ", c.num_heads, " must be in 1..", kMaxT5Heads);
    const int64_t d_kv = config_int(j, {"d_kv"}, 64, source);
    if (d_kv <= 0 || d_kv > kMaxT5Width)
      throw_input_error(source, ": d_kv ", d_kv, " must be in 1..", kMaxT5Width);
    c.dim_attn = d_kv * c.num_heads;
    c.dim_ffn = config_int(j, {"d_ff"}, c.dim_ffn, source);
    c.num_layers = config_int(j, {"num_layers"}, c.num_layers, source);
    c.num_buckets = config_int(j, {"relative_attention_num_buckets"}, c.num_buckets, source);
    if (j.contains("relative_attention_max_distance") &&
        config_int(j, {"relative_attention_max_distance"}, 128, source) != 128)
      throw_input_error(source, ": relative_attention_max_distance must be 128 (umT5)");
    if (j.contains("feed_forward_proj") && j["feed_forward_proj"] != "gated-gelu")
      throw_input_error(source, ": feed_forward_proj ", j["feed_forward_proj"].dump(),
                        " is not supported (umT5 uses \"gated-gelu\")");
  } else {
    c.vocab = config_int(j, {"vocab", "vocab_size"}, c.vocab, source);
    c.dim = config_int(j, {"dim"}, c.dim, source);
    c.dim_attn = config_int(j, {"dim_attn"}, c.dim_attn, source);
    c.dim_ffn = config_int(j, {"dim_ffn"}, c.dim_ffn, source);
    c.num_heads = config_int(j, {"num_heads"}, c.num_heads, source);
    c.num_layers = config_int(j, {"num_layers", "encoder_layers"}, c.num_layers, source);
    c.num_buckets = config_int(j, {"num_buckets"}, c.num_buckets, source);
    if (j.contains("shared_pos") && j["shared_pos"] == true)
      throw_input_error(source,
                        ": shared_pos=true (one position table for all blocks) is not "
                        "supported; umT5 uses a table per block");
  }
  c.text_len = config_int(j, {"text_len"}, c.text_len, source);
  c.validate(source);
  return c;
}

T5Config infer_t5_config(const T5ShapeLookup& shape_of, const std::string& source) {
  auto need = [&](const std::string& name, int rank) {
    auto s = shape_of(name);
    if (!s)
      throw_input_error(source, ": cannot infer the umT5 config: tensor '", name, "' is missing");
    if (s->rank() != rank)
      throw_input_error(source, ": tensor '", name, "' has shape ", s->str(), ", expected rank ",
                        rank);
    return *s;
  };
  T5Config c;
  const Shape emb = need("token_embedding.weight", 2);
  c.vocab = emb[0];
  c.dim = emb[1];
  c.dim_attn = need("blocks.0.attn.q.weight", 2)[0];
  c.dim_ffn = need("blocks.0.ffn.fc1.weight", 2)[0];
  const Shape pos = need("blocks.0.pos_embedding.embedding.weight", 2);
  c.num_buckets = pos[0];
  c.num_heads = pos[1];
  c.num_layers = 0;
  while (shape_of("blocks." + std::to_string(c.num_layers) + ".attn.q.weight")) ++c.num_layers;
  c.validate(source);
  return c;
}

}  // namespace vidax::wan
