// Storage: a block of bytes that tensors view. Either owned, 64-byte aligned heap memory, or a
// read-only window into a memory-mapped file (kept alive by shared ownership of the mapping).
// Storage objects are immutable after creation apart from the bytes of owned storage; sharing
// one between threads is safe as long as writers touch disjoint bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace vidax {

class Storage {
 public:
  virtual ~Storage() = default;
  std::byte* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  bool writable() const { return writable_; }

 protected:
  std::byte* data_ = nullptr;
  size_t bytes_ = 0;
  bool writable_ = false;
};

// Owned, zero-initialised, 64-byte aligned memory.
std::shared_ptr<Storage> allocate_storage(size_t bytes);

// A read-only memory mapping of a whole file. Throws InputError naming the path on failure.
class MappedFile {
 public:
  static std::shared_ptr<MappedFile> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // madvise(MADV_DONTNEED): drop the pages from the resident set; later reads fault them in
  // again from the page cache. The mapping stays valid.
  void release_resident_pages() const;

 private:
  MappedFile() = default;
  std::byte* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

// A read-only storage over [offset, offset+bytes) of a mapped file.
std::shared_ptr<Storage> mapped_storage(std::shared_ptr<MappedFile> file, size_t offset,
                                        size_t bytes);

}  // namespace vidax
