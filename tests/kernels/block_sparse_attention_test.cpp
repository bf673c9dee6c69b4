// Differential tests of the block-sparse executor against the scalar masked reference: random
// masks with all three tile classes, ragged and unequal query/key partitions, block sizes 16..128,
// kv_valid padding, empty rows, f32 and every bf16 kernel of this machine, every Highway target;
// and density 1.0 against the dense kernel.
#include "kernels/cpu/block_sparse_attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/convert.h"
#include "core/error.h"
#include "kernels/cpu/attention_reference.h"
#include "kernels/cpu/flash_attention.h"
#include "support/test_support.h"

namespace vidax {
namespace {

using ::vidax::testing::all_close;
using ::vidax::testing::random_floats;

// Blocks of random sizes in [lo, hi] covering `tokens` (the last one possibly smaller).
BlockPartition random_partition(int64_t tokens, int64_t lo, int64_t hi, std::mt19937& rng) {
  BlockPartition p;
  p.offsets.push_back(0);
  std::uniform_int_distribution<int64_t> size(lo, hi);
  while (p.offsets.back() < tokens)
    p.offsets.push_back(std::min(tokens, p.offsets.back() + size(rng)));
  return p;
}

// Element rule for boundary tiles: a pseudo-random function of (head, query, key) positions that
// keeps about 60%, and masks every key of query rows that are multiples of 11 in head 0 (so
// that some rows of boundary tiles lose all their keys).
bool keep_rule(int64_t h, int64_t i, int64_t j) {
  if (h == 0 && i % 11 == 0) return false;
  const uint64_t x =
      static_cast<uint64_t>(h * 1000003 + i * 7919 + j * 104729) * 0x9E3779B97F4A7C15ull;
  return (x >> 59) % 5 < 3;
}

TilePredicate test_predicate() {
  return [](int64_t h, int64_t q0, int64_t nq, int64_t k0, int64_t nk, uint8_t* keep) {
    for (int64_t i = 0; i < nq; ++i)
      for (int64_t j = 0; j < nk; ++j) keep[i * nk + j] = keep_rule(h, q0 + i, k0 + j);
  };
}

struct Problem {
  int64_t heads, head_dim;
  BlockPartition qp, kp;
  BlockMask mask;
  BlockSparseDims d;
  std::vector<float> q, k, v;
  TilePredicate pred = test_predicate();

