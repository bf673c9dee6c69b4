// Block-sparse flash attention, per Highway target (contract in block_sparse_attention.h).
// Included by flash_attention.cpp inside namespace vidax::HWY_NAMESPACE after the dense kernels,
// once per target, hence no include guard. It reuses the dense kernel's pieces unchanged:
// packing (64-key blocks, f32 transposed or bf16 pairs), the register tiles (ScoreTile*,
// PvTile*), RowMax / ExpRows* (online softmax), the AMX tile pipeline (AmxWork) and Scratch.
//
// Each partition key block is packed as ceil(size / 64) consecutive 64-key sub-blocks (ragged
// ones zero-padded, `valid` keys each), so a sparse task walks a list of sub-blocks where the
// dense task walks all of them. What differs from the dense task:
//   - BOUNDARY tiles: the predicate's keep tile replaces masked scores by a sentinel (-FLT_MAX
//     in the direction of the scale's sign) before RowMax, so the dense softmax steps run as is;
//   - the running maximum is floored at half the sentinel's scaled value (UpdateRowMaxFloor), so
//     that a row whose keys so far are all masked keeps a finite maximum, its masked entries
//     give 2^(very negative) = 0 exactly and nothing becomes NaN;
//   - rows that saw no key end with l = 0 and are written as 0 (FinishRowsSafe).
// Real scores satisfy |s| < FLT_MAX / 2, so they always stay above the floor.

struct SparseChunk {
  int64_t qb, q0, rows;  // query block, first row, rows (<= the task size)
};

// One softmax step of a task: `blocks` (1 or 2) packed sub-blocks, `sub` then `sub2`, holding
// `valid` keys, at key offset koff within partition key block starting at k0 (nk keys). sub2 is
// sub + 1 for the two halves of one key block; the AMX kernel also pairs the full 64-key FULL
// sub-blocks of two different key blocks (then koff / k0 / nk describe the first).
struct SparseStep {
  int64_t sub, sub2, blocks, valid, koff, k0, nk;
  bool boundary, first;  // first: first step of its key block (predicate evaluated there)
};

