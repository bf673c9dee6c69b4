#include "models/wan/causal_kv_cache.h"

#include <algorithm>
#include <cmath>
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
  if (opt_.persistent_tokens < 0 || (opt_.persistent_tokens > 0 && !opt_.rolling))
    throw_input_error("kv cache: ", opt_.persistent_tokens,
                      " persistent rows (a rolling cache keeps evicted blocks; expected >= 0)");
  if (opt_.block_tokens < 1)
    throw_input_error("kv cache: blocks of ", opt_.block_tokens, " tokens (expected >= 1)");
  int64_t rows = 0, values = 0;
  if (__builtin_mul_overflow(opt_.capacity_frames, opt_.frame_tokens, &rows) ||
      __builtin_add_overflow(rows, opt_.persistent_tokens, &rows) ||
      __builtin_mul_overflow(rows, 2 * width, &values) || values > (int64_t{1} << 46))
    throw_input_error("kv cache: ", opt_.capacity_frames, " frames of ", opt_.frame_tokens,
                      " tokens (+", opt_.persistent_tokens, " rows) is too large");
}

double CausalKvCache::bytes() const {
  return static_cast<double>(layers_) * static_cast<double>(buffer_rows()) * 2.0 *
         static_cast<double>(width_) * (bf16_ ? 2.0 : 4.0);
}

double CausalKvCache::valid_bytes() const {
  return static_cast<double>(layers_) * static_cast<double>(local_end_) * 2.0 *
         static_cast<double>(width_) * (bf16_ ? 2.0 : 4.0);
}

int64_t CausalKvCache::persistent_rows() const {
  int64_t n = 0;
  for (const KvBlock& b : persistent_) n += b.rows;
  return n;
}

KvBlock CausalKvCache::block_of(int64_t token) const {
  const int64_t fs = opt_.frame_tokens, frame = token / fs, in = token % fs;
  KvBlock b;
  b.begin = frame * fs + in / opt_.block_tokens * opt_.block_tokens;
  b.rows = std::min(opt_.block_tokens, frame * fs + fs - b.begin);
  return b;
}

int64_t CausalKvCache::token_of_row(int64_t row) const {
  VIDAX_CHECK(row >= 0 && row < local_end_, "kv cache: row ", row, " of ", local_end_);
  const int64_t sink = std::min(opt_.sink_frames * opt_.frame_tokens, local_end_);
  const int64_t p = persistent_rows();
  if (row < sink) return row;
  if (row < sink + p) {
    int64_t r = row - sink;
    for (const KvBlock& b : persistent_) {
      if (r < b.rows) return b.begin + r;
      r -= b.rows;
    }
  }
  return global_end_ - (local_end_ - row);
}

void CausalKvCache::add_block_mass(int64_t token, double mass) {
  const int64_t begin = block_of(token).begin;
  for (KvBlock& b : persistent_)
    if (b.begin == begin) {
      b.score += mass;
      return;
    }
  scores_[begin] += mass;
}

KvCacheSlot CausalKvCache::plan(int64_t start, int64_t count) const {
  if (broken_)
    throw_input_error("kv cache: a forward failed part-way through its layers; reset the cache");
  const int64_t cap = capacity_tokens();
  const int64_t sink_cap = opt_.sink_frames * opt_.frame_tokens;
  KvCacheSlot s;
  s.start = start;
  s.count = count;
  const int64_t end = start + count;
  if (count < 1 || start < 0) throw_input_error("kv cache: a call over ", count, " tokens");
  if (end > global_end_) {
    if (start != global_end_)
      throw_input_error("kv cache: a call over tokens [", start, ", ", end,
                        ") neither continues the cache (which ends at token ", global_end_,
                        ") nor rewrites its last rows");
    if (count > cap || (opt_.rolling && count > cap - sink_cap))
      throw_input_error("kv cache: a chunk of ", count, " tokens does not fit a cache of ",
                        opt_.capacity_frames, " frames (", cap, " tokens, sink ", opt_.sink_frames,
                        " frames)");
    const int64_t p = persistent_rows();
    const int64_t sink = std::min(sink_cap, local_end_);
    const int64_t window = local_end_ - sink - p;  // the reference's rows after the sink
    if (sink + window + count > cap) {
      if (!opt_.rolling)
        throw_input_error("kv cache: full: it holds ", opt_.capacity_frames,
                          " latent frames and the call would write frames up to ",
                          end / opt_.frame_tokens, " (a rolling cache evicts the oldest)");
      s.evict = count + sink + window - cap;  // the oldest window rows (whole frames)
      // Persistent blocks: those held and the evicted ones compete on score for the room.
      std::vector<std::pair<KvBlock, int64_t>> candidates;  // block, its row now
      int64_t row = sink;
      for (KvBlock b : persistent_) {
        if (std::isnan(b.score)) b.score = -INFINITY;
        candidates.push_back({b, row});
        row += b.rows;
      }
      if (opt_.persistent_tokens > 0) {
        const int64_t first = global_end_ - window;  // absolute token of the first window row
        for (int64_t t = first; t < first + s.evict;) {
          KvBlock b = block_of(t);
          const auto it = scores_.find(b.begin);
          b.score = it == scores_.end() ? 0 : it->second;
          if (std::isnan(b.score)) b.score = -INFINITY;  // a diverged run ranks it last
          candidates.push_back({b, sink + p + (t - first)});
          t = b.begin + b.rows;
        }
      }
      std::vector<size_t> order(candidates.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = i;
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {  // best, newest
        if (candidates[a].first.score != candidates[b].first.score)
          return candidates[a].first.score > candidates[b].first.score;
        return candidates[a].first.begin > candidates[b].first.begin;
      });
      std::vector<size_t> kept;
      int64_t room = opt_.persistent_tokens;
      for (size_t i : order)
        if (candidates[i].first.rows <= room) {
          kept.push_back(i);
          room -= candidates[i].first.rows;
        }
      std::sort(kept.begin(), kept.end(), [&](size_t a, size_t b) {
        return candidates[a].first.begin < candidates[b].first.begin;
      });
      s.keep.push_back({0, sink});
      int64_t kept_rows = 0;
      for (size_t i : kept) {
        const auto& [b, r] = candidates[i];
        s.persistent.push_back(b);
        s.keep.push_back({r, r + b.rows});
        kept_rows += b.rows;
      }
      s.keep.push_back({sink + p + s.evict, local_end_});
      s.local_end = sink + kept_rows + (window - s.evict) + count;
    } else {
      s.persistent = persistent_;
      s.local_end = local_end_ + count;
    }
  } else {
    if (end != global_end_)
      throw_input_error("kv cache: a call over tokens [", start, ", ", end,
                        ") does not end where the cache ends (token ", global_end_, ")");
    const int64_t fixed = std::min(opt_.sink_frames * opt_.frame_tokens, local_end_) +
                          persistent_rows();  // sink and persistent rows are never rewritten
    const int64_t rewritable = global_end_ > local_end_ ? local_end_ - fixed : local_end_;
    if (count > rewritable)
      throw_input_error("kv cache: a call rewrites ", count, " rows of a cache whose window holds ",
                        rewritable);
    s.persistent = persistent_;
    s.local_end = local_end_;
  }
  s.write_begin = s.local_end - count;
  s.write_end = s.local_end;
  s.global_end = std::max(end, global_end_);
  return s;
}

