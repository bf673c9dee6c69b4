#include "dist/sequence_parallel.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "core/convert.h"
#include "core/error.h"
#include "core/profile.h"
#include "kernels/cpu/attention_lse.h"
#include "kernels/cpu/flash_attention.h"

namespace vidax {
namespace {

template <typename T>
constexpr DType wire_dtype() {
  return std::is_same_v<T, float> ? DType::kF32 : DType::kBF16;
}

// Ring attention over the ring group: `q` holds this ring shard's rows (`rows`, the same count
// on every ring rank), `k`/`v` (row stride `q_stride`) this shard's keys and values. Chunk j holds
// global rows [j * rows, (j + 1) * rows), of which those below `total` are real keys. The
// buffers are the workspace's, reused from block to block.
template <typename T>
void ring_attention(dist::Group& ring, const T* q, const T* k, const T* v, int64_t q_stride,
                    int64_t rows, int64_t total, int64_t heads, int64_t head_dim, float scale,
                    float* out, int64_t out_stride, SeqParallelWorkspace& ws) {
  const int R = ring.size(), g = ring.rank();
  const int64_t width = heads * head_dim;
  const auto chunk = static_cast<size_t>(rows * 2 * width);
  Buffer<T>* kv = &ws.pick<T>(ws.kv32, ws.kv16);        // [rows][2 * width] held
  Buffer<T>* next = &ws.pick<T>(ws.next32, ws.next16);  // [rows][2 * width] arriving
  kv->resize(chunk);
  next->resize(chunk);
  ws.part.resize(static_cast<size_t>(rows * width));
  ws.part_lse.resize(static_cast<size_t>(rows * heads));
  ws.lse.resize(static_cast<size_t>(rows * heads));
  std::fill_n(ws.lse.data(), rows * heads, -std::numeric_limits<float>::infinity());
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(kv->data() + r * 2 * width, k + r * q_stride,
                sizeof(T) * static_cast<size_t>(width));
    std::memcpy(kv->data() + r * 2 * width + width, v + r * q_stride,
                sizeof(T) * static_cast<size_t>(width));
    std::fill_n(out + r * out_stride, width, 0.0f);
  }
  for (int s = 0; s < R; ++s) {
    const int owner = ((g - s) % R + R) % R;  // ring rank whose rows this chunk holds
    // Pass the chunk on, then attend to it (no overlap yet: send_recv blocks).
    if (s + 1 < R) {
      profile::ScopedTimer pt("comm.ring");
      ring.send_recv(kv->data(), static_cast<int64_t>(chunk), (g + 1) % R, next->data(),
                     static_cast<int64_t>(chunk), (g - 1 + R) % R, wire_dtype<T>());
    }
    const int64_t valid = std::clamp<int64_t>(total - owner * rows, 0, rows);
    if (valid > 0) {
      // The dense flash kernels (the same ones one process runs), returning the log-sum-exp.
      AttentionDims d{};
      d.q_len = rows;
      d.kv_len = rows;
      d.kv_valid = valid;
      d.heads = heads;
      d.head_dim = head_dim;
      d.q_stride = q_stride;
      d.k_stride = d.v_stride = 2 * width;
      d.out_stride = width;
      d.scale = scale;
      d.lse = ws.part_lse.data();
      flash_attention(q, kv->data(), kv->data() + width, ws.part.data(), d);
      merge_attention_partial(out, ws.lse.data(), ws.part.data(), ws.part_lse.data(), rows, heads,
                              head_dim, out_stride, width);
    }
    if (s + 1 < R) std::swap(kv, next);
  }
}

}  // namespace

SeqShard seq_shard(int64_t total, int sp_rank, int sp_size) {
  VIDAX_CHECK(sp_size >= 1 && sp_rank >= 0 && sp_rank < sp_size, "seq_shard ", sp_rank, "/",
              sp_size);
  SeqShard s;
  s.total = total;
  s.sp_rank = sp_rank;
  s.sp_size = sp_size;
  s.per_rank = (total + sp_size - 1) / sp_size;
  s.first = s.per_rank * sp_rank;
  s.real = std::clamp<int64_t>(total - s.first, 0, s.per_rank);
  return s;
}

template <typename T>
void ulysses_to_heads(dist::Group& ulysses, const T* qkv, int64_t stride, int64_t rows,
                      int64_t heads, int64_t head_dim, Buffer<T>& send, Buffer<T>& out) {
  const int U = ulysses.size();
  const int64_t dim = heads * head_dim, width = heads / U * head_dim;
  const auto n = static_cast<size_t>(U * rows * 3 * width);
  send.resize(n);
  out.resize(n);
  T* dst = send.data();
  {
    profile::ScopedTimer pt("ulysses.pack");
#pragma omp parallel for collapse(2) schedule(static)
    for (int d = 0; d < U; ++d)
      for (int64_t r = 0; r < rows; ++r)
        for (int p = 0; p < 3; ++p)
          std::memcpy(dst + ((d * rows + r) * 3 + p) * width,
                      qkv + r * stride + p * dim + d * width,
                      sizeof(T) * static_cast<size_t>(width));
  }
  profile::ScopedTimer pt("comm.ulysses");
  ulysses.all_to_all(send.data(), out.data(), rows * 3 * width, wire_dtype<T>());
}