struct SparseProblem {
  SparseProblem(const BlockPartition& qp, const BlockPartition& kp, const BlockMask& mask,
                const TilePredicate& pred, const BlockSparseDims& dims,
                const BlockSparseOutput& output, const BlockSparseInput& input, int64_t task_rows)
      : qp(qp),
        kp(kp),
        mask(mask),
        pred(pred),
        d(dims),
        o(output),
        in(input),
        ad(dense_dims(dims, kp, input)),
        g(ad) {
    if (o.stride == 0) o.stride = d.heads * d.head_dim;
    in.stride = ad.q_stride;
    c = static_cast<float>(static_cast<double>(d.scale) * fa::kLog2e);
    sentinel = c > 0 ? -std::numeric_limits<float>::max() : std::numeric_limits<float>::max();
    floor = -0.5f * std::numeric_limits<float>::max() * std::fabs(c);
    sub_begin.push_back(0);
    for (int64_t b = 0; b < kp.blocks(); ++b) {
      const int64_t n = fa::ceil_div(kp.size(b), kBlockK);
      for (int64_t j = 0; j < n; ++j) {
        const int64_t start = kp.begin(b) + j * kBlockK;
        const int64_t end = std::min({start + kBlockK, kp.begin(b) + kp.size(b), ad.kv_valid});
        sub_start.push_back(start);
        sub_len.push_back(std::max<int64_t>(0, end - start));
      }
      sub_begin.push_back(static_cast<int64_t>(sub_start.size()));
      max_kb = std::max(max_kb, kp.size(b));
    }
    // Query blocks split into chunks of task_rows rows, the last one taking a remainder of
    // less than half a chunk (so no task is a sliver that fills an AMX row group of 32 with a
    // few rows).
    for (int64_t b = 0; b < qp.blocks(); ++b) {
      for (int64_t r = 0; r < qp.size(b);) {
        int64_t n = std::min(task_rows, qp.size(b) - r);
        if (qp.size(b) - r - n < task_rows / 2) n = qp.size(b) - r;
        chunks.push_back({b, qp.begin(b) + r, n});
        max_rows = std::max(max_rows, n);
        r += n;
      }
    }
  }
  static AttentionDims dense_dims(const BlockSparseDims& d, const BlockPartition& kp,
                                  const BlockSparseInput& in) {
    AttentionDims a{};
    a.q_len = 0;
    a.kv_len = kp.tokens();
    a.kv_valid = d.kv_valid > 0 ? d.kv_valid : kp.tokens();
    a.heads = d.heads;
    a.head_dim = d.head_dim;
    const int64_t src_heads = in.heads ? in.src_heads : d.heads;
    a.q_stride = a.k_stride = a.v_stride = in.stride > 0 ? in.stride : src_heads * d.head_dim;
    a.out_stride = d.heads * d.head_dim;
    a.scale = d.scale;
    return a;
  }
  int64_t nsub() const { return static_cast<int64_t>(sub_start.size()); }
  // Destination of output row i (permuted position) of mask head h.
  float* out_row(float* out, int64_t h, int64_t i) const {
    const int64_t r = o.rows ? o.rows[i] : i, dh = o.heads ? o.heads[h] : h;
    return out + r * o.stride + dh * d.head_dim;
  }
  // Source row of permuted position i of mask head h (q, k or v).
  template <class T>
  const T* in_row(const T* base, int64_t h, int64_t i) const {
    const int64_t r = in.rows ? in.rows[i] : i, sh = in.heads ? in.heads[h] : h;
    return base + r * in.stride + sh * d.head_dim;
  }
  // Geometry for packing sub-block `sub` through the dense pack functions (key block 0 of a
  // sequence that starts at the sub-block and has its valid keys).
  Geometry sub_geometry(int64_t sub) const {
    Geometry gs = g;
    gs.kv = sub_len[static_cast<size_t>(sub)];
    return gs;
  }

  // The steps of one (head, query block) row, keys_per_step = 64 or 128 (two sub-blocks).
  void build_steps(int64_t h, int64_t qb, int64_t keys_per_step,
                   std::vector<SparseStep>& steps) const {
    steps.clear();
    const BlockMask::Row row = mask.row(h, qb);
    for (size_t i = 0; i < row.key_blocks.size(); ++i) {
      const int64_t kb = row.key_blocks[i], k0 = kp.begin(kb), nk = kp.size(kb);
      const int64_t end = std::min(k0 + nk, ad.kv_valid);
      if (end <= k0) break;  // ascending: every later block is padding as well
      for (int64_t off = 0; k0 + off < end; off += keys_per_step) {
        const int64_t valid = std::min(keys_per_step, end - k0 - off);
        const int64_t sub = sub_begin[static_cast<size_t>(kb)] + off / kBlockK;
        const SparseStep step{sub, sub + 1, fa::ceil_div(valid, kBlockK), valid,   off,
                              k0,  nk,      row.boundary[i] != 0,         off == 0};
        // Two-sub-block steps: a lone full 64-key FULL step and the next one-sub-block FULL
        // step, of any key block, are one 128-key step (the softmax is order-free), so small key
        // blocks (SPADE's 64-token blocks, scattered by top-k) fill the AMX step. The first must
        // be full: the second's keys are columns 64.. of the step.
        if (keys_per_step == 2 * kBlockK && !steps.empty()) {
          SparseStep& prev = steps.back();
          if (!prev.boundary && !step.boundary && prev.blocks == 1 && prev.valid == kBlockK &&
              step.blocks == 1) {
            prev.blocks = 2;
            prev.sub2 = step.sub;
            prev.valid = kBlockK + step.valid;
            continue;
          }
        }
        steps.push_back(step);
      }
    }
  }