void CausalKvCache::allocate() {
  const auto n = static_cast<size_t>(buffer_rows() * 2 * width_);
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

namespace {

// Moves the rows of `keep` (old positions, new order) to the front of `buf`: [row, width2] each.
template <typename T>
void compact(T* buf, int64_t width2, const std::vector<std::pair<int64_t, int64_t>>& keep,
             Buffer<T>& scratch, bool only_shift) {
  const auto row = static_cast<size_t>(width2);
  if (only_shift) {  // [0, sink) stays, the window shifts left (the reference's copy)
    VIDAX_CHECK(keep.size() == 2 && keep[0].first == 0, "kv cache: shift layout");
    const int64_t dst = keep[0].second, src = keep[1].first, n = keep[1].second - keep[1].first;
    if (n > 0 && src != dst)
      std::memmove(buf + static_cast<size_t>(dst) * row, buf + static_cast<size_t>(src) * row,
                   sizeof(T) * static_cast<size_t>(n) * row);
    return;
  }
  int64_t total = 0;
  for (const auto& [b, e] : keep) total += e - b;
  scratch.resize(static_cast<size_t>(total) * row);
  int64_t at = 0;
  for (const auto& [b, e] : keep) {
    std::memcpy(scratch.data() + static_cast<size_t>(at) * row, buf + static_cast<size_t>(b) * row,
                sizeof(T) * static_cast<size_t>(e - b) * row);
    at += e - b;
  }
  std::memcpy(buf, scratch.data(), sizeof(T) * static_cast<size_t>(total) * row);
}

}  // namespace

void CausalKvCache::evict(int layer, const KvCacheSlot& slot) {
  if (slot.evict == 0) return;
  const bool shift = opt_.persistent_tokens == 0;
  if (bf16_) {
    compact(rows16(layer), 2 * width_, slot.keep, scratch16_, shift);
  } else {
    compact(rows32(layer), 2 * width_, slot.keep, scratch32_, shift);
  }
}

void CausalKvCache::commit(const KvCacheSlot& slot) {
  const bool new_chunk = slot.global_end > global_end_;
  global_end_ = slot.global_end;
  local_end_ = slot.local_end;
  persistent_ = slot.persistent;
  if (new_chunk) {
    // Scores decay at every new chunk; those of blocks no longer in the sink or window go.
    for (KvBlock& b : persistent_) b.score *= opt_.score_decay;
    const int64_t sink = std::min(opt_.sink_frames * opt_.frame_tokens, local_end_);
    const int64_t window_begin = global_end_ - (local_end_ - sink - persistent_rows());
    for (auto it = scores_.begin(); it != scores_.end();) {
      if (it->first >= sink && it->first < window_begin) {
        it = scores_.erase(it);
      } else {
        it->second *= opt_.score_decay;
        ++it;
      }
    }
  }
}

void CausalKvCache::reset() {
  global_end_ = local_end_ = 0;
  broken_ = false;
  persistent_.clear();
  scores_.clear();
}

}  // namespace vidax::wan
