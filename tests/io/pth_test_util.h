// Builders for hand-made zip archives and pickle streams, so the .pth tests can produce both
// valid and precisely broken inputs without PyTorch.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace vidax::testing {

inline void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
inline uint64_t get_le(const std::string& s, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[at + i]);
  return v;
}
inline void set_le(std::string& s, size_t at, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) s[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

// Raw deflate (no zlib header), as zip method 8 stores it.
inline std::string deflate_raw(const std::string& data) {
  z_stream zs{};
  deflateInit2(&zs, 9, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&zs, data.size()), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

struct ZipItem {
  std::string name;
  std::string data;  // uncompressed content
  bool deflate = false;
  uint16_t flags = 0;
};

// A plain (non-ZIP64) zip archive; records in the given order, no data descriptors.
inline std::string build_zip(const std::vector<ZipItem>& items) {
  std::string out, cd;
  for (const ZipItem& it : items) {
    const std::string payload = it.deflate ? deflate_raw(it.data) : it.data;
    const uint32_t crc = static_cast<uint32_t>(crc32(
        0, reinterpret_cast<const Bytef*>(it.data.data()), static_cast<uInt>(it.data.size())));
    const uint64_t offset = out.size();
    put_le(out, 0x04034b50, 4);
    put_le(out, 20, 2);
    put_le(out, it.flags, 2);
    put_le(out, it.deflate ? 8 : 0, 2);
    put_le(out, 0, 4);
    put_le(out, crc, 4);
    put_le(out, payload.size(), 4);
    put_le(out, it.data.size(), 4);
    put_le(out, it.name.size(), 2);
    put_le(out, 0, 2);
    out += it.name;
    out += payload;
    put_le(cd, 0x02014b50, 4);
    put_le(cd, 20, 2);
    put_le(cd, 20, 2);
    put_le(cd, it.flags, 2);
    put_le(cd, it.deflate ? 8 : 0, 2);
    put_le(cd, 0, 4);
    put_le(cd, crc, 4);
    put_le(cd, payload.size(), 4);
    put_le(cd, it.data.size(), 4);
    put_le(cd, it.name.size(), 2);
    put_le(cd, 0, 2);
    put_le(cd, 0, 2);
    put_le(cd, 0, 2);
    put_le(cd, 0, 2);
    put_le(cd, 0, 4);
    put_le(cd, offset, 4);
    cd += it.name;
  }
  const uint64_t cd_offset = out.size();
  out += cd;
  put_le(out, 0x06054b50, 4);
  put_le(out, 0, 4);
  put_le(out, items.size(), 2);
  put_le(out, items.size(), 2);
  put_le(out, cd.size(), 4);
  put_le(out, cd_offset, 4);
  put_le(out, 0, 2);
  return out;
}

// Offset of the central-directory header of `name` (the first one), or npos.
inline size_t central_header(const std::string& zip, std::string_view name) {
  for (size_t p = 0; p + 46 <= zip.size(); ++p) {
    if (get_le(zip, p, 4) == 0x02014b50 && get_le(zip, p + 28, 2) == name.size() &&
        zip.compare(p + 46, name.size(), name) == 0) {
      return p;
    }
  }
  return std::string::npos;
}
// Offset of the local header of `name`, or npos.
inline size_t local_header(const std::string& zip, std::string_view name) {
  for (size_t p = 0; p + 30 <= zip.size(); ++p) {
    if (get_le(zip, p, 4) == 0x04034b50 && get_le(zip, p + 26, 2) == name.size() &&
        zip.compare(p + 30, name.size(), name) == 0) {
      return p;
    }
  }
  return std::string::npos;
}

// --- pickle pieces (protocol 2 opcodes) ---
namespace pk {
inline std::string op(unsigned char c) { return std::string(1, static_cast<char>(c)); }
inline std::string str(std::string_view s) {
  std::string out = op('X');
  put_le(out, s.size(), 4);
  out += s;
  return out;
}
inline std::string int1(uint8_t v) { return op('K') + op(v); }
inline std::string global(std::string_view module, std::string_view name) {
  return op('c') + std::string(module) + "\n" + std::string(name) + "\n";
}
inline std::string ordered_dict() {
  return global("collections", "OrderedDict") + op(')') + op('R');
}
inline std::string tuple(const std::vector<std::string>& items) {
  std::string out = op('(');
  for (const std::string& i : items) out += i;
  return out + op('t');
}
inline std::string persid(std::string_view type, std::string_view key, uint8_t numel) {
  return tuple({str("storage"), global("torch", type), str(key), str("cpu"), int1(numel)}) +
         op('Q');
}
// _rebuild_tensor_v2(storage, offset, size, stride, False, OrderedDict()).
inline std::string tensor(std::string_view type, std::string_view key, uint8_t numel,
                          uint8_t offset, const std::vector<uint8_t>& sizes,
                          const std::vector<uint8_t>& strides) {
  std::vector<std::string> sz, st;
  for (uint8_t s : sizes) sz.push_back(int1(s));
  for (uint8_t s : strides) st.push_back(int1(s));
  return global("torch._utils", "_rebuild_tensor_v2") +
         tuple({persid(type, key, numel), int1(offset), tuple(sz), tuple(st), op(0x89),
                ordered_dict()}) +
         op('R');
}
// PROTO 2, OrderedDict {name: value...}, STOP.
inline std::string state_dict(const std::vector<std::pair<std::string, std::string>>& items) {
  std::string out = op(0x80) + op(2) + ordered_dict() + op('(');
  for (const auto& [k, v] : items) out += str(k) + v;
  return out + op('u') + op('.');
}
}  // namespace pk

// A torch-layout archive: archive/data.pkl + the given records under archive/data/.
inline std::string make_pth(const std::string& pickle,
                            const std::vector<std::pair<std::string, std::string>>& records,
                            bool deflate_pickle = false) {
  std::vector<ZipItem> items{{"archive/data.pkl", pickle, deflate_pickle, 0}};
  for (const auto& [key, data] : records) items.push_back({"archive/data/" + key, data, false, 0});
  items.push_back({"archive/version", "3\n", false, 0});
  return build_zip(items);
}

inline std::string floats_bytes(const std::vector<float>& v) {
  std::string out(v.size() * 4, '\0');
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

}  // namespace vidax::testing
