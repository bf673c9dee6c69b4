// ZipArchive: valid archives (plain, ZIP64, deflated records) and every structural defect the
// reader must refuse, each error naming the problem.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "io/pth_test_util.h"
#include "io/safetensors_test_util.h"
#include "io/torch_checkpoint.h"
#include "io/zip_archive.h"
#include "support/test_support.h"

namespace vidax {
namespace {

using testing::build_zip;
using testing::central_header;
using testing::local_header;
using testing::set_le;
using testing::throws_input_error;
using testing::ZipItem;

ZipArchive parse(const std::string& bytes) {
  return ZipArchive::from_buffer(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size(),
                                 "t.zip");
}

std::string as_string(const std::vector<std::byte>& v) {
  return {reinterpret_cast<const char*>(v.data()), v.size()};
}

TEST(ZipArchive, ReadsStoredAndDeflatedEntries) {
  const std::string text(5000, 'a');
  const std::string zip = build_zip({{"d/one", "hello", false, 0}, {"d/two", text, true, 0}});
  const ZipArchive z = parse(zip);
  ASSERT_EQ(z.entries().size(), 2u);
  const ZipEntry* one = z.find("d/one");
  ASSERT_NE(one, nullptr);
  EXPECT_EQ(z.find("d/three"), nullptr);
  const auto span = z.stored_bytes(*one);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(span.data()), span.size()), "hello");
  // Zero-copy: the span points into the buffer itself.
  EXPECT_EQ(reinterpret_cast<const char*>(span.data()), zip.data() + one->data_offset);
  const ZipEntry* two = z.find("d/two");
  ASSERT_NE(two, nullptr);
  EXPECT_EQ(two->method, 8);
  EXPECT_LT(two->compressed_size, two->uncompressed_size);
  EXPECT_EQ(as_string(z.read(*two)), text);
  EXPECT_TRUE(
      throws_input_error([&] { z.stored_bytes(*two); }, {"t.zip", "'d/two'", "compressed"}));
}

TEST(ZipArchive, OpensFromFileWithMapping) {
  testing::TempDir dir;
  const std::string path = dir.file("a.zip");
  testing::write_bytes(path, build_zip({{"x/y", "data", false, 0}}));
  const ZipArchive z = ZipArchive::open(path);
  ASSERT_NE(z.mapping(), nullptr);
  EXPECT_EQ(as_string(z.read(*z.find("x/y"))), "data");
}

TEST(ZipArchive, ReadsForcedZip64FromTheWriter) {
  // The writer saturates every classic field, so only the ZIP64 records give the values.
  testing::TempDir dir;
  const std::string path = dir.file("z64.pth");
  TorchWriteOptions options;
  options.force_zip64 = true;
  write_torch_checkpoint(path, {{"w", Tensor::from_floats(std::vector<float>{1, 2, 3}, {3})}},
                         options);
  const ZipArchive z = ZipArchive::open(path);
  ASSERT_NE(z.find("archive/data/0"), nullptr);
  EXPECT_EQ(z.find("archive/data/0")->uncompressed_size, 12u);
  EXPECT_EQ(z.find("archive/data/0")->data_offset % 64, 0u);  // torch's record alignment
}

TEST(ZipArchive, RefusesNonZipAndTruncatedDirectory) {
  EXPECT_TRUE(throws_input_error([] { parse("short"); }, {"t.zip", "not a zip archive"}));
  EXPECT_TRUE(throws_input_error([] { parse(std::string(100, 'x')); },
                                 {"no end-of-central-directory record"}));
  std::string zip = build_zip({{"a/b", "1234", false, 0}});
  // Central directory offset pointing beyond the end-of-central-directory record.
  set_le(zip, zip.size() - 6, zip.size(), 4);
  EXPECT_TRUE(throws_input_error([&] { parse(zip); }, {"central directory", "runs past"}));
}

TEST(ZipArchive, RefusesEntryOutsideTheArchive) {
  std::string zip = build_zip({{"a/b", "1234", false, 0}, {"a/c", "5678", false, 0}});
  const size_t cd = central_header(zip, "a/c");
  set_le(zip, cd + 42, 1u << 30, 4);  // local header offset far beyond the file
  EXPECT_TRUE(throws_input_error([&] { parse(zip); }, {"'a/c'", "local header offset"}));

  std::string big = build_zip({{"a/b", "1234", false, 0}});
  const size_t cd2 = central_header(big, "a/b");
  set_le(big, cd2 + 20, 1u << 20, 4);  // sizes larger than the file
  set_le(big, cd2 + 24, 1u << 20, 4);
  EXPECT_TRUE(throws_input_error([&] { parse(big); }, {"'a/b'", "runs past", "truncated"}));
}

TEST(ZipArchive, RefusesOverlappingEntries) {
  std::string zip = build_zip({{"a/b", "12345678", false, 0}, {"a/c", "abcdefgh", false, 0}});
  // Point a/c's central entry at a/b's local header region: a second entry with the name a/c
  // would be needed there, so instead make a/b's declared size swallow a/c's local header.
  const size_t cd = central_header(zip, "a/b");
  const size_t lc = local_header(zip, "a/c");
  const uint64_t grow = lc + 10 - (local_header(zip, "a/b") + 30 + 3);
  set_le(zip, cd + 20, grow, 4);
  set_le(zip, cd + 24, grow, 4);
  EXPECT_TRUE(throws_input_error([&] { parse(zip); }, {"entries 'a/b' and 'a/c' overlap"}));
}

