#include "models/wan/tokenizer.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <optional>
#include <string_view>

#include "core/error.h"
#include "io/safetensors.h"

namespace vidax::wan {
namespace {

namespace fs = std::filesystem;

// ---- UTF-8 -------------------------------------------------------------------------------

// Decodes one code point at s[i]; returns its length in bytes, or 0 for an invalid sequence
// (the caller then copies that byte unchanged: prompts with stray bytes still tokenize).
size_t decode_utf8(std::string_view s, size_t i, char32_t& cp) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) {
    cp = b0;
    return 1;
  }
  size_t len = 0;
  if ((b0 & 0xe0) == 0xc0) {
    len = 2, cp = b0 & 0x1f;
  } else if ((b0 & 0xf0) == 0xe0) {
    len = 3, cp = b0 & 0x0f;
  } else if ((b0 & 0xf8) == 0xf0) {
    len = 4, cp = b0 & 0x07;
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (b & 0x3f);
  }
  static constexpr char32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return len;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

// Applies fn(code point) -> bool keep / replacement to every decodable code point.
template <class Fn>
std::string map_code_points(std::string_view s, const Fn& fn) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    char32_t cp = 0;
    const size_t len = decode_utf8(s, i, cp);
    if (len == 0) {
      out += s[i++];
      continue;
    }
    fn(cp, s.substr(i, len), out);
    i += len;
  }
  return out;
}

// `regex` module `\s` (Unicode White_Space): what whitespace_clean collapses.
bool is_regex_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0d) || c == 0x20 || c == 0x85 || c == 0xa0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f ||
         c == 0x3000;
}

// Python's str.isspace(): what strip() removes (adds the information separators 0x1c-0x1f).
bool is_py_space(char32_t c) { return is_regex_space(c) || (c >= 0x1c && c <= 0x1f); }

// ---- ftfy pieces that are cheap to reproduce -----------------------------------------------

// ftfy.fix_text's remove_control_chars: C0 controls except \t \n \f \r, DEL, the deprecated
// Arabic format characters, interlinear annotations, the object replacement character, BOM.
bool is_removed_control(char32_t c) {
  return c <= 0x08 || c == 0x0b || (c >= 0x0e && c <= 0x1f) || c == 0x7f ||
         (c >= 0x206a && c <= 0x206f) || (c >= 0xfff9 && c <= 0xfffc) || c == 0xfeff;
}

// ---- html.unescape -------------------------------------------------------------------------

// Latin-1 named entities for U+00A0..U+00FF in code point order; HTML5 (and Python) also accept
// these without the trailing ';'.
constexpr std::array<const char*, 96> kLatin1Names = {
    "nbsp",   "iexcl",  "cent",   "pound",  "curren", "yen",    "brvbar", "sect",   "uml",
    "copy",   "ordf",   "laquo",  "not",    "shy",    "reg",    "macr",   "deg",    "plusmn",
    "sup2",   "sup3",   "acute",  "micro",  "para",   "middot", "cedil",  "sup1",   "ordm",
    "raquo",  "frac14", "frac12", "frac34", "iquest", "Agrave", "Aacute", "Acirc",  "Atilde",
    "Auml",   "Aring",  "AElig",  "Ccedil", "Egrave", "Eacute", "Ecirc",  "Euml",   "Igrave",
    "Iacute", "Icirc",  "Iuml",   "ETH",    "Ntilde", "Ograve", "Oacute", "Ocirc",  "Otilde",
    "Ouml",   "times",  "Oslash", "Ugrave", "Uacute", "Ucirc",  "Uuml",   "Yacute", "THORN",
    "szlig",  "agrave", "aacute", "acirc",  "atilde", "auml",   "aring",  "aelig",  "ccedil",
    "egrave", "eacute", "ecirc",  "euml",   "igrave", "iacute", "icirc",  "iuml",   "eth",
    "ntilde", "ograve", "oacute", "ocirc",  "otilde", "ouml",   "divide", "oslash", "ugrave",
    "uacute", "ucirc",  "uuml",   "yacute", "thorn",  "yuml"};

struct NamedEntity {
  const char* name;
  char32_t cp;
  bool legacy;  // also recognised without ';'
};

