// AVX-512-only parts of the flash attention kernels: vectorized packing, the vdpbf16ps
// (AVX512-BF16) kernel and the AMX-BF16 kernel. Included by flash_attention.cpp inside
// namespace vidax::HWY_NAMESPACE when compiling the AVX3 targets, once per such target, hence
// no include guard; it uses that file's helpers (Exp2, the softmax steps, RunBlocked). The
// functions marked VIDAX_FA_BF16 / VIDAX_FA_AMX are compiled with those ISA extensions added to
// the target's and are only called after the run-time checks in fa::cpu_has_avx512_bf16 /
// fa::amx_bf16_usable. Lambdas do not inherit such attributes (GCC and clang alike), so no
// lambda here uses a bf16 or AMX intrinsic directly, and functions that lambdas call are not
// force-inlined.

#undef VIDAX_FA_BF16
#undef VIDAX_FA_AMX
#define VIDAX_FA_BF16 __attribute__((target(HWY_TARGET_STR ",avx512bf16")))
#define VIDAX_FA_AMX __attribute__((target(HWY_TARGET_STR ",avx512bf16,amx-tile,amx-bf16")))

// ------------------------------------------------------------------------------ packing
// bf16 "pair" (VNNI) layouts, the operands of vdpbf16ps and of the AMX B tiles: two bf16 in one
// 32-bit word, the lower-indexed one in the low half. Per key block:
//   kp[p][j] = (k[j][2p], k[j][2p+1])  for p < kpairs, j < kBlockK
//   vp[m][c] = (v[2m][c], v[2m+1][c])  for m < kBlockK/2, c < dv
// zero-padded in channels and past kv_valid.

// GCC 12 warns (-Wmaybe-uninitialized, a false positive) on several unmasked intrinsics
// (unpack, shuffle, scalef, ...), which it implements with an undefined pass-through operand;
// the zero-masking forms with an all-ones mask compile to the same instructions without it.
HWY_INLINE __m512i UnpackLo32(__m512i a, __m512i b) {
  return _mm512_maskz_unpacklo_epi32(0xFFFF, a, b);
}
HWY_INLINE __m512i UnpackHi32(__m512i a, __m512i b) {
  return _mm512_maskz_unpackhi_epi32(0xFFFF, a, b);
}
HWY_INLINE __m512i UnpackLo64(__m512i a, __m512i b) {
  return _mm512_maskz_unpacklo_epi64(0xFF, a, b);
}
HWY_INLINE __m512i UnpackHi64(__m512i a, __m512i b) {
  return _mm512_maskz_unpackhi_epi64(0xFF, a, b);
}

// Transposes 16 rows of 16 32-bit elements in place: r[i][j] becomes r[j][i].
HWY_INLINE void Transpose16x16(__m512i r[16]) {
  __m512i t[16];
  for (int k = 0; k < 16; k += 2) {  // interleave row pairs within 128-bit lanes
    t[k] = UnpackLo32(r[k], r[k + 1]);
    t[k + 1] = UnpackHi32(r[k], r[k + 1]);
  }
  for (int k = 0; k < 16; k += 4) {  // r[k + c], lane L: column 4L + c of rows k..k+3
    r[k] = UnpackLo64(t[k], t[k + 2]);
    r[k + 1] = UnpackHi64(t[k], t[k + 2]);
    r[k + 2] = UnpackLo64(t[k + 1], t[k + 3]);
    r[k + 3] = UnpackHi64(t[k + 1], t[k + 3]);
  }
  for (int c = 0; c < 4; ++c) {  // transpose the 4x4 grid of 128-bit lanes
    const __m512i v0 = _mm512_maskz_shuffle_i32x4(0xFFFF, r[c], r[4 + c], 0x44);
    const __m512i v1 = _mm512_maskz_shuffle_i32x4(0xFFFF, r[c], r[4 + c], 0xEE);
    const __m512i v2 = _mm512_maskz_shuffle_i32x4(0xFFFF, r[8 + c], r[12 + c], 0x44);
    const __m512i v3 = _mm512_maskz_shuffle_i32x4(0xFFFF, r[8 + c], r[12 + c], 0xEE);
    t[c] = _mm512_maskz_shuffle_i32x4(0xFFFF, v0, v2, 0x88);
    t[4 + c] = _mm512_maskz_shuffle_i32x4(0xFFFF, v0, v2, 0xDD);
    t[8 + c] = _mm512_maskz_shuffle_i32x4(0xFFFF, v1, v3, 0x88);
    t[12 + c] = _mm512_maskz_shuffle_i32x4(0xFFFF, v1, v3, 0xDD);
  }
  for (int i = 0; i < 16; ++i) r[i] = t[i];
}

