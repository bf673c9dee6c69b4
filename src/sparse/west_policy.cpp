#include "sparse/west_policy.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <numeric>
#include <sstream>

#include "core/error.h"
#include "sparse/policies.h"
#include "sparse/policy_options.h"

namespace vidax::sparse {
namespace {

BlockShape parse_block(const std::string& s) {
  BlockShape b;
  int64_t* dst[3] = {&b.t, &b.h, &b.w};
  const char* p = s.data();
  const char* end = s.data() + s.size();
  for (int i = 0; i < 3; ++i) {
    const auto [next, ec] = std::from_chars(p, end, *dst[i]);
    if (ec != std::errc() || *dst[i] < 1 || *dst[i] > 4096 ||
        (i < 2 ? (next == end || *next != 'x') : next != end))
      throw_input_error("--attention west: block='", s, "' must be TxHxW with positive sizes");
    p = next + 1;
  }
  return b;
}

}  // namespace

WestOptions parse_west_options(std::string_view options) {
  WestOptions w;
  std::string_view tail;
  const size_t colon = options.rfind(':');
  if (colon != std::string_view::npos &&
      options.substr(colon + 1).find('=') != std::string_view::npos) {
    w.path = std::string(options.substr(0, colon));
    tail = options.substr(colon + 1);
  } else {
    w.path = std::string(options);
  }
  if (w.path.empty() || w.path.find('=') != std::string::npos)
    throw_input_error(
        "--attention west: expected west:FILE[:budget=..|density=..] with FILE a "
        "prior written by vidax calibrate");
  PolicyOptions o("west", tail);
  const bool has_density = o.has("density");
  if (has_density && o.has("budget"))
    throw_input_error("--attention west: give budget= or density=, not both");
  w.budget = o.number("budget", w.budget, 0.0, 1.0);
  w.density = o.number("density", 0.0, 1e-6, 1.0);
  if (!has_density) w.density = 0;
  w.block = parse_block(o.text("block", "2x8x8"));
  w.dense_layers = o.integer("dense_layers", w.dense_layers, 0, 1 << 16);
  o.finish();
  return w;
}

WestPolicy::WestPolicy(WestOptions options, WestPrior prior)
    : opt_(std::move(options)), prior_(std::move(prior)) {
  const int64_t c = prior_.cells(), units = prior_.layers * prior_.heads;
  keep_.assign(static_cast<size_t>(units), std::vector<uint8_t>(static_cast<size_t>(c * c), 0));
  for (int64_t u = 0; u < units; ++u)
    for (int64_t r = 0; r < c; ++r)
      keep_[static_cast<size_t>(u)][static_cast<size_t>(r * c + r)] = 1;
  if (opt_.density > 0) {
    // One global threshold: the top `target` cell pairs by mass (diagonals already in).
    const auto total = static_cast<int64_t>(prior_.mass.size());
    const auto target =
        static_cast<int64_t>(std::llround(opt_.density * static_cast<double>(total)));
    std::vector<int64_t> order(static_cast<size_t>(total));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return prior_.mass[static_cast<size_t>(a)] > prior_.mass[static_cast<size_t>(b)];
    });
    int64_t kept = units * c;
    for (size_t i = 0; i < order.size() && kept < target; ++i) {
      const int64_t idx = order[i];
      auto& k = keep_[static_cast<size_t>(idx / (c * c))][static_cast<size_t>(idx % (c * c))];
      if (!k) {
        k = 1;
        ++kept;
      }
    }
  } else {
    std::vector<int32_t> order(static_cast<size_t>(c));
    for (int64_t l = 0; l < prior_.layers; ++l)
      for (int64_t h = 0; h < prior_.heads; ++h)
        for (int64_t r = 0; r < c; ++r) {
          const float* row = prior_.row(l, h, r);
          auto& k = keep_[static_cast<size_t>(l * prior_.heads + h)];
          std::iota(order.begin(), order.end(), 0);
          std::stable_sort(order.begin(), order.end(),
                           [&](int32_t a, int32_t b) { return row[a] > row[b]; });
          double mass = row[r];  // the own cell is kept anyway
          for (const int32_t j : order) {
            if (mass >= 1.0 - opt_.budget) break;
            if (j == r) continue;
            k[static_cast<size_t>(r * c + j)] = 1;
            mass += row[j];
          }
        }
  }
}