constexpr NamedEntity kOtherNames[] = {
    {"amp", '&', true},        {"lt", '<', true},         {"gt", '>', true},
    {"quot", '"', true},       {"AMP", '&', true},        {"LT", '<', true},
    {"GT", '>', true},         {"QUOT", '"', true},       {"COPY", 0xa9, true},
    {"REG", 0xae, true},       {"apos", '\'', false},     {"hellip", 0x2026, false},
    {"mdash", 0x2014, false},  {"ndash", 0x2013, false},  {"lsquo", 0x2018, false},
    {"rsquo", 0x2019, false},  {"sbquo", 0x201a, false},  {"ldquo", 0x201c, false},
    {"rdquo", 0x201d, false},  {"bdquo", 0x201e, false},  {"bull", 0x2022, false},
    {"euro", 0x20ac, false},   {"trade", 0x2122, false},  {"prime", 0x2032, false},
    {"Prime", 0x2033, false},  {"larr", 0x2190, false},   {"rarr", 0x2192, false},
    {"uarr", 0x2191, false},   {"darr", 0x2193, false},   {"harr", 0x2194, false},
    {"ensp", 0x2002, false},   {"emsp", 0x2003, false},   {"thinsp", 0x2009, false},
    {"zwnj", 0x200c, false},   {"zwj", 0x200d, false},    {"lrm", 0x200e, false},
    {"rlm", 0x200f, false},    {"dagger", 0x2020, false}, {"Dagger", 0x2021, false},
    {"permil", 0x2030, false}, {"lsaquo", 0x2039, false}, {"rsaquo", 0x203a, false},
    {"OElig", 0x152, false},   {"oelig", 0x153, false},   {"Scaron", 0x160, false},
    {"scaron", 0x161, false},  {"Yuml", 0x178, false},    {"fnof", 0x192, false},
    {"circ", 0x2c6, false},    {"tilde", 0x2dc, false},   {"minus", 0x2212, false},
    {"hearts", 0x2665, false}, {"star", 0x2606, false},   {"nbsp", 0xa0, true},
};

// Looks `name` up; `with_semicolon` false restricts to the legacy names.
std::optional<char32_t> named_entity(std::string_view name, bool with_semicolon) {
  for (size_t k = 0; k < kLatin1Names.size(); ++k)
    if (name == kLatin1Names[k]) return static_cast<char32_t>(0xa0 + k);
  for (const auto& e : kOtherNames)
    if (name == e.name && (with_semicolon || e.legacy)) return e.cp;
  return std::nullopt;
}

// Python's html._replace_charref for numeric references: cp1252 meanings for 0x80..0x9f, U+FFFD
// for NUL, surrogates and out-of-range values, nothing for other invalid code points.
void append_numeric_reference(std::string& out, uint64_t num) {
  static constexpr char32_t kCp1252[32] = {
      0x20ac, 0x81,   0x201a, 0x192,  0x201e, 0x2026, 0x2020, 0x2021, 0x2c6,  0x2030, 0x160,
      0x2039, 0x152,  0x8d,   0x17d,  0x8f,   0x90,   0x2018, 0x2019, 0x201c, 0x201d, 0x2022,
      0x2013, 0x2014, 0x2dc,  0x2122, 0x161,  0x203a, 0x153,  0x9d,   0x17e,  0x178};
  if (num == 0) return append_utf8(out, 0xfffd);
  if (num == 0x0d) return append_utf8(out, '\r');
  if (num >= 0x80 && num <= 0x9f) return append_utf8(out, kCp1252[num - 0x80]);
  if ((num >= 0xd800 && num <= 0xdfff) || num > 0x10ffff) return append_utf8(out, 0xfffd);
  const auto c = static_cast<char32_t>(num);
  const bool invalid = (c >= 0x1 && c <= 0x8) || c == 0xb || (c >= 0xe && c <= 0x1f) ||
                       (c >= 0x7f && c <= 0x9f) || (c >= 0xfdd0 && c <= 0xfdef) ||
                       (c & 0xfffe) == 0xfffe;
  if (!invalid) append_utf8(out, c);
}