// Up to 16 channels of one key row as f32 bits; lanes past `mask` are zero (and not read).
HWY_INLINE __m512i LoadRow16(const float* p, __mmask16 mask) {
  return _mm512_maskz_loadu_epi32(mask, p);
}
HWY_INLINE __m512i LoadRow16(const BFloat16* p, __mmask16 mask) {
  const __m512i wide = _mm512_maskz_cvtepu16_epi32(0xFFFF, _mm256_maskz_loadu_epi16(mask, p));
  return _mm512_maskz_slli_epi32(0xFFFF, wide, 16);
}

HWY_INLINE __mmask16 FirstLanes16(int64_t n) {
  return n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << std::max<int64_t>(n, 0)) - 1);
}

// Same result as PackKTransposed, 16x16 blocks at a time.
template <class T>
void PackKTransposedAvx512(const T* k, const AttentionDims& d, const Geometry& g, int64_t h,
                           int64_t kb, float* kt) {
  const int64_t j0 = kb * kBlockK, n = std::min(kBlockK, g.kv - j0);
  for (int64_t jb = 0; jb < kBlockK; jb += 16) {
    for (int64_t c0 = 0; c0 < g.hd; c0 += 16) {
      const int64_t nc = std::min<int64_t>(16, g.hd - c0);
      __m512i r[16];
      for (int64_t i = 0; i < 16; ++i) {
        r[i] = jb + i < n
                   ? LoadRow16(k + (j0 + jb + i) * d.k_stride + h * g.hd + c0, FirstLanes16(nc))
                   : _mm512_setzero_si512();
      }
      Transpose16x16(r);
      for (int64_t p = 0; p < nc; ++p) _mm512_store_si512(kt + (c0 + p) * kBlockK + jb, r[p]);
    }
  }
}

// kp for one key block: a 32-bit pair of channels is transposed like one element.
void PackKPairsAvx512(const BFloat16* k, const AttentionDims& d, const Geometry& g, int64_t h,
                      int64_t kb, uint32_t* kp) {
  const int64_t j0 = kb * kBlockK, n = std::min(kBlockK, g.kv - j0);
  for (int64_t jb = 0; jb < kBlockK; jb += 16) {
    for (int64_t pb = 0; pb < g.kpairs; pb += 16) {
      const int64_t nc = std::clamp<int64_t>(g.hd - 2 * pb, 0, 32);  // channels present
      const __mmask32 mask = nc >= 32 ? ~__mmask32(0) : __mmask32((1u << nc) - 1);
      __m512i r[16];
      for (int64_t i = 0; i < 16; ++i) {
        r[i] = jb + i < n && nc > 0 ? _mm512_maskz_loadu_epi16(
                                          mask, k + (j0 + jb + i) * d.k_stride + h * g.hd + 2 * pb)
                                    : _mm512_setzero_si512();
      }
      Transpose16x16(r);
      for (int64_t p = 0; p < 16; ++p) _mm512_store_si512(kp + (pb + p) * kBlockK + jb, r[p]);
    }
  }
}

