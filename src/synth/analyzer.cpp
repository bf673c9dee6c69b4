// The prompt-adherence analyzer (method in analyzer.h).
#include "synth/analyzer.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "synth/render.h"

namespace vidax::synth {
namespace {

constexpr int kBorder = 2;               // border ring width used for the background, pixels
constexpr float kForeground = 40.0f;     // min RGB distance from the background of an object pixel
constexpr double kMinShare = 0.15;       // of the largest colour, to count as an object
constexpr int64_t kMinFramePixels = 16;  // an object is "seen" in a frame from this many pixels
constexpr double kBounce = 0.08;         // vertical excursion, fraction of height
constexpr double kGrowth = 1.4;          // area ratio
constexpr double kShift = 0.08;          // centroid shift, fraction of frame
constexpr double kSquareFill = 0.89, kCircleFill = 0.64;

struct Video {
  int64_t f, h, w;
  const uint8_t* rgb;  // [F, H, W, 3]
  const uint8_t* px(int64_t t, int64_t y, int64_t x) const {
    return rgb + ((t * h + y) * w + x) * 3;
  }
};

uint8_t median(const std::array<int64_t, 256>& hist, int64_t n) {
  int64_t seen = 0;
  for (int v = 0; v < 256; ++v) {
    seen += hist[static_cast<size_t>(v)];
    if (2 * seen >= n) return static_cast<uint8_t>(v);
  }
  return 255;
}

std::array<float, 3> border_median(const Video& v, int64_t t) {
  std::array<std::array<int64_t, 256>, 3> hist{};
  int64_t n = 0;
  for (int64_t y = 0; y < v.h; ++y) {
    const bool edge_row = y < kBorder || y >= v.h - kBorder;
    for (int64_t x = 0; x < v.w; ++x) {
      if (!edge_row && x >= kBorder && x < v.w - kBorder) {
        x = v.w - kBorder - 1;  // skip the interior of this row
        continue;
      }
      const uint8_t* p = v.px(t, y, x);
      for (size_t c = 0; c < 3; ++c) ++hist[c][p[c]];
      ++n;
    }
  }
  return {static_cast<float>(median(hist[0], n)), static_cast<float>(median(hist[1], n)),
          static_cast<float>(median(hist[2], n))};
}

template <typename Palette>
int nearest(const Palette& palette, const float* rgb) {
  int best = 0;
  float best_d = 1e30f;
  for (size_t i = 0; i < palette.size(); ++i) {
    const Rgb8 c = palette[i].rgb;
    const float dr = rgb[0] - c.r, dg = rgb[1] - c.g, db = rgb[2] - c.b;
    const float d = dr * dr + dg * dg + db * db;
    if (d < best_d) {
      best_d = d;
      best = static_cast<int>(i);
    }
  }
  return best;
}

// Per pixel: 0 background, 1 + colour index otherwise.
void label_frame(const Video& v, int64_t t, const std::array<float, 3>& bg, uint8_t* labels) {
  const auto colors = object_colors();
  const size_t nc = colors.size();
  std::vector<std::array<float, 3>> dir(nc);
  std::vector<float> inv_norm2(nc);
  for (size_t i = 0; i < nc; ++i) {
    dir[i] = {colors[i].rgb.r - bg[0], colors[i].rgb.g - bg[1], colors[i].rgb.b - bg[2]};
    const float n2 = dir[i][0] * dir[i][0] + dir[i][1] * dir[i][1] + dir[i][2] * dir[i][2];
    inv_norm2[i] = n2 > 1.0f ? 1.0f / n2 : 0.0f;
  }
  for (int64_t i = 0; i < v.h * v.w; ++i) {
    const uint8_t* p = v.rgb + (t * v.h * v.w + i) * 3;
    const float d[3] = {p[0] - bg[0], p[1] - bg[1], p[2] - bg[2]};
    const float dist2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
    uint8_t label = 0;
    if (dist2 >= kForeground * kForeground) {
      float best = 1e30f;
      for (size_t c = 0; c < nc; ++c) {
        const float alpha = (d[0] * dir[c][0] + d[1] * dir[c][1] + d[2] * dir[c][2]) * inv_norm2[c];
        if (alpha < 0.5f) continue;
        const float r0 = d[0] - alpha * dir[c][0], r1 = d[1] - alpha * dir[c][1],
                    r2 = d[2] - alpha * dir[c][2];
        const float res = r0 * r0 + r1 * r1 + r2 * r2;
        if (res < best) {
          best = res;
          label = static_cast<uint8_t>(c + 1);
        }
      }
    }
    labels[i] = label;
  }
}

struct Blob {
  int64_t area = 0;
  double cx = 0, cy = 0;
  int64_t x0 = 0, y0 = 0, x1 = -1, y1 = -1;
};

// The largest 4-connected component of mask (1 = member); scratch is reused across calls.
Blob largest_component(const std::vector<uint8_t>& mask, int64_t h, int64_t w,
                       std::vector<int64_t>& stack, std::vector<uint8_t>& seen) {
  seen.assign(mask.size(), 0);
  Blob best;
  for (int64_t start = 0; start < h * w; ++start) {
    if (!mask[static_cast<size_t>(start)] || seen[static_cast<size_t>(start)]) continue;
    Blob b;
    b.x0 = w, b.y0 = h;
    double sx = 0, sy = 0;
    stack.clear();
    stack.push_back(start);
    seen[static_cast<size_t>(start)] = 1;
    while (!stack.empty()) {
      const int64_t i = stack.back();
      stack.pop_back();
      const int64_t y = i / w, x = i % w;
      ++b.area;
      sx += static_cast<double>(x);
      sy += static_cast<double>(y);
      b.x0 = std::min(b.x0, x), b.x1 = std::max(b.x1, x);
      b.y0 = std::min(b.y0, y), b.y1 = std::max(b.y1, y);
      const int64_t nb[4] = {x > 0 ? i - 1 : -1, x + 1 < w ? i + 1 : -1, y > 0 ? i - w : -1,
                             y + 1 < h ? i + w : -1};
      for (int64_t j : nb) {
        if (j >= 0 && mask[static_cast<size_t>(j)] && !seen[static_cast<size_t>(j)]) {
          seen[static_cast<size_t>(j)] = 1;
          stack.push_back(j);
        }
      }
    }
    if (b.area > best.area) {
      b.cx = sx / static_cast<double>(b.area) + 0.5;
      b.cy = sy / static_cast<double>(b.area) + 0.5;
      best = b;
    }
  }
  return best;
}

double mean_of(const std::vector<double>& v, size_t from, size_t to) {
  return std::accumulate(v.begin() + static_cast<std::ptrdiff_t>(from),
                         v.begin() + static_cast<std::ptrdiff_t>(to), 0.0) /
         static_cast<double>(to - from);
}

Motion classify_motion(DetectedObject& o, const std::vector<double>& xs,
                       const std::vector<double>& ys, const std::vector<double>& areas) {
  const size_t n = xs.size();
  if (n < 2) return Motion::kStill;
  // Ends averaged over ~1/8 of the clip each, so one odd frame does not decide.
  const size_t k = std::max<size_t>(1, n / 8);
  const double y_start = mean_of(ys, 0, k), y_end = mean_of(ys, n - k, n);
  o.dx = mean_of(xs, n - k, n) - mean_of(xs, 0, k);
  o.dy = y_end - y_start;
  o.area_ratio = mean_of(areas, n - k, n) / std::max(mean_of(areas, 0, k), 1.0);
  const auto [lo, hi] = std::minmax_element(ys.begin(), ys.end());
  o.excursion = std::max(*hi - std::max(y_start, y_end), std::min(y_start, y_end) - *lo);
  if (o.excursion >= kBounce) return Motion::kBounce;
  if (o.area_ratio >= kGrowth) return Motion::kGrow;
  if (o.area_ratio <= 1.0 / kGrowth) return Motion::kShrink;
  if (std::max(std::abs(o.dx), std::abs(o.dy)) < kShift) return Motion::kStill;
  if (std::abs(o.dx) >= std::abs(o.dy)) return o.dx < 0 ? Motion::kLeft : Motion::kRight;
  return o.dy < 0 ? Motion::kUp : Motion::kDown;
}

ShapeKind classify_shape(double fill) {
  if (fill >= kSquareFill) return ShapeKind::kSquare;
  if (fill >= kCircleFill) return ShapeKind::kCircle;
  return ShapeKind::kTriangle;
}

// Per colour and frame: pixel count and centroid, to find colours that are one object.
struct ColourTrack {
  int64_t total = 0;
  std::vector<int64_t> count;
  std::vector<double> cx, cy;
};

bool same_spot(const ColourTrack& a, const ColourTrack& b) {
  int both = 0, near = 0;
  for (size_t t = 0; t < a.count.size(); ++t) {
    if (a.count[t] < kMinFramePixels || b.count[t] < kMinFramePixels) continue;
    ++both;
    const double d = std::hypot(a.cx[t] - b.cx[t], a.cy[t] - b.cy[t]);
    const double reach = 0.5 * (std::sqrt(static_cast<double>(a.count[t])) +
                                std::sqrt(static_cast<double>(b.count[t])));
    near += d < reach ? 1 : 0;
  }
  return both > 0 && 2 * near >= both;
}

}  // namespace

Analysis analyze(const Tensor& frames) {
  Tensor rgb8;
  if (frames.dtype() == DType::kU8) {
    if (frames.rank() != 4 || frames.dim(3) != 3)
      throw_input_error("frames: expected U8 [F, H, W, 3], got ", frames.describe());
    rgb8 = frames.contiguous();
  } else {
    rgb8 = video_to_rgb8(frames);
  }
  const Video v{rgb8.dim(0), rgb8.dim(1), rgb8.dim(2), rgb8.data<uint8_t>()};
  if (v.f < 1 || v.h < 8 || v.w < 8)
    throw_input_error("frames: need at least one frame of 8x8 pixels, got ", frames.describe());
  const size_t plane = static_cast<size_t>(v.h * v.w);
  const size_t nc = object_colors().size();

  Analysis out;
  std::vector<uint8_t> labels(static_cast<size_t>(v.f) * plane);
  std::array<std::vector<float>, 3> bg_trace;
  std::vector<ColourTrack> tracks(nc);
  for (auto& tr : tracks) {
    tr.count.assign(static_cast<size_t>(v.f), 0);
    tr.cx.assign(static_cast<size_t>(v.f), 0.0);
    tr.cy.assign(static_cast<size_t>(v.f), 0.0);
  }
  for (int64_t t = 0; t < v.f; ++t) {
    const auto bg = border_median(v, t);
    for (size_t c = 0; c < 3; ++c) bg_trace[c].push_back(bg[c]);
    uint8_t* lab = labels.data() + static_cast<size_t>(t) * plane;
    label_frame(v, t, bg, lab);
    for (int64_t i = 0; i < v.h * v.w; ++i) {
      if (!lab[i]) continue;
      ColourTrack& tr = tracks[lab[i] - 1u];
      ++tr.count[static_cast<size_t>(t)];
      tr.cx[static_cast<size_t>(t)] += static_cast<double>(i % v.w);
      tr.cy[static_cast<size_t>(t)] += static_cast<double>(i / v.w);
    }
  }
  for (auto& tr : tracks) {
    for (size_t t = 0; t < tr.count.size(); ++t) {
      tr.total += tr.count[t];
      if (tr.count[t]) {
        tr.cx[t] /= static_cast<double>(tr.count[t]);
        tr.cy[t] /= static_cast<double>(tr.count[t]);
      }
    }
  }
  for (size_t c = 0; c < 3; ++c) {
    auto& tr = bg_trace[c];
    std::nth_element(tr.begin(), tr.begin() + static_cast<std::ptrdiff_t>(tr.size() / 2), tr.end());
    out.background_rgb[c] = tr[tr.size() / 2];
  }
  out.background = nearest(background_colors(), out.background_rgb);

  // Colours by pixel count; a colour on the same spot as a larger one joins it.
  std::vector<size_t> order(nc);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return tracks[a].total > tracks[b].total; });
  const int64_t top = tracks[order[0]].total;
  std::vector<std::vector<size_t>> groups;  // colour indices, the first is the object's colour
  for (size_t c : order) {
    if (tracks[c].total < kMinFramePixels || tracks[c].total < kMinShare * static_cast<double>(top))
      break;
    bool joined = false;
    for (auto& g : groups) {
      if (same_spot(tracks[g[0]], tracks[c])) {
        g.push_back(c);
        joined = true;
        break;
      }
    }
    if (!joined && groups.size() < 2) groups.push_back({c});
  }

  std::vector<uint8_t> mask(plane), seen;
  std::vector<int64_t> stack;
  for (const auto& g : groups) {
    DetectedObject o;
    o.attributes.color = static_cast<int>(g[0]);
    std::array<bool, 256> member{};
    for (size_t c : g) {
      member[c + 1] = true;
      o.pixels += tracks[c].total;
    }
    std::vector<double> xs, ys, areas, fills;
    for (int64_t t = 0; t < v.f; ++t) {
      const uint8_t* lab = labels.data() + static_cast<size_t>(t) * plane;
      for (size_t i = 0; i < plane; ++i) mask[i] = member[lab[i]] ? 1 : 0;
      const Blob b = largest_component(mask, v.h, v.w, stack, seen);
      if (b.area < kMinFramePixels) continue;
      xs.push_back(b.cx / static_cast<double>(v.w));
      ys.push_back(b.cy / static_cast<double>(v.h));
      areas.push_back(static_cast<double>(b.area));
      fills.push_back(static_cast<double>(b.area) /
                      static_cast<double>((b.x1 - b.x0 + 1) * (b.y1 - b.y0 + 1)));
    }
    o.frames_seen = static_cast<int>(xs.size());
    if (o.frames_seen == 0) continue;
    std::nth_element(fills.begin(), fills.begin() + static_cast<std::ptrdiff_t>(fills.size() / 2),
                     fills.end());
    o.fill = fills[fills.size() / 2];
    o.attributes.shape = classify_shape(o.fill);
    o.attributes.motion = classify_motion(o, xs, ys, areas);
    out.objects.push_back(o);
  }
  return out;
}

