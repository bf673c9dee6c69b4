#include "core/memory_usage.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace vidax {

size_t resident_bytes() {
  char buf[128];
  const int fd = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);  // "size resident shared ...", in pages
  ::close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  const char* p = std::strchr(buf, ' ');
  if (p == nullptr) return 0;
  return std::strtoull(p + 1, nullptr, 10) * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
}

size_t peak_resident_bytes() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return static_cast<size_t>(ru.ru_maxrss) * 1024;  // KiB on Linux
}

}  // namespace vidax
