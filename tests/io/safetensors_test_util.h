// Helpers for the safetensors tests: raw file images, byte I/O, and an InputError matcher.
#pragma once

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <sstream>
#include <string>

#include "core/error.h"

namespace vidax::testing {

inline std::string u64_le(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[static_cast<size_t>(i)] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

// A file image: length prefix, header text exactly as given, `data_bytes` of data.
inline std::string st_image(const std::string& header, size_t data_bytes = 0, char fill = '\0') {
  return u64_le(header.size()) + header + std::string(data_bytes, fill);
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Passes when fn throws InputError whose message contains every phrase.
template <typename Fn>
::testing::AssertionResult throws_input_error(Fn&& fn, std::initializer_list<std::string> phrases) {
  try {
    fn();
  } catch (const InputError& e) {
    const std::string message = e.what();
    for (const std::string& p : phrases) {
      if (message.find(p) == std::string::npos) {
        return ::testing::AssertionFailure()
               << "InputError message lacks \"" << p << "\": " << message;
      }
    }
    return ::testing::AssertionSuccess() << message;
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw a non-InputError exception: " << e.what();
  }
  return ::testing::AssertionFailure() << "did not throw";
}

// Bytes placed so that they end exactly at an inaccessible page: any read past the end faults,
// even in builds without AddressSanitizer.
class GuardedBuffer {
 public:
  explicit GuardedBuffer(const std::string& bytes) {
    page_ = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    body_ = ((bytes.size() + page_ - 1) / page_) * page_;
    if (body_ == 0) body_ = page_;
    void* p =
        ::mmap(nullptr, body_ + page_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) std::abort();
    base_ = static_cast<std::byte*>(p);
    if (::mprotect(base_ + body_, page_, PROT_NONE) != 0) std::abort();
    data_ = base_ + body_ - bytes.size();
    if (!bytes.empty()) std::memcpy(data_, bytes.data(), bytes.size());
    size_ = bytes.size();
  }
  ~GuardedBuffer() { ::munmap(base_, body_ + page_); }
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;

  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  std::byte* base_ = nullptr;
  std::byte* data_ = nullptr;
  size_t page_ = 0, body_ = 0, size_ = 0;
};

}  // namespace vidax::testing
