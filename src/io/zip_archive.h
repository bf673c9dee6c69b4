// A strict, read-only zip reader for PyTorch checkpoints (torch.save writes a zip archive since
// PyTorch 1.6). The archive is a memory-mapped file or a caller-owned buffer; nothing is copied
// on open. Stored entries (method 0, which is how torch writes every record) are handed out as
// spans straight into the bytes, so multi-GB tensor records cost nothing to open. Deflated entries
// (method 8) are accepted only for small records and are inflated on request under hard caps.
//
// Everything the file claims is validated against the file: end-of-central-directory record,
// ZIP64 records (torch writes them even for small files), every central-directory entry and its
// local header (offsets, sizes, names), entries overlapping each other or the central directory,
// duplicate names, encryption, unsupported methods, names that could escape a folder ('..',
// absolute, backslash). Violations throw InputError whose message starts with the label (the
// file path) and names the entry. CRCs of stored records are not verified on open (that would
// read every byte of an 11 GB checkpoint); read() verifies the CRC of what it returns.
//
// ZipArchive is immutable after open; concurrent reads are safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/storage.h"

namespace vidax {

// Limits for compressed entries: a deflated record may inflate to at most this many bytes, all
// deflated records of one archive together to at most kMaxZipInflatedTotal, and a record larger
// than kZipRatioCheckFloor must not claim to inflate more than kMaxZipInflateRatio times its
// compressed size (real pickles compress 3-10x; bombs need ~1000x).
inline constexpr uint64_t kMaxZipInflatedEntry = uint64_t{64} << 20;   // 64 MiB
inline constexpr uint64_t kMaxZipInflatedTotal = uint64_t{256} << 20;  // 256 MiB
inline constexpr uint64_t kMaxZipInflateRatio = 200;
inline constexpr uint64_t kZipRatioCheckFloor = uint64_t{1} << 20;  // 1 MiB
// read() copies or inflates at most this many bytes (it is meant for small records).
inline constexpr uint64_t kMaxZipReadBytes = uint64_t{256} << 20;  // 256 MiB
inline constexpr size_t kMaxZipEntries = 1'000'000;

struct ZipEntry {
  std::string name;
  uint16_t method = 0;  // 0 stored, 8 deflate
  uint16_t flags = 0;   // general-purpose bit flags from the central directory
  uint32_t crc32 = 0;
  uint64_t compressed_size = 0;
  uint64_t uncompressed_size = 0;
  uint64_t header_offset = 0;  // local file header
  uint64_t data_offset = 0;    // first byte of the (compressed) data
};

class ZipArchive {
 public:
  // Maps `path` and parses it; errors start with `path`.
  static ZipArchive open(const std::string& path);
  // Parses caller-owned bytes (they must outlive the archive and every span taken from it);
  // `label` names the image in errors. The same parser as open().
  static ZipArchive from_buffer(const std::byte* data, size_t size, std::string label);

  const std::string& label() const { return label_; }
  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  // The mapping when opened from a file (null for from_buffer), for zero-copy tensor storage.
  const std::shared_ptr<MappedFile>& mapping() const { return file_; }

  // In central-directory order.
  const std::vector<ZipEntry>& entries() const { return entries_; }
  const ZipEntry* find(std::string_view name) const;  // nullptr when absent
  // The bytes of a stored entry, in place. InputError naming the entry if it is compressed.
  std::span<const std::byte> stored_bytes(const ZipEntry& entry) const;
  // A copy of a small entry (stored or deflated), CRC-checked; InputError beyond
  // kMaxZipReadBytes, on a corrupt stream, or when inflating would exceed the declared size.
  std::vector<std::byte> read(const ZipEntry& entry) const;

 private:
  void parse();

  std::string label_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
  std::shared_ptr<MappedFile> file_;
  std::vector<ZipEntry> entries_;
  std::vector<size_t> by_name_;  // indices into entries_, sorted by name
};

}  // namespace vidax
