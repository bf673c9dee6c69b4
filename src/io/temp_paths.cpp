// Fixed-slot registry of temporaries and the async-signal-safe cleanup handler.
#include "io/temp_paths.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "core/error.h"

namespace vidax {
namespace {

constexpr int kSlots = 32;
constexpr size_t kPathCapacity = 4096;  // PATH_MAX on Linux, terminating NUL included
constexpr size_t kPrefixCapacity = 256;
constexpr size_t kSuffixCapacity = 64;
constexpr int kMaxDigits = 18;

enum SlotState : int { kFree = 0, kFilling = 1, kFile = 2, kFolder = 3 };

// Plain arrays, written only while the slot is kFilling (owned by one registering thread) and
// published by the release store of `state`; the handler reads them after an acquire load.
struct Slot {
  std::atomic<int> state{kFree};
  std::atomic<int64_t> count{0};
  int digits = 0;
  char path[kPathCapacity] = {};
  char prefix[kPrefixCapacity] = {};
  char suffix[kSuffixCapacity] = {};
};

Slot g_slots[kSlots];
static_assert(std::atomic<int>::is_always_lock_free && std::atomic<int64_t>::is_always_lock_free,
              "the signal handler needs lock-free atomics");

int claim_slot(const std::string& path) {
  if (path.empty() || path.size() >= kPathCapacity)
    throw_input_error("output path '", path, "': expected 1 to ", kPathCapacity - 1,
                      " bytes for its temporary name, got ", path.size());
  for (int i = 0; i < kSlots; ++i) {
    int expected = kFree;
    if (g_slots[i].state.compare_exchange_strong(expected, kFilling, std::memory_order_acquire)) {
      std::memcpy(g_slots[i].path, path.c_str(), path.size() + 1);
      g_slots[i].count.store(0, std::memory_order_relaxed);
      return i;
    }
  }
  throw_input_error("output ", path, ": more than ", kSlots,
                    " outputs are being written at once (temporary registry full)");
}

// Appends `text` to buf[len..cap) without overflowing; returns false when it does not fit.
bool append(char* buf, size_t& len, size_t cap, const char* text) {
  const size_t n = std::strlen(text);
  if (len + n + 1 > cap) return false;
  std::memcpy(buf + len, text, n + 1);
  len += n;
  return true;
}

// Zero-padded decimal, async-signal-safe (no printf).
bool append_index(char* buf, size_t& len, size_t cap, int64_t value, int digits) {
  char tmp[24];
  int n = 0;
  do {
    tmp[n++] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value > 0 && n < 20);
  while (n < digits) tmp[n++] = '0';
  if (len + static_cast<size_t>(n) + 1 > cap) return false;
  for (int i = 0; i < n; ++i) buf[len + static_cast<size_t>(i)] = tmp[n - 1 - i];
  len += static_cast<size_t>(n);
  buf[len] = '\0';
  return true;
}

void remove_folder_slot(const Slot& slot) noexcept {
  char name[kPathCapacity + kPrefixCapacity + kSuffixCapacity + 32];
  const int64_t count = slot.count.load(std::memory_order_acquire);
  for (int64_t i = 0; i < count; ++i) {
    size_t len = 0;
    name[0] = '\0';
    if (!append(name, len, sizeof(name), slot.path) || !append(name, len, sizeof(name), "/") ||
        !append(name, len, sizeof(name), slot.prefix) ||
        !append_index(name, len, sizeof(name), i, slot.digits) ||
        !append(name, len, sizeof(name), slot.suffix))
      continue;
    ::unlink(name);
  }
  ::rmdir(slot.path);
}

extern "C" void temp_cleanup_signal_handler(int signo) {
  const int saved_errno = errno;
  remove_registered_temp_paths();
  // Die of the same signal with its default action: the signal is blocked while this handler
  // runs, so the raised one is delivered (and kills) as soon as the handler returns.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(signo, &dfl, nullptr);
  ::raise(signo);
  errno = saved_errno;
}

std::atomic<int> g_interrupt_requested{0};  // lock-free: set in a handler, read by the run
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void graceful_interrupt_handler(int signo) {
  if (g_interrupt_requested.exchange(1) != 0) {  // the second Ctrl-C: clean up and die
    temp_cleanup_signal_handler(signo);
    return;
  }
  const int saved_errno = errno;
  static const char kMessage[] =
      "\nvidax: interrupted: finishing the frames done so far (Ctrl-C again to abort)\n";
  const ssize_t unused = ::write(2, kMessage, sizeof kMessage - 1);
  (void)unused;
  errno = saved_errno;
}

}  // namespace

void install_graceful_interrupt() {
  struct sigaction old {};
  ::sigaction(SIGINT, nullptr, &old);
  if (old.sa_handler == SIG_IGN) return;
  struct sigaction action {};
  action.sa_handler = graceful_interrupt_handler;
  action.sa_flags = SA_RESTART;  // the run goes on after the first one: restart its system calls
  sigemptyset(&action.sa_mask);
  sigaddset(&action.sa_mask, SIGINT);
  sigaddset(&action.sa_mask, SIGTERM);
  sigaddset(&action.sa_mask, SIGHUP);
  ::sigaction(SIGINT, &action, nullptr);
}

bool interrupt_requested() { return g_interrupt_requested.load() != 0; }

TempPathGuard TempPathGuard::file(const std::string& path) {
  const int slot = claim_slot(path);
  g_slots[slot].state.store(kFile, std::memory_order_release);
  return TempPathGuard(slot);
}

TempPathGuard TempPathGuard::numbered_folder(const std::string& folder, const std::string& prefix,
                                             const std::string& suffix, int digits) {
  VIDAX_CHECK(prefix.size() < kPrefixCapacity && suffix.size() < kSuffixCapacity &&
                  prefix.find('/') == std::string::npos && digits >= 1 && digits <= kMaxDigits,
              "bad numbered-folder pattern '", prefix, "' / '", suffix, "' / ", digits);
  const int slot = claim_slot(folder);
  Slot& s = g_slots[slot];
  std::memcpy(s.prefix, prefix.c_str(), prefix.size() + 1);
  std::memcpy(s.suffix, suffix.c_str(), suffix.size() + 1);
  s.digits = digits;
  s.state.store(kFolder, std::memory_order_release);
  return TempPathGuard(slot);
}

TempPathGuard::TempPathGuard(TempPathGuard&& other) noexcept : slot_(other.slot_) {
  other.slot_ = -1;
}

TempPathGuard& TempPathGuard::operator=(TempPathGuard&& other) noexcept {
  if (this != &other) {
    release();
    slot_ = other.slot_;
    other.slot_ = -1;
  }
  return *this;
}

TempPathGuard::~TempPathGuard() { release(); }

void TempPathGuard::set_file_count(int64_t count) {
  VIDAX_CHECK(slot_ >= 0 && g_slots[slot_].state.load() == kFolder,
              "set_file_count on a guard that is not a numbered folder");
  g_slots[slot_].count.store(count, std::memory_order_release);
}

void TempPathGuard::release() {
  if (slot_ < 0) return;
  g_slots[slot_].state.store(kFree, std::memory_order_release);
  slot_ = -1;
}

void install_temp_cleanup_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (const int signo : {SIGINT, SIGTERM, SIGHUP}) {
      struct sigaction old {};
      ::sigaction(signo, nullptr, &old);
      if (old.sa_handler == SIG_IGN) continue;  // e.g. nohup: keep ignoring
      struct sigaction action {};
      action.sa_handler = temp_cleanup_signal_handler;
      sigemptyset(&action.sa_mask);
      // Block the other two while cleaning up so two handlers never run at once.
      sigaddset(&action.sa_mask, SIGINT);
      sigaddset(&action.sa_mask, SIGTERM);
      sigaddset(&action.sa_mask, SIGHUP);
      ::sigaction(signo, &action, nullptr);
    }
  });
}

