// Byte counts as people write them on a command line: "8GiB", "512MiB", "1.5GiB", "65536",
// "4 GB". Binary units KiB, MiB, GiB, TiB (1024^n; also K, M, G, T), decimal kB, MB, GB, TB
// (1000^n), B or nothing for bytes; case-insensitive except that "b"/"B" after a prefix is
// ignored. Thread-safe (pure).
#pragma once

#include <cstdint>
#include <string>

namespace vidax {

// Throws InputError naming `flag` unless `text` is a positive byte count below 2^62.
int64_t parse_byte_size(const std::string& text, const std::string& flag);

// "8.00 GiB", "512.0 MiB", "2.5 KiB", "100 B": for messages.
std::string format_bytes(double bytes);

}  // namespace vidax
