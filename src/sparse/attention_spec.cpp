// make_attention_policy: parses `--attention` specs, including per-layer / per-step schedules:
//   SPEC     := ENTRY (';' ENTRY)*
//   ENTRY    := NAME[:OPTIONS] ['@' SELECTOR]
//   SELECTOR := COND (',' COND)*          every condition must hold
//   COND     := (layers | steps) '=' RANGE ('+' RANGE)*
//   RANGE    := N | N-M | N-              inclusive, 0-based; "N-" is open-ended
// A call uses the first entry whose selector matches it (an entry without one matches every
// call); a call no entry matches runs dense. Example: "dense@layers=0-1;dense@steps=0-4;
// window:18,24,24" is dense in the first two blocks and the first five steps, windowed elsewhere.
#include <charconv>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "sparse/attention_policy.h"
#include "sparse/policy_registry.h"

namespace vidax::sparse {
namespace {

struct Range {
  int64_t first = 0, last = 0;
};

struct Selector {
  std::vector<Range> layers, steps;  // empty: any
  std::string text;
  bool matches(const AttentionCall& c) const {
    auto in = [](const std::vector<Range>& rs, int64_t x) {
      if (rs.empty()) return true;
      for (const Range& r : rs)
        if (x >= r.first && x <= r.last) return true;
      return false;
    };
    return in(layers, c.layer) && in(steps, c.step);
  }
};

int64_t parse_int(std::string_view s, std::string_view part) {
  int64_t v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size() || v < 0)
    throw_input_error("--attention: bad range \"", part,
                      "\" (expected N, N-M or N- with non-negative integers)");
  return v;
}

std::vector<Range> parse_ranges(std::string_view s) {
  std::vector<Range> out;
  size_t at = 0;
  while (true) {
    const size_t end = s.find('+', at);
    const std::string_view r = s.substr(at, end == std::string_view::npos ? s.npos : end - at);
    const size_t dash = r.find('-');
    Range range;
    if (dash == std::string_view::npos) {
      range.first = range.last = parse_int(r, r);
    } else {
      range.first = parse_int(r.substr(0, dash), r);
      range.last = dash + 1 == r.size() ? std::numeric_limits<int64_t>::max()
                                        : parse_int(r.substr(dash + 1), r);
      if (range.last < range.first)
        throw_input_error("--attention: range \"", r, "\" ends before it starts");
    }
    out.push_back(range);
    if (end == std::string_view::npos) return out;
    at = end + 1;
  }
}

Selector parse_selector(std::string_view s) {
  Selector sel;
  sel.text = std::string(s);
  size_t at = 0;
  while (true) {
    const size_t end = s.find(',', at);
    const std::string_view cond = s.substr(at, end == std::string_view::npos ? s.npos : end - at);
    const size_t eq = cond.find('=');
    const std::string_view key = cond.substr(0, eq);
    if (eq == std::string_view::npos || (key != "layers" && key != "steps"))
      throw_input_error("--attention: bad selector \"", cond,
                        "\" (expected layers=RANGES or steps=RANGES, e.g. layers=0-1+28-29)");
    (key == "layers" ? sel.layers : sel.steps) = parse_ranges(cond.substr(eq + 1));
    if (end == std::string_view::npos) return sel;
    at = end + 1;
  }
}

std::unique_ptr<AttentionPolicy> make_one(std::string_view entry) {
  const size_t colon = entry.find(':');
  const std::string_view name = entry.substr(0, colon);
  const std::string_view options =
      colon == std::string_view::npos ? std::string_view{} : entry.substr(colon + 1);
  std::string known;
  for (const PolicyEntry& p : policy_registry()) {
    if (name == p.name) return p.make(options);
    known += known.empty() ? "" : " | ";
    known += p.syntax;
  }
  throw_input_error("--attention: unknown policy \"", name, "\" (expected ", known, ")");
}

class ScheduledPolicy final : public AttentionPolicy {
 public:
  struct Entry {
    std::unique_ptr<AttentionPolicy> policy;
    std::optional<Selector> selector;
  };
  explicit ScheduledPolicy(std::vector<Entry> entries) : entries_(std::move(entries)) {
    fallback_ = make_dense_policy({});
  }
  std::string name() const override {
    std::string s;
    for (const Entry& e : entries_) {
      if (!s.empty()) s += ';';
      s += e.policy->name();
      if (e.selector) s += "@" + e.selector->text;
    }
    return s;
  }
  AttentionPlan plan(const AttentionCall& call) override {
    for (Entry& e : entries_)
      if (!e.selector || e.selector->matches(call)) return e.policy->plan(call);
    return fallback_->plan(call);
  }

 private:
  std::vector<Entry> entries_;
  std::unique_ptr<AttentionPolicy> fallback_;
};

}  // namespace

std::unique_ptr<AttentionPolicy> make_attention_policy(const std::string& spec) {
  if (spec.empty()) throw_input_error("--attention: empty spec (expected e.g. dense)");
  std::vector<ScheduledPolicy::Entry> entries;
  const std::string_view s(spec);
  size_t at = 0;
  while (true) {
    const size_t end = s.find(';', at);
    const std::string_view entry = s.substr(at, end == std::string_view::npos ? s.npos : end - at);
    if (entry.empty()) throw_input_error("--attention: empty entry in \"", spec, "\"");
    const size_t sel = entry.find('@');
    ScheduledPolicy::Entry e;
    e.policy = make_one(entry.substr(0, sel));
    if (sel != std::string_view::npos) e.selector = parse_selector(entry.substr(sel + 1));
    entries.push_back(std::move(e));
    if (end == std::string_view::npos) break;
    at = end + 1;
  }
  if (entries.size() == 1 && !entries[0].selector) return std::move(entries[0].policy);
  return std::make_unique<ScheduledPolicy>(std::move(entries));
}

}  // namespace vidax::sparse
