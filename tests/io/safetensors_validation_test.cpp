// Hostile safetensors files: one case per validation rule. Each must raise InputError whose
// message starts with the file path and carries the rule's key phrase (and the tensor name where
// there is one); open() and validate_buffer() must agree, since they share one parser.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "io/safetensors_test_util.h"
#include "support/test_support.h"

namespace vidax {
namespace {

using testing::st_image;
using testing::throws_input_error;
using testing::u64_le;

struct HostileCase {
  std::string name;
  std::string bytes;                 // the whole file
  std::vector<std::string> phrases;  // all must appear in the message
};

void PrintTo(const HostileCase& c, std::ostream* os) { *os << c.name; }

// A well-formed entry for tensor `t` with the given fields replaced.
std::string entry(const std::string& dtype = "\"F32\"", const std::string& shape = "[2, 2]",
                  const std::string& offsets = "[0, 16]") {
  return "{\"dtype\": " + dtype + ", \"shape\": " + shape + ", \"data_offsets\": " + offsets + "}";
}
std::string one(const std::string& e, size_t data = 16) {
  return st_image("{\"t\": " + e + "}", data);
}

std::vector<HostileCase> hostile_cases() {
  std::vector<HostileCase> c;
  // Framing.
  c.push_back({"empty_file", "", {"file is 0 bytes", "shorter than the 8-byte"}});
  c.push_back({"short_file",
               std::string("\x05\x00\x00", 3),
               {"file is 3 bytes", "shorter than the 8-byte"}});
  c.push_back({"header_length_zero", u64_le(0) + std::string(16, '\0'), {"header length is 0"}});
  c.push_back({"header_length_over_100mib",
               u64_le((100u << 20) + 1) + "{}",
               {"header length 104857601", "exceeds the limit"}});
  c.push_back({"header_length_u64_max", u64_le(~uint64_t{0}) + "{}", {"exceeds the limit"}});
  c.push_back({"header_length_beyond_eof",
               u64_le(64) + "{\"t\": 1}",
               {"header length 64", "beyond the end of the file"}});
  // JSON.
  c.push_back({"json_truncated", st_image("{\"t\": {\"dtype\": "), {"not valid JSON"}});
  c.push_back({"json_trailing_garbage", st_image("{} x"), {"not valid JSON"}});
  c.push_back({"json_nul_padding",
               st_image(std::string("{}\0\0", 4)),
               {"not valid JSON", "NUL byte at header offset 2"}});
  c.push_back({"json_nul_hides_tail",
               st_image(std::string("{}\0", 3) + "{\"t\": " + entry() + "}", 16),
               {"NUL byte at header offset 2"}});
  c.push_back(
      {"json_invalid_utf8", st_image("{\"t\xff\": " + entry() + "}", 16), {"not valid JSON"}});
  c.push_back({"json_nan_literal", one(entry("\"F32\"", "[NaN]")), {"not valid JSON"}});
  c.push_back({"json_infinity_literal",
               one(entry("\"F32\"", "[2, 2]", "[0, Infinity]")),
               {"not valid JSON"}});
  c.push_back({"json_number_overflow", one(entry("\"F32\"", "[1e999]")), {"number out of range"}});
  c.push_back({"json_duplicate_tensor",
               st_image("{\"t\": " + entry() + ", \"t\": " + entry() + "}", 16),
               {"duplicate key 't'"}});
  c.push_back({"json_duplicate_field",
               one("{\"dtype\": \"F32\", \"dtype\": \"I32\", \"shape\": [2, 2], "
                   "\"data_offsets\": [0, 16]}"),
               {"duplicate key 'dtype'"}});
  c.push_back({"json_too_deep", one(entry("\"F32\"", "[[[[[[2]]]]]]")), {"nests deeper"}});
  c.push_back({"name_with_control_bytes",
               st_image("{\"a\\nb'\": " + entry("\"F64\"") + "}", 16),
               {"tensor 'a\\x0ab\\x27'", "unknown dtype 'F64'"}});
  c.push_back({"name_very_long",
               st_image("{\"" + std::string(5000, 'n') + "\": 7}"),
               {"tensor '" + std::string(200, 'n') + "'...: entry must be an object"}});
  c.push_back({"top_level_array", st_image("[]"), {"must be a JSON object", "array"}});
  c.push_back({"top_level_string", st_image("\"F32\""), {"must be a JSON object", "string"}});
  // Entry structure.
  c.push_back({"entry_not_object", one("[1, 2]"), {"tensor 't'", "entry must be an object"}});
  c.push_back({"entry_null", one("null"), {"tensor 't'", "entry must be an object", "null"}});
  c.push_back({"dtype_missing",
               one("{\"shape\": [2, 2], \"data_offsets\": [0, 16]}"),
               {"tensor 't'", "missing 'dtype'"}});
  c.push_back({"dtype_not_string", one(entry("4")), {"tensor 't'", "'dtype' must be a string"}});
  c.push_back(
      {"dtype_unknown",
       one(entry("\"F64\"")),
       {"tensor 't'", "unknown dtype 'F64'", "F32, BF16, F16, F8_E4M3, F8_E5M2, I64, I32"}});
  c.push_back({"dtype_lowercase", one(entry("\"f32\"")), {"tensor 't'", "unknown dtype 'f32'"}});
  c.push_back({"dtype_bool", one(entry("\"BOOL\"")), {"unknown dtype 'BOOL'"}});
  c.push_back({"shape_missing",
               one("{\"dtype\": \"F32\", \"data_offsets\": [0, 16]}"),
               {"tensor 't'", "missing 'shape'"}});
  c.push_back(
      {"shape_not_array", one(entry("\"F32\"", "4")), {"tensor 't'", "'shape' must be an array"}});
  c.push_back({"shape_negative",
               one(entry("\"F32\"", "[2, -2]")),
               {"tensor 't'", "shape[1] is negative (-2)"}});
  c.push_back({"shape_fraction",
               one(entry("\"F32\"", "[2.5, 2]")),
               {"tensor 't'", "shape[0] must be an integer", "non-integer"}});
  c.push_back({"shape_exponent", one(entry("\"F32\"", "[4e0]")), {"shape[0] must be an integer"}});
  c.push_back({"shape_string",
               one(entry("\"F32\"", "[\"4\"]")),
               {"shape[0] must be an integer", "string"}});
  c.push_back({"shape_beyond_int64",
               one(entry("\"F32\"", "[9223372036854775808]")),
               {"shape[0] must be an integer in int64 range", "beyond int64"}});
  c.push_back({"shape_beyond_uint64",
               one(entry("\"F32\"", "[100000000000000000000]")),
               {"shape[0] must be an integer"}});
  c.push_back({"shape_rank_9",
               one(entry("\"F32\"", "[1, 1, 1, 1, 1, 1, 1, 1, 4]")),
               {"tensor 't'", "rank 9 exceeds the maximum of 8"}});
  c.push_back({"shape_numel_overflow",
               one(entry("\"F32\"", "[4294967296, 4294967296]")),
               {"tensor 't'", "element count overflows"}});
  c.push_back({"shape_numel_overflow_before_zero",
               one(entry("\"F32\"", "[4294967296, 4294967296, 0]", "[0, 0]")),
               {"element count overflows"}});
  c.push_back({"shape_bytes_overflow",
               one(entry("\"F32\"", "[4611686018427387904]")),
               {"tensor 't'", "byte size overflows"}});
  c.push_back({"offsets_missing",
               one("{\"dtype\": \"F32\", \"shape\": [2, 2]}"),
               {"tensor 't'", "missing 'data_offsets'"}});
  c.push_back({"offsets_not_array",
               one(entry("\"F32\"", "[2, 2]", "16")),
               {"tensor 't'", "'data_offsets' must be an array [begin, end]"}});
  c.push_back({"offsets_one_element",
               one(entry("\"F32\"", "[2, 2]", "[16]")),
               {"'data_offsets' must be an array [begin, end]", "an array of 1"}});
  c.push_back(
      {"offsets_three_elements", one(entry("\"F32\"", "[2, 2]", "[0, 8, 16]")), {"an array of 3"}});
  c.push_back({"offsets_negative",
               one(entry("\"F32\"", "[2, 2]", "[-16, 0]")),
               {"tensor 't'", "data_offsets[0] must be a non-negative integer"}});
  c.push_back({"offsets_fraction",
               one(entry("\"F32\"", "[2, 2]", "[0, 16.0]")),
               {"data_offsets[1] must be a non-negative integer"}});
  c.push_back({"offsets_begin_after_end",
               one(entry("\"F32\"", "[0]", "[16, 8]")),
               {"tensor 't'", "begin 16 is after end 8"}});
  c.push_back({"offsets_end_beyond_data",
               one(entry(), 15),
               {"tensor 't'", "end 16 is beyond the data section (15 bytes)"}});
  c.push_back({"offsets_huge",
               one(entry("\"F32\"", "[2, 2]", "[18446744073709551600, 18446744073709551615]")),
               {"tensor 't'", "beyond the data section"}});
  c.push_back({"size_mismatch_short",
               one(entry("\"F32\"", "[2, 2]", "[0, 12]")),
               {"tensor 't'", "needs 16 bytes but data_offsets [0, 12] span 12"}});
  c.push_back({"size_mismatch_dtype",
               one(entry("\"BF16\"", "[2, 2]", "[0, 16]")),
               {"tensor 't'", "of BF16 needs 8 bytes"}});
  c.push_back({"overlap",
               st_image("{\"a\": " + entry("\"F32\"", "[2]", "[8, 16]") +
                            ", \"b\": " + entry("\"F32\"", "[3]", "[0, 12]") + "}",
                        16),
               {"tensors 'b' [0, 12) and 'a' [8, 16) overlap"}});
  c.push_back({"overlap_identical",
               st_image("{\"a\": " + entry("\"I32\"", "[1]", "[0, 4]") +
                            ", \"b\": " + entry("\"F32\"", "[1]", "[0, 4]") + "}",
                        4),
               {"'a'", "'b'", "overlap"}});
  c.push_back({"overlap_across_zero_size",
               st_image("{\"a\": " + entry("\"F32\"", "[4]", "[0, 16]") +
                            ", \"m\": " + entry("\"F32\"", "[0]", "[4, 4]") +
                            ", \"z\": " + entry("\"F32\"", "[1]", "[12, 16]") + "}",
                        16),
               {"tensors 'a' [0, 16) and 'z' [12, 16) overlap"}});
  // Metadata.
  c.push_back({"metadata_not_object",
               st_image("{\"__metadata__\": [\"x\"]}"),
               {"__metadata__ must be an object of strings"}});
  c.push_back({"metadata_number_value",
               st_image("{\"__metadata__\": {\"total_size\": 16}}"),
               {"__metadata__ value for key 'total_size' must be a string"}});
  c.push_back({"metadata_nested_value",
               st_image("{\"__metadata__\": {\"cfg\": {\"a\": \"b\"}}}"),
               {"__metadata__ value for key 'cfg' must be a string"}});
  return c;
}

class HostileFile : public ::testing::TestWithParam<HostileCase> {};

TEST_P(HostileFile, RejectedWithNamedError) {
  const HostileCase& hc = GetParam();
  testing::TempDir dir;
  const std::string path = dir.file(hc.name + ".safetensors");
  testing::write_bytes(path, hc.bytes);

  std::string open_message;
  try {
    SafetensorsFile::open(path);
    FAIL() << hc.name << ": open() accepted a hostile file";
  } catch (const InputError& e) {
    open_message = e.what();
  } catch (const std::exception& e) {
    FAIL() << hc.name << ": open() threw a non-InputError: " << e.what();
  }
  EXPECT_EQ(open_message.rfind(path + ": ", 0), 0u)
      << "message must start with the path: " << open_message;
  // One line of printable text, whatever bytes the file held.
  for (const char ch : open_message) {
    EXPECT_FALSE(static_cast<unsigned char>(ch) < 0x20 || static_cast<unsigned char>(ch) >= 0x7f)
        << hc.name << ": unprintable byte " << int(static_cast<unsigned char>(ch)) << " in "
        << open_message;
  }
  for (const std::string& phrase : hc.phrases) {
    EXPECT_NE(open_message.find(phrase), std::string::npos)
        << hc.name << ": message lacks \"" << phrase << "\": " << open_message;
  }

  // The buffer entry point (the fuzz target's) reports the very same error.
  testing::GuardedBuffer buffer(hc.bytes);
  try {
    SafetensorsFile::validate_buffer(buffer.data(), buffer.size(), path);
    ADD_FAILURE() << hc.name << ": validate_buffer accepted what open() rejected";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), open_message);
  }
}

