// Prompt lists for batched generation (`vidax generate --prompts FILE`, `vidax run t5
// --prompts FILE`): UTF-8 text, one prompt per line. Blank (whitespace-only) lines are skipped;
// a trailing "\r" (CRLF files) and surrounding whitespace are trimmed. Pure; thread-safe.
#pragma once

#include <string>
#include <vector>

namespace vidax {

inline constexpr size_t kMaxPromptFileBytes = 16u << 20;  // 16 MiB
inline constexpr size_t kMaxPrompts = 100000;

// The prompts of `text`; InputError naming `source` (and the line) when there is none, a line
// holds a NUL byte, or the limits above are passed.
std::vector<std::string> parse_prompt_lines(const std::string& text, const std::string& source);

// Reads and parses the file; InputError naming the path when it cannot be read.
std::vector<std::string> read_prompt_file(const std::string& path);

}  // namespace vidax
