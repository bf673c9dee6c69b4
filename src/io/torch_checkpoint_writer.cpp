// write_torch_checkpoint: the layout torch.save produces (zip, stored records aligned to 64
// bytes, pickle protocol 2 with _rebuild_tensor_v2 and persistent storage ids), written
// atomically. Small enough to keep beside its reader's header; the zip framing is local here.
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <string_view>

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/torch_checkpoint.h"
#include "io/torch_pickle.h"

namespace vidax {
namespace {

constexpr uint64_t kSat32 = 0xffffffffu;
constexpr size_t kAlign = 64;  // torch aligns every record's data to 64 bytes
constexpr uint16_t kUtf8Flag = 0x0800;

void put16(std::string& out, uint64_t v) {
  for (int i = 0; i < 2; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put32(std::string& out, uint64_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// --- pickle (protocol 2, the subset torch.save uses) ---
class PickleWriter {
 public:
  std::string bytes;

  void op(uint8_t code) { bytes.push_back(static_cast<char>(code)); }
  void global(std::string_view module, std::string_view name) {
    op('c');
    bytes.append(module).append("\n").append(name).append("\n");
  }
  void str(std::string_view s) {
    op('X');
    put32(bytes, s.size());
    bytes.append(s);
  }
  void integer(int64_t v) {
    if (v >= 0 && v < 256) {
      op('K');
      bytes.push_back(static_cast<char>(v));
    } else if (v >= 0 && v < 65536) {
      op('M');
      put16(bytes, static_cast<uint64_t>(v));
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
      op('J');
      put32(bytes, static_cast<uint64_t>(static_cast<uint32_t>(static_cast<int32_t>(v))));
    } else {
      op(0x8a);  // LONG1, 8 bytes two's complement
      op(8);
      put64(bytes, static_cast<uint64_t>(v));
    }
  }
  void int_tuple(std::span<const int64_t> values) {
    op('(');
    for (int64_t v : values) integer(v);
    op('t');
  }
  void empty_ordered_dict() {
    global("collections", "OrderedDict");
    op(')');
    op('R');
  }
};

std::string make_pickle(const std::vector<std::pair<std::string, Tensor>>& tensors) {
  PickleWriter w;
  w.op(0x80);
  w.op(2);
  w.empty_ordered_dict();
  constexpr size_t kBatch = 1000;  // as Python's pickler batches SETITEMS
  for (size_t start = 0; start < tensors.size(); start += kBatch) {
    w.op('(');
    for (size_t i = start; i < std::min(tensors.size(), start + kBatch); ++i) {
      const Tensor& t = tensors[i].second;
      w.str(tensors[i].first);
      w.global("torch._utils", "_rebuild_tensor_v2");
      w.op('(');
      // Persistent id ('storage', torch.<X>Storage, key, location, numel).
      w.op('(');
      w.str("storage");
      w.global("torch", torch_storage_name(t.dtype()));
      w.str(std::to_string(i));
      w.str("cpu");
      w.integer(t.numel());
      w.op('t');
      w.op('Q');
      w.integer(0);  // storage_offset
      w.int_tuple(t.shape().dims());
      std::vector<int64_t> strides(static_cast<size_t>(t.rank()));
      int64_t s = 1;
      for (int d = t.rank() - 1; d >= 0; --d) {
        strides[static_cast<size_t>(d)] = s;
        s *= t.dim(d);
      }
      w.int_tuple(strides);
      w.op(0x89);              // requires_grad = False
      w.empty_ordered_dict();  // backward_hooks
      w.op('t');
      w.op('R');
    }
    w.op('u');
  }
  w.op('.');
  return w.bytes;
}

// --- zip ---
struct Record {
  std::string name;
  uint64_t size = 0;
  uint32_t crc = 0;
  uint64_t header_offset = 0;
};

uint32_t crc_of(const void* data, size_t size) {
  uLong crc = crc32(0L, Z_NULL, 0);
  const auto* p = static_cast<const Bytef*>(data);
  while (size > 0) {
    const uInt chunk = static_cast<uInt>(std::min<size_t>(size, 1u << 30));
    crc = crc32(crc, p, chunk);
    p += chunk;
    size -= chunk;
  }
  return static_cast<uint32_t>(crc);
}

class ZipWriter {
 public:
  ZipWriter(AtomicFile& out, bool force_zip64) : out_(out), force_zip64_(force_zip64) {}

  void add(const std::string& name, const void* data, uint64_t size) {
    Record r{name, size, crc_of(data, static_cast<size_t>(size)), out_.written()};
    const bool zip64 = force_zip64_ || size >= kSat32;
    std::string h;
    put32(h, 0x04034b50);
    put16(h, zip64 ? 45 : 20);
    put16(h, kUtf8Flag);
    put16(h, 0);  // stored
    put32(h, 0);  // DOS time and date
    put32(h, r.crc);
    put32(h, zip64 ? kSat32 : size);
    put32(h, zip64 ? kSat32 : size);
    put16(h, name.size());
    std::string extra;
    if (zip64) {
      put16(extra, 0x0001);
      put16(extra, 16);
      put64(extra, size);
      put64(extra, size);
    }
    // Pad with an unregistered extra field ("FB", as torch does) so the data starts on a
    // 64-byte boundary; a padding field needs at least its 4-byte header.
    const uint64_t base = r.header_offset + h.size() + 2 + name.size() + extra.size();
    uint64_t pad = (kAlign - base % kAlign) % kAlign;
    if (pad != 0 && pad < 4) pad += kAlign;
    if (pad != 0) {
      put16(extra, 0x4246);
      put16(extra, pad - 4);
      extra.append(pad - 4, 'Z');
    }
    put16(h, extra.size());
    h += name;
    h += extra;
    out_.write_all(h.data(), h.size());
    if (size > 0) out_.write_all(data, static_cast<size_t>(size));
    records_.push_back(std::move(r));
  }

  void finish() {
    const uint64_t cd_offset = out_.written();
    std::string cd;
    bool need_zip64 = force_zip64_ || records_.size() >= 0xffff;
    for (const Record& r : records_) {
      const bool big_size = force_zip64_ || r.size >= kSat32;
      const bool big_offset = force_zip64_ || r.header_offset >= kSat32;
      need_zip64 = need_zip64 || big_size || big_offset;
      std::string extra;
      if (big_size || big_offset) {
        put16(extra, 0x0001);
        put16(extra, (big_size ? 16 : 0) + (big_offset ? 8 : 0));
        if (big_size) {
          put64(extra, r.size);
          put64(extra, r.size);
        }
        if (big_offset) put64(extra, r.header_offset);
      }
      put32(cd, 0x02014b50);
      put16(cd, 45);  // made by
      put16(cd, extra.empty() ? 20 : 45);
      put16(cd, kUtf8Flag);
      put16(cd, 0);
      put32(cd, 0);
      put32(cd, r.crc);
      put32(cd, big_size ? kSat32 : r.size);
      put32(cd, big_size ? kSat32 : r.size);
      put16(cd, r.name.size());
      put16(cd, extra.size());
      put16(cd, 0);  // comment
      put16(cd, 0);  // disk
      put16(cd, 0);  // internal attributes
      put32(cd, 0);  // external attributes
      put32(cd, big_offset ? kSat32 : r.header_offset);
      cd += r.name;
      cd += extra;
    }
    const uint64_t cd_size = cd.size();
    need_zip64 = need_zip64 || cd_offset >= kSat32 || cd_size >= kSat32;
    std::string tail;
    if (need_zip64) {
      const uint64_t z64_offset = cd_offset + cd_size;
      put32(tail, 0x06064b50);
      put64(tail, 44);  // size of the rest of this record
      put16(tail, 45);
      put16(tail, 45);
      put32(tail, 0);
      put32(tail, 0);
      put64(tail, records_.size());
      put64(tail, records_.size());
      put64(tail, cd_size);
      put64(tail, cd_offset);
      put32(tail, 0x07064b50);  // locator
      put32(tail, 0);
      put64(tail, z64_offset);
      put32(tail, 1);
    }
    // Forced ZIP64 saturates every field so readers must take the ZIP64 values.
    const bool sat = force_zip64_;
    put32(tail, 0x06054b50);
    put16(tail, 0);
    put16(tail, 0);
    const uint64_t n = records_.size();
    put16(tail, sat || n >= 0xffff ? 0xffff : n);
    put16(tail, sat || n >= 0xffff ? 0xffff : n);
    put32(tail, sat || cd_size >= kSat32 ? kSat32 : cd_size);
    put32(tail, sat || cd_offset >= kSat32 ? kSat32 : cd_offset);
    put16(tail, 0);
    out_.write_all(cd.data(), cd.size());
    out_.write_all(tail.data(), tail.size());
  }

 private:
  AtomicFile& out_;
  bool force_zip64_;
  std::vector<Record> records_;
};

}  // namespace

void write_torch_checkpoint(const std::string& path,
                            const std::vector<std::pair<std::string, Tensor>>& tensors,
                            const TorchWriteOptions& options) {
  const std::string& prefix = options.prefix;
  if (prefix.empty() || prefix.find_first_of("/\\") != std::string::npos || prefix == "." ||
      prefix == "..") {
    throw_input_error(path, ": archive folder name '", prefix, "' must be a plain name");
  }
  std::set<std::string> seen;
  for (const auto& [name, t] : tensors) {
    if (!t.defined()) throw_input_error(path, ": tensor '", name, "' is undefined");
    if (!seen.insert(name).second) {
      throw_input_error(path, ": duplicate tensor name '", name, "' (names must be unique)");
    }
  }
  const std::string pickle = make_pickle(tensors);

  AtomicFile out(path);
  ZipWriter zip(out, options.force_zip64);
  zip.add(prefix + "/data.pkl", pickle.data(), pickle.size());
  zip.add(prefix + "/byteorder", "little", 6);
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor c = tensors[i].second.contiguous();  // one copy at a time, only for views
    zip.add(prefix + "/data/" + std::to_string(i), c.raw_data(), c.nbytes());
  }
  zip.add(prefix + "/version", "3\n", 2);
  zip.finish();
  out.commit();
}

}  // namespace vidax
