// The Wan VAE's structure and the single declaration of every tensor it owns, by official name
// and shape. One description of the architecture (stages, residual blocks, resamplers, the
// Wan 2.2 shortcut factors) drives both the tensor list (loading, shape checks, missing /
// unexpected reports, memory accounting) and the model builder. Thread-safe.
#pragma once

#include <string>
#include <vector>

#include "models/wan/dit_tensors.h"  // TensorDecl
#include "models/wan/vae_config.h"

namespace vidax::wan {

struct VaeResBlockDesc {
  std::string prefix;  // e.g. "decoder.upsamples.4." (official names below it)
  int64_t in = 0, out = 0;
  bool has_shortcut() const { return in != out; }
};

enum class VaeResampleMode { kNone, kDown2d, kDown3d, kUp2d, kUp3d };

struct VaeResampleDesc {
  std::string prefix;  // "encoder.downsamples.2." -> resample.1.*, time_conv.*
  VaeResampleMode mode = VaeResampleMode::kNone;
  int64_t dim = 0;      // channels in
  int64_t out_dim = 0;  // channels out of the spatial conv (2.1 upsamplers halve)
};

struct VaeStageDesc {
  int64_t in = 0, out = 0;
  std::vector<VaeResBlockDesc> res;
  VaeResampleDesc resample;  // mode kNone for the last stage
  // Wan 2.2 shortcut around the whole stage: AvgDown3D (encoder) or DupUp3D (decoder) with
  // these factors; factor_s == 0 means no shortcut.
  int64_t shortcut_t = 0, shortcut_s = 0;
};

struct VaeArchitecture {
  std::vector<VaeStageDesc> encoder, decoder;
  int64_t enc_top = 0;  // channels at the encoder's middle block
  int64_t dec_top = 0;  // channels at the decoder's middle block
  int64_t dec_out = 0;  // channels into the decoder head
};

VaeArchitecture vae_architecture(const VaeConfig& config);

std::vector<TensorDecl> vae_tensor_decls(const VaeConfig& config);
int64_t vae_parameter_count(const VaeConfig& config);
// Parameters of the decoder half (decoder.* and the post-quant conv2).
int64_t vae_decoder_parameter_count(const VaeConfig& config);

}  // namespace vidax::wan
