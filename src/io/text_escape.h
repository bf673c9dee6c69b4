// Making text that comes from a file safe to put in a one-line error message. Thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace vidax {

// 'name' in quotes with control bytes, quotes and backslashes hex-escaped, cut at 200 bytes.
std::string quote_name(std::string_view s);
// Non-printable and non-ASCII bytes hex-escaped (for parser messages that echo input).
std::string ascii_only(std::string_view s);

}  // namespace vidax