INSTANTIATE_TEST_SUITE_P(EveryRule, HostileFile, ::testing::ValuesIn(hostile_cases()),
                         [](const ::testing::TestParamInfo<HostileCase>& info) {
                           return info.param.name;
                         });

// The boundaries that must still be accepted: the rules above are not over-eager.
TEST(SafetensorsValidation, AcceptsGapsZeroSizeScalarsAndPadding) {
  const std::string header =
      "{\"__metadata__\": null, "
      "\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [4, 12], \"extra\": 1}, "
      "\"empty\": {\"dtype\": \"BF16\", \"shape\": [3, 0, 2], \"data_offsets\": [6, 6]}, "
      "\"s\": {\"dtype\": \"I64\", \"shape\": [], \"data_offsets\": [16, 24]}}      ";
  const std::string bytes = st_image(header, 32, '\x01');  // trailing bytes after the last tensor
  testing::TempDir dir;
  const std::string path = dir.file("ok.safetensors");
  testing::write_bytes(path, bytes);
  const SafetensorsFile f = SafetensorsFile::open(path);
  ASSERT_EQ(f.entries().size(), 3u);
  EXPECT_EQ(f.entries()[0].name, "a");  // storage order
  EXPECT_EQ(f.entries()[1].name, "empty");
  EXPECT_EQ(f.entries()[2].name, "s");
  EXPECT_TRUE(f.metadata().empty());
  EXPECT_EQ(f.entry("empty").shape, Shape({3, 0, 2}));
  EXPECT_EQ(f.tensor("empty").numel(), 0);
  const Tensor s = f.tensor("s");
  EXPECT_EQ(s.rank(), 0);
  // The header length is not a multiple of 8, so this I64 is unaligned: read it with memcpy.
  EXPECT_NE(reinterpret_cast<uintptr_t>(s.raw_data()) % alignof(int64_t), 0u);
  int64_t value = 0;
  std::memcpy(&value, s.raw_data(), sizeof(value));
  EXPECT_EQ(value, 0x0101010101010101);
}

