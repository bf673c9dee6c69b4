// SHA-256 (FIPS 180-4), used to fingerprint model files in generation sidecars so that a video
// can be traced back to the exact weights. Incremental; an object is not thread-safe, separate
// objects are independent.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace vidax {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t size);
  std::array<uint8_t, 32> finish();  // the object must not be updated afterwards
  static std::string hex(const std::array<uint8_t, 32>& digest);

 private:
  void compress(const uint8_t* block);
  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

// Hex SHA-256 of a whole file (read through a memory mapping). InputError naming the file if
// it cannot be read.
std::string sha256_file(const std::string& path);

}  // namespace vidax
