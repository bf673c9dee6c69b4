// Zip reader: end-of-central-directory (+ ZIP64) -> central directory -> local headers, every
// offset checked against the image before it is read.
#include "io/zip_archive.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>

#include "core/error.h"
#include "io/text_escape.h"

namespace vidax {
namespace {

constexpr uint32_t kLocalHeaderSig = 0x04034b50;
constexpr uint32_t kCentralHeaderSig = 0x02014b50;
constexpr uint32_t kEocdSig = 0x06054b50;
constexpr uint32_t kZip64EocdSig = 0x06064b50;
constexpr uint32_t kZip64LocatorSig = 0x07064b50;
constexpr size_t kLocalHeaderSize = 30;
constexpr size_t kCentralHeaderSize = 46;
constexpr size_t kEocdSize = 22;
constexpr size_t kZip64EocdSize = 56;
constexpr size_t kZip64LocatorSize = 20;
constexpr uint16_t kZip64ExtraId = 0x0001;
constexpr uint16_t kFlagEncrypted = 0x0001;
constexpr uint16_t kFlagStrongEncryption = 0x0040;
constexpr uint32_t kSat32 = 0xffffffffu;
constexpr uint16_t kSat16 = 0xffffu;

uint16_t u16(const std::byte* p) {
  return static_cast<uint16_t>(static_cast<unsigned>(p[0]) | (static_cast<unsigned>(p[1]) << 8));
}
uint32_t u32(const std::byte* p) {
  return static_cast<uint32_t>(u16(p)) | (static_cast<uint32_t>(u16(p + 2)) << 16);
}
uint64_t u64(const std::byte* p) {
  return static_cast<uint64_t>(u32(p)) | (static_cast<uint64_t>(u32(p + 4)) << 32);
}

// [offset, offset + length) lies within [0, limit).
bool in_bounds(uint64_t offset, uint64_t length, uint64_t limit) {
  return offset <= limit && length <= limit - offset;
}

// Names are used as record keys and may be shown to users; refuse anything that would mean a
// different file on disk than it says (absolute, parent references, Windows separators) or that
// cannot be printed.
const char* bad_name_reason(std::string_view name) {
  if (name.empty()) return "is empty";
  if (name.front() == '/') return "is an absolute path";
  if (name.find('\\') != std::string_view::npos) return "contains a backslash";
  for (char c : name) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return "contains a control byte";
  }
  size_t start = 0;
  while (start <= name.size()) {
    const size_t slash = name.find('/', start);
    const std::string_view part = name.substr(
        start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (part == "..") return "contains a '..' component";
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return nullptr;
}

struct Eocd {
  uint64_t entries = 0;
  uint64_t cd_size = 0;
  uint64_t cd_offset = 0;
  uint64_t cd_limit = 0;  // the central directory must end at or before this offset
};

}  // namespace

ZipArchive ZipArchive::open(const std::string& path) {
  ZipArchive z;
  z.label_ = path;
  z.file_ = MappedFile::open(path);
  z.data_ = z.file_->data();
  z.size_ = z.file_->size();
  z.parse();
  return z;
}

ZipArchive ZipArchive::from_buffer(const std::byte* data, size_t size, std::string label) {
  ZipArchive z;
  z.label_ = std::move(label);
  z.data_ = data;
  z.size_ = size;
  z.parse();
  return z;
}

void ZipArchive::parse() {
  const std::string& label = label_;
  const std::byte* d = data_;
  const uint64_t size = size_;
  if (size < kEocdSize) {
    throw_input_error(label, ": not a zip archive: ", size,
                      " bytes, shorter than an end-of-central-directory record");
  }

  // The EOCD record is the last thing in the file, followed only by its comment (< 64 KiB). The
  // comment length must reach exactly to the end, which also rules out false signatures inside
  // the comment.
  std::optional<uint64_t> eocd_pos;
  const uint64_t lowest = size > kEocdSize + 0xffff ? size - kEocdSize - 0xffff : 0;
  for (uint64_t pos = size - kEocdSize;; --pos) {
    if (u32(d + pos) == kEocdSig && u16(d + pos + 20) == size - pos - kEocdSize) {
      eocd_pos = pos;
      break;
    }
    if (pos == lowest) break;
  }
  if (!eocd_pos) {
    throw_input_error(label,
                      ": not a zip archive: no end-of-central-directory record (truncated or not "
                      "a zip file)");
  }
  const std::byte* e = d + *eocd_pos;
  const uint16_t disk = u16(e + 4), cd_disk = u16(e + 6);
  const uint16_t disk_entries = u16(e + 8), total_entries = u16(e + 10);
  const uint32_t cd_size32 = u32(e + 12), cd_offset32 = u32(e + 16);

  Eocd eocd;
  eocd.entries = total_entries;
  eocd.cd_size = cd_size32;
  eocd.cd_offset = cd_offset32;
  eocd.cd_limit = *eocd_pos;

  // ZIP64: a locator right before the EOCD points at the ZIP64 EOCD record, whose 64-bit values
  // replace the saturated 16/32-bit ones. Where the classic record is not saturated the two must
  // agree, so no two readers can see different directories.
  const bool has_locator =
      *eocd_pos >= kZip64LocatorSize && u32(d + *eocd_pos - kZip64LocatorSize) == kZip64LocatorSig;
  if (has_locator) {
    const std::byte* loc = d + *eocd_pos - kZip64LocatorSize;
    const uint32_t z64_disk = u32(loc + 4);
    const uint64_t z64_offset = u64(loc + 8);
    const uint32_t disks = u32(loc + 16);
    if (z64_disk != 0 || disks > 1) {
      throw_input_error(label, ": multi-disk (spanned) zip archives are not supported");
    }
    const uint64_t locator_pos = *eocd_pos - kZip64LocatorSize;
    if (!in_bounds(z64_offset, kZip64EocdSize, locator_pos)) {
      throw_input_error(label, ": ZIP64 end-of-central-directory offset ", z64_offset,
                        " is outside the archive (", size, " bytes)");
    }
    const std::byte* z = d + z64_offset;
    if (u32(z) != kZip64EocdSig) {
      throw_input_error(label, ": no ZIP64 end-of-central-directory record at offset ", z64_offset,
                        " where the ZIP64 locator points");
    }
    const uint64_t record_size = u64(z + 4);
    if (record_size < kZip64EocdSize - 12 ||
        !in_bounds(z64_offset, 12 + record_size, locator_pos)) {
      throw_input_error(label, ": ZIP64 end-of-central-directory record size ", record_size,
                        " is invalid or runs past the ZIP64 locator");
    }
    if (u32(z + 16) != 0 || u32(z + 20) != 0) {
      throw_input_error(label, ": multi-disk (spanned) zip archives are not supported");
    }
    const uint64_t z_disk_entries = u64(z + 24), z_entries = u64(z + 32);
    const uint64_t z_cd_size = u64(z + 40), z_cd_offset = u64(z + 48);
    auto agree = [&](uint64_t classic, uint64_t saturated, uint64_t z64, const char* what) {
      if (classic != saturated && classic != z64) {
        throw_input_error(label, ": end-of-central-directory ", what, " ", classic,
                          " disagrees with the ZIP64 record (", z64, ")");
      }
    };
    agree(total_entries, kSat16, z_entries, "entry count");
    agree(disk_entries, kSat16, z_disk_entries, "entry count on this disk");
    agree(cd_size32, kSat32, z_cd_size, "central directory size");
    agree(cd_offset32, kSat32, z_cd_offset, "central directory offset");
    if (z_disk_entries != z_entries) {
      throw_input_error(label, ": multi-disk (spanned) zip archives are not supported");
    }
    eocd.entries = z_entries;
    eocd.cd_size = z_cd_size;
    eocd.cd_offset = z_cd_offset;
    eocd.cd_limit = z64_offset;
  } else {
    if (total_entries == kSat16 || cd_size32 == kSat32 || cd_offset32 == kSat32) {
      throw_input_error(label,
                        ": end-of-central-directory needs a ZIP64 record but there is no ZIP64 "
                        "locator before it");
    }
    if (disk != 0 || cd_disk != 0 || disk_entries != total_entries) {
      throw_input_error(label, ": multi-disk (spanned) zip archives are not supported");
    }
  }

  if (!in_bounds(eocd.cd_offset, eocd.cd_size, eocd.cd_limit)) {
    throw_input_error(label, ": central directory [", eocd.cd_offset, ", +", eocd.cd_size,
                      ") runs past the end-of-central-directory record at ", eocd.cd_limit,
                      " (truncated file?)");
  }
  if (eocd.entries > kMaxZipEntries || eocd.entries > eocd.cd_size / kCentralHeaderSize) {
    throw_input_error(label, ": central directory claims ", eocd.entries, " entries, more than ",
                      std::min<uint64_t>(kMaxZipEntries, eocd.cd_size / kCentralHeaderSize),
                      " fit (", eocd.cd_size, " bytes, limit ", kMaxZipEntries, ")");
  }

  // Central directory entries.
  const std::byte* cd = d + eocd.cd_offset;
  const uint64_t cd_size = eocd.cd_size;
  uint64_t pos = 0;
  uint64_t inflated_total = 0;
  entries_.reserve(static_cast<size_t>(eocd.entries));
  for (uint64_t i = 0; i < eocd.entries; ++i) {
    if (!in_bounds(pos, kCentralHeaderSize, cd_size) || u32(cd + pos) != kCentralHeaderSig) {
      throw_input_error(label, ": central directory entry ", i, " at offset ", eocd.cd_offset + pos,
                        " is missing or malformed");
    }
    const std::byte* h = cd + pos;
    ZipEntry entry;
    entry.flags = u16(h + 8);
    entry.method = u16(h + 10);
    entry.crc32 = u32(h + 16);
    entry.compressed_size = u32(h + 20);
    entry.uncompressed_size = u32(h + 24);
    const uint16_t name_len = u16(h + 28), extra_len = u16(h + 30), comment_len = u16(h + 32);
    uint64_t start_disk = u16(h + 34);
    entry.header_offset = u32(h + 42);
    const uint64_t var_len = uint64_t{name_len} + extra_len + comment_len;
    if (!in_bounds(pos + kCentralHeaderSize, var_len, cd_size)) {
      throw_input_error(label, ": central directory entry ", i,
                        " runs past the end of the central directory");
    }
    entry.name.assign(reinterpret_cast<const char*>(h + kCentralHeaderSize), name_len);
    const std::string where = str_cat(label, ": entry ", quote_name(entry.name), ": ");

    // ZIP64 extended information: present for each saturated field, in this order.
    const std::byte* extra = h + kCentralHeaderSize + name_len;
    const bool need_usize = entry.uncompressed_size == kSat32;
    const bool need_csize = entry.compressed_size == kSat32;
    const bool need_offset = entry.header_offset == kSat32;
    const bool need_disk = start_disk == kSat16;
    bool found_zip64 = false;
    for (size_t x = 0; x < extra_len;) {
      if (extra_len - x < 4) throw_input_error(where, "truncated extra field");
      const uint16_t id = u16(extra + x), len = u16(extra + x + 2);
      if (len > extra_len - x - 4) throw_input_error(where, "extra field runs past its entry");
      if (id == kZip64ExtraId) {
        if (found_zip64) throw_input_error(where, "two ZIP64 extra fields");
        found_zip64 = true;
        size_t f = x + 4;
        const size_t f_end = x + 4 + len;
        auto take = [&](bool needed, uint64_t& value, size_t width) {
          if (!needed) return;
          if (f_end - f < width) throw_input_error(where, "ZIP64 extra field too short");
          value = width == 8 ? u64(extra + f) : u32(extra + f);
          f += width;
        };
        take(need_usize, entry.uncompressed_size, 8);
        take(need_csize, entry.compressed_size, 8);
        take(need_offset, entry.header_offset, 8);
        take(need_disk, start_disk, 4);
      }
      x += 4 + size_t{len};
    }
    if ((need_usize || need_csize || need_offset || need_disk) && !found_zip64) {
      throw_input_error(where, "sizes or offset need a ZIP64 extra field, which is missing");
    }
    pos += kCentralHeaderSize + var_len;

    if (const char* reason = bad_name_reason(entry.name)) {
      throw_input_error(where, "name ", reason, " (refused: it could refer outside the archive)");
    }
    if (start_disk != 0) throw_input_error(where, "starts on another disk (spanned archive)");
    if (entry.flags & (kFlagEncrypted | kFlagStrongEncryption)) {
      throw_input_error(where, "is encrypted (not supported)");
    }
    if (entry.method != 0 && entry.method != 8) {
      throw_input_error(where, "compression method ", entry.method,
                        " is not supported (expected 0 stored or 8 deflate)");
    }
    if (entry.method == 0 && entry.compressed_size != entry.uncompressed_size) {
      throw_input_error(where, "stored entry has compressed size ", entry.compressed_size,
                        " != uncompressed size ", entry.uncompressed_size);
    }
    if (entry.method == 8) {
      // Zip-bomb defence: the declared size is a hard cap on what inflate may produce, and the
      // declared sizes themselves are bounded.
      if (entry.uncompressed_size > kMaxZipInflatedEntry) {
        throw_input_error(where, "deflated entry declares ", entry.uncompressed_size,
                          " bytes, more than the ", kMaxZipInflatedEntry,
                          "-byte limit for compressed records (tensor data must be stored "
                          "uncompressed, as torch.save writes it)");
      }
      if (entry.uncompressed_size > kZipRatioCheckFloor &&
          entry.uncompressed_size / std::max<uint64_t>(entry.compressed_size, 1) >
              kMaxZipInflateRatio) {
        throw_input_error(where, "deflated entry claims a ", entry.uncompressed_size, " / ",
                          entry.compressed_size, " compression ratio, above the limit of ",
                          kMaxZipInflateRatio, " (zip bomb?)");
      }
      inflated_total += entry.uncompressed_size;
      if (inflated_total > kMaxZipInflatedTotal) {
        throw_input_error(where, "deflated entries of the archive declare more than ",
                          kMaxZipInflatedTotal, " bytes in total (zip bomb?)");
      }
    }

    entries_.push_back(std::move(entry));
  }
  if (pos != cd_size) {
    throw_input_error(label, ": central directory holds ", cd_size - pos,
                      " bytes after its last entry");
  }

  // Local headers: same name and method; the data follows its name and extra field.
  for (ZipEntry& entry : entries_) {
    const std::string where = str_cat(label, ": entry ", quote_name(entry.name), ": ");
    const uint64_t name_len = entry.name.size();
    if (!in_bounds(entry.header_offset, kLocalHeaderSize, eocd.cd_offset)) {
      throw_input_error(where, "local header offset ", entry.header_offset,
                        " is outside the archive's data area (", eocd.cd_offset, " bytes)");
    }
    const std::byte* l = d + entry.header_offset;
    if (u32(l) != kLocalHeaderSig) {
      throw_input_error(where, "no local file header at offset ", entry.header_offset);
    }
    const uint16_t l_flags = u16(l + 6), l_method = u16(l + 8);
    const uint16_t l_name_len = u16(l + 26), l_extra_len = u16(l + 28);
    if (l_method != entry.method) {
      throw_input_error(where, "local header says compression method ", l_method,
                        ", the central directory says ", entry.method);
    }
    if (l_flags & (kFlagEncrypted | kFlagStrongEncryption)) {
      throw_input_error(where, "is encrypted (not supported)");
    }
    const uint64_t name_at = entry.header_offset + kLocalHeaderSize;
    if (!in_bounds(name_at, uint64_t{l_name_len} + l_extra_len, eocd.cd_offset)) {
      throw_input_error(where, "local header runs past the archive's data area");
    }
    if (l_name_len != name_len || std::memcmp(d + name_at, entry.name.data(), name_len) != 0) {
      throw_input_error(
          where, "local header names a different file (",
          quote_name(std::string_view(reinterpret_cast<const char*>(d + name_at), l_name_len)),
          ")");
    }
    entry.data_offset = name_at + l_name_len + l_extra_len;
    if (!in_bounds(entry.data_offset, entry.compressed_size, eocd.cd_offset)) {
      throw_input_error(where, "data [", entry.data_offset, ", +", entry.compressed_size,
                        ") runs past the archive's data area (", eocd.cd_offset,
                        " bytes; truncated file?)");
    }
  }

  // Entries must not share bytes: overlapping records would let one file mean two things.
  std::vector<size_t> order(entries_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return entries_[a].header_offset < entries_[b].header_offset;
  });
  for (size_t k = 1; k < order.size(); ++k) {
    const ZipEntry& prev = entries_[order[k - 1]];
    const ZipEntry& cur = entries_[order[k]];
    if (cur.header_offset < prev.data_offset + prev.compressed_size) {
      throw_input_error(label, ": entries ", quote_name(prev.name), " and ", quote_name(cur.name),
                        " overlap (local header at ", cur.header_offset, " lies inside [",
                        prev.header_offset, ", ", prev.data_offset + prev.compressed_size, "))");
    }
  }