  const BlockPartition& qp;
  const BlockPartition& kp;
  const BlockMask& mask;
  const TilePredicate& pred;
  BlockSparseDims d;
  BlockSparseOutput o;
  BlockSparseInput in;  // stride filled in
  AttentionDims ad;     // the dense view: strides, kv_valid, scale
  Geometry g;
  float c = 0, sentinel = 0, floor = 0;
  std::vector<int64_t> sub_begin;  // [k_blocks + 1] first packed sub-block of each key block
  std::vector<int64_t> sub_start, sub_len;
  std::vector<SparseChunk> chunks;
  int64_t max_rows = 0, max_kb = 0;
};

// Masked scores of a boundary step get the sentinel: keep[i * ld + j] == 0 for row i, key j.
HWY_INLINE void MaskScores(int64_t rows, int64_t valid, float* sb, int64_t width,
                           const uint8_t* keep, int64_t ld, float sentinel) {
  for (int64_t i = 0; i < rows; ++i) {
    const uint8_t* ki = keep + i * ld;
    float* si = sb + i * width;
    for (int64_t j = 0; j < valid; ++j)
      if (!ki[j]) si[j] = sentinel;
  }
}

// UpdateRowMax with the maximum floored (see the top of this file).
HWY_INLINE void UpdateRowMaxFloor(int64_t rows, float* HWY_RESTRICT m, const float* HWY_RESTRICT bm,
                                  float* HWY_RESTRICT alpha, float floor) {
  const DF df;
  const VF vfloor = hn::Set(df, floor);
  for (int64_t i = 0; i < rows; i += kLanes) {
    const VF old = hn::Load(df, m + i);
    const VF now = hn::Max(hn::Max(old, hn::Load(df, bm + i)), vfloor);
    hn::Store(Exp2(df, hn::Sub(old, now)), df, alpha + i);
    hn::Store(now, df, m + i);
  }
}

// FinishRows, with rows that never saw a key (l == 0) written as 0, each row to its destination.
HWY_INLINE void FinishRowsSafe(const SparseProblem& sp, int64_t h, int64_t q0, int64_t rows,
                               const RowState& s, float* out) {
  const DF df;
  const Geometry& g = sp.g;
  for (int64_t i = 0; i < rows; ++i) {
    const float l = hn::GetLane(hn::SumOfLanes(df, hn::Load(df, s.lsum + i * 16)));
    const float inv = l > 0 ? 1.0f / l : 0.0f;
    const float* oi = s.o + i * g.dv;
    float* dst = sp.out_row(out, h, q0 + i);
    for (int64_t c = 0; c < g.hd; ++c) dst[c] = l > 0 ? oi[c] * inv : 0.0f;
  }
}

// Sub-block `sub` of mask head h as the dense pack functions read it (rows at a fixed stride,
// head `h` of `ad`): in place when the input rows are in permuted order, else its rows copied
// into `stage` as [keys, head_dim] (an L1-sized copy instead of a gather pass over q, k, v).
template <class T>
struct SubBlockSource {
  const T* base;
  AttentionDims ad;
  int64_t h;
};
template <class T>
SubBlockSource<T> SubBlockRows(const SparseProblem& sp, const T* src, int64_t h, int64_t sub,
                               std::vector<T>& stage) {
  const int64_t start = sp.sub_start[static_cast<size_t>(sub)];
  if (!sp.in.rows) return {src + start * sp.in.stride, sp.ad, sp.in.heads ? sp.in.heads[h] : h};
  const int64_t n = sp.sub_len[static_cast<size_t>(sub)], hd = sp.d.head_dim;
  stage.resize(static_cast<size_t>(std::max<int64_t>(1, n) * hd));
  for (int64_t j = 0; j < n; ++j)
    std::memcpy(stage.data() + j * hd, sp.in_row(src, h, start + j),
                static_cast<size_t>(hd) * sizeof(T));
  AttentionDims ad = sp.ad;
  ad.k_stride = ad.v_stride = hd;
  return {stage.data(), ad, 0};
}