AdherenceScore score(const SceneAttributes& expected, const Analysis& analysis) {
  AdherenceScore s;
  s.analysis = analysis;
  s.background = analysis.background == expected.background;
  s.count = analysis.objects.size() == expected.objects.size();
  const size_t ne = expected.objects.size(), nd = analysis.objects.size();
  // Try every assignment of expected objects to distinct detections (at most 2 x 2); an
  // unassigned expected object gets every attribute wrong. Colour agreement weighs most, so a
  // detection is paired with the object of its colour when there is one.
  std::vector<size_t> perm(std::max(ne, nd));
  std::iota(perm.begin(), perm.end(), size_t{0});
  int best = -1;
  do {
    bool color = true, shape = true, motion = true;
    int agree = 0;
    for (size_t e = 0; e < ne; ++e) {
      const size_t d = perm[e];
      const ObjectAttributes& want = expected.objects[e];
      const bool have = d < nd;
      const bool c = have && analysis.objects[d].attributes.color == want.color;
      const bool sh = have && analysis.objects[d].attributes.shape == want.shape;
      const bool m = have && analysis.objects[d].attributes.motion == want.motion;
      color &= c, shape &= sh, motion &= m;
      agree += 4 * c + sh + m;
    }
    if (agree > best) {
      best = agree;
      s.color = color, s.shape = shape, s.motion = motion;
    }
  } while (std::next_permutation(perm.begin(), perm.end()));
  s.overall = s.color && s.shape && s.motion && s.background && s.count;
  return s;
}

AdherenceScore score(const SceneAttributes& expected, const Tensor& frames) {
  return score(expected, analyze(frames));
}

AdherenceScore score(const SceneSpec& expected, const Tensor& frames) {
  return score(attributes(expected), analyze(frames));
}

void AdherenceTally::add(const AdherenceScore& s) {
  ++clips;
  color += s.color, shape += s.shape, motion += s.motion, background += s.background;
  count += s.count, overall += s.overall;
}

std::string AdherenceTally::summary() const {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "color %.1f%%  shape %.1f%%  motion %.1f%%  background %.1f%%  count %.1f%%  "
                "overall %.1f%%",
                100 * rate(color), 100 * rate(shape), 100 * rate(motion), 100 * rate(background),
                100 * rate(count), 100 * rate(overall));
  return buf;
}

}  // namespace vidax::synth
