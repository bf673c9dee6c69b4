// libFuzzer target for the still-image decoders of image-to-video (io/image_reader: PNG through
// FFmpeg, JPEG through libjpeg-turbo, WebP through libwebp, chosen by content). Any input must
// either be rejected with InputError or give an image whose guarantees hold; every other outcome
// (crash, sanitizer report, another exception type, a broken guarantee) is a finding.
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "io/image_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const vidax::RgbImage im = vidax::decode_image({data, size}, "fuzz input");
    if (im.width <= 0 || im.height <= 0 || im.width * im.height > vidax::kMaxImagePixels ||
        im.rgb.size() != static_cast<size_t>(im.width * im.height * 3))
      __builtin_trap();
    // Touch the first and last pixel: AddressSanitizer flags a buffer shorter than claimed.
    volatile uint8_t sink = im.rgb.front();
    sink = im.rgb.back();
    (void)sink;
  } catch (const vidax::InputError&) {
  }
  return 0;
}
