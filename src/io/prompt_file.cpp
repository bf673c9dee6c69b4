#include "io/prompt_file.h"

#include <fstream>
#include <iterator>

#include "core/error.h"

namespace vidax {

std::vector<std::string> parse_prompt_lines(const std::string& text, const std::string& source) {
  if (text.size() > kMaxPromptFileBytes)
    throw_input_error(source, ": ", text.size(), " bytes; a prompt file holds at most ",
                      kMaxPromptFileBytes, " bytes");
  std::vector<std::string> prompts;
  size_t start = 0, line = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    ++line;
    std::string_view s(text.data() + start, end - start);
    if (s.find('\0') != std::string_view::npos)
      throw_input_error(source, ": line ", line, " holds a NUL byte (not a text file?)");
    const auto is_space = [](char c) {
      return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
    };
    while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
    while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
    if (!s.empty()) {
      if (prompts.size() == kMaxPrompts)
        throw_input_error(source, ": more than ", kMaxPrompts, " prompts");
      prompts.emplace_back(s);
    }
    start = end + 1;
  }
  if (prompts.empty()) throw_input_error(source, ": no prompt (every line is blank)");
  return prompts;
}

std::vector<std::string> read_prompt_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_input_error(path, ": cannot read the prompt file");
  std::string text;
  char buf[65536];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    text.append(buf, static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxPromptFileBytes)
      throw_input_error(path, ": more than ", kMaxPromptFileBytes,
                        " bytes; a prompt file holds at most that");
  }
  if (in.bad()) throw_input_error(path, ": read error");
  return parse_prompt_lines(text, path);
}

}  // namespace vidax
