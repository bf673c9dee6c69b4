#include "sparse/svg_policy.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/error.h"
#include "sparse/estimator_math.h"
#include "sparse/policies.h"
#include "sparse/policy_options.h"

namespace vidax::sparse {

SvgOptions parse_svg_options(std::string_view options) {
  PolicyOptions o("svg", options);
  SvgOptions s;
  s.density = o.number("density", s.density, 1e-6, 1.0);
  s.warmup = o.number("warmup", s.warmup, 0.0, 1.0);
  s.warmup_layers = o.number("warmup_layers", s.warmup_layers, 0.0, 1.0);
  s.samples = o.integer("samples", s.samples, 1, 1 << 20);
  s.block = o.integer("block", s.block, 1, 1 << 16);
  s.seed = static_cast<uint64_t>(o.integer("seed", 0, 0, INT64_MAX));
  s.route_every = o.integer("route_every", s.route_every, 1, 1 << 20);
  o.finish();
  return s;
}

TokenLayout svg_temporal_layout(const TokenGrid& grid, int64_t block) {
  validate_grid(grid, "svg temporal layout");
  const int64_t hw = grid.height * grid.width, F = grid.frames;
  TokenLayout l;
  l.perm.resize(static_cast<size_t>(grid.tokens()));
  for (int64_t s = 0; s < hw; ++s) l.perm[static_cast<size_t>(s)] = static_cast<int32_t>(s);
  for (int64_t s = 0; s < hw; ++s)
    for (int64_t f = 1; f < F; ++f)
      l.perm[static_cast<size_t>(hw + s * (F - 1) + (f - 1))] = static_cast<int32_t>(f * hw + s);
  l.blocks = BlockPartition::uniform(grid.tokens(), block);
  return l;
}

SvgBand svg_band_mask(const BlockPartition& blocks, int64_t anchor_tokens, double density) {
  const int64_t nb = blocks.blocks(), n = blocks.tokens();
  SvgBand band;
  band.mask = BlockMask(1, nb, nb);
  band.budget_pairs = std::llround(density * static_cast<double>(n) * static_cast<double>(n));
  auto pairs = [&](int64_t qb, int64_t kb) { return blocks.size(qb) * blocks.size(kb); };
  auto keep = [&](int64_t qb, int64_t kb) {
    if (band.mask.get(0, qb, kb) != TileClass::kSkip) return;
    band.mask.set(0, qb, kb, TileClass::kFull);
    band.kept_pairs += pairs(qb, kb);
  };
  // The anchor: key blocks that hold any of its tokens (a partial last block is kept whole).
  for (int64_t kb = 0; kb < nb && blocks.begin(kb) < anchor_tokens; ++kb)
    for (int64_t qb = 0; qb < nb; ++qb) keep(qb, kb);
  for (int64_t b = 0; b < nb; ++b) keep(b, b);  // a query always sees its own block
  band.full_diagonals = 1;
  for (int64_t delta = 1; delta < nb; ++delta) {
    // Tiles of diagonal `delta` not yet kept, ordered along the diagonal (both sides
    // interleaved so thinning stays symmetric).
    std::vector<std::pair<int64_t, int64_t>> tiles;
    int64_t add = 0;
    for (int64_t i = 0; i + delta < nb; ++i)
      for (const auto& t : {std::pair{i, i + delta}, std::pair{i + delta, i}})
        if (band.mask.get(0, t.first, t.second) == TileClass::kSkip) {
          tiles.push_back(t);
          add += pairs(t.first, t.second);
        }
    const int64_t left = band.budget_pairs - band.kept_pairs;
    if (add <= left) {
      for (const auto& t : tiles) keep(t.first, t.second);
      ++band.full_diagonals;
      continue;
    }
    // Balanced rounding: the count whose pair total is nearest the remaining budget, spread
    // evenly along the diagonal (tile i of c sits at floor((i + 0.5) * size / c)).
    const double mean_pairs = static_cast<double>(add) / static_cast<double>(tiles.size());
    const int64_t count = std::clamp<int64_t>(
        std::llround(static_cast<double>(std::max<int64_t>(left, 0)) / mean_pairs), 0,
        static_cast<int64_t>(tiles.size()));
    for (int64_t i = 0; i < count; ++i) {
      const auto& t = tiles[static_cast<size_t>((2 * i + 1) * static_cast<int64_t>(tiles.size()) /
                                                (2 * count))];
      keep(t.first, t.second);
    }
    band.edge_tiles = count;
    break;
  }
  band.mask.build_rows();
  return band;
}

SvgPolicy::SvgPolicy(const SvgOptions& options) : opt_(options) {}

std::string SvgPolicy::name() const {
  std::ostringstream s;
  s << "svg:density=" << opt_.density << ",warmup=" << opt_.warmup
    << ",warmup_layers=" << opt_.warmup_layers << ",samples=" << opt_.samples
    << ",block=" << opt_.block;
  if (opt_.seed) s << ",seed=" << opt_.seed;
  if (opt_.route_every > 1) s << ",route_every=" << opt_.route_every;
  return s.str();
}

bool SvgPolicy::warm_up(const AttentionCall& call) const {
  // As the reference: floor(share * count) leading steps / layers run dense.
  const auto dense_steps =
      static_cast<int64_t>(std::floor(opt_.warmup * static_cast<double>(call.steps)));
  const auto dense_layers =
      static_cast<int64_t>(std::floor(opt_.warmup_layers * static_cast<double>(call.layers)));
  return call.step < dense_steps || call.layer < dense_layers;
}

std::vector<int64_t> SvgPolicy::sample_rows(const AttentionCall& call) const {
  const int64_t n = call.grid.tokens();
  uint64_t state = mix64(opt_.seed ^ mix64(static_cast<uint64_t>(call.layer) * 1000003u +
                                           static_cast<uint64_t>(call.step) * 7919u +
                                           static_cast<uint64_t>(call.cfg_branch)));
  std::vector<int64_t> rows(static_cast<size_t>(opt_.samples));
  for (auto& r : rows) {
    state = mix64(state);
    r = static_cast<int64_t>(state % static_cast<uint64_t>(n));  // with replacement, as the repo
  }
  return rows;
}

const SvgPolicy::Masks& SvgPolicy::masks_for(const TokenGrid& grid) {
  auto& slot = cache_[{grid.frames, grid.height, grid.width}];
  if (!slot) {
    slot = std::make_unique<Masks>();
    const int64_t anchor = grid.height * grid.width;
    slot->layout[0] = frame_major_layout(grid, opt_.block);
    slot->layout[1] = svg_temporal_layout(grid, opt_.block);
    for (int kind = 0; kind < 2; ++kind) {
      slot->band[kind] = svg_band_mask(slot->layout[kind].blocks, anchor, opt_.density);
      if (slot->layout[kind].identity()) {
        slot->position[kind].resize(static_cast<size_t>(grid.tokens()));
        for (int64_t i = 0; i < grid.tokens(); ++i)
          slot->position[kind][static_cast<size_t>(i)] = static_cast<int32_t>(i);
      } else {
        slot->position[kind] = inverse_permutation(slot->layout[kind].perm);
      }
    }
  }
  return *slot;
}

AttentionPlan SvgPolicy::plan(const AttentionCall& call) {
  validate_call(call, "svg");
  AttentionPlan plan;
  if (warm_up(call)) {
    HeadGroup g;
    g.dense = true;
    for (int64_t h = 0; h < call.heads; ++h) g.heads.push_back(h);
    plan.groups.push_back(std::move(g));
    return plan;
  }
  const Masks& m = masks_for(call.grid);
  // Reuse the routing of an earlier step of the same (layer, branch, grid) within route_every.
  const std::array<int64_t, 5> route_key{call.layer, call.cfg_branch, call.grid.frames,
                                         call.grid.height, call.grid.width};
  auto cached = routes_.find(route_key);
  routed_ = opt_.route_every == 1 || cached == routes_.end() || call.step < cached->second.step ||
            call.step - cached->second.step >= opt_.route_every ||
            static_cast<int64_t>(cached->second.kinds.size()) != call.heads;
  if (!routed_) {
    kinds_ = cached->second.kinds;
    return grouped_plan(m, call.heads);
  }
  const std::vector<int64_t> rows = sample_rows(call);
  // Routing: the mean attention mass each candidate mask drops on the sampled rows. The
  // reference compares output MSE, which needs V; AttentionCall carries q and k only, and the
  // dropped mass bounds the output error (|o_mask - o| <= 2 * dropped * max |v|).
  errors_.assign(static_cast<size_t>(call.heads), {0.0, 0.0});
  kinds_.assign(static_cast<size_t>(call.heads), 0);
  const int64_t block = opt_.block;  // uniform partitions: block index = position / block
  const auto nr = static_cast<int64_t>(rows.size());
  const int64_t words = (nr + 63) / 64, n = call.grid.tokens();
  // Per kind, bitmap [tokens][words] over frame-major keys: bit i = key kept by sampled row i's
  // mask row (the same for every head).
  for (int kind = 0; kind < 2; ++kind) {
    auto& bits = keep_bits_[kind];
    bits.assign(static_cast<size_t>(n * words), 0);
    const auto& layout = m.layout[kind];
    for (int64_t i = 0; i < nr; ++i) {
      const int64_t r = rows[static_cast<size_t>(i)];
      const auto row = m.band[kind].mask.row(0, m.position[kind][static_cast<size_t>(r)] / block);
      const uint64_t bit = uint64_t{1} << (i % 64);
      for (const int32_t kb : row.key_blocks)
        for (int64_t q = layout.blocks.begin(kb);
             q < layout.blocks.begin(kb) + layout.blocks.size(kb); ++q)
          bits[static_cast<size_t>(layout.original(q) * words + i / 64)] |= bit;
    }
  }
  // The kept mass of every (head, kind, sampled row) on bf16-rounded q/k, the precision the
  // DiT's bf16 attention runs at (AMX tiles where present), in one pass over the keys.
  sampled_attention_mass_bf16(call, rows, {keep_bits_[0].data(), keep_bits_[1].data()}, mass_);
  for (int64_t h = 0; h < call.heads; ++h) {
    auto& e = errors_[static_cast<size_t>(h)];
    for (int kind = 0; kind < 2; ++kind) {
      double lost = 0;
      for (int64_t i = 0; i < nr; ++i)
        lost += 1.0 - mass_[static_cast<size_t>((h * 2 + kind) * nr + i)];
      e[static_cast<size_t>(kind)] = lost / static_cast<double>(nr);
    }
    kinds_[static_cast<size_t>(h)] = e[1] < e[0] ? 1 : 0;  // ties go spatial, as argmin does
  }
  routes_[route_key] = Route{call.step, kinds_};
  return grouped_plan(m, call.heads);
}

AttentionPlan SvgPolicy::grouped_plan(const Masks& m, int64_t heads) const {
  AttentionPlan plan;
  for (int kind = 0; kind < 2; ++kind) {
    HeadGroup g;
    for (int64_t h = 0; h < heads; ++h)
      if (kinds_[static_cast<size_t>(h)] == kind) g.heads.push_back(h);
    if (g.heads.empty()) continue;
    g.layout = m.layout[kind];
    g.mask = replicate_mask(m.band[kind].mask, static_cast<int64_t>(g.heads.size()));
    plan.groups.push_back(std::move(g));
  }
  return plan;
}

std::unique_ptr<AttentionPolicy> make_svg_policy(std::string_view options) {
  return std::make_unique<SvgPolicy>(parse_svg_options(options));
}

}  // namespace vidax::sparse