// Query rows of a sparse task as bf16 (LoadQueryBf16 through the input's row map).
HWY_INLINE void LoadSparseQueryBf16(const SparseProblem& sp, const BFloat16* q, int64_t h,
                                    int64_t q0, int64_t rows, int64_t padded_rows, uint16_t* qs) {
  const int64_t ld = 2 * sp.g.kpairs;
  std::fill(qs, qs + padded_rows * ld, uint16_t{0});
  for (int64_t i = 0; i < rows; ++i)
    std::memcpy(qs + i * ld, sp.in_row(q, h, q0 + i), static_cast<size_t>(sp.g.hd) * 2);
}

// Packs every sub-block of every head group and runs task(h, chunk, k_head, v_head, scratch,
// keep, steps) for every (head, chunk): the dense RunBlocked with sub-blocks for key blocks and
// chunks of query blocks for query blocks.
template <class Pack, class Task>
void RunSparse(const SparseProblem& sp, int64_t k_block, int64_t v_block, int64_t width,
               const Pack& pack, const Task& task) {
  const int64_t nsub = sp.nsub(), heads = sp.d.heads;
  const int64_t head_elems = std::max<int64_t>(1, nsub * (k_block + v_block));
  const int64_t group = std::clamp<int64_t>(fa::kPackBudgetBytes / (head_elems * 4), 1, heads);
  float* base = fa::packed_scratch(static_cast<size_t>(group * head_elems));
  const int64_t nch = static_cast<int64_t>(sp.chunks.size());
  for (int64_t h0 = 0; h0 < heads; h0 += group) {
    const int64_t hg = std::min(group, heads - h0);
#pragma omp parallel
    {
#pragma omp for schedule(static)
      for (int64_t t = 0; t < hg * nsub; ++t) {
        const int64_t hl = t / nsub, sub = t % nsub;
        float* head = base + hl * head_elems;
        pack(h0 + hl, sub, head + sub * k_block, head + nsub * k_block + sub * v_block);
      }
      // Rows rounded to 32: the AMX task pads its row groups to two 16-row tiles.
      const Scratch scratch(sp.g, fa::round_up(sp.max_rows, 32), width);
      std::vector<uint8_t> keep(static_cast<size_t>(sp.max_rows * sp.max_kb));
      std::vector<SparseStep> steps;
#pragma omp for schedule(dynamic, 1)
      for (int64_t t = 0; t < hg * nch; ++t) {
        const int64_t hl = t / nch;
        const float* head = base + hl * head_elems;
        task(h0 + hl, sp.chunks[static_cast<size_t>(t % nch)], head, head + nsub * k_block, scratch,
             keep.data(), steps);
      }
    }
  }
}

HWY_INLINE void ZeroRows(const SparseProblem& sp, int64_t h, int64_t q0, int64_t rows, float* out) {
  for (int64_t i = 0; i < rows; ++i) {
    float* dst = sp.out_row(out, h, q0 + i);
    std::fill(dst, dst + sp.d.head_dim, 0.0f);
  }
}