  std::vector<float> reference(bool bf16_inputs) const {
    auto round = [&](const std::vector<float>& x) {
      if (!bf16_inputs) return x;
      std::vector<BFloat16> b(x.size());
      std::vector<float> r(x.size());
      convert_floats(x.data(), DType::kF32, b.data(), DType::kBF16, x.size());
      convert_floats(b.data(), DType::kBF16, r.data(), DType::kF32, x.size());
      return r;
    };
    const auto qr = round(q), kr = round(k), vr = round(v);
    std::vector<float> out(static_cast<size_t>(qp.tokens() * heads * head_dim));
    masked_attention_reference(qr.data(), kr.data(), vr.data(), out.data(), qp, kp, mask, pred, d);
    return out;
  }
  std::vector<float> run_f32() const {
    std::vector<float> out(static_cast<size_t>(qp.tokens() * heads * head_dim), 12345.0f);
    block_sparse_attention(q.data(), k.data(), v.data(), out.data(), qp, kp, mask, pred, d);
    return out;
  }
  std::vector<float> run_bf16(AttentionBf16Kernel kernel) const {
    auto conv = [](const std::vector<float>& x) {
      std::vector<BFloat16> b(x.size());
      convert_floats(x.data(), DType::kF32, b.data(), DType::kBF16, x.size());
      return b;
    };
    const auto qb = conv(q), kb = conv(k), vb = conv(v);
    std::vector<float> out(static_cast<size_t>(qp.tokens() * heads * head_dim), 12345.0f);
    block_sparse_attention_bf16(kernel, qb.data(), kb.data(), vb.data(), out.data(), qp, kp, mask,
                                pred, d);
    return out;
  }
};

// p_skip / p_boundary: tile class probabilities; empty_rows: some rows get no tile at all.
Problem make_problem(int64_t q_tokens, int64_t k_tokens, int64_t lo, int64_t hi, int64_t heads,
                     int64_t hd, double p_skip, double p_boundary, int64_t kv_valid,
                     uint32_t seed) {
  std::mt19937 rng(seed);
  Problem p{heads,
            hd,
            random_partition(q_tokens, lo, hi, rng),
            random_partition(k_tokens, lo, hi, rng),
            {},
            {},
            {},
            {},
            {}};
  p.mask = BlockMask(heads, p.qp.blocks(), p.kp.blocks());
  std::uniform_real_distribution<double> u(0, 1);
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t qb = 0; qb < p.qp.blocks(); ++qb) {
      if (qb % 7 == 3) continue;  // an empty row
      for (int64_t kb = 0; kb < p.kp.blocks(); ++kb) {
        const double x = u(rng);
        p.mask.set(h, qb, kb,
                   x < p_skip                ? TileClass::kSkip
                   : x < p_skip + p_boundary ? TileClass::kBoundary
                                             : TileClass::kFull);
      }
    }
  p.mask.build_rows();
  p.d = {heads, hd, kv_valid, 1.0f / std::sqrt(static_cast<float>(hd))};
  p.q = random_floats(static_cast<size_t>(q_tokens * heads * hd), seed + 1, -2, 2);
  p.k = random_floats(static_cast<size_t>(k_tokens * heads * hd), seed + 2, -2, 2);
  p.v = random_floats(static_cast<size_t>(k_tokens * heads * hd), seed + 3);
  return p;
}

::testing::AssertionResult close(const std::vector<float>& a, const std::vector<float>& r,
                                 const Problem& p, double atol, const std::string& what) {
  const Shape shape{p.qp.tokens(), p.heads, p.head_dim};
  return all_close(Tensor::from_floats(a, shape), Tensor::from_floats(r, shape), atol, 1e-5, what);
}

const AttentionBf16Kernel kBf16Kernels[] = {
    AttentionBf16Kernel::kWidened, AttentionBf16Kernel::kAvx512Bf16, AttentionBf16Kernel::kAmx};
const char* kBf16Names[] = {"widened", "avx512bf16", "amx"};

struct Shape3 {
  int64_t q_tokens, k_tokens, lo, hi, heads, hd, kv_valid;
  double p_skip, p_boundary;
};

TEST(BlockSparseAttention, MatchesMaskedReference) {
  const Shape3 cases[] = {
      {1, 1, 1, 1, 1, 8, 0, 0.0, 0.5},              // one token
      {100, 100, 16, 16, 2, 40, 0, 0.5, 0.25},      // 16-token blocks
      {200, 150, 17, 70, 3, 72, 0, 0.4, 0.3},       // ragged, q and k partitions differ
      {300, 300, 64, 64, 1, 128, 0, 0.6, 0.2},      // aligned 64
      {260, 390, 100, 128, 2, 128, 333, 0.3, 0.3},  // ragged 100..128 with kv_valid padding
      {257, 257, 128, 128, 2, 100, 0, 0.2, 0.6},    // 128 blocks, mostly boundary
      {190, 190, 20, 50, 2, 64, 150, 0.0, 0.0},     // all FULL (except empty rows), padding
      // FULL 64-token blocks, scattered: the AMX kernel pairs non-adjacent ones into one step;
      // a 2-token last block and kv_valid padding give short sub-blocks to pair or not
      {450, 450, 64, 64, 3, 128, 430, 0.7, 0.0},
      {300, 300, 40, 70, 2, 64, 0, 0.5, 0.0},  // 40..70: full, short and two-sub-block blocks
  };
  uint32_t seed = 10;
  for (const auto& c : cases) {
    const Problem p = make_problem(c.q_tokens, c.k_tokens, c.lo, c.hi, c.heads, c.hd, c.p_skip,
                                   c.p_boundary, c.kv_valid, seed += 7);
    const std::string name =
        (std::ostringstream() << "q" << c.q_tokens << " k" << c.k_tokens << " blocks " << c.lo
                              << ".." << c.hi << " hd " << c.hd)
            .str();
    const auto ref = p.reference(false);
    const auto ref16 = p.reference(true);
    testing::for_each_target([&] {
      EXPECT_TRUE(close(p.run_f32(), ref, p, 3e-6, name + " f32"));
      for (size_t i = 0; i < std::size(kBf16Kernels); ++i) {
        if (!flash_attention_bf16_available(kBf16Kernels[i])) continue;
        const double atol = kBf16Kernels[i] == AttentionBf16Kernel::kWidened ? 3e-6 : 4e-3;
        EXPECT_TRUE(
            close(p.run_bf16(kBf16Kernels[i]), ref16, p, atol, name + " bf16 " + kBf16Names[i]));
      }
    });
  }
}

TEST(BlockSparseAttention, OutputRowsAndHeadsGoToTheirDestination) {
  // Row i of mask head h lands at rows[i] * stride + heads[h] * hd of a wider buffer; everything
  // else of that buffer stays untouched.
  const Problem p = make_problem(150, 150, 20, 70, 2, 24, 0.3, 0.3, 0, 21);
  const int64_t tokens = 150, hd = 24, dest_heads = 5, stride = dest_heads * hd + 3;
  std::vector<int32_t> rows(static_cast<size_t>(tokens));
  for (int64_t i = 0; i < tokens; ++i)
    rows[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7) % tokens);
  const std::vector<int64_t> heads{4, 1};
  BlockSparseOutput o;
  o.stride = stride;
  o.rows = rows.data();
  o.heads = heads.data();
  o.dest_heads = dest_heads;
  const auto plain = p.run_f32();
  std::vector<float> wide(static_cast<size_t>(tokens * stride), -3.0f);
  block_sparse_attention(p.q.data(), p.k.data(), p.v.data(), wide.data(), p.qp, p.kp, p.mask,
                         p.pred, p.d, o);
  std::vector<float> want(wide.size(), -3.0f);
  for (int64_t i = 0; i < tokens; ++i)
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t c = 0; c < hd; ++c)
        want[static_cast<size_t>(rows[static_cast<size_t>(i)] * stride +
                                 heads[static_cast<size_t>(h)] * hd + c)] =
            plain[static_cast<size_t>((i * 2 + h) * hd + c)];
  EXPECT_EQ(wide, want);
  o.heads = nullptr;
  o.stride = 10;  // shorter than 2 heads x 24
  EXPECT_THROW(block_sparse_attention(p.q.data(), p.k.data(), p.v.data(), wide.data(), p.qp, p.kp,
                                      p.mask, p.pred, p.d, o),
               InternalError);
}

