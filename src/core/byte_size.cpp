#include "core/byte_size.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace vidax {

int64_t parse_byte_size(const std::string& text, const std::string& flag) {
  auto fail = [&]() -> int64_t {
    throw_input_error(flag, ": expected a byte count such as 8GiB, 512MiB or 1048576, got '", text,
                      "'");
  };
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
    ++i;
  const std::string number = text.substr(0, i);
  if (number.empty() || number.front() == '.' || number.back() == '.' ||
      number.find('.') != number.rfind('.'))
    return fail();
  while (i < text.size() && text[i] == ' ') ++i;
  std::string unit;
  for (; i < text.size(); ++i)
    unit += static_cast<char>(std::tolower(static_cast<unsigned char>(text[i])));
  double scale = 0;
  static const char* const kPrefixes = "kmgt";
  if (unit.empty() || unit == "b") {
    scale = 1;
  } else {
    const char* p = std::strchr(kPrefixes, unit[0]);
    if (p == nullptr || unit[0] == '\0') return fail();
    const int power = static_cast<int>(p - kPrefixes) + 1;
    const std::string rest = unit.substr(1);
    if (rest.empty() || rest == "ib") {
      scale = std::pow(1024.0, power);
    } else if (rest == "b") {
      scale = std::pow(1000.0, power);
    } else {
      return fail();
    }
  }
  const double bytes = std::strtod(number.c_str(), nullptr) * scale;
  if (!(bytes >= 1) || bytes >= 4.6e18) return fail();
  return static_cast<int64_t>(bytes);
}

std::string format_bytes(double bytes) {
  char buf[64];
  const double a = std::fabs(bytes);
  if (a >= double(1 << 30)) {
    std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / double(1 << 30));
  } else if (a >= double(1 << 20)) {
    std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / double(1 << 20));
  } else if (a >= 1024) {
    std::snprintf(buf, sizeof buf, "%.1f KiB", bytes / 1024);
  } else {
    std::snprintf(buf, sizeof buf, "%.0f B", bytes);
  }
  return buf;
}

}  // namespace vidax
