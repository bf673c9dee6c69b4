#include "io/text_escape.h"

namespace vidax {
namespace {

constexpr char kHexDigits[] = "0123456789abcdef";

std::string hex_escape(unsigned char c) {
  return {'\\', 'x', kHexDigits[c >> 4], kHexDigits[c & 15]};
}

}  // namespace

std::string quote_name(std::string_view s) {
  constexpr size_t kMaxShown = 200;
  std::string out = "'";
  for (const char ch : s.substr(0, kMaxShown)) {
    const auto c = static_cast<unsigned char>(ch);
    out += (c < 0x20 || c == 0x7f || c == '\\' || c == '\'') ? hex_escape(c) : std::string(1, ch);
  }
  return out + (s.size() > kMaxShown ? "'..." : "'");
}

std::string ascii_only(std::string_view s) {
  std::string out;
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    out += (c < 0x20 || c >= 0x7f) ? hex_escape(c) : std::string(1, ch);
  }
  return out;
}

}  // namespace vidax
