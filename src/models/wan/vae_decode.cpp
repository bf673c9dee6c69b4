// Streaming decode: latent statistics and post-quant conv on the whole latent (it is small),
// then the decoder one latent frame at a time, optionally over overlapping spatial tiles that
// each keep their own causal state and are blended linearly across the overlap.
#include <algorithm>
#include <cstring>

#include "core/page_buffer.h"
#include "dist/group.h"
#include "models/wan/vae.h"
#include "models/wan/vae_impl.h"
#include "nn/video_ops.h"

namespace vidax::wan {
namespace {

struct Span {
  int64_t begin, end;  // latent pixels
};

// Tiles of `tile` latent pixels overlapping by at least `overlap`; the last one is pulled back
// to end at `total` so every tile has the same size.
std::vector<Span> tile_spans(int64_t total, int64_t tile, int64_t overlap) {
  if (tile <= 0 || tile >= total) return {{0, total}};
  std::vector<Span> spans;
  const int64_t stride = tile - overlap;
  for (int64_t b = 0;; b += stride) {
    if (b + tile >= total) {
      spans.push_back({total - tile, total});
      break;
    }
    spans.push_back({b, b + tile});
  }
  return spans;
}

// Blend weight of output pixel p (0-based inside a tile of `len` pixels): ramps up over `ramp`
// pixels at an edge shared with a previous tile and down at one shared with a next tile.
float edge_weight(int64_t p, int64_t len, bool ramp_lo, bool ramp_hi, int64_t ramp) {
  float wgt = 1.0f;
  if (ramp <= 0) return wgt;
  if (ramp_lo) wgt = std::min(wgt, static_cast<float>((static_cast<double>(p) + 0.5) / ramp));
  if (ramp_hi) wgt = std::min(wgt, static_cast<float>((static_cast<double>(len - p) - 0.5) / ramp));
  return wgt;
}

}  // namespace

void WanVae::decode(const Tensor& latent_in, const FrameSink& sink, const VaeDecodeOptions& opt,
                    const CaptureFn& capture) {
  Impl& m = *impl_;
  const VaeConfig& cfg = m.cfg;
  if (m.parts == VaeParts::kEncoder)
    throw_input_error("decode: this VAE was loaded without its decoder (encoder only)");
  const Tensor latent =
      latent_in.rank() == 5 && latent_in.dim(0) == 1 ? latent_in.select(0, 0) : latent_in;
  if (latent.rank() != 4 || latent.dim(0) != cfg.z_dim)
    throw_input_error("latent: expected [", cfg.z_dim, ", F, h, w] (or [1, ", cfg.z_dim,
                      ", F, h, w]) for the Wan ", cfg.version_name(), " VAE, got ",
                      latent_in.shape().str());
  if (!is_float(latent.dtype()))
    throw_input_error("latent: expected a float tensor, got ", latent.describe());
  if (latent.numel() == 0) throw_input_error("latent: empty shape ", latent.shape().str());
  if (opt.tile_h < 0 || opt.tile_w < 0 || opt.overlap < 0)
    throw_input_error("tiling: tile sizes and overlap must be >= 0");
  if ((opt.tile_h > 0 && opt.overlap >= opt.tile_h) ||
      (opt.tile_w > 0 && opt.overlap >= opt.tile_w))
    throw_input_error("tiling: overlap ", opt.overlap, " must be smaller than the tile (",
                      opt.tile_h, "x", opt.tile_w, " latent pixels)");
  // The decoder makes the same buffers once per latent frame: keep their pages between frames.
  const PageReuse reuse;
  const int64_t z = cfg.z_dim, nf = latent.dim(1), lh = latent.dim(2), lw = latent.dim(3);
  const int64_t ss = cfg.spatial_stride(), ts = cfg.temporal_stride(), p = cfg.patch();
  const int64_t hh = lh * ss, ww = lw * ss;

  // z / inv_std + mean (division, as the reference), then the post-quant conv, channels-last.
  const std::vector<float> zf = latent.to_float_vector();  // [z, F, h, w]
  const int64_t px = nf * lh * lw;
  Frames zs = Frames::make(nf, lh, lw, z);
  for (int64_t c = 0; c < z; ++c)
    for (int64_t i = 0; i < px; ++i)
      zs.data.data()[i * z + c] =
          zf[static_cast<size_t>(c * px + i)] / m.inv_std[static_cast<size_t>(c)] +
          m.mean[static_cast<size_t>(c)];
  Frames pq = Frames::make(nf, lh, lw, z);
  m.post_quant.forward(zs.data.data(), px, pq.data.data());
  zs = Frames();
  if (capture) {
    Tensor t = Tensor::zeros(Shape{1, z, nf, lh, lw});
    float* o = t.mutable_data<float>();
    for (int64_t c = 0; c < z; ++c)
      for (int64_t i = 0; i < px; ++i) o[c * px + i] = pq.data.data()[i * z + c];
    capture("dec_post_quant_out", t);
  }

  const std::vector<Span> hs = tile_spans(lh, opt.tile_h, opt.overlap);
  const std::vector<Span> ws = tile_spans(lw, opt.tile_w, opt.overlap);
  const bool tiled = hs.size() > 1 || ws.size() > 1;
  if (!opt.continues) m.dec.reset();
  for (int64_t i = 0; i < nf; ++i) {
    const bool clip_first = i == 0 && !opt.continues;
    const int64_t n_out = clip_first ? 1 : ts;
    Tensor out = Tensor::zeros(Shape{3, n_out, hh, ww});
    RunCtx ctx;
    ctx.first_chunk = clip_first;
    if (!tiled) {
      int64_t pos = 0;
      m.decode_latent_frame(pq.copy_frames(i, 1), ctx, [&](Frames&& f) {
        VIDAX_CHECK(pos + f.t <= n_out, "decoder produced too many frames");
        unpatchify_frames(f.data.data(), f.t, f.h, f.w, 3, p, out.slice(1, pos, pos + f.t));
        pos += f.t;
      });
      VIDAX_CHECK(pos == n_out, "decoder produced ", pos, " frames, expected ", n_out);
    } else {
      Tensor wsum = Tensor::zeros(Shape{hh, ww});
      float* acc = out.mutable_data<float>();
      float* wsp = wsum.mutable_data<float>();
      // Every tile has the same size (tile_spans), so a decoded tile is `tile_floats` floats.
      const int64_t th = (hs[0].end - hs[0].begin) * ss, tw = (ws[0].end - ws[0].begin) * ss;
      const int64_t tile_floats = 3 * n_out * th * tw;
      const int64_t n_tiles = static_cast<int64_t>(hs.size() * ws.size());
      const int ranks = opt.group != nullptr ? opt.group->size() : 1;
      const int me = opt.group != nullptr ? opt.group->rank() : 0;
      auto owner = [&](int64_t slot) { return static_cast<int>(slot % ranks); };
      auto owned = [&](int r) { return (n_tiles - r + ranks - 1) / ranks; };  // slots r, r+P, ...
      // This rank's decoded tiles [owned][3, n_out, th, tw], in slot order.
      std::vector<float> mine(static_cast<size_t>(owned(me) * tile_floats));
      for (int64_t slot = me; slot < n_tiles; slot += ranks) {
        ctx.slot = static_cast<size_t>(slot);
        const Span sh = hs[static_cast<size_t>(slot) / ws.size()];
        const Span sw = ws[static_cast<size_t>(slot) % ws.size()];
        Frames crop = Frames::make(1, sh.end - sh.begin, sw.end - sw.begin, z);
        for (int64_t y = sh.begin; y < sh.end; ++y)
          std::memcpy(crop.data.data() + (y - sh.begin) * crop.w * z,
                      pq.frame(i) + (y * lw + sw.begin) * z,
                      static_cast<size_t>(crop.w * z) * sizeof(float));
        Tensor tile = Tensor::zeros(Shape{3, n_out, th, tw});
        int64_t pos = 0;
        m.decode_latent_frame(crop, ctx, [&](Frames&& f) {
          VIDAX_CHECK(pos + f.t <= n_out, "decoder produced too many frames");
          unpatchify_frames(f.data.data(), f.t, f.h, f.w, 3, p, tile.slice(1, pos, pos + f.t));
          pos += f.t;
        });
        VIDAX_CHECK(pos == n_out, "decoder produced ", pos, " frames, expected ", n_out);
        std::memcpy(mine.data() + (slot / ranks) * tile_floats, tile.data<float>(),
                    sizeof(float) * static_cast<size_t>(tile_floats));
      }
      // Every rank's tiles on every rank: [rank][owned(rank)][tile].
      std::vector<float> all;
      std::vector<int64_t> first(static_cast<size_t>(ranks) + 1, 0);
      if (ranks > 1) {
        std::vector<int64_t> counts(static_cast<size_t>(ranks));
        for (int r = 0; r < ranks; ++r) {
          counts[static_cast<size_t>(r)] = owned(r) * tile_floats;
          first[static_cast<size_t>(r) + 1] =
              first[static_cast<size_t>(r)] + counts[static_cast<size_t>(r)];
        }
        all.resize(static_cast<size_t>(first.back()));
        opt.group->all_gather_v(mine.data(), all.data(), counts, DType::kF32);
      } else {
        all = std::move(mine);
      }
      // Blend in slot order, exactly as one process does.
      for (size_t a = 0; a < hs.size(); ++a)
        for (size_t b = 0; b < ws.size(); ++b) {
          const int64_t slot = static_cast<int64_t>(a * ws.size() + b);
          const Span sh = hs[a], sw = ws[b];
          std::vector<float> wy(static_cast<size_t>(th)), wx(static_cast<size_t>(tw));
          for (int64_t y = 0; y < th; ++y)
            wy[static_cast<size_t>(y)] =
                edge_weight(y, th, a > 0, a + 1 < hs.size(), opt.overlap * ss);
          for (int64_t x = 0; x < tw; ++x)
            wx[static_cast<size_t>(x)] =
                edge_weight(x, tw, b > 0, b + 1 < ws.size(), opt.overlap * ss);
          const float* tp =
              all.data() + first[static_cast<size_t>(owner(slot))] + (slot / ranks) * tile_floats;
          for (int64_t c = 0; c < 3; ++c)
            for (int64_t k = 0; k < n_out; ++k)
              for (int64_t y = 0; y < th; ++y)
                for (int64_t x = 0; x < tw; ++x)
                  acc[((c * n_out + k) * hh + sh.begin * ss + y) * ww + sw.begin * ss + x] +=
                      tp[((c * n_out + k) * th + y) * tw + x] * wy[static_cast<size_t>(y)] *
                      wx[static_cast<size_t>(x)];
          for (int64_t y = 0; y < th; ++y)
            for (int64_t x = 0; x < tw; ++x)
              wsp[(sh.begin * ss + y) * ww + sw.begin * ss + x] +=
                  wy[static_cast<size_t>(y)] * wx[static_cast<size_t>(x)];
        }
      for (int64_t c = 0; c < 3; ++c)
        for (int64_t k = 0; k < n_out; ++k)
          for (int64_t q = 0; q < hh * ww; ++q) acc[(c * n_out + k) * hh * ww + q] /= wsp[q];
    }
    sink(out);
  }
  if (!opt.more_follows) m.dec.reset();
}

Tensor WanVae::decode(const Tensor& latent, const VaeDecodeOptions& options) {
  const int64_t nf = latent.rank() >= 4 ? latent.dim(latent.rank() - 3) : 0;
  const int64_t ss = impl_->cfg.spatial_stride(), ts = impl_->cfg.temporal_stride();
  const int64_t total = nf > 0 ? 1 + ts * (nf - 1) : 0;
  Tensor out;
  int64_t pos = 0;
  decode(
      latent,
      [&](const Tensor& frames) {
        if (!out.defined())
          out = Tensor::zeros(Shape{3, total, latent.dim(-2) * ss, latent.dim(-1) * ss});
        for (int64_t c = 0; c < 3; ++c)  // per channel the frames are contiguous
          out.select(0, c)
              .slice(0, pos, pos + frames.dim(1))
              .copy_from(frames.select(0, c).contiguous());
        pos += frames.dim(1);
      },
      options);
  return out;
}

}  // namespace vidax::wan
