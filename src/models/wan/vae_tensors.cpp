#include "models/wan/vae_tensors.h"

namespace vidax::wan {
namespace {

std::string num(int64_t i) { return std::to_string(i); }

}  // namespace

VaeArchitecture vae_architecture(const VaeConfig& c) {
  const bool v22 = c.version == VaeVersion::kWan22;
  const int64_t stages = c.stages();
  const int64_t nrb = c.num_res_blocks;
  auto tflag = [&](const std::vector<bool>& flags, int64_t i) {
    return i < static_cast<int64_t>(flags.size()) && flags[static_cast<size_t>(i)];
  };
  VaeArchitecture a;

  // Encoder: widths dim * [1] + dim_mult.
  std::vector<int64_t> ed = {c.dim};
  for (int64_t m : c.dim_mult) ed.push_back(c.dim * m);
  int64_t flat = 0;  // Wan 2.1 numbers the encoder's blocks in one flat list
  for (int64_t i = 0; i < stages; ++i) {
    VaeStageDesc s;
    s.in = ed[static_cast<size_t>(i)];
    s.out = ed[static_cast<size_t>(i + 1)];
    const bool down = i != stages - 1;
    const bool tdown = down && tflag(c.temporal_downsample, i);
    auto prefix = [&](int64_t j) {
      return v22 ? "encoder.downsamples." + num(i) + ".downsamples." + num(j) + "."
                 : "encoder.downsamples." + num(flat + j) + ".";
    };
    int64_t in = s.in;
    for (int64_t j = 0; j < nrb; ++j) {
      s.res.push_back({prefix(j), in, s.out});
      in = s.out;
    }
    if (down) {
      s.resample = {prefix(nrb), tdown ? VaeResampleMode::kDown3d : VaeResampleMode::kDown2d, s.out,
                    s.out};
    }
    if (v22) {
      s.shortcut_t = tdown ? 2 : 1;
      s.shortcut_s = down ? 2 : 1;
    }
    flat += nrb + (down ? 1 : 0);
    a.encoder.push_back(s);
  }
  a.enc_top = ed.back();

  // Decoder: widths dec_dim * ([dim_mult[-1]] + reversed dim_mult); temporal flags reversed.
  std::vector<int64_t> dd = {c.dec_dim * c.dim_mult.back()};
  for (auto it = c.dim_mult.rbegin(); it != c.dim_mult.rend(); ++it) dd.push_back(c.dec_dim * *it);
  const std::vector<bool> tup(c.temporal_downsample.rbegin(), c.temporal_downsample.rend());
  flat = 0;
  for (int64_t i = 0; i < stages; ++i) {
    VaeStageDesc s;
    s.in = dd[static_cast<size_t>(i)];
    // Wan 2.1 upsamplers halve the channels, so later stages start at half width.
    if (!v22 && i >= 1) s.in /= 2;
    s.out = dd[static_cast<size_t>(i + 1)];
    const bool up = i != stages - 1;
    const bool tupf = up && tflag(tup, i);
    auto prefix = [&](int64_t j) {
      return v22 ? "decoder.upsamples." + num(i) + ".upsamples." + num(j) + "."
                 : "decoder.upsamples." + num(flat + j) + ".";
    };
    int64_t in = s.in;
    for (int64_t j = 0; j < nrb + 1; ++j) {
      s.res.push_back({prefix(j), in, s.out});
      in = s.out;
    }
    if (up) {
      s.resample = {prefix(nrb + 1), tupf ? VaeResampleMode::kUp3d : VaeResampleMode::kUp2d, s.out,
                    v22 ? s.out : s.out / 2};
    }
    if (v22 && up) {
      s.shortcut_t = tupf ? 2 : 1;
      s.shortcut_s = 2;
    }
    flat += nrb + 1 + (up ? 1 : 0);
    a.decoder.push_back(s);
  }
  a.dec_top = dd.front();
  a.dec_out = dd.back();
  return a;
}

std::vector<TensorDecl> vae_tensor_decls(const VaeConfig& c) {
  std::vector<TensorDecl> d;
  auto conv = [&](const std::string& name, Shape w, int64_t out) {
    d.push_back({name + ".weight", w, TensorRole::kConvWeight});
    d.push_back({name + ".bias", Shape{out}, TensorRole::kVector});
  };
  auto conv3 = [&](const std::string& name, int64_t out, int64_t in, int64_t kt, int64_t k) {
    conv(name, Shape{out, in, kt, k, k}, out);
  };
  auto gamma = [&](const std::string& name, int64_t ch, bool images) {
    d.push_back(
        {name + ".gamma", images ? Shape{ch, 1, 1} : Shape{ch, 1, 1, 1}, TensorRole::kVector});
  };
  auto res = [&](const VaeResBlockDesc& r) {
    gamma(r.prefix + "residual.0", r.in, false);
    conv3(r.prefix + "residual.2", r.out, r.in, 3, 3);
    gamma(r.prefix + "residual.3", r.out, false);
    conv3(r.prefix + "residual.6", r.out, r.out, 3, 3);
    if (r.has_shortcut()) conv3(r.prefix + "shortcut", r.out, r.in, 1, 1);
  };
  auto resample = [&](const VaeResampleDesc& r) {
    if (r.mode == VaeResampleMode::kNone) return;
    conv(r.prefix + "resample.1", Shape{r.out_dim, r.dim, 3, 3}, r.out_dim);
    if (r.mode == VaeResampleMode::kDown3d)
      conv(r.prefix + "time_conv", Shape{r.dim, r.dim, 3, 1, 1}, r.dim);
    if (r.mode == VaeResampleMode::kUp3d)
      conv(r.prefix + "time_conv", Shape{2 * r.dim, r.dim, 3, 1, 1}, 2 * r.dim);
  };
  auto middle = [&](const std::string& p, int64_t ch) {
    res({p + "middle.0.", ch, ch});
    gamma(p + "middle.1.norm", ch, true);
    conv(p + "middle.1.to_qkv", Shape{3 * ch, ch, 1, 1}, 3 * ch);
    conv(p + "middle.1.proj", Shape{ch, ch, 1, 1}, ch);
    res({p + "middle.2.", ch, ch});
  };
  const VaeArchitecture a = vae_architecture(c);
  conv3("encoder.conv1", c.dim, c.io_channels(), 3, 3);
  for (const auto& s : a.encoder) {
    for (const auto& r : s.res) res(r);
    resample(s.resample);
  }
  middle("encoder.", a.enc_top);
  gamma("encoder.head.0", a.enc_top, false);
  conv3("encoder.head.2", 2 * c.z_dim, a.enc_top, 3, 3);
  conv3("conv1", 2 * c.z_dim, 2 * c.z_dim, 1, 1);
  conv3("conv2", c.z_dim, c.z_dim, 1, 1);
  conv3("decoder.conv1", a.dec_top, c.z_dim, 3, 3);
  middle("decoder.", a.dec_top);
  for (const auto& s : a.decoder) {
    for (const auto& r : s.res) res(r);
    resample(s.resample);
  }
  gamma("decoder.head.0", a.dec_out, false);
  conv3("decoder.head.2", c.io_channels(), a.dec_out, 3, 3);
  return d;
}

int64_t vae_parameter_count(const VaeConfig& c) {
  int64_t n = 0;
  for (const auto& d : vae_tensor_decls(c)) n += d.shape.numel();
  return n;
}

int64_t vae_decoder_parameter_count(const VaeConfig& c) {
  int64_t n = 0;
  for (const auto& d : vae_tensor_decls(c))
    if (d.name.rfind("decoder.", 0) == 0 || d.name.rfind("conv2.", 0) == 0) n += d.shape.numel();
  return n;
}

}  // namespace vidax::wan