  by_name_ = order;
  std::sort(by_name_.begin(), by_name_.end(),
            [&](size_t a, size_t b) { return entries_[a].name < entries_[b].name; });
  for (size_t k = 1; k < by_name_.size(); ++k) {
    if (entries_[by_name_[k - 1]].name == entries_[by_name_[k]].name) {
      throw_input_error(label, ": entry ", quote_name(entries_[by_name_[k]].name),
                        " appears twice in the central directory");
    }
  }
}

const ZipEntry* ZipArchive::find(std::string_view name) const {
  const auto it =
      std::lower_bound(by_name_.begin(), by_name_.end(), name,
                       [&](size_t i, std::string_view n) { return entries_[i].name < n; });
  if (it == by_name_.end() || entries_[*it].name != name) return nullptr;
  return &entries_[*it];
}

std::span<const std::byte> ZipArchive::stored_bytes(const ZipEntry& entry) const {
  if (entry.method != 0) {
    throw_input_error(label_, ": entry ", quote_name(entry.name), " is compressed (method ",
                      entry.method,
                      "); tensor records must be stored uncompressed, as torch.save writes them");
  }
  return {data_ + entry.data_offset, static_cast<size_t>(entry.compressed_size)};
}

std::vector<std::byte> ZipArchive::read(const ZipEntry& entry) const {
  const std::string where = str_cat(label_, ": entry ", quote_name(entry.name), ": ");
  if (entry.uncompressed_size > kMaxZipReadBytes) {
    throw_input_error(where, entry.uncompressed_size, " bytes, more than the ", kMaxZipReadBytes,
                      "-byte limit for records read into memory");
  }
  std::vector<std::byte> out(static_cast<size_t>(entry.uncompressed_size));
  if (entry.method == 0) {
    if (!out.empty()) std::memcpy(out.data(), data_ + entry.data_offset, out.size());
  } else {
    // Raw deflate, output capped at the declared size (checked <= 64 MiB at parse time).
    z_stream zs{};
    if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) throw_input_error(where, "cannot start inflate");
    uint64_t in_left = entry.compressed_size;
    const std::byte* in = data_ + entry.data_offset;
    zs.next_out = reinterpret_cast<Bytef*>(out.data());
    zs.avail_out = static_cast<uInt>(out.size());
    int rc = Z_OK;
    while (rc == Z_OK) {
      if (zs.avail_in == 0 && in_left > 0) {
        const uInt chunk = static_cast<uInt>(std::min<uint64_t>(in_left, 1u << 30));
        zs.next_in = const_cast<Bytef*>(reinterpret_cast<const Bytef*>(in));
        zs.avail_in = chunk;
        in += chunk;
        in_left -= chunk;
      }
      if (zs.avail_out == 0) {
        // Full: the stream must end exactly here. Probe with a one-byte scratch buffer.
        Bytef probe = 0;
        zs.next_out = &probe;
        zs.avail_out = 1;
        rc = inflate(&zs, Z_NO_FLUSH);
        if (zs.avail_out == 0) {
          inflateEnd(&zs);
          throw_input_error(where, "inflates to more than its declared ", out.size(),
                            " bytes (zip bomb or corrupt entry)");
        }
        break;
      }
      const uInt before_in = zs.avail_in;
      const uInt before_out = zs.avail_out;
      rc = inflate(&zs, Z_NO_FLUSH);
      if (rc == Z_BUF_ERROR && zs.avail_in == before_in && zs.avail_out == before_out) {
        break;  // no progress although input and room were offered: truncated stream
      }
      if (rc == Z_BUF_ERROR) rc = Z_OK;
    }
    const uint64_t produced = zs.total_out;
    const uint64_t leftover = zs.avail_in + in_left;
    inflateEnd(&zs);
    if (rc != Z_STREAM_END) {
      throw_input_error(where, "corrupt or truncated deflate stream (", produced, " of ",
                        out.size(), " bytes inflated)");
    }
    if (produced != out.size()) {
      throw_input_error(where, "inflates to ", produced, " bytes, the archive declares ",
                        out.size());
    }
    if (leftover != 0) {
      throw_input_error(where, leftover, " bytes of compressed data after the end of the stream");
    }
  }
  uLong crc = crc32(0L, Z_NULL, 0);
  const std::byte* p = out.data();
  for (size_t left = out.size(); left > 0;) {
    const uInt chunk = static_cast<uInt>(std::min<size_t>(left, 1u << 30));
    crc = crc32(crc, reinterpret_cast<const Bytef*>(p), chunk);
    p += chunk;
    left -= chunk;
  }
  if (static_cast<uint32_t>(crc) != entry.crc32) {
    throw_input_error(where, "CRC-32 mismatch (corrupt archive)");
  }
  return out;
}

}  // namespace vidax
