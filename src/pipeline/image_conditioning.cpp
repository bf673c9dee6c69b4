#include "pipeline/image_conditioning.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "nn/image_resize.h"

namespace vidax {

PixelSize wan21_i2v_size(int64_t iw, int64_t ih, int64_t max_area, int64_t stride, int64_t patch) {
  if (iw <= 0 || ih <= 0 || max_area <= 0)
    throw_input_error("image-to-video size: image ", iw, "x", ih, ", area ", max_area,
                      " must be positive");
  const double aspect = static_cast<double>(ih) / static_cast<double>(iw);
  const double area = static_cast<double>(max_area);
  auto lat = [&](double side) {
    // numpy: sqrt(.) // stride // patch * patch on float64, then round().
    const double q =
        std::floor(std::floor(side / static_cast<double>(stride)) / static_cast<double>(patch)) *
        static_cast<double>(patch);
    return static_cast<int64_t>(std::nearbyint(q));
  };
  const int64_t lat_h = lat(std::sqrt(area * aspect)), lat_w = lat(std::sqrt(area / aspect));
  if (lat_h <= 0 || lat_w <= 0)
    throw_input_error("--size: an area of ", max_area, " pixels gives a ", lat_w * stride, "x",
                      lat_h * stride, " video for a ", iw, "x", ih,
                      " image; give a larger --size (each side needs at least ", stride * patch,
                      " pixels)");
  return {lat_w * stride, lat_h * stride};
}

PixelSize wan22_best_output_size(int64_t w, int64_t h, int64_t dw, int64_t dh, int64_t area_i) {
  if (w <= 0 || h <= 0 || dw <= 0 || dh <= 0 || area_i <= 0)
    throw_input_error("image-to-video size: image ", w, "x", h, ", area ", area_i,
                      " must be positive");
  const double ratio = static_cast<double>(w) / static_cast<double>(h);
  const double area = static_cast<double>(area_i);
  const double ow = std::sqrt(area * ratio);  // (expected_area * ratio) ** 0.5
  const double oh = area / ow;
  auto floor_to = [](double v, int64_t m) {  // int(v // m * m)
    return static_cast<int64_t>(std::floor(v / static_cast<double>(m)) * static_cast<double>(m));
  };
  const int64_t ow1 = floor_to(ow, dw);
  const int64_t oh2 = floor_to(oh, dh);
  if (ow1 <= 0 || oh2 <= 0)
    throw_input_error("--size: an area of ", area_i, " pixels is too small for a ", w, "x", h,
                      " image (sides must be multiples of ", dw, "x", dh, ")");
  const int64_t oh1 = floor_to(area / static_cast<double>(ow1), dh);
  const int64_t ow2 = floor_to(area / static_cast<double>(oh2), dw);
  if (oh1 <= 0 || ow2 <= 0)
    throw_input_error("--size: an area of ", area_i, " pixels is too small for a ", w, "x", h,
                      " image (sides must be multiples of ", dw, "x", dh, ")");
  const double r1 = static_cast<double>(ow1) / static_cast<double>(oh1);
  const double r2 = static_cast<double>(ow2) / static_cast<double>(oh2);
  if (std::max(ratio / r1, r1 / ratio) < std::max(ratio / r2, r2 / ratio)) return {ow1, oh1};
  return {ow2, oh2};
}

Tensor i2v_frame_mask(int64_t frames, int64_t lat_h, int64_t lat_w, bool last_frame) {
  VIDAX_CHECK(frames >= 1 && (frames - 1) % 4 == 0, "i2v mask: frames must be 4k+1");
  const int64_t lf = 1 + (frames - 1) / 4;
  Tensor m = Tensor::zeros(Shape{4, lf, lat_h, lat_w});
  float* p = m.mutable_data<float>();
  const int64_t plane = lat_h * lat_w;
  for (int64_t c = 0; c < 4; ++c) std::fill_n(p + (c * lf + 0) * plane, plane, 1.0f);
  // The last pixel frame is sub-frame 4 + frames - 2 = 4 (F' - 1) + 3: channel 3 of the last
  // latent frame.
  if (last_frame) std::fill_n(p + (3 * lf + lf - 1) * plane, plane, 1.0f);
  return m;
}

Tensor i2v_vae_input(const Tensor& first, const Tensor* last, int64_t frames) {
  VIDAX_CHECK(first.rank() == 3 && first.dim(0) == 3 && frames >= 1, "i2v VAE input: bad image");
  const int64_t h = first.dim(1), w = first.dim(2), plane = h * w;
  Tensor v = Tensor::zeros(Shape{3, frames, h, w});
  float* p = v.mutable_data<float>();
  auto put = [&](const Tensor& img, int64_t f) {
    VIDAX_CHECK(img.shape() == first.shape(), "i2v VAE input: the images differ in size");
    const Tensor c = img.contiguous();
    for (int64_t ch = 0; ch < 3; ++ch)
      std::copy_n(c.data<float>() + ch * plane, plane, p + (ch * frames + f) * plane);
  };
  put(first, 0);
  if (last != nullptr) put(*last, frames - 1);
  return v;
}

Tensor i2v_condition(const Tensor& mask, const Tensor& latent) {
  VIDAX_CHECK(mask.rank() == 4 && latent.rank() == 4 && mask.dim(1) == latent.dim(1) &&
                  mask.dim(2) == latent.dim(2) && mask.dim(3) == latent.dim(3),
              "i2v condition: mask ", mask.describe(), " does not match latent ",
              latent.describe());
  const Tensor m = mask.contiguous(), l = latent.contiguous();
  Tensor y = Tensor::zeros(Shape{m.dim(0) + l.dim(0), l.dim(1), l.dim(2), l.dim(3)});
  std::copy_n(m.data<float>(), m.numel(), y.mutable_data<float>());
  std::copy_n(l.data<float>(), l.numel(), y.mutable_data<float>() + m.numel());
  return y;
}

Tensor ti2v_image(const RgbImage& image, PixelSize size) {
  const double scale =
      std::max(static_cast<double>(size.width) / static_cast<double>(image.width),
               static_cast<double>(size.height) / static_cast<double>(image.height));
  // Python's round(): half to even.
  const auto rw = static_cast<int64_t>(std::nearbyint(static_cast<double>(image.width) * scale));
  const auto rh = static_cast<int64_t>(std::nearbyint(static_cast<double>(image.height) * scale));
  const std::vector<uint8_t> resized =
      resize_lanczos_rgb8(image.rgb, image.width, image.height, rw, rh);
  const int64_t x1 = (rw - size.width) / 2, y1 = (rh - size.height) / 2;
  const std::vector<uint8_t> crop = crop_rgb8(resized, rw, rh, x1, y1, size.width, size.height);
  return rgb8_to_signed_unit(crop, size.width, size.height);
}

Tensor ti2v_token_timesteps(int64_t t, int64_t tokens, int64_t frame0_tokens) {
  Tensor ts = Tensor::zeros(Shape{tokens}, DType::kI64);
  int64_t* p = ts.mutable_data<int64_t>();
  for (int64_t i = frame0_tokens; i < tokens; ++i) p[i] = t;
  return ts;
}

void replace_first_latent_frame(Tensor& latent, const Tensor& first) {
  VIDAX_CHECK(latent.rank() == 4 && first.rank() == 4 && first.dim(0) == latent.dim(0) &&
                  first.dim(2) == latent.dim(2) && first.dim(3) == latent.dim(3),
              "TI2V: first-frame latent ", first.describe(), " does not match ", latent.describe());
  latent = latent.contiguous();
  if (!latent.writable()) latent = latent.clone();
  const Tensor f = first.contiguous();
  const int64_t frames = latent.dim(1), plane = latent.dim(2) * latent.dim(3);
  float* p = latent.mutable_data<float>();
  for (int64_t c = 0; c < latent.dim(0); ++c)
    std::copy_n(f.data<float>() + c * f.dim(1) * plane, plane, p + c * frames * plane);
}

}  // namespace vidax
