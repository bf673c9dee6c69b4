// The error kinds: InternalError carries where it was raised; the CLI's one line for anything
// that is not an InputError says "internal error", the command and the exception's type.
#include <filesystem>
#include <stdexcept>
#include <string>

#include "core/error.h"
#include "support/test_support.h"

namespace vidax {
namespace {

TEST(Errors, InternalErrorSaysWhereItWasRaised) {
  try {
    VIDAX_INTERNAL_ERROR("attention: heads must be >= 1, got ", 0);
    FAIL() << "no throw";
  } catch (const InternalError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("error_test.cpp:"), std::string::npos) << what;
    EXPECT_NE(what.find("heads must be >= 1, got 0"), std::string::npos) << what;
    const std::string line = describe_internal_error("run dit", e);
    EXPECT_EQ(line.rfind("internal error in `run dit`: ", 0), 0u) << line;
    EXPECT_NE(line.find("a bug in vidax"), std::string::npos);
  }
  // An InternalError is not an InputError: input handlers do not swallow it.
  EXPECT_THROW(
      {
        try {
          VIDAX_INTERNAL_ERROR("x");
        } catch (const InputError&) {
        }
      },
      InternalError);
}

TEST(Errors, OtherExceptionsAreInternalErrorsNamingTheirType) {
  const std::out_of_range e("map::at\nsecond line");
  const std::string line = describe_internal_error("generate", e);
  EXPECT_EQ(line,
            "internal error in `generate` (std::out_of_range): map::at second line (a bug in "
            "vidax, not in the input: please report it with the command line)");
  const std::filesystem::filesystem_error fe("cannot", std::error_code());
  EXPECT_NE(describe_internal_error("", fe).find("filesystem_error)"), std::string::npos)
      << describe_internal_error("", fe);
}

}  // namespace
}  // namespace vidax
