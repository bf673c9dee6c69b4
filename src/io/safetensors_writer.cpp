// Atomic safetensors writer: temporary file in the target folder, fsync, rename.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/safetensors.h"

namespace vidax {
namespace {

using nlohmann::json;

// Owns the temporary file until it has been renamed into place; otherwise closes and removes it,
// so a failed write never leaves debris next to the target.
class TempFile {
 public:
  TempFile(std::string target, std::string tmp) : target_(std::move(target)), tmp_(std::move(tmp)) {
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) fail("cannot create temporary file " + tmp_);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(tmp_.c_str());
  }

  void write_all(const void* data, size_t bytes) {
    const auto* p = static_cast<const char*>(data);
    while (bytes > 0) {
      const ssize_t n = ::write(fd_, p, bytes);
      if (n < 0) {
        if (errno == EINTR) continue;
        fail("cannot write " + tmp_);
      }
      p += n;
      bytes -= static_cast<size_t>(n);
    }
  }

  void commit() {
    if (::fsync(fd_) != 0) fail("cannot fsync " + tmp_);
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail("cannot close " + tmp_);
    if (::rename(tmp_.c_str(), target_.c_str()) != 0) fail("cannot rename " + tmp_ + " into place");
    committed_ = true;
    // Persist the rename itself; failing to sync the folder does not undo a complete file.
    std::string dir = std::filesystem::path(target_).parent_path().string();
    if (dir.empty()) dir = ".";
    const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd >= 0) {
      ::fsync(dir_fd);
      ::close(dir_fd);
    }
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    const int err = errno;
    throw_input_error(target_, ": ", what, ": ", std::strerror(err));
  }

  std::string target_;
  std::string tmp_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace

void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  std::set<std::string> seen;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (name == "__metadata__") {
      throw_input_error(path, ": '__metadata__' is reserved and cannot name a tensor");
    }
    if (!t.defined()) throw_input_error(path, ": tensor '", name, "' is undefined");
    if (!seen.insert(name).second) {
      throw_input_error(path, ": duplicate tensor name '", name, "' (names must be unique)");
    }
    const uint64_t bytes = t.nbytes();
    header[name] = {{"dtype", std::string(dtype_name(t.dtype()))},
                    {"shape", t.shape().to_vector()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;

  std::string text;
  try {
    text = header.dump();
  } catch (const json::exception& e) {  // names or metadata that are not valid UTF-8
    throw_input_error(path, ": cannot encode the header: ", e.what());
  }
  // Padding keeps the data section 8-byte aligned relative to the start of the file.
  text.append((8 - text.size() % 8) % 8, ' ');
  if (text.size() > kMaxSafetensorsHeaderBytes) {
    throw_input_error(path, ": header would be ", text.size(), " bytes, over the ",
                      kMaxSafetensorsHeaderBytes, "-byte limit readers accept");
  }
  unsigned char length_le[8];
  for (int i = 0; i < 8; ++i) {
    length_le[i] = static_cast<unsigned char>(static_cast<uint64_t>(text.size()) >> (8 * i));
  }

  TempFile out(path, path + ".tmp." + std::to_string(::getpid()));
  out.write_all(length_le, sizeof(length_le));
  out.write_all(text.data(), text.size());
  for (const auto& [name, t] : tensors) {
    if (t.nbytes() == 0) continue;
    const Tensor c = t.contiguous();  // one copy at a time, only for strided views
    out.write_all(c.raw_data(), c.nbytes());
  }
  out.commit();
}

}  // namespace vidax
