// The table of attention policies `--attention` can name, and the factories behind it. Each
// factory takes the text after "name:" (empty when there is none) and throws InputError naming
// the bad part. The registry itself lives in policy_registry.cpp (one row per policy), so adding
// a policy touches one line there and the policy's own files. Thread-safe (immutable data).
#pragma once

#include <memory>
#include <span>
#include <string_view>

#include "sparse/attention_policy.h"

namespace vidax::sparse {

using PolicyFactory = std::unique_ptr<AttentionPolicy> (*)(std::string_view options);

struct PolicyEntry {
  const char* name;    // "window"
  const char* syntax;  // "window:kt,kh,kw[:tile=bt,bh,bw][:sink]" for error messages and docs
  PolicyFactory make;
};

std::span<const PolicyEntry> policy_registry();

// Factories of the policies in this layer (one file each).
std::unique_ptr<AttentionPolicy> make_dense_policy(std::string_view options);
std::unique_ptr<AttentionPolicy> make_window_policy(std::string_view options);

}  // namespace vidax::sparse
