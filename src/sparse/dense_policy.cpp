// The dense policy: every head in one dense group (the DiT then takes its unchanged dense path).
#include <numeric>

#include "core/error.h"
#include "sparse/policy_registry.h"

namespace vidax::sparse {
namespace {

class DensePolicy final : public AttentionPolicy {
 public:
  std::string name() const override { return "dense"; }
  AttentionPlan plan(const AttentionCall& call) override {
    AttentionPlan p;
    HeadGroup g;
    g.heads.resize(static_cast<size_t>(call.heads));
    std::iota(g.heads.begin(), g.heads.end(), int64_t{0});
    g.dense = true;
    p.groups.push_back(std::move(g));
    return p;
  }
};

}  // namespace

std::unique_ptr<AttentionPolicy> make_dense_policy(std::string_view options) {
  if (!options.empty())
    throw_input_error("--attention dense: takes no options, got \"", options, "\"");
  return std::make_unique<DensePolicy>();
}

}  // namespace vidax::sparse
