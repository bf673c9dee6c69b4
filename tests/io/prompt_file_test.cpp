// Prompt files for batched generation: one prompt per line, blank lines skipped, whitespace and
// CRLF trimmed, errors naming the file and line.
#include "io/prompt_file.h"

#include <fstream>

#include "core/error.h"
#include "support/test_support.h"

namespace vidax {
namespace {

using vidax::testing::TempDir;

TEST(PromptFile, OnePromptPerLineBlankLinesSkipped) {
  const auto p = parse_prompt_lines("first\r\n\n   \n\tsecond one  \nthird", "p.txt");
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0], "first");
  EXPECT_EQ(p[1], "second one");
  EXPECT_EQ(p[2], "third");
  // UTF-8 passes through unchanged.
  EXPECT_EQ(parse_prompt_lines("一只猫\n", "p.txt").front(), "一只猫");
}

TEST(PromptFile, ErrorsNameTheFileAndLine) {
  auto message = [](const std::string& text) {
    try {
      parse_prompt_lines(text, "list.txt");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("").find("list.txt: no prompt"), std::string::npos);
  EXPECT_NE(message(" \n\r\n").find("no prompt"), std::string::npos);
  EXPECT_NE(message(std::string("a\nb\0c\n", 6)).find("line 2"), std::string::npos);
  EXPECT_NE(message(std::string(kMaxPromptFileBytes + 1, 'a')).find("at most"), std::string::npos);
}

TEST(PromptFile, ReadsAFileAndNamesAMissingOne) {
  TempDir dir;
  {
    std::ofstream f(dir.file("p.txt"));
    f << "a cat\na dog\n";
  }
  EXPECT_EQ(read_prompt_file(dir.file("p.txt")).size(), 2u);
  try {
    read_prompt_file(dir.file("none.txt"));
    ADD_FAILURE() << "expected an error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("none.txt"), std::string::npos);
  }
  EXPECT_THROW(read_prompt_file(dir.path()), InputError);  // a folder
}

}  // namespace
}  // namespace vidax
