#include "models/wan/causal_kv_cache.h"

#include <cstring>

#include "core/error.h"

namespace vidax::wan {

CausalKvCache::CausalKvCache(int layers, int64_t width, bool bf16, const KvCacheOptions& options)
    : layers_(layers), width_(width), bf16_(bf16), opt_(options) {
  if (layers < 1 || width < 1) throw_input_error("kv cache: ", layers, " layers of width ", width);
  if (opt_.frame_tokens < 1)
    throw_input_error("kv cache: ", opt_.frame_tokens, " tokens per frame (expected >= 1)");
  if (opt_.capacity_frames < 1)
    throw_input_error("kv cache: a capacity of ", opt_.capacity_frames, " frames (expected >= 1)");
  if (opt_.sink_frames < 0 || (opt_.rolling && opt_.sink_frames >= opt_.capacity_frames))
    throw_input_error("kv cache: sink of ", opt_.sink_frames, " frames for a capacity of ",
                      opt_.capacity_frames, " (the sink must be smaller)");
}

double CausalKvCache::bytes() const {
  return static_cast<double>(layers_) * static_cast<double>(capacity_tokens()) * 2.0 *
         static_cast<double>(width_) * (bf16_ ? 2.0 : 4.0);
}

double CausalKvCache::valid_bytes() const {
  return bytes() * static_cast<double>(local_end_) / static_cast<double>(capacity_tokens());
}

KvCacheSlot CausalKvCache::plan(int64_t start, int64_t count) const {
  const int64_t cap = capacity_tokens();
  KvCacheSlot s;
  s.start = start;
  s.count = count;
  const int64_t end = start + count;
  if (broken_)
    throw_input_error("kv cache: a forward failed part-way through its layers; reset the cache");
  if (count < 1 || start < 0) throw_input_error("kv cache: a call over ", count, " tokens");
  if (end > global_end_) {
    if (start != global_end_)
      throw_input_error("kv cache: a call over tokens [", start, ", ", end,
                        ") neither continues the cache (which ends at token ", global_end_,
                        ") nor rewrites its last rows");
    if (count > cap || (opt_.rolling && count > cap - opt_.sink_frames * opt_.frame_tokens))
      throw_input_error("kv cache: a chunk of ", count, " tokens does not fit a cache of ",
                        opt_.capacity_frames, " frames (", cap, " tokens, sink ", opt_.sink_frames,
                        " frames)");
    if (local_end_ + count > cap) {
      if (!opt_.rolling)
        throw_input_error("kv cache: full: it holds ", opt_.capacity_frames,
                          " latent frames and the call would write frames up to ",
                          end / opt_.frame_tokens, " (a rolling cache evicts the oldest)");
      s.evict = count + local_end_ - cap;
    }
    s.local_end = local_end_ + count - s.evict;
  } else {
    if (end != global_end_)
      throw_input_error("kv cache: a call over tokens [", start, ", ", end,
                        ") does not end where the cache ends (token ", global_end_, ")");
    if (count > local_end_)
      throw_input_error("kv cache: a call rewrites ", count, " rows of a cache holding ",
                        local_end_);
    s.local_end = local_end_;
  }
  s.write_begin = s.local_end - count;
  s.write_end = s.local_end;
  s.global_end = std::max(end, global_end_);
  return s;
}

void CausalKvCache::allocate() {
  const auto n = static_cast<size_t>(capacity_tokens() * 2 * width_);
  if (bf16_) {
    if (k16_.empty()) {
      k16_.resize(static_cast<size_t>(layers_));
      for (auto& b : k16_) b.resize(n);
    }
  } else if (k32_.empty()) {
    k32_.resize(static_cast<size_t>(layers_));
    for (auto& b : k32_) b.resize(n);
  }
}

float* CausalKvCache::rows32(int layer) {
  VIDAX_CHECK(!bf16_ && layer >= 0 && layer < layers_, "kv cache: rows32 of layer ", layer);
  allocate();
  return k32_[static_cast<size_t>(layer)].data();
}

BFloat16* CausalKvCache::rows16(int layer) {
  VIDAX_CHECK(bf16_ && layer >= 0 && layer < layers_, "kv cache: rows16 of layer ", layer);
  allocate();
  return k16_[static_cast<size_t>(layer)].data();
}

void CausalKvCache::evict(int layer, const KvCacheSlot& slot) {
  if (slot.evict == 0) return;
  // rows [sink + evict, sink + evict + rolled) -> [sink, sink + rolled)
  const int64_t sink = opt_.sink_frames * opt_.frame_tokens;
  const int64_t rolled = local_end_ - slot.evict - sink;
  if (rolled <= 0) return;
  const auto row = static_cast<size_t>(2 * width_);
  if (bf16_) {
    BFloat16* b = rows16(layer);
    std::memmove(b + static_cast<size_t>(sink) * row,
                 b + static_cast<size_t>(sink + slot.evict) * row,
                 sizeof(BFloat16) * static_cast<size_t>(rolled) * row);
  } else {
    float* b = rows32(layer);
    std::memmove(b + static_cast<size_t>(sink) * row,
                 b + static_cast<size_t>(sink + slot.evict) * row,
                 sizeof(float) * static_cast<size_t>(rolled) * row);
  }
}

void CausalKvCache::commit(const KvCacheSlot& slot) {
  global_end_ = slot.global_end;
  local_end_ = slot.local_end;
}

void CausalKvCache::reset() {
  global_end_ = local_end_ = 0;
  broken_ = false;
}

}  // namespace vidax::wan
