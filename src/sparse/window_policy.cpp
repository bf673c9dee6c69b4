#include "sparse/window_policy.h"

#include <algorithm>
#include <charconv>
#include <memory>
#include <numeric>
#include <vector>

#include "core/error.h"
#include "sparse/policy_registry.h"

namespace vidax::sparse {
namespace {

// "a,b,c" -> BlockShape with positive entries; `what` names the part in errors.
BlockShape parse_triple(std::string_view s, const char* what) {
  int64_t v[3];
  size_t at = 0;
  for (int i = 0; i < 3; ++i) {
    const size_t end = i < 2 ? s.find(',', at) : s.size();
    if (end == std::string_view::npos) break;
    const std::string_view part = s.substr(at, end - at);
    const auto [p, ec] = std::from_chars(part.data(), part.data() + part.size(), v[i]);
    if (ec != std::errc() || p != part.data() + part.size() || v[i] <= 0)
      throw_input_error("--attention window: ", what, " \"", s,
                        "\" must be three positive integers t,h,w");
    at = end + 1;
    if (i == 2) return {v[0], v[1], v[2]};
  }
  throw_input_error("--attention window: ", what, " \"", s,
                    "\" must be three positive integers t,h,w");
}

class WindowPolicy final : public AttentionPolicy {
 public:
  explicit WindowPolicy(WindowSpec spec) : spec_(spec) {}
  std::string name() const override { return spec_.str(); }
  AttentionPlan plan(const AttentionCall& call) override {
    if (!(cached_grid_ == call.grid) || cached_heads_ != call.heads) {
      cached_ = window_group(call.grid, call.heads, spec_);
      cached_grid_ = call.grid;
      cached_heads_ = call.heads;
    }
    AttentionPlan p;
    p.groups.push_back(cached_);
    return p;
  }

 private:
  WindowSpec spec_;
  HeadGroup cached_;
  TokenGrid cached_grid_;
  int64_t cached_heads_ = 0;
};

}  // namespace

std::string WindowSpec::str() const {
  std::string s = "window:";
  s += std::to_string(window.t) + "," + std::to_string(window.h) + "," + std::to_string(window.w);
  s += ":tile=";
  s += std::to_string(tile.t) + "," + std::to_string(tile.h) + "," + std::to_string(tile.w);
  if (sink) s += ":sink";
  return s;
}

WindowSpec parse_window_spec(std::string_view options) {
  if (options.empty())
    throw_input_error(
        "--attention window: expected window:kt,kh,kw[:tile=bt,bh,bw][:sink] (latent tokens)");
  WindowSpec spec;
  size_t at = options.find(':');
  spec.window = parse_triple(options.substr(0, at), "window");
  while (at != std::string_view::npos) {
    const size_t next = options.find(':', at + 1);
    const std::string_view part = options.substr(
        at + 1, next == std::string_view::npos ? std::string_view::npos : next - at - 1);
    if (part == "sink") {
      spec.sink = true;
    } else if (part.substr(0, 5) == "tile=") {
      spec.tile = parse_triple(part.substr(5), "tile");
    } else {
      throw_input_error("--attention window: unknown option \"", part,
                        "\" (expected tile=bt,bh,bw or sink)");
    }
    at = next;
  }
  if (spec.window.t % spec.tile.t || spec.window.h % spec.tile.h || spec.window.w % spec.tile.w)
    throw_input_error("--attention window: the tile ", spec.tile.str(), " must divide the window ",
                      spec.window.str(), " along each axis");
  return spec;
}

std::pair<int64_t, int64_t> window_tile_range(int64_t c, int64_t n, int64_t w) {
  if (w >= n) return {0, n};
  const int64_t s = std::clamp<int64_t>(c - (w - 1) / 2, 0, n - w);
  return {s, s + w};
}

HeadGroup window_group(const TokenGrid& grid, int64_t heads, const WindowSpec& spec) {
  HeadGroup g;
  g.heads.resize(static_cast<size_t>(heads));
  std::iota(g.heads.begin(), g.heads.end(), int64_t{0});
  g.layout = block3d_layout(grid, spec.tile);
  const auto [nt, nh, nw] = g.layout.block_grid;
  const int64_t nb = nt * nh * nw;
  const int64_t wt = spec.window.t / spec.tile.t, wh = spec.window.h / spec.tile.h,
                ww = spec.window.w / spec.tile.w;
  g.mask = BlockMask(heads, nb, nb);
  for (int64_t ct = 0; ct < nt; ++ct)
    for (int64_t ch = 0; ch < nh; ++ch)
      for (int64_t cw = 0; cw < nw; ++cw) {
        const int64_t qb = (ct * nh + ch) * nw + cw;
        const auto [t0, t1] = window_tile_range(ct, nt, wt);
        const auto [h0, h1] = window_tile_range(ch, nh, wh);
        const auto [w0, w1] = window_tile_range(cw, nw, ww);
        for (int64_t head = 0; head < heads; ++head) {
          // Sink first: all tiles of temporal index 0 keep their frame-0 keys; the window then
          // makes the ones inside it FULL.
          if (spec.sink)
            for (int64_t kh = 0; kh < nh; ++kh)
              for (int64_t kw = 0; kw < nw; ++kw)
                g.mask.set(head, qb, kh * nw + kw,
                           spec.tile.t == 1 ? TileClass::kFull : TileClass::kBoundary);
          for (int64_t kt = t0; kt < t1; ++kt)
            for (int64_t kh = h0; kh < h1; ++kh)
              for (int64_t kw = w0; kw < w1; ++kw)
                g.mask.set(head, qb, (kt * nh + kh) * nw + kw, TileClass::kFull);
        }
      }
  g.mask.build_rows();
  if (spec.sink && spec.tile.t > 1) {
    // Only sink tiles are BOUNDARY: keep the keys of latent frame 0.
    auto frame0 = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(grid.tokens()));
    const int64_t hw = grid.height * grid.width;
    for (int64_t i = 0; i < grid.tokens(); ++i)
      (*frame0)[static_cast<size_t>(i)] = g.layout.original(i) < hw;
    g.predicate = [frame0](int64_t, int64_t, int64_t nq, int64_t k0, int64_t nk, uint8_t* keep) {
      for (int64_t i = 0; i < nq; ++i)
        std::copy(frame0->begin() + k0, frame0->begin() + k0 + nk, keep + i * nk);
    };
  }
  return g;
}

std::unique_ptr<AttentionPolicy> make_window_policy(std::string_view options) {
  return std::make_unique<WindowPolicy>(parse_window_spec(options));
}

}  // namespace vidax::sparse