std::string WestPolicy::name() const {
  std::ostringstream s;
  s << "west:" << opt_.path << ":";
  if (opt_.density > 0)
    s << "density=" << opt_.density;
  else
    s << "budget=" << opt_.budget;
  s << ",block=" << opt_.block.t << "x" << opt_.block.h << "x" << opt_.block.w;
  if (opt_.dense_layers) s << ",dense_layers=" << opt_.dense_layers;
  return s.str();
}

double WestPolicy::head_density(int64_t layer, int64_t head) const {
  const auto& k = keep(layer, head);
  return static_cast<double>(std::accumulate(k.begin(), k.end(), int64_t{0})) /
         static_cast<double>(k.size());
}

double WestPolicy::head_dropped(int64_t layer, int64_t head) const {
  const int64_t c = prior_.cells();
  const auto& k = keep(layer, head);
  double dropped = 0;
  for (int64_t r = 0; r < c; ++r) {
    const float* row = prior_.row(layer, head, r);
    for (int64_t j = 0; j < c; ++j)
      if (!k[static_cast<size_t>(r * c + j)]) dropped += row[j];
  }
  return dropped / static_cast<double>(c);
}

AttentionPlan WestPolicy::plan(const AttentionCall& call) {
  validate_call(call, "west");
  const int64_t model_heads = call.model_heads > 0 ? call.model_heads : call.heads;
  if (model_heads != prior_.heads || call.layers != prior_.layers)
    throw_input_error("--attention ", opt_.path, ": the prior was calibrated for ", prior_.layers,
                      " layers x ", prior_.heads, " heads, the model has ", call.layers, " x ",
                      model_heads);
  const std::array<int64_t, 4> key{call.grid.frames, call.grid.height, call.grid.width, call.layer};
  if (const auto it = cache_.find(key); it != cache_.end()) return it->second;
  AttentionPlan plan;
  HeadGroup g;
  for (int64_t h = 0; h < call.heads; ++h) g.heads.push_back(h);
  if (call.layer < opt_.dense_layers) {
    g.dense = true;
  } else {
    g.layout = block3d_layout(call.grid, opt_.block);
    const int64_t nb = g.layout.blocks.blocks(), c = prior_.cells();
    std::vector<int64_t> cell(static_cast<size_t>(nb));
    for (int64_t b = 0; b < nb; ++b)
      cell[static_cast<size_t>(b)] = west_block_cell(call.grid, prior_.grid, g.layout, b);
    g.mask = BlockMask(call.heads, nb, nb);
    for (int64_t h = 0; h < call.heads; ++h) {
      const auto& k = keep(call.layer, call.first_head + h);  // the prior's (model) head
      for (int64_t qb = 0; qb < nb; ++qb) {
        const uint8_t* row = &k[static_cast<size_t>(cell[static_cast<size_t>(qb)] * c)];
        for (int64_t kb = 0; kb < nb; ++kb)
          if (row[cell[static_cast<size_t>(kb)]] || kb == qb)
            g.mask.set(h, qb, kb, TileClass::kFull);
      }
    }
    g.mask.build_rows();
  }
  plan.groups.push_back(std::move(g));
  return cache_.emplace(key, std::move(plan)).first->second;
}

AttentionPlan WestRecorder::plan(const AttentionCall& call) {
  acc_.add(call);
  AttentionPlan plan;
  HeadGroup g;
  g.dense = true;
  for (int64_t h = 0; h < call.heads; ++h) g.heads.push_back(h);
  plan.groups.push_back(std::move(g));
  return plan;
}

std::unique_ptr<AttentionPolicy> make_west_policy(std::string_view options) {
  WestOptions o = parse_west_options(options);
  WestPrior prior = read_west_prior(o.path);
  return std::make_unique<WestPolicy>(std::move(o), std::move(prior));
}

}  // namespace vidax::sparse