// One (head, chunk) task on f32 (or widened bf16) packed sub-blocks: TaskWidened over a list.
template <class T>
void TaskSparseWidened(const SparseProblem& sp, const T* q, float* out, int64_t h,
                       const SparseChunk& ch, const float* kt_head, const float* v_head,
                       const Scratch& s, uint8_t* keep, std::vector<SparseStep>& steps) {
  const Geometry& g = sp.g;
  const int64_t hd = g.hd, dv = g.dv, nvec = dv / kLanes, rows = ch.rows;
  sp.build_steps(h, ch.qb, kBlockK, steps);
  if (steps.empty()) return ZeroRows(sp, h, ch.q0, rows, out);
  for (int64_t i = 0; i < rows; ++i) {
    const T* src = sp.in_row(q, h, ch.q0 + i);
    for (int64_t c = 0; c < hd; ++c) s.q[i * hd + c] = fa::to_f32(src[c]);
  }
  StartRows(fa::round_up(rows, 16), s);
  const RowState st = s.at(0);
  for (const SparseStep& step : steps) {
    if (step.boundary && step.first) sp.pred(h, ch.q0, rows, step.k0, step.nk, keep);
    const float* kt = kt_head + step.sub * hd * kBlockK;
    const float* vb = v_head + step.sub * kBlockK * dv;
    for (int64_t r0 = 0; r0 < rows; r0 += kR) {
      with_count<kR>(std::min<int64_t>(kR, rows - r0), [&](auto nr) {
        ScoreTileF32<decltype(nr)::value>(s.q + r0 * hd, hd, kt, hd, s.s + r0 * kBlockK);
      });
    }
    if (step.boundary)
      MaskScores(rows, step.valid, s.s, kBlockK, keep + step.koff, step.nk, sp.sentinel);
    RowMax(rows, step.valid, sp.c, s.s, st);
    UpdateRowMaxFloor(rows, s.m, s.bm, s.alpha, sp.floor);
    ExpRowsF32(rows, step.valid, sp.c, s.s, st);
    for (int64_t r0 = 0; r0 < rows; r0 += kR) {
      with_count<kR>(std::min<int64_t>(kR, rows - r0), [&](auto nr) {
        for (int64_t c0 = 0; c0 < nvec; c0 += kC) {
          with_count<kC>(std::min<int64_t>(kC, nvec - c0), [&](auto nc) {
            PvTileF32<decltype(nr)::value, decltype(nc)::value>(s.s + r0 * kBlockK, s.alpha + r0,
                                                                vb + c0 * kLanes, dv, step.valid,
                                                                s.o + r0 * dv + c0 * kLanes);
          });
        }
      });
    }
  }
  FinishRowsSafe(sp, h, ch.q0, rows, st, out);
}

template <class T>
void SparseWidened(const T* q, const T* k, const T* v, float* out, const SparseProblem& sp) {
  const Geometry& g = sp.g;
  RunSparse(
      sp, g.hd * kBlockK, kBlockK * g.dv, kBlockK,
      [&](int64_t h, int64_t sub, float* kt, float* vp) {
        const Geometry gs = sp.sub_geometry(sub);
        thread_local ThreadScratch<std::vector<T>> stage_k_scratch, stage_v_scratch;
        std::vector<T>& stage_k = stage_k_scratch.value;
        std::vector<T>& stage_v = stage_v_scratch.value;
        const SubBlockSource<T> ks = SubBlockRows(sp, k, h, sub, stage_k);
        const SubBlockSource<T> vs = SubBlockRows(sp, v, h, sub, stage_v);
#if VIDAX_FA_AVX512
        PackKTransposedAvx512(ks.base, ks.ad, gs, ks.h, 0, kt);
#else
        PackKTransposed(ks.base, ks.ad, gs, ks.h, 0, kt);
#endif
        PackV(vs.base, vs.ad, gs, vs.h, 0, vp);
      },
      [&](int64_t h, const SparseChunk& ch, const float* kt, const float* vp, const Scratch& s,
          uint8_t* keep, std::vector<SparseStep>& steps) {
        TaskSparseWidened(sp, q, out, h, ch, kt, vp, s, keep, steps);
      });
}

#if VIDAX_FA_AVX512

// As in flash_attention_x86-inl.h (which undefines its own at its end).
#undef VIDAX_FA_COMPILER_BARRIER
#define VIDAX_FA_COMPILER_BARRIER() asm volatile("" ::: "memory")