// vp for one key block.
void PackVPairsAvx512(const BFloat16* v, const AttentionDims& d, const Geometry& g, int64_t h,
                      int64_t kb, uint32_t* vp) {
  const int64_t j0 = kb * kBlockK, n = std::min(kBlockK, g.kv - j0);
  for (int64_t m = 0; m < kBlockK / 2; ++m) {
    const BFloat16* a = 2 * m < n ? v + (j0 + 2 * m) * d.v_stride + h * g.hd : nullptr;
    const BFloat16* b = 2 * m + 1 < n ? v + (j0 + 2 * m + 1) * d.v_stride + h * g.hd : nullptr;
    for (int64_t c0 = 0; c0 < g.dv; c0 += 16) {
      const __mmask16 mask = FirstLanes16(g.hd - c0);
      const __m256i lo = a ? _mm256_maskz_loadu_epi16(mask, a + c0) : _mm256_setzero_si256();
      const __m256i hi = b ? _mm256_maskz_loadu_epi16(mask, b + c0) : _mm256_setzero_si256();
      const __m512i pairs = _mm512_or_si512(
          _mm512_maskz_cvtepu16_epi32(0xFFFF, lo),
          _mm512_maskz_slli_epi32(0xFFFF, _mm512_maskz_cvtepu16_epi32(0xFFFF, hi), 16));
      _mm512_store_si512(vp + m * g.dv + c0, pairs);
    }
  }
}

// Query rows of a task as bf16, zero-padded to 2*kpairs channels and to `padded_rows` rows.
HWY_INLINE void LoadQueryBf16(const AttentionDims& d, const Geometry& g, const BFloat16* q,
                              int64_t h, int64_t q0, int64_t rows, int64_t padded_rows,
                              uint16_t* qs) {
  const int64_t ld = 2 * g.kpairs;
  std::fill(qs, qs + padded_rows * ld, uint16_t{0});
  for (int64_t i = 0; i < rows; ++i) {
    std::memcpy(qs + i * ld, q + (q0 + i) * d.q_stride + h * g.hd, static_cast<size_t>(g.hd) * 2);
  }
}

template <class Task>
void RunPairs(const BFloat16* k, const BFloat16* v, const AttentionDims& d, const Geometry& g,
              int64_t block_q, int64_t min_block_q, int64_t width, const Task& task) {
  RunBlocked(
      d, g, g.kpairs * kBlockK, (kBlockK / 2) * g.dv, block_q, min_block_q, width,
      [&](int64_t h, int64_t kb, float* kp, float* vp) {
        PackKPairsAvx512(k, d, g, h, kb, reinterpret_cast<uint32_t*>(kp));
        PackVPairsAvx512(v, d, g, h, kb, reinterpret_cast<uint32_t*>(vp));
      },
      [&](int64_t h, int64_t q0, int64_t rows, const float* kp, const float* vp, const Scratch& s) {
        task(h, q0, rows, reinterpret_cast<const uint32_t*>(kp),
             reinterpret_cast<const uint32_t*>(vp), s);
      });
}

// ------------------------------------------------------------------- AVX512-BF16 (vdpbf16ps)
VIDAX_FA_BF16 HWY_INLINE __m512 Dot2(__m512 acc, __m512i a, __m512i b) {
  return _mm512_dpbf16_ps(acc, (__m512bh)a, (__m512bh)b);
}

