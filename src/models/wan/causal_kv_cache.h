// The self-attention key/value cache of a causal (autoregressive) Wan rollout, as Self-Forcing
// and CausVid run it (docs/rollout.md): for every layer, the post-RoPE keys and the values of
// the latent frames generated so far, written by the DiT forward of each chunk
// (DitSample::kv_cache) and attended to by the chunks after it.
//
// Bookkeeping, exactly the reference's (`CausalWanSelfAttention.forward` with a kv_cache):
//  - global_end: the absolute token end written so far; local_end: the end inside the buffer.
//  - A call over tokens [start, start + n) with start + n > global_end appends (a new chunk);
//    one with start + n == global_end rewrites the last n rows (the chunk's further denoising
//    calls and its clean pass).
//  - Rolling (options.rolling, the reference's local_attn_size != -1): when an appending call
//    would overflow, the oldest rows after the sink are evicted (the rest shift left, a copy),
//    so the cache then holds the sink frames and the most recent frames, the chunk included.
//    Without rolling an overflowing call is an InputError (the reference fails there).
//  - Every call attends to all valid rows [0, local_end). Cached keys keep their absolute RoPE
//    positions (they are not re-rotated when the window moves).
//
// Persistent blocks (Sparse Forcing's PBSA, training-free; sparse/pbsa.h): with
// options.persistent_tokens > 0 a rolling cache does not drop what it evicts outright. The rows
// are cut into blocks (block_tokens tokens of one frame), each block carries a saliency score
// (the attention mass sampled queries gave it, add_block_mass, decayed at every new chunk),
// and the highest-scoring evicted blocks stay, up to persistent_tokens rows, between the sink
// and the window, in their original order: [sink | persistent blocks | window]. With room for
// every evicted block the rows are exactly those of a global cache.
//
// Layout: per layer one buffer [rows, 2 * width] = k | v per row (width = this rank's heads x
// head_dim), f32 or bf16 (the DiT's attention dtype). Allocated in full on first use.
//
// Thread-safety: none; one rollout owns it.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "core/buffer.h"
#include "core/tensor.h"  // BFloat16

namespace vidax::wan {

struct KvCacheOptions {
  int64_t frame_tokens = 0;       // tokens per latent frame, (H / ph) * (W / pw)
  int64_t capacity_frames = 0;    // frames the cache holds (sink and window)
  int64_t sink_frames = 0;        // frames kept at the front when it rolls
  bool rolling = false;           // evict the oldest non-sink frames when full
  int64_t persistent_tokens = 0;  // rows of evicted blocks kept (rolling only; 0: none)
  int64_t block_tokens = 64;      // tokens per block of a frame (the last one of a frame ragged)
  double score_decay = 0.5;       // a block's score is multiplied by this at every new chunk
};

// A block of cached rows: absolute tokens [begin, begin + rows) of one frame.
struct KvBlock {
  int64_t begin = 0, rows = 0;
  double score = 0;
};

// Where one call writes and what it attends to (rows of the buffer).
struct KvCacheSlot {
  int64_t start = 0, count = 0;  // the call's absolute tokens [start, start + count)
  int64_t evict = 0;             // rows evicted from the window before writing (0: none)
  // With an eviction: the rows kept, as [begin, end) ranges of the old buffer in their new order
  // (they are moved to the front of the buffer), and the persistent blocks after it.
  std::vector<std::pair<int64_t, int64_t>> keep;
  std::vector<KvBlock> persistent;
  int64_t write_begin = 0, write_end = 0;  // rows written
  int64_t local_end = 0;                   // valid rows after the call (attended: [0, local_end))
  int64_t global_end = 0;                  // absolute token end after the call
};

class CausalKvCache {
 public:
  // layers x [capacity + persistent, 2 * width]; bf16 selects the storage dtype. Throws
  // InputError on inconsistent options (capacity below one frame, sink not below the capacity,
  // persistent rows without rolling).
  CausalKvCache(int layers, int64_t width, bool bf16, const KvCacheOptions& options);

  const KvCacheOptions& options() const { return opt_; }
  int layers() const { return layers_; }
  int64_t width() const { return width_; }
  bool bf16() const { return bf16_; }
  // Rows of sink and window (the reference's cache size).
  int64_t capacity_tokens() const { return opt_.capacity_frames * opt_.frame_tokens; }
  // Rows of the buffer: capacity_tokens() + persistent_tokens.
  int64_t buffer_rows() const { return capacity_tokens() + opt_.persistent_tokens; }
  int64_t global_end() const { return global_end_; }
  int64_t local_end() const { return local_end_; }
  // Rows of persistent blocks now held (between the sink and the window).
  int64_t persistent_rows() const;
  const std::vector<KvBlock>& persistent_blocks() const { return persistent_; }
  // Bytes of the k | v buffers (allocated or not: every row of every layer).
  double bytes() const;
  // Bytes of the valid rows (what attention reads).
  double valid_bytes() const;

  // The absolute token of buffer row `row` < local_end (the rows of a cache in use; a call's
  // own rows included once its slot is planned and committed).
  int64_t token_of_row(int64_t row) const;
  // Saliency for persistent blocks: adds `mass` to the block holding absolute token `token`.
  // The scores of the blocks still cached are kept; they decay at every new chunk.
  void add_block_mass(int64_t token, double mass);

  // The slot of a call over [start, start + count). Throws InputError when the call neither
  // continues the cache (start == global_end) nor rewrites its last rows (start + count ==
  // global_end), or when it overflows a cache that does not roll.
  KvCacheSlot plan(int64_t start, int64_t count) const;
  // Moves layer `layer`'s rows for the slot's eviction (no-op without one). Called once per
  // layer, before that layer writes.
  void evict(int layer, const KvCacheSlot& slot);
  // After every layer wrote: the cache's ends (and persistent blocks) become the slot's.
  void commit(const KvCacheSlot& slot);
  // Empties the cache (keeps the buffers).
  void reset();
  // Marks the cache unusable (a forward failed half-way through its layers): plan() then throws
  // until reset().
  void invalidate() { broken_ = true; }

  // Layer rows [buffer_rows, 2 * width]: k at column 0, v at column width.
  float* rows32(int layer);
  BFloat16* rows16(int layer);

 private:
  void allocate();
  // The block of absolute token `token`: [begin, begin + rows).
  KvBlock block_of(int64_t token) const;
  int layers_;
  int64_t width_;
  bool bf16_;
  KvCacheOptions opt_;
  int64_t global_end_ = 0, local_end_ = 0;
  bool broken_ = false;
  std::vector<KvBlock> persistent_;  // in absolute order
  // Scores of the blocks of the sink and window rows, by block begin (absolute token).
  std::map<int64_t, double> scores_;
  std::vector<Buffer<float>> k32_;
  std::vector<Buffer<BFloat16>> k16_;
  Buffer<float> scratch32_;
  Buffer<BFloat16> scratch16_;
};

}  // namespace vidax::wan
