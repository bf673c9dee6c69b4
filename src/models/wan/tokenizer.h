// The umT5 prompt tokenizer of the Wan pipelines (`wan/modules/tokenizers.py`
// HuggingfaceTokenizer with clean="whitespace", seq_len 512), on libsentencepiece: the prompt is
// cleaned (HTML entities unescaped twice, curly quotes straightened, whitespace runs collapsed
// to one space and stripped; no lowercasing), encoded to sentencepiece ids, truncated to
// max_len - 1 tokens, `</s>` appended, and padded with the pad id (0) to max_len, with the
// attention mask. docs/t5.md lists what differs from the reference cleaning (ftfy's mojibake
// repair is not reproduced).
//
// It needs the sentencepiece model (`spiece.model`, shipped in google/umt5-xxl/ and in diffusers'
// tokenizer/ folder); a folder holding only the HF fast tokenizer's tokenizer.json is refused.
// Thread-safety: a Tokenizer is immutable after open; encode() may run concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace vidax::wan {

struct TokenizedText {
  Tensor ids;         // [max_len] I64: token ids, </s> after the last real token, then pad (0)
  Tensor mask;        // [max_len] I64: 1 for real tokens incl. </s>, 0 for padding
  int64_t count = 0;  // number of real tokens incl. </s> (= mask.sum())
};

class Tokenizer {
 public:
  // `path`: a sentencepiece model file, a folder holding `spiece.model` (or `tokenizer.model`),
  // or a ComfyUI text-encoder .safetensors embedding it as the U8 tensor `spiece_model`.
  // Throws InputError naming the path otherwise.
  static Tokenizer open(const std::string& path);
  // A serialized sentencepiece model held in memory; `label` names it in errors.
  static Tokenizer from_serialized(const std::string& model_bytes, const std::string& label);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Cleaned, tokenized, truncated and padded like the reference wrapper. max_len >= 1.
  TokenizedText encode(const std::string& prompt, int64_t max_len = 512) const;
  // Plain sentencepiece ids of `text` (no cleaning, no </s>, no truncation).
  std::vector<int64_t> piece_ids(const std::string& text) const;

  int64_t eos_id() const;
  int64_t pad_id() const;
  int64_t vocab_size() const;
  const std::string& path() const;

 private:
  Tokenizer();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// HTML character references as Python's html.unescape() resolves them: decimal and hex numeric
// references (with its replacement rules for invalid code points and the cp1252 range) and the
// common named entities (docs/t5.md lists them); unknown names are left as they are.
std::string html_unescape(const std::string& text);

// The reference cleaning (clean="whitespace"): html_unescape twice, curly quotes to straight
// ones (as ftfy.fix_text does), then every run of Unicode whitespace collapsed to one space and
// the ends stripped.
std::string clean_prompt(const std::string& text);

}  // namespace vidax::wan