// P = 2^(s c - m') (0 for keys >= valid) of the score tile sb rounded to bf16 (round to nearest
// even) into pb16. The row sums add the rounded values (a dot product with bf16 ones), so the
// weights applied to V are exactly the ones that l normalises. P is rounded anyway, so a
// degree-4 exp suffices.
template <class Hook = NoHook>
VIDAX_FA_BF16 HWY_INLINE void ExpRowsBf16(int64_t rows, int64_t valid, float c, const float* sb,
                                          uint16_t* pb16, const RowState& s, Hook&& hook = Hook()) {
  const DF df;
  const __m512 vc = _mm512_set1_ps(c);
  const __m512i ones = _mm512_set1_epi16(0x3F80);  // bf16 1.0
  auto exp_at = [&](const float* si, __m512 mi, int64_t j0) {
    VF p = Exp2<4, true>(df, VF{_mm512_fmsub_ps(_mm512_load_ps(si + j0), vc, mi)});
    return j0 + 16 > valid ? hn::IfThenElseZero(ValidKeys(j0, valid), p) : p;
  };
  for (int64_t i = 0; i < rows; ++i) {
    const float* si = sb + i * s.width;
    const __m512 mi = _mm512_set1_ps(s.m[i]);
    __m512 acc = _mm512_mul_ps(_mm512_load_ps(s.lsum + i * 16), _mm512_set1_ps(s.alpha[i]));
    for (int64_t j0 = 0; j0 < s.width; j0 += 32) {
      const VF p0 = exp_at(si, mi, j0), p1 = exp_at(si, mi, j0 + 16);
      const __m512i pb = (__m512i)_mm512_cvtne2ps_pbh(p1.raw, p0.raw);  // [p0 | p1]
      _mm512_store_si512(pb16 + i * s.width + j0, pb);
      acc = Dot2(acc, pb, ones);
    }
    _mm512_store_ps(s.lsum + i * 16, acc);
    hook();
  }
}

// S[r][j] = sum_p Qpair[r][p] . Kpair[p][j]: each step multiplies two channels at once.
template <int R>
VIDAX_FA_BF16 void ScoreTileBf16(const uint32_t* HWY_RESTRICT q, int64_t q_ld,
                                 const uint32_t* HWY_RESTRICT kp, int64_t dpairs,
                                 float* HWY_RESTRICT s) {
  __m512 acc[R][4];
  for (int r = 0; r < R; ++r) {
    for (int i = 0; i < 4; ++i) acc[r][i] = _mm512_setzero_ps();
  }
  for (int64_t p = 0; p < dpairs; ++p, kp += kBlockK) {
    __m512i kv[4];
    for (int i = 0; i < 4; ++i) kv[i] = _mm512_load_si512(kp + 16 * i);
    for (int r = 0; r < R; ++r) {
      const __m512i qb = _mm512_set1_epi32(static_cast<int>(q[r * q_ld + p]));
      for (int i = 0; i < 4; ++i) acc[r][i] = Dot2(acc[r][i], qb, kv[i]);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int i = 0; i < 4; ++i) _mm512_store_ps(s + r * kBlockK + 16 * i, acc[r][i]);
  }
}

// O[r][:] = alpha[r] O[r][:] + sum_m Ppair[r][m] . Vpair[m][:] over C vectors of channels.
template <int R, int C>
VIDAX_FA_BF16 void PvTileBf16(const uint32_t* HWY_RESTRICT p, const float* HWY_RESTRICT alpha,
                              const uint32_t* HWY_RESTRICT vp, int64_t dv, int64_t npairs,
                              float* HWY_RESTRICT o) {
  __m512 acc[R][C];
  for (int r = 0; r < R; ++r) {
    const __m512 a = _mm512_set1_ps(alpha[r]);
    for (int i = 0; i < C; ++i) acc[r][i] = _mm512_mul_ps(_mm512_load_ps(o + r * dv + 16 * i), a);
  }
  for (int64_t m = 0; m < npairs; ++m, vp += dv) {
    __m512i vv[C];
    for (int i = 0; i < C; ++i) vv[i] = _mm512_load_si512(vp + 16 * i);
    for (int r = 0; r < R; ++r) {
      const __m512i pb = _mm512_set1_epi32(static_cast<int>(p[r * (kBlockK / 2) + m]));
      for (int i = 0; i < C; ++i) acc[r][i] = Dot2(acc[r][i], pb, vv[i]);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int i = 0; i < C; ++i) _mm512_store_ps(o + r * dv + 16 * i, acc[r][i]);
  }
}