TEST(BlockSparseAttention, InputReadInPlaceEqualsGatheredInput) {
  // Permuted position i of mask head h read from source row rows[i], head heads[h] of a wider,
  // padded buffer gives bit for bit what the gathered contiguous copy gives: same rows packed,
  // same kernels. Ragged blocks, boundary tiles, f32 and every bf16 kernel, every target.
  for (const int64_t hd : {24, 128}) {
    const int64_t tokens = 333, heads = 2, src_heads = 5, stride = src_heads * hd + 3;
    const Problem p = make_problem(tokens, tokens, 20, 130, heads, hd, 0.4, 0.3, 0, 31);
    std::vector<int32_t> rows(static_cast<size_t>(tokens));
    for (int64_t i = 0; i < tokens; ++i)
      rows[static_cast<size_t>(i)] = static_cast<int32_t>((i * 101 + 7) % tokens);
    const std::vector<int64_t> head_map{3, 0};
    // The wide sources hold p's rows at their source positions; everything else is NaN, so a
    // wrong address shows.
    auto widen = [&](const std::vector<float>& x) {
      std::vector<float> w(static_cast<size_t>(tokens * stride), std::nanf(""));
      for (int64_t i = 0; i < tokens; ++i)
        for (int64_t h = 0; h < heads; ++h)
          std::copy_n(x.begin() + (i * heads + h) * hd, hd,
                      w.begin() + rows[static_cast<size_t>(i)] * stride +
                          head_map[static_cast<size_t>(h)] * hd);
      return w;
    };
    const auto wq = widen(p.q), wk = widen(p.k), wv = widen(p.v);
    BlockSparseInput in;
    in.stride = stride;
    in.rows = rows.data();
    in.heads = head_map.data();
    in.src_heads = src_heads;
    const std::string name = "hd " + std::to_string(hd);
    auto to16 = [](const std::vector<float>& x) {
      std::vector<BFloat16> b(x.size());
      convert_floats(x.data(), DType::kF32, b.data(), DType::kBF16, x.size());
      return b;
    };
    const auto wq16 = to16(wq), wk16 = to16(wk), wv16 = to16(wv);
    testing::for_each_target([&] {
      std::vector<float> out(static_cast<size_t>(tokens * heads * hd), 12345.0f);
      block_sparse_attention(wq.data(), wk.data(), wv.data(), out.data(), p.qp, p.kp, p.mask,
                             p.pred, p.d, {}, in);
      EXPECT_EQ(out, p.run_f32()) << name << " f32";
      for (size_t i = 0; i < std::size(kBf16Kernels); ++i) {
        if (!flash_attention_bf16_available(kBf16Kernels[i])) continue;
        std::fill(out.begin(), out.end(), 12345.0f);
        block_sparse_attention_bf16(kBf16Kernels[i], wq16.data(), wk16.data(), wv16.data(),
                                    out.data(), p.qp, p.kp, p.mask, p.pred, p.d, {}, in);
        EXPECT_EQ(out, p.run_bf16(kBf16Kernels[i])) << name << " bf16 " << kBf16Names[i];
      }
    });
  }
}

