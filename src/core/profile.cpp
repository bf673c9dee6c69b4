#include "core/profile.h"

#include <algorithm>
#include <map>

namespace vidax::profile {
namespace {

bool g_enabled = false;
std::map<std::string, std::pair<double, long>>& buckets() {
  static std::map<std::string, std::pair<double, long>> b;
  return b;
}

}  // namespace

void set_enabled(bool on) { g_enabled = on; }
bool enabled() { return g_enabled; }
void reset() { buckets().clear(); }

void add(const char* bucket, double seconds) {
  auto& b = buckets()[bucket];
  b.first += seconds;
  b.second += 1;
}

std::vector<std::pair<std::string, std::pair<double, long>>> snapshot() {
  std::vector<std::pair<std::string, std::pair<double, long>>> v(buckets().begin(),
                                                                 buckets().end());
  std::sort(v.begin(), v.end(),
            [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  return v;
}

}  // namespace vidax::profile