bool is_hex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// Handles one '&' at s[i]; appends the replacement and returns the bytes consumed (0: not a
// reference, the caller copies the '&').
size_t unescape_one(std::string_view s, size_t i, std::string& out) {
  size_t j = i + 1;
  if (j < s.size() && s[j] == '#') {
    ++j;
    const bool hex = j < s.size() && (s[j] == 'x' || s[j] == 'X');
    if (hex) ++j;
    const size_t digits_begin = j;
    uint64_t num = 0;
    while (j < s.size() && (hex ? is_hex(s[j]) : (s[j] >= '0' && s[j] <= '9'))) {
      const char c = s[j];
      const uint64_t d =
          c <= '9' ? static_cast<uint64_t>(c - '0') : static_cast<uint64_t>((c | 0x20) - 'a' + 10);
      num = std::min<uint64_t>(num * (hex ? 16 : 10) + d, uint64_t{1} << 40);  // saturate
      ++j;
    }
    if (j == digits_begin) return 0;
    if (j < s.size() && s[j] == ';') ++j;
    append_numeric_reference(out, num);
    return j - i;
  }
  // Named: up to 32 characters other than tab, newline, form feed, space, '<', '&', '#', ';'.
  while (j < s.size() && j - (i + 1) < 32 &&
         std::string_view("\t\n\f <&#;").find(s[j]) == std::string_view::npos)
    ++j;
  if (j == i + 1) return 0;
  const std::string_view name = s.substr(i + 1, j - i - 1);
  if (j < s.size() && s[j] == ';') {
    if (auto cp = named_entity(name, true)) {
      append_utf8(out, *cp);
      return j + 1 - i;
    }
  }
  // Longest legacy prefix (at least 2 characters), the rest kept as text.
  for (size_t len = name.size(); len >= 2; --len) {
    if (auto cp = named_entity(name.substr(0, len), false)) {
      append_utf8(out, *cp);
      return 1 + len;
    }
  }
  return 0;
}

}  // namespace

std::string html_unescape(const std::string& text) {
  if (text.find('&') == std::string::npos) return text;
  std::string out;
  out.reserve(text.size());
  const std::string_view s(text);
  for (size_t i = 0; i < s.size();) {
    if (s[i] == '&') {
      if (const size_t used = unescape_one(s, i, out)) {
        i += used;
        continue;
      }
    }
    out += s[i++];
  }
  return out;
}

std::string clean_prompt(const std::string& text) {
  // ftfy.fix_text (the parts reproduced): control characters out, quotes uncurled.
  std::string t = map_code_points(text, [](char32_t c, std::string_view raw, std::string& out) {
    if (is_removed_control(c)) return;
    if (c >= 0x2018 && c <= 0x201b) {
      out += '\'';
    } else if (c >= 0x201c && c <= 0x201f) {
      out += '"';
    } else {
      out.append(raw);
    }
  });
  t = html_unescape(html_unescape(t));
  // whitespace_clean: every run of \s to one space, then strip().
  bool in_space = false;
  t = map_code_points(t, [&](char32_t c, std::string_view raw, std::string& out) {
    if (is_regex_space(c)) {
      if (!in_space) out += ' ';
      in_space = true;
      return;
    }
    in_space = false;
    out.append(raw);
  });
  // strip(): from both ends, code point by code point.
  size_t begin = 0;
  while (begin < t.size()) {
    char32_t c = 0;
    const size_t len = decode_utf8(t, begin, c);
    if (len == 0 || !is_py_space(c)) break;
    begin += len;
  }
  size_t end = t.size();
  while (end > begin) {
    size_t start = end - 1;  // back up to the lead byte
    while (start > begin && (static_cast<unsigned char>(t[start]) & 0xc0) == 0x80) --start;
    char32_t c = 0;
    const size_t len = decode_utf8(t, start, c);
    if (len != end - start || !is_py_space(c)) break;
    end = start;
  }
  return t.substr(begin, end - begin);
}

struct Tokenizer::Impl {
  std::string path;
  sentencepiece::SentencePieceProcessor sp;
  int64_t eos = 1, pad = 0;

  void init_special_ids() {
    eos = sp.eos_id();
    if (eos < 0) eos = sp.PieceToId("</s>");
    if (eos < 0 || eos == sp.unk_id())
      throw_input_error(path, ": the sentencepiece model defines no </s> (end-of-sequence) piece");
    pad = sp.pad_id() >= 0 ? sp.pad_id() : 0;
  }
};