TEST(SafetensorsValidation, AcceptsEmptyHeaderObject) {
  testing::TempDir dir;
  const std::string path = dir.file("empty.safetensors");
  testing::write_bytes(path, st_image("{}      "));
  const SafetensorsFile f = SafetensorsFile::open(path);
  EXPECT_TRUE(f.entries().empty());
  EXPECT_FALSE(f.contains("t"));
}

TEST(SafetensorsValidation, ZeroSizeTensorMayNotPointPastTheData) {
  testing::TempDir dir;
  const std::string path = dir.file("z.safetensors");
  testing::write_bytes(path,
                       st_image("{\"z\": {\"dtype\": \"F32\", \"shape\": [0], \"data_offsets\": "
                                "[9, 9]}}",
                                8));
  EXPECT_TRUE(
      throws_input_error([&] { SafetensorsFile::open(path); },
                         {path, "tensor 'z'", "end 9 is beyond the data section (8 bytes)"}));
}

TEST(SafetensorsValidation, MissingFileIsInputError) {
  testing::TempDir dir;
  const std::string path = dir.file("absent.safetensors");
  EXPECT_TRUE(throws_input_error([&] { SafetensorsFile::open(path); }, {path, "cannot open"}));
  EXPECT_TRUE(throws_input_error([&] { SafetensorsFile::open(dir.path()); },
                                 {dir.path(), "not a regular file"}));
}

}  // namespace
}  // namespace vidax