template <class Task>
void RunSparsePairs(const BFloat16* k, const BFloat16* v, const SparseProblem& sp, int64_t width,
                    const Task& task) {
  const Geometry& g = sp.g;
  RunSparse(
      sp, g.kpairs * kBlockK, (kBlockK / 2) * g.dv, width,
      [&](int64_t h, int64_t sub, float* kp, float* vp) {
        const Geometry gs = sp.sub_geometry(sub);
        thread_local ThreadScratch<std::vector<BFloat16>> stage_k_scratch, stage_v_scratch;
        std::vector<BFloat16>& stage_k = stage_k_scratch.value;
        std::vector<BFloat16>& stage_v = stage_v_scratch.value;
        const SubBlockSource<BFloat16> ks = SubBlockRows(sp, k, h, sub, stage_k);
        const SubBlockSource<BFloat16> vs = SubBlockRows(sp, v, h, sub, stage_v);
        PackKPairsAvx512(ks.base, ks.ad, gs, ks.h, 0, reinterpret_cast<uint32_t*>(kp));
        PackVPairsAvx512(vs.base, vs.ad, gs, vs.h, 0, reinterpret_cast<uint32_t*>(vp));
      },
      [&](int64_t h, const SparseChunk& ch, const float* kp, const float* vp, const Scratch& s,
          uint8_t* keep, std::vector<SparseStep>& steps) {
        task(h, ch, reinterpret_cast<const uint32_t*>(kp), reinterpret_cast<const uint32_t*>(vp), s,
             keep, steps);
      });
}

// TaskDpBf16 over a list of sub-blocks. No lambda calls a bf16 intrinsic or a force-inlined
// bf16 function (see flash_attention_x86-inl.h).
VIDAX_FA_BF16 void TaskSparseDpBf16(const SparseProblem& sp, const BFloat16* q, float* out,
                                    int64_t h, const SparseChunk& ch, const uint32_t* kp_head,
                                    const uint32_t* vp_head, const Scratch& s, uint8_t* keep,
                                    std::vector<SparseStep>& steps) {
  const Geometry& g = sp.g;
  const int64_t dv = g.dv, nvec = dv / 16, q_ld = g.kpairs, rows = ch.rows;
  sp.build_steps(h, ch.qb, kBlockK, steps);
  if (steps.empty()) return ZeroRows(sp, h, ch.q0, rows, out);
  LoadSparseQueryBf16(sp, q, h, ch.q0, rows, rows, s.q16());
  const auto* qp = reinterpret_cast<const uint32_t*>(s.q16());
  const auto* p32 = reinterpret_cast<const uint32_t*>(s.p16());
  StartRows(fa::round_up(rows, 16), s);
  const RowState st = s.at(0);
  for (const SparseStep& step : steps) {
    if (step.boundary && step.first) sp.pred(h, ch.q0, rows, step.k0, step.nk, keep);
    const uint32_t* kp = kp_head + step.sub * g.kpairs * kBlockK;
    const uint32_t* vb = vp_head + step.sub * (kBlockK / 2) * dv;
    for (int64_t r0 = 0; r0 < rows; r0 += kR) {
      with_count<kR>(std::min<int64_t>(kR, rows - r0), [&](auto nr) {
        ScoreTileBf16<decltype(nr)::value>(qp + r0 * q_ld, q_ld, kp, g.dpairs, s.s + r0 * kBlockK);
      });
    }
    if (step.boundary)
      MaskScores(rows, step.valid, s.s, kBlockK, keep + step.koff, step.nk, sp.sentinel);
    RowMax(rows, step.valid, sp.c, s.s, st);
    UpdateRowMaxFloor(rows, s.m, s.bm, s.alpha, sp.floor);
    ExpRowsBf16(rows, step.valid, sp.c, s.s, s.p16(), st);
    const int64_t npairs = fa::ceil_div(step.valid, 2);
    for (int64_t r0 = 0; r0 < rows; r0 += kR) {
      with_count<kR>(std::min<int64_t>(kR, rows - r0), [&](auto nr) {
        for (int64_t c0 = 0; c0 < nvec; c0 += kC) {
          with_count<kC>(std::min<int64_t>(kC, nvec - c0), [&](auto nc) {
            PvTileBf16<decltype(nr)::value, decltype(nc)::value>(p32 + r0 * (kBlockK / 2),
                                                                 s.alpha + r0, vb + c0 * 16, dv,
                                                                 npairs, s.o + r0 * dv + c0 * 16);
          });
        }
      });
    }
  }
  FinishRowsSafe(sp, h, ch.q0, rows, st, out);
}