TEST(ZipArchive, RefusesEncryptedUnsupportedAndDuplicateEntries) {
  EXPECT_TRUE(throws_input_error(
      [] {
        parse(build_zip({{"a/b", "x", false, 1}}));
      },
      {"'a/b'", "encrypted"}));
  std::string zip = build_zip({{"a/b", "x", false, 0}});
  set_le(zip, central_header(zip, "a/b") + 10, 12, 2);  // bzip2
  EXPECT_TRUE(throws_input_error([&] { parse(zip); }, {"compression method 12"}));
  EXPECT_TRUE(throws_input_error(
      [] {
        parse(build_zip({{"a/b", "x", false, 0}, {"a/b", "y", false, 0}}));
      },
      {"'a/b'", "appears twice"}));
  std::string mismatch = build_zip({{"a/b", "x", false, 0}});
  mismatch[local_header(mismatch, "a/b") + 32] = 'c';  // local name a/c
  EXPECT_TRUE(
      throws_input_error([&] { parse(mismatch); }, {"local header names a different file"}));
}

TEST(ZipArchive, RefusesNamesThatEscape) {
  for (const std::string& name :
       std::vector<std::string>{"../evil", "a/../../b", "/abs", "a\\b", std::string("a\0b", 3)}) {
    EXPECT_TRUE(throws_input_error(
        [&] {
          parse(build_zip({{name, "x", false, 0}}));
        },
        {"refused: it could refer outside the archive"}))
        << name;
  }
}

TEST(ZipArchive, ZipBombsAreRefused) {
  // Declared size above the per-entry cap.
  const std::string zeros(1 << 20, '\0');
  std::string zip = build_zip({{"a/bomb", zeros, true, 0}});
  const size_t cd = central_header(zip, "a/bomb");
  set_le(zip, cd + 24, kMaxZipInflatedEntry + 1, 4);
  EXPECT_TRUE(throws_input_error([&] { parse(zip); }, {"'a/bomb'", "limit for compressed"}));

  // Within the cap but a ratio no real pickle has (2 MiB of zeros compress ~1000x).
  const std::string two_mib(2 << 20, '\0');
  EXPECT_TRUE(throws_input_error(
      [&] {
        parse(build_zip({{"a/bomb", two_mib, true, 0}}));
      },
      {"'a/bomb'", "compression ratio", "zip bomb"}));

  // Declaring less than the stream inflates to: inflate stops at the declared size.
  std::string liar = build_zip({{"a/liar", std::string(5000, 'z'), true, 0}});
  set_le(liar, central_header(liar, "a/liar") + 24, 100, 4);
  const ZipArchive z = parse(liar);
  EXPECT_TRUE(throws_input_error([&] { z.read(*z.find("a/liar")); },
                                 {"'a/liar'", "inflates to more than its declared 100 bytes"}));

  // Several deflated entries together above the archive cap.
  std::vector<ZipItem> many;
  for (int i = 0; i < 5; ++i)
    many.push_back({"a/" + std::to_string(i), std::string(100, 'q'), true, 0});
  std::string total = build_zip(many);
  for (int i = 0; i < 5; ++i) {
    set_le(total, central_header(total, "a/" + std::to_string(i)) + 24, kMaxZipInflatedEntry, 4);
    set_le(total, central_header(total, "a/" + std::to_string(i)) + 20, kMaxZipInflatedEntry / 4,
           4);  // keep the ratio plausible; the local data check happens after the size checks
  }
  EXPECT_TRUE(throws_input_error([&] { parse(total); }, {"bytes in total", "zip bomb"}));
}

TEST(ZipArchive, CorruptDeflateAndCrcAreRefused) {
  std::string zip = build_zip({{"a/p", std::string(3000, 'k') + "tail", true, 0}});
  const ZipArchive good = parse(zip);
  const ZipEntry& e = *good.find("a/p");
  std::string corrupt = zip;
  corrupt[e.data_offset + 2] ^= 0x55;
  const ZipArchive bad = parse(corrupt);
  EXPECT_TRUE(throws_input_error([&] { bad.read(*bad.find("a/p")); }, {"'a/p'"}));

  std::string crc = build_zip({{"a/s", "stored", false, 0}});
  set_le(crc, central_header(crc, "a/s") + 16, 0x12345678, 4);
  const ZipArchive c = parse(crc);
  EXPECT_TRUE(throws_input_error([&] { c.read(*c.find("a/s")); }, {"'a/s'", "CRC-32 mismatch"}));
}

TEST(ZipArchive, TruncationAtEveryByteIsAnInputError) {
  const std::string zip = build_zip({{"a/data.pkl", "pickle", false, 0},
                                     {"a/data/0", std::string(40, 'w'), false, 0},
                                     {"a/c", std::string(300, 'c'), true, 0}});
  for (size_t n = 0; n < zip.size(); ++n) {
    const std::string cut = zip.substr(0, n);
    EXPECT_TRUE(throws_input_error([&] { parse(cut); }, {"t.zip"})) << "cut at " << n;
  }
}

TEST(ZipArchive, CorruptingAnyByteNeverCrashes) {
  const std::string zip =
      build_zip({{"a/data.pkl", "pickle", false, 0}, {"a/c", std::string(300, 'c'), true, 0}});
  for (size_t i = 0; i < zip.size(); ++i) {
    for (const unsigned char v : {0x00, 0xff, 0x7f}) {
      std::string bad = zip;
      bad[i] = static_cast<char>(v);
      try {
        const ZipArchive z = parse(bad);
        for (const ZipEntry& e : z.entries()) z.read(e);
      } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("t.zip"), std::string::npos) << e.what();
      }
    }
  }
}

}  // namespace
}  // namespace vidax