template <typename T>
void sequence_parallel_attention(const dist::Mesh& mesh, const SeqShard& shard, const T* qkv,
                                 int64_t stride, int64_t heads, int64_t head_dim, float scale,
                                 const AttentionCore<T>& core, float* out, int64_t out_stride,
                                 SeqParallelWorkspace& ws) {
  dist::Group& uly = mesh.ulysses();
  dist::Group& ring = mesh.ring();
  const int U = uly.size(), u = uly.rank();
  const int64_t dim = heads * head_dim;
  VIDAX_CHECK(heads % U == 0, "ulysses ", U, " does not divide ", heads, " heads");
  const int64_t hl = heads / U, width = hl * head_dim, lr = shard.per_rank;
  const int64_t rows = lr * U;  // rows of this ring shard after the exchange

  // ---- Ulysses in: [lr][3][heads][hd] -> [U * lr][3][hl][hd] (this rank's heads, all rows).
  const T* q = qkv;
  int64_t q_stride = stride;
  if (U > 1) {
    Buffer<T>& send = ws.pick<T>(ws.send32, ws.send16);
    Buffer<T>& gathered = ws.pick<T>(ws.recv32, ws.recv16);
    ulysses_to_heads(uly, qkv, stride, lr, heads, head_dim, send, gathered);
    q = gathered.data();
    q_stride = 3 * width;
  }
  const T* k = q + (U > 1 ? width : dim);
  const T* v = q + (U > 1 ? 2 * width : 2 * dim);

  // ---- Attention over the complete sequence (ring: chunk by chunk) into [rows][hl][hd].
  ws.heads_out.resize(static_cast<size_t>(rows * width));
  float* heads_out = ws.heads_out.data();
  if (ring.size() == 1) {
    // Padding rows sit at the end: they are neither queries nor keys (their output is 0).
    core(q, k, v, q_stride, shard.total, hl, u * hl, heads_out, width);
    std::fill(heads_out + shard.total * width, heads_out + rows * width, 0.0f);
  } else {
    ring_attention(ring, q, k, v, q_stride, rows, shard.total, hl, head_dim, scale, heads_out,
                   width, ws);
  }

  // ---- Ulysses out: [U * lr][hl][hd] -> [lr][heads][hd]. A bf16 run sends the output as bf16:
  // the o projection rounds its input to bf16 anyway, so the result is the same bits.
  if (U > 1) {
    const auto n = static_cast<size_t>(rows * width);
    ws.back.resize(n);
    if (std::is_same_v<T, BFloat16>) {
      ws.send16.resize(n);
      ws.recv16.resize(n);
      convert_floats(heads_out, DType::kF32, ws.send16.data(), DType::kBF16, n);
      {
        profile::ScopedTimer pt("comm.ulysses");
        uly.all_to_all(ws.send16.data(), ws.recv16.data(), lr * width, DType::kBF16);
      }
      convert_floats(ws.recv16.data(), DType::kBF16, ws.back.data(), DType::kF32, n);
    } else {
      profile::ScopedTimer pt("comm.ulysses");
      uly.all_to_all(heads_out, ws.back.data(), lr * width, DType::kF32);
    }
    const float* back = ws.back.data();
    profile::ScopedTimer pt("ulysses.unpack");
#pragma omp parallel for collapse(2) schedule(static)
    for (int d = 0; d < U; ++d)
      for (int64_t r = 0; r < lr; ++r)
        std::memcpy(out + r * out_stride + d * width, back + (d * lr + r) * width,
                    sizeof(float) * static_cast<size_t>(width));
  } else {
    for (int64_t r = 0; r < lr; ++r)
      std::memcpy(out + r * out_stride, heads_out + r * width,
                  sizeof(float) * static_cast<size_t>(width));
  }
  for (int64_t r = shard.real; r < lr; ++r) std::fill_n(out + r * out_stride, dim, 0.0f);
}

template void ulysses_to_heads<float>(dist::Group&, const float*, int64_t, int64_t, int64_t,
                                      int64_t, Buffer<float>&, Buffer<float>&);
template void ulysses_to_heads<BFloat16>(dist::Group&, const BFloat16*, int64_t, int64_t, int64_t,
                                         int64_t, Buffer<BFloat16>&, Buffer<BFloat16>&);
template void sequence_parallel_attention<float>(const dist::Mesh&, const SeqShard&, const float*,
                                                 int64_t, int64_t, int64_t, float,
                                                 const AttentionCore<float>&, float*, int64_t,
                                                 SeqParallelWorkspace&);
template void sequence_parallel_attention<BFloat16>(const dist::Mesh&, const SeqShard&,
                                                    const BFloat16*, int64_t, int64_t, int64_t,
                                                    float, const AttentionCore<BFloat16>&, float*,
                                                    int64_t, SeqParallelWorkspace&);

}  // namespace vidax