// TaskAmx over a list of steps of up to kAmxKeys keys (a step's two sub-blocks may lie anywhere
// in the packed buffers: sub and sub2).
VIDAX_FA_AMX void TaskSparseAmx(const SparseProblem& sp, const BFloat16* q, float* out, int64_t h,
                                const SparseChunk& ch, const uint32_t* kp_head,
                                const uint32_t* vp_head, const Scratch& s, uint8_t* keep,
                                std::vector<SparseStep>& steps) {
  const Geometry& g = sp.g;
  const int64_t dv = g.dv, dq = 2 * g.kpairs, rows = ch.rows;
  sp.build_steps(h, ch.qb, kAmxKeys, steps);
  const int64_t nsteps = static_cast<int64_t>(steps.size());
  if (nsteps == 0) return ZeroRows(sp, h, ch.q0, rows, out);
  const int64_t groups = fa::ceil_div(rows, kAmxRows);
  LoadSparseQueryBf16(sp, q, h, ch.q0, rows, groups * kAmxRows, s.q16());
  StartRows(groups * kAmxRows, s);  // padded rows enter the tiles too: keep them 0
  // P rows past `rows` are never written by the softmax; zero them in both buffers (the rows
  // below are written in full, every key column, at each step).
  for (int64_t copy = 0; copy < 2; ++copy)
    std::fill(s.p16(copy) + rows * kAmxKeys, s.p16(copy) + groups * kAmxRows * kAmxKeys,
              uint16_t{0});
  auto add_scores = [&](AmxWork& work, int64_t grp, int64_t t) {
    const SparseStep& st = steps[static_cast<size_t>(t)];
    work.AddScores(s.q16() + grp * kAmxRows * dq, dq, kp_head + st.sub * g.kpairs * kBlockK,
                   st.blocks, s.scores(t % 2) + grp * kAmxRows * kAmxKeys,
                   kp_head + st.sub2 * g.kpairs * kBlockK);
  };
  auto add_pv = [&](AmxWork& work, int64_t grp, int64_t t) {
    const SparseStep& st = steps[static_cast<size_t>(t)];
    work.AddPv(s.p16(t % 2) + grp * kAmxRows * kAmxKeys, vp_head + st.sub * (kBlockK / 2) * dv, dv,
               fa::ceil_div(st.valid, 32), s.o + grp * kAmxRows * dv,
               vp_head + st.sub2 * (kBlockK / 2) * dv);
  };
  const AmxTileConfig config;
  AmxWork work;
  VIDAX_FA_COMPILER_BARRIER();
  _tile_loadconfig(&config);
  for (int64_t grp = 0; grp < groups; ++grp) {
    add_scores(work, grp, 0);
    work.Drain();
  }
  for (int64_t t = 0; t < nsteps; ++t) {
    const SparseStep& step = steps[static_cast<size_t>(t)];
    if (step.boundary && step.first) sp.pred(h, ch.q0, rows, step.k0, step.nk, keep);
    for (int64_t grp = 0; grp < groups; ++grp) {
      const int64_t n = std::min(kAmxRows, rows - grp * kAmxRows);
      const RowState st = s.at(grp * kAmxRows);
      float* sb = s.scores(t % 2) + grp * kAmxRows * kAmxKeys;
      VIDAX_FA_COMPILER_BARRIER();
      if (step.boundary)
        MaskScores(n, step.valid, sb, kAmxKeys, keep + grp * kAmxRows * step.nk + step.koff,
                   step.nk, sp.sentinel);
      if (t > 0) add_pv(work, grp, t - 1);
      if (t + 1 < nsteps) add_scores(work, grp, t + 1);
      const int64_t total = work.remaining(), calls = 2 * n;
      int64_t call = 0, issued = 0;
      auto hook = [&] {
        const int64_t due = (++call * total + calls - 1) / calls;
        for (; issued < due; ++issued) work.Step();
      };
      RowMax(n, step.valid, sp.c, sb, st, hook);
      UpdateRowMaxFloor(n, st.m, st.bm, st.alpha, sp.floor);
      ExpRowsBf16(n, step.valid, sp.c, sb, s.p16(t % 2) + grp * kAmxRows * kAmxKeys, st, hook);
      work.Drain();
      VIDAX_FA_COMPILER_BARRIER();
      RescaleRows(n, st.alpha, st.o, dv);
    }
  }
  for (int64_t grp = 0; grp < groups; ++grp) {
    VIDAX_FA_COMPILER_BARRIER();
    add_pv(work, grp, nsteps - 1);
    work.Drain();
  }
  VIDAX_FA_COMPILER_BARRIER();
  _tile_release();
  FinishRowsSafe(sp, h, ch.q0, rows, s.at(0), out);
}

