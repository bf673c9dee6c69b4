#include "core/byte_size.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace vidax {
namespace {

TEST(ByteSize, ParsesBinaryAndDecimalUnits) {
  EXPECT_EQ(parse_byte_size("65536", "--x"), 65536);
  EXPECT_EQ(parse_byte_size("100B", "--x"), 100);
  EXPECT_EQ(parse_byte_size("8GiB", "--x"), int64_t{8} << 30);
  EXPECT_EQ(parse_byte_size("8gib", "--x"), int64_t{8} << 30);
  EXPECT_EQ(parse_byte_size("8G", "--x"), int64_t{8} << 30);
  EXPECT_EQ(parse_byte_size("512MiB", "--x"), int64_t{512} << 20);
  EXPECT_EQ(parse_byte_size("1.5GiB", "--x"), int64_t{3} << 29);
  EXPECT_EQ(parse_byte_size("4 KiB", "--x"), 4096);
  EXPECT_EQ(parse_byte_size("2GB", "--x"), 2000000000);
  EXPECT_EQ(parse_byte_size("3kB", "--x"), 3000);
  EXPECT_EQ(parse_byte_size("1TiB", "--x"), int64_t{1} << 40);
}

TEST(ByteSize, RefusesWhatIsNotAByteCount) {
  for (const char* bad : {"", "GiB", "-1GiB", "0", "0.5", "8XiB", "8 GiBs", "1.2.3MiB", ".5GiB",
                          "5.GiB", "8GiB ", "1e3", "9999999TiB", "nan"}) {
    try {
      parse_byte_size(bad, "--weights-budget");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("--weights-budget"), std::string::npos) << e.what();
    }
  }
}

TEST(ByteSize, FormatsForMessages) {
  EXPECT_EQ(format_bytes(100), "100 B");
  EXPECT_EQ(format_bytes(8.0 * (1 << 30)), "8.00 GiB");
  EXPECT_EQ(format_bytes(1536.0 * 1024), "1.5 MiB");
  EXPECT_EQ(format_bytes(2560), "2.5 KiB");
}

}  // namespace
}  // namespace vidax