void remove_registered_temp_paths() noexcept {
  for (const Slot& slot : g_slots) {
    const int state = slot.state.load(std::memory_order_acquire);
    if (state == kFile) {
      ::unlink(slot.path);
    } else if (state == kFolder) {
      remove_folder_slot(slot);
    }
  }
}

size_t registered_temp_path_count() {
  size_t n = 0;
  for (const Slot& slot : g_slots) {
    const int state = slot.state.load(std::memory_order_acquire);
    if (state == kFile || state == kFolder) ++n;
  }
  return n;
}

std::string temp_path_for(const std::string& path) {
  std::string base = path;
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  return str_cat(base, ".tmp.", ::getpid());
}

namespace {

[[noreturn]] void fail_errno(const std::string& path, const char* what) {
  const int err = errno;
  throw_input_error(path, ": ", what, ": ", std::strerror(err));
}

}  // namespace

void write_whole_file(const std::string& path, std::span<const uint8_t> bytes, bool sync) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail_errno(path, "cannot create file");
  const uint8_t* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      errno = err;
      fail_errno(path, "cannot write");
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (sync && ::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    errno = err;
    fail_errno(path, "cannot fsync");
  }
  if (::close(fd) != 0) fail_errno(path, "cannot close");
}

void sync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail_errno(path, "cannot open for fsync");
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    errno = err;
    fail_errno(path, "cannot fsync");
  }
  ::close(fd);
}

void rename_into_place(const std::string& temp, const std::string& target) {
  if (::rename(temp.c_str(), target.c_str()) != 0) {
    const int err = errno;
    throw_input_error(target, ": cannot rename the temporary ", temp,
                      " into place: ", std::strerror(err));
  }
  // (Not `folder = "."` on an empty string: GCC 12 warns a false -Wrestrict on that.)
  const std::filesystem::path parent = std::filesystem::path(target).parent_path();
  const std::string folder = parent.empty() ? std::string(".") : parent.string();
  const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

}  // namespace vidax