TEST(BlockSparseAttention, BadInputMapsAreInternalErrors) {
  const Problem p = make_problem(100, 100, 30, 30, 2, 16, 0.3, 0, 0, 5);
  std::vector<float> out(100 * 2 * 16);
  std::vector<int32_t> rows(100);
  for (int32_t i = 0; i < 100; ++i) rows[static_cast<size_t>(i)] = 99 - i;
  const std::vector<int64_t> heads{0, 3};
  auto run = [&](const BlockSparseInput& in) {
    block_sparse_attention(p.q.data(), p.k.data(), p.v.data(), out.data(), p.qp, p.kp, p.mask,
                           p.pred, p.d, {}, in);
  };
  BlockSparseInput in;
  in.heads = heads.data();
  in.src_heads = 3;  // head 3 is outside
  EXPECT_THROW(run(in), InternalError);
  in.src_heads = 4;
  in.stride = 4 * 16 - 1;  // shorter than 4 heads
  EXPECT_THROW(run(in), InternalError);
  in = {};
  in.rows = rows.data();
  rows[5] = 100;  // outside [0, 100)
  EXPECT_THROW(run(in), InternalError);
  const Problem cross = make_problem(100, 120, 30, 30, 2, 16, 0.3, 0, 0, 6);
  rows[5] = 94;
  EXPECT_THROW(block_sparse_attention(cross.q.data(), cross.k.data(), cross.v.data(), out.data(),
                                      cross.qp, cross.kp, cross.mask, cross.pred, cross.d, {}, in),
               InternalError);  // rows need query and key blocks over the same tokens
}