Tokenizer::Tokenizer() : impl_(std::make_unique<Impl>()) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::open(const std::string& path) {
  fs::path p(path);
  std::error_code ec;
  if (!fs::exists(p, ec))
    throw_input_error(path, ": tokenizer not found (expected spiece.model or a folder holding it)");
  const std::string json_hint =
      ": vidax needs the sentencepiece model 'spiece.model' (shipped beside tokenizer.json in "
      "google/umt5-xxl/ and in diffusers' tokenizer/ folder); the HF fast tokenizer's "
      "tokenizer.json is not read";
  if (fs::is_directory(p, ec)) {
    fs::path found;
    for (const char* name : {"spiece.model", "tokenizer.model"}) {
      if (fs::is_regular_file(p / name, ec)) {
        found = p / name;
        break;
      }
    }
    if (found.empty()) {
      if (fs::is_regular_file(p / "tokenizer.json", ec))
        throw_input_error(path, ": holds tokenizer.json but no spiece.model", json_hint);
      throw_input_error(path, ": no spiece.model in this folder", json_hint);
    }
    p = found;
  } else if (p.extension() == ".json") {
    throw_input_error(path, json_hint);
  } else if (p.extension() == ".safetensors") {
    // ComfyUI text-encoder files carry the tokenizer as a byte tensor named "spiece_model".
    const TensorSource src = TensorSource::open(path);
    for (const auto& name : src.names()) {
      if (name != "spiece_model" && !name.ends_with(".spiece_model")) continue;
      const Tensor t = src.tensor(name).contiguous();
      const std::string bytes(static_cast<const char*>(t.raw_data()), t.nbytes());
      return from_serialized(bytes, str_cat(path, " (", name, ")"));
    }
    throw_input_error(path, ": this safetensors file embeds no 'spiece_model' tokenizer",
                      json_hint);
  }
  Tokenizer t;
  t.impl_->path = p.string();
  const auto status = t.impl_->sp.Load(p.string());
  if (!status.ok())
    throw_input_error(p.string(), ": not a sentencepiece model (", status.ToString(), ")");
  t.impl_->init_special_ids();
  return t;
}

Tokenizer Tokenizer::from_serialized(const std::string& model_bytes, const std::string& label) {
  Tokenizer t;
  t.impl_->path = label;
  const auto status = t.impl_->sp.LoadFromSerializedProto(model_bytes);
  if (!status.ok())
    throw_input_error(label, ": not a sentencepiece model (", status.ToString(), ")");
  t.impl_->init_special_ids();
  return t;
}

std::vector<int64_t> Tokenizer::piece_ids(const std::string& text) const {
  std::vector<int> ids;
  const auto status = impl_->sp.Encode(text, &ids);
  if (!status.ok())
    throw_input_error(impl_->path, ": sentencepiece could not encode the prompt (",
                      status.ToString(), ")");
  return std::vector<int64_t>(ids.begin(), ids.end());
}

TokenizedText Tokenizer::encode(const std::string& prompt, int64_t max_len) const {
  if (max_len < 1) throw_input_error("max_len: expected >= 1, got ", max_len);
  std::vector<int64_t> ids = piece_ids(clean_prompt(prompt));
  // transformers truncates the text to max_len minus the special tokens it adds (one </s>), so
  // </s> always ends the real tokens.
  if (static_cast<int64_t>(ids.size()) > max_len - 1) ids.resize(static_cast<size_t>(max_len - 1));
  ids.push_back(impl_->eos);
  TokenizedText out;
  out.count = static_cast<int64_t>(ids.size());
  out.ids = Tensor::zeros(Shape{max_len}, DType::kI64);
  out.mask = Tensor::zeros(Shape{max_len}, DType::kI64);
  int64_t* id = out.ids.mutable_data<int64_t>();
  int64_t* m = out.mask.mutable_data<int64_t>();
  for (int64_t i = 0; i < max_len; ++i) {
    const bool real = i < out.count;
    id[i] = real ? ids[static_cast<size_t>(i)] : impl_->pad;
    m[i] = real ? 1 : 0;
  }
  return out;
}

int64_t Tokenizer::eos_id() const { return impl_->eos; }
int64_t Tokenizer::pad_id() const { return impl_->pad; }
int64_t Tokenizer::vocab_size() const { return impl_->sp.GetPieceSize(); }
const std::string& Tokenizer::path() const { return impl_->path; }

}  // namespace vidax::wan
