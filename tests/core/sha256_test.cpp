#include "core/sha256.h"

#include <cstdio>
#include <fstream>
#include <string>

#include "core/error.h"
#include "support/test_support.h"

namespace vidax {
namespace {

std::string digest_of(const std::string& text) {
  Sha256 h;
  h.update(text.data(), text.size());
  return Sha256::hex(h.finish());
}

TEST(Sha256, FipsVectors) {
  EXPECT_EQ(digest_of(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(digest_of("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(digest_of("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(digest_of(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, IncrementalEqualsOneShotAtEverySplit) {
  std::string text;
  for (int i = 0; i < 200; ++i) text.push_back(static_cast<char>('a' + (i * 7) % 26));
  const std::string whole = digest_of(text);
  for (size_t split = 0; split <= text.size(); ++split) {
    Sha256 h;
    h.update(text.data(), split);
    h.update(text.data() + split, text.size() - split);
    ASSERT_EQ(Sha256::hex(h.finish()), whole) << "split at " << split;
  }
}

TEST(Sha256, FileMatchesInMemory) {
  testing::TempDir dir;
  std::string text(300000, '\0');
  for (size_t i = 0; i < text.size(); ++i) text[i] = static_cast<char>(i * 131 % 251);
  std::ofstream(dir.file("blob.bin"), std::ios::binary) << text;
  EXPECT_EQ(sha256_file(dir.file("blob.bin")), digest_of(text));
  EXPECT_THROW(sha256_file(dir.file("missing.bin")), InputError);
}

}  // namespace
}  // namespace vidax