TEST(BlockSparseAttention, EmptyRowsGiveZero) {
  Problem p = make_problem(130, 130, 64, 64, 1, 32, 0, 0, 0, 3);
  p.mask = BlockMask(1, p.qp.blocks(), p.kp.blocks());  // nothing active
  p.mask.set(0, 1, 0, TileClass::kBoundary);
  p.pred = [](int64_t, int64_t, int64_t nq, int64_t, int64_t nk, uint8_t* keep) {
    std::fill(keep, keep + nq * nk, uint8_t{0});  // every element masked too
  };
  p.mask.build_rows();
  for (const auto& out : {p.run_f32(), p.run_bf16(AttentionBf16Kernel::kAuto)})
    for (const float x : out) ASSERT_EQ(x, 0.0f);
}

TEST(BlockSparseAttention, DensityOneEqualsDenseKernel) {
  const int64_t tokens = 333, heads = 3, hd = 128;
  std::mt19937 rng(5);
  for (const int64_t block : {64, 128, 0}) {  // 0: ragged 40..128
    Problem p = make_problem(tokens, tokens, 40, 128, heads, hd, 0, 0, 0, 77);
    if (block > 0) p.qp = p.kp = BlockPartition::uniform(tokens, block);
    p.mask = BlockMask(heads, p.qp.blocks(), p.kp.blocks());
    p.mask.fill(TileClass::kFull);
    p.mask.build_rows();
    AttentionDims ad{tokens,     tokens,     tokens,     heads,      hd,
                     heads * hd, heads * hd, heads * hd, heads * hd, p.d.scale};
    std::vector<float> dense(static_cast<size_t>(tokens * heads * hd));
    flash_attention(p.q.data(), p.k.data(), p.v.data(), dense.data(), ad);
    // Same packing, tiles and exp; only the grouping of keys into softmax steps differs.
    EXPECT_TRUE(close(p.run_f32(), dense, p, 1e-6, "f32 block " + std::to_string(block)));
    std::vector<BFloat16> q16(p.q.size()), k16(p.k.size()), v16(p.v.size());
    convert_floats(p.q.data(), DType::kF32, q16.data(), DType::kBF16, q16.size());
    convert_floats(p.k.data(), DType::kF32, k16.data(), DType::kBF16, k16.size());
    convert_floats(p.v.data(), DType::kF32, v16.data(), DType::kBF16, v16.size());
    for (size_t i = 0; i < std::size(kBf16Kernels); ++i) {
      if (!flash_attention_bf16_available(kBf16Kernels[i])) continue;
      flash_attention_bf16(kBf16Kernels[i], q16.data(), k16.data(), v16.data(), dense.data(), ad);
      // The bf16 kernels round P to bf16; a different max schedule changes those roundings.
      const double atol = kBf16Kernels[i] == AttentionBf16Kernel::kWidened ? 1e-6 : 2e-3;
      EXPECT_TRUE(close(p.run_bf16(kBf16Kernels[i]), dense, p, atol,
                        std::string("bf16 ") + kBf16Names[i] + " block " + std::to_string(block)));
    }
  }
}

TEST(BlockSparseAttention, BadArgumentsAreInternalErrors) {
  Problem p = make_problem(64, 64, 32, 32, 1, 16, 0, 0.5, 0, 1);
  std::vector<float> out(64 * 16);
  auto run = [&](const BlockSparseDims& d, const TilePredicate& pred, const BlockMask& m) {
    block_sparse_attention(p.q.data(), p.k.data(), p.v.data(), out.data(), p.qp, p.kp, m, pred, d);
  };
  EXPECT_THROW(run({2, 16, 0, 0.25f}, p.pred, p.mask), InternalError);   // mask heads
  EXPECT_THROW(run({1, 16, 65, 0.25f}, p.pred, p.mask), InternalError);  // kv_valid
  EXPECT_THROW(run({1, 16, 0, 0.0f}, p.pred, p.mask), InternalError);    // scale
  EXPECT_THROW(run(p.d, TilePredicate{}, p.mask), InternalError);        // boundary, no predicate
  BlockMask unbuilt(1, 2, 2);
  EXPECT_THROW(run(p.d, p.pred, unbuilt), InternalError);
}

}  // namespace
}  // namespace vidax