#undef VIDAX_FA_COMPILER_BARRIER
#endif  // VIDAX_FA_AVX512

// kernel: -1 for f32 inputs, else a resolved AttentionBf16Kernel the machine has.
void BlockSparseRun(int kernel, const void* q, const void* k, const void* v, float* out,
                    const BlockPartition& qp, const BlockPartition& kp, const BlockMask& mask,
                    const TilePredicate& pred, const BlockSparseDims& d, const BlockSparseOutput& o,
                    const BlockSparseInput& in) {
  if (kernel < 0) {
    const SparseProblem sp(qp, kp, mask, pred, d, o, in, kBlockQ);
    return SparseWidened(static_cast<const float*>(q), static_cast<const float*>(k),
                         static_cast<const float*>(v), out, sp);
  }
  const auto* q16 = static_cast<const BFloat16*>(q);
  const auto* k16 = static_cast<const BFloat16*>(k);
  const auto* v16 = static_cast<const BFloat16*>(v);
#if VIDAX_FA_AVX512
  if (kernel == static_cast<int>(AttentionBf16Kernel::kAmx)) {
    const SparseProblem sp(qp, kp, mask, pred, d, o, in, kAmxGroups * kAmxRows);
    return RunSparsePairs(
        k16, v16, sp, kAmxKeys,
        [&](int64_t h, const SparseChunk& ch, const uint32_t* kpk, const uint32_t* vpk,
            const Scratch& s, uint8_t* keep, std::vector<SparseStep>& steps) {
          TaskSparseAmx(sp, q16, out, h, ch, kpk, vpk, s, keep, steps);
        });
  }
  if (kernel == static_cast<int>(AttentionBf16Kernel::kAvx512Bf16)) {
    const SparseProblem sp(qp, kp, mask, pred, d, o, in, kBlockQ);
    return RunSparsePairs(
        k16, v16, sp, kBlockK,
        [&](int64_t h, const SparseChunk& ch, const uint32_t* kpk, const uint32_t* vpk,
            const Scratch& s, uint8_t* keep, std::vector<SparseStep>& steps) {
          TaskSparseDpBf16(sp, q16, out, h, ch, kpk, vpk, s, keep, steps);
        });
  }
#endif
  const SparseProblem sp(qp, kp, mask, pred, d, o, in, kBlockQ);
  SparseWidened(q16, k16, v16, out, sp);
}