VIDAX_FA_BF16 void TaskDpBf16(const AttentionDims& d, const Geometry& g, const BFloat16* q,
                              float* out, int64_t h, int64_t q0, int64_t rows,
                              const uint32_t* kp_head, const uint32_t* vp_head, const Scratch& s) {
  const int64_t dv = g.dv, nvec = dv / 16, q_ld = g.kpairs;
  LoadQueryBf16(d, g, q, h, q0, rows, rows, s.q16());
  const auto* qp = reinterpret_cast<const uint32_t*>(s.q16());
  const auto* p32 = reinterpret_cast<const uint32_t*>(s.p16());
  StartRows(fa::round_up(rows, 16), s);
  const RowState st = s.at(0);
  const float c = static_cast<float>(static_cast<double>(d.scale) * fa::kLog2e);
  for (int64_t kb = 0; kb < g.nkb; ++kb) {
    const int64_t valid = std::min(kBlockK, g.kv - kb * kBlockK);
    const uint32_t* kp = kp_head + kb * g.kpairs * kBlockK;
    const uint32_t* vb = vp_head + kb * (kBlockK / 2) * dv;
    for (int64_t r0 = 0; r0 < rows; r0 += kR) {
      with_count<kR>(std::min<int64_t>(kR, rows - r0), [&](auto nr) {
        ScoreTileBf16<decltype(nr)::value>(qp + r0 * q_ld, q_ld, kp, g.dpairs, s.s + r0 * kBlockK);
      });
    }
    fa::add_last_key_bias(g, kb * kBlockK, kBlockK, rows, s.s, st.width);
    RowMax(rows, valid, c, s.s, st);
    UpdateRowMax(rows, s.m, s.bm, s.alpha);
    ExpRowsBf16(rows, valid, c, s.s, s.p16(), st);
    const int64_t npairs = fa::ceil_div(valid, 2);
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
  FinishRows(rows, g, st, out + q0 * d.out_stride + h * g.hd, d.out_stride,
             d.lse != nullptr ? d.lse + q0 * d.heads + h : nullptr, d.heads);
}

void FlashDpBf16(const BFloat16* q, const BFloat16* k, const BFloat16* v, float* out,
                 const AttentionDims& d) {
  const Geometry g(d);
  RunPairs(k, v, d, g, kBlockQ, kR, kBlockK,
           [&](int64_t h, int64_t q0, int64_t rows, const uint32_t* kp, const uint32_t* vp,
               const Scratch& s) { TaskDpBf16(d, g, q, out, h, q0, rows, kp, vp, s); });
}

// ------------------------------------------------------------------------------ AMX-BF16
// The two matrix products run on the AMX tile unit (tdpbf16ps: a 16x32 bf16 tile times a 32x16
// bf16 tile in pair layout, accumulated into a 16x16 f32 tile), the online softmax on AVX-512
// in between. Rows go in groups of kAmxRows = 32 (two row tiles, zero-padded) so that each
// loaded K or V tile feeds two products; the product loops keep four independent accumulator
// tiles in flight to cover the tdpbf16ps latency. Each softmax step takes kAmxKeys = 128 keys
// (two packed blocks), which halves the O tile loads/stores and the per-row softmax overhead.
constexpr int64_t kAmxRows = 32;   // query rows of one group (two row tiles)
constexpr int64_t kAmxGroups = 2;  // groups per task
constexpr int64_t kAmxKeys = 2 * kBlockK;

// The tile load/store intrinsics are asm statements without memory operands, so the compiler
// does not know they touch memory; a barrier between them and ordinary loads/stores of the same
// buffers keeps the order.
#define VIDAX_FA_COMPILER_BARRIER() asm volatile("" ::: "memory")

// Palette 1, tiles 0-7 all 16 rows x 64 bytes.
struct alignas(64) AmxTileConfig {
  AmxTileConfig() {
    for (int t = 0; t < 8; ++t) {
      colsb[t] = 64;
      rows[t] = 16;
    }
  }
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Tile work issued a step (up to 4 tile products) at a time, so that it can be interleaved with
// the softmax of another key step: the scores of one key step (QK) and the P.V product of one.
// Steps run in the order the jobs were added; a job's accumulator tiles persist across its
// steps, so jobs never interleave with each other. Tiles: 0-3 accumulators, 4-7 operands.
class AmxWork {
 public:
  // S[32][128] = Q[32][dq] K^T for `blocks` (1 or 2) packed 64-key blocks: the first at kp, the
  // second at kp2 (nullptr: the block after kp, as the dense kernel packs them). Columns 64..127
  // of S belong to the second block.
  void AddScores(const uint16_t* q, int64_t dq, const uint32_t* kp, int64_t blocks, float* s,
                 const uint32_t* kp2 = nullptr) {
    q_ = q;
    dq_ = dq;
    kp_ = kp;
    kp2_ = kp2 ? kp2 : kp + (dq / 2) * kBlockK;
    s_ = s;
    qk_end_ = blocks * 2 * (dq / 32);
    qk_next_ = 0;
  }
  // O[32][dv] += P[32][32 * nhalves] V for the V pairs at vp, two 16-channel groups at a time.
  // Keys 64..127 (halves 2 and 3) come from vp2 (nullptr: the packed block after vp's).
  void AddPv(const uint16_t* p16, const uint32_t* vp, int64_t dv, int64_t nhalves, float* o,
             const uint32_t* vp2 = nullptr) {
    p16_ = p16;
    vp_ = vp;
    vp2_ = vp2 ? vp2 : vp + 2 * 16 * dv;
    dv_ = dv;
    nhalves_ = nhalves;
    o_ = o;
    pv_end_ = fa::ceil_div(dv, 32) * nhalves;
    pv_next_ = 0;
  }
  int64_t remaining() const { return (pv_end_ - pv_next_) + (qk_end_ - qk_next_); }
  VIDAX_FA_AMX void Step() {
    if (pv_next_ < pv_end_) return StepPv(pv_next_++);
    if (qk_next_ < qk_end_) StepScores(qk_next_++);
  }
  VIDAX_FA_AMX void Drain() {
    while (remaining() > 0) Step();
  }

 private:
  VIDAX_FA_AMX HWY_INLINE void StepScores(int64_t i) {
    const int64_t per_half = dq_ / 32, step = i % per_half, half = (i / per_half) % 2;
    const int64_t block = i / (2 * per_half);
    if (step == 0) {
      _tile_zero(0);
      _tile_zero(1);
      _tile_zero(2);
      _tile_zero(3);
    }
    const long q_ld = dq_ * 2, k_ld = kBlockK * 4;  // bytes
    const uint16_t* qs = q_ + 32 * step;
    const uint32_t* ks = (block == 0 ? kp_ : kp2_) + 16 * step * kBlockK + 32 * half;
    _tile_loadd(4, qs, q_ld);
    _tile_loadd(5, qs + 16 * dq_, q_ld);
    _tile_loadd(6, ks, k_ld);
    _tile_loadd(7, ks + 16, k_ld);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
    if (step == per_half - 1) {
      float* sh = s_ + block * kBlockK + 32 * half;
      const long s_ld = kAmxKeys * 4;
      _tile_stored(0, sh, s_ld);
      _tile_stored(1, sh + 16, s_ld);
      _tile_stored(2, sh + 16 * kAmxKeys, s_ld);
      _tile_stored(3, sh + 16 * kAmxKeys + 16, s_ld);
    }
  }

  VIDAX_FA_AMX HWY_INLINE void StepPv(int64_t i) {
    const int64_t half = i % nhalves_, c0 = 32 * (i / nhalves_);
    const bool pair = c0 + 32 <= dv_;                // else one last 16-channel group
    const long p_ld = kAmxKeys * 2, o_ld = dv_ * 4;  // bytes
    const int64_t row16 = 16 * dv_;                  // O / V offset of 16 rows (V: 32 keys)
    float* oc = o_ + c0;
    if (half == 0) {
      _tile_loadd(0, oc, o_ld);
      _tile_loadd(1, oc + row16, o_ld);
      if (pair) {
        _tile_loadd(2, oc + 16, o_ld);
        _tile_loadd(3, oc + row16 + 16, o_ld);
      }
    }
    _tile_loadd(4, p16_ + 32 * half, p_ld);
    _tile_loadd(5, p16_ + 16 * kAmxKeys + 32 * half, p_ld);
    const uint32_t* vh = half < 2 ? vp_ + half * row16 : vp2_ + (half - 2) * row16;
    _tile_loadd(6, vh + c0, o_ld);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 5, 6);
    if (pair) {
      _tile_loadd(7, vh + c0 + 16, o_ld);
      _tile_dpbf16ps(2, 4, 7);
      _tile_dpbf16ps(3, 5, 7);
    }
    if (half == nhalves_ - 1) {
      _tile_stored(0, oc, o_ld);
      _tile_stored(1, oc + row16, o_ld);
      if (pair) {
        _tile_stored(2, oc + 16, o_ld);
        _tile_stored(3, oc + row16 + 16, o_ld);
      }
    }
  }

  const uint16_t* q_ = nullptr;
  int64_t dq_ = 0;
  const uint32_t* kp_ = nullptr;
  const uint32_t* kp2_ = nullptr;
  float* s_ = nullptr;
  int64_t qk_next_ = 0, qk_end_ = 0;
  const uint16_t* p16_ = nullptr;
  const uint32_t* vp_ = nullptr;
  const uint32_t* vp2_ = nullptr;
  int64_t dv_ = 0, nhalves_ = 0;
  float* o_ = nullptr;
  int64_t pv_next_ = 0, pv_end_ = 0;
};

// O[i][:] *= alpha[i]; rows whose maximum did not move (alpha == 1, most rows after the first
// few steps) are skipped.
HWY_INLINE void RescaleRows(int64_t rows, const float* alpha, float* o, int64_t dv) {
  for (int64_t i = 0; i < rows; ++i) {
    if (alpha[i] == 1.0f) continue;
    const __m512 a = _mm512_set1_ps(alpha[i]);
    float* oi = o + i * dv;
    for (int64_t c = 0; c < dv; c += 16) {
      _mm512_store_ps(oi + c, _mm512_mul_ps(_mm512_load_ps(oi + c), a));
    }
  }
}

// Software pipeline over key steps t (kAmxKeys keys each): while the vector units compute the
// softmax of step t for one group of 32 rows, the tile unit computes that group's P.V of step
// t-1 and its scores of step t+1 (double-buffered S and P). O is rescaled for step t once P.V of
// step t-1 is in. A task holds up to kAmxGroups groups that take turns on each key step, so a
// key step's K and V tiles are read from memory once and then from cache.
VIDAX_FA_AMX void TaskAmx(const AttentionDims& d, const Geometry& g, const BFloat16* q, float* out,
                          int64_t h, int64_t q0, int64_t rows, const uint32_t* kp_head,
                          const uint32_t* vp_head, const Scratch& s) {
  const int64_t dv = g.dv, dq = 2 * g.kpairs, steps = fa::ceil_div(g.nkb, 2);
  const int64_t groups = fa::ceil_div(rows, kAmxRows);
  LoadQueryBf16(d, g, q, h, q0, rows, groups * kAmxRows, s.q16());
  StartRows(groups * kAmxRows, s);  // padded rows enter the tiles too: keep them 0
  std::fill(s.p16(0), s.p16(0) + 2 * s.s_stride, uint16_t{0});
  const float c = static_cast<float>(static_cast<double>(d.scale) * fa::kLog2e);
  auto valid_keys = [&](int64_t t) { return std::min(kAmxKeys, g.kv - t * kAmxKeys); };
  auto add_scores = [&](AmxWork& work, int64_t grp, int64_t t) {
    work.AddScores(s.q16() + grp * kAmxRows * dq, dq, kp_head + 2 * t * g.kpairs * kBlockK,
                   std::min<int64_t>(2, g.nkb - 2 * t),
                   s.scores(t % 2) + grp * kAmxRows * kAmxKeys);
  };
  auto add_pv = [&](AmxWork& work, int64_t grp, int64_t t) {
    work.AddPv(s.p16(t % 2) + grp * kAmxRows * kAmxKeys, vp_head + t * (kAmxKeys / 2) * dv, dv,
               fa::ceil_div(valid_keys(t), 32), s.o + grp * kAmxRows * dv);
  };
  const AmxTileConfig config;
  AmxWork work;
  VIDAX_FA_COMPILER_BARRIER();
  _tile_loadconfig(&config);
  for (int64_t grp = 0; grp < groups; ++grp) {
    add_scores(work, grp, 0);
    work.Drain();
  }
  for (int64_t t = 0; t < steps; ++t) {
    const int64_t valid = valid_keys(t);
    for (int64_t grp = 0; grp < groups; ++grp) {
      const int64_t n = std::min(kAmxRows, rows - grp * kAmxRows);
      const RowState st = s.at(grp * kAmxRows);
      float* sb = s.scores(t % 2) + grp * kAmxRows * kAmxKeys;
      VIDAX_FA_COMPILER_BARRIER();
      if (t > 0) add_pv(work, grp, t - 1);
      if (t + 1 < steps) add_scores(work, grp, t + 1);
      // Spread the tile work evenly over the 2 n rows of the softmax.
      const int64_t total = work.remaining(), calls = 2 * n;
      int64_t call = 0, issued = 0;
      auto hook = [&] {
        const int64_t due = (++call * total + calls - 1) / calls;
        for (; issued < due; ++issued) work.Step();
      };
      fa::add_last_key_bias(g, t * kAmxKeys, kAmxKeys, n, sb, st.width);
      RowMax(n, valid, c, sb, st, hook);
      UpdateRowMax(n, st.m, st.bm, st.alpha);
      ExpRowsBf16(n, valid, c, sb, s.p16(t % 2) + grp * kAmxRows * kAmxKeys, st, hook);
      work.Drain();
      VIDAX_FA_COMPILER_BARRIER();
      RescaleRows(n, st.alpha, st.o, dv);
    }
  }
  for (int64_t grp = 0; grp < groups; ++grp) {
    VIDAX_FA_COMPILER_BARRIER();
    add_pv(work, grp, steps - 1);
    work.Drain();
  }
  VIDAX_FA_COMPILER_BARRIER();
  _tile_release();
  FinishRows(rows, g, s.at(0), out + q0 * d.out_stride + h * g.hd, d.out_stride,
             d.lse != nullptr ? d.lse + q0 * d.heads + h : nullptr, d.heads);
}

void FlashAmx(const BFloat16* q, const BFloat16* k, const BFloat16* v, float* out,
              const AttentionDims& d) {
  const Geometry g(d);
  RunPairs(k, v, d, g, kAmxGroups * kAmxRows, kAmxRows, kAmxKeys,
           [&](int64_t h, int64_t q0, int64_t rows, const uint32_t* kp, const uint32_t* vp,
               const Scratch& s) { TaskAmx(d, g, q, out, h, q0, rows, kp, vp, s); });
}

#undef VIDAX_FA_COMPILER_BARRIER
