// Plan execution: mixed dense / sparse head groups with permuted layouts against the scalar
// references (attention_reference for dense heads, masked_attention_reference on the permuted
// rows for sparse heads), f32 and bf16; diagnostics; plan validation.
#include "sparse/sparse_attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/convert.h"
#include "core/error.h"
#include "kernels/cpu/attention_reference.h"
#include "kernels/cpu/token_permute.h"
#include "support/test_support.h"

namespace vidax::sparse {
namespace {

using ::vidax::testing::all_close;

constexpr int64_t kHeads = 4, kHd = 32;
const TokenGrid kGrid{3, 5, 7};  // 105 tokens

TilePredicate band_predicate(int64_t width) {
  return [width](int64_t, int64_t q0, int64_t nq, int64_t k0, int64_t nk, uint8_t* keep) {
    for (int64_t i = 0; i < nq; ++i)
      for (int64_t j = 0; j < nk; ++j) keep[i * nk + j] = std::abs(q0 + i - (k0 + j)) <= width;
  };
}

AttentionPlan mixed_plan(uint32_t seed, const TokenLayout& layout) {
  std::mt19937 rng(seed);
  AttentionPlan plan;
  HeadGroup dense;
  dense.heads = {2, 0};
  dense.dense = true;
  plan.groups.push_back(std::move(dense));
  HeadGroup sp;
  sp.heads = {3, 1};
  sp.layout = layout;
  const int64_t nb = sp.layout.blocks.blocks();
  sp.mask = BlockMask(2, nb, nb);
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t qb = 0; qb < nb; ++qb)
      for (int64_t kb = 0; kb < nb; ++kb) sp.mask.set(h, qb, kb, static_cast<TileClass>(rng() % 3));
  sp.mask.build_rows();
  sp.predicate = band_predicate(20);
  plan.groups.push_back(std::move(sp));
  return plan;
}

struct Inputs {
  std::vector<float> qkv;  // [tokens, 3, heads, hd]
  int64_t tokens = kGrid.tokens(), row = kHeads * kHd;
  explicit Inputs(uint32_t seed)
      : qkv(testing::random_floats(static_cast<size_t>(kGrid.tokens() * 3 * kHeads * kHd), seed)) {}
  AttentionIo io(float* out, bool bf16) const {
    AttentionIo io;
    io.q = qkv.data();
    io.k = qkv.data() + row;
    io.v = qkv.data() + 2 * row;
    io.stride = 3 * row;
    io.tokens = tokens;
    io.heads = kHeads;
    io.head_dim = kHd;
    io.scale = 1.0f / std::sqrt(static_cast<float>(kHd));
    io.bf16 = bf16;
    io.out = out;
    io.out_stride = row;
    return io;
  }
};

// Reference: the plan's semantics with scalar kernels on (bf16-rounded) inputs.
std::vector<float> reference(const AttentionPlan& plan, const Inputs& in, bool bf16) {
  std::vector<float> qkv = in.qkv;
  if (bf16) {
    std::vector<BFloat16> b(qkv.size());
    convert_floats(qkv.data(), DType::kF32, b.data(), DType::kBF16, b.size());
    convert_floats(b.data(), DType::kBF16, qkv.data(), DType::kF32, b.size());
  }
  std::vector<float> out(static_cast<size_t>(in.tokens * in.row));
  const AttentionIo io = in.io(out.data(), false);
  for (const HeadGroup& g : plan.groups) {
    const int64_t gh = static_cast<int64_t>(g.heads.size()), n = in.tokens * gh * kHd;
    std::vector<float> q(n), k(n), v(n), o(n);
    const float* base[] = {qkv.data(), qkv.data() + in.row, qkv.data() + 2 * in.row};
    std::vector<float>* dst[] = {&q, &k, &v};
    const std::vector<int32_t> perm = g.dense ? std::vector<int32_t>{} : g.layout.perm;
    for (int x = 0; x < 3; ++x)
      gather_token_heads({base[x], in.tokens, kHeads, kHd, io.stride}, perm, g.heads,
                         dst[x]->data());
    if (g.dense) {
      AttentionDims d{in.tokens, in.tokens, in.tokens, gh,       kHd,
                      gh * kHd,  gh * kHd,  gh * kHd,  gh * kHd, io.scale};
      attention_reference(q.data(), k.data(), v.data(), o.data(), d);
    } else {
      masked_attention_reference(q.data(), k.data(), v.data(), o.data(), g.layout.blocks,
                                 g.layout.blocks, g.mask, g.predicate, {gh, kHd, 0, io.scale});
    }
    scatter_token_heads(o.data(), in.tokens, kHd, perm, g.heads, out.data(), in.row, kHeads);
  }
  return out;
}

// Random FULL / BOUNDARY / SKIP tiles over the token-major layout and over 3D block layouts
// whose blocks are ragged along height and width (5 = 2+2+1, 7 = 3+3+1) or span whole frames.
TEST(SparseAttention, MixedPlanMatchesReference) {
  const Inputs in(3);
  const Shape shape{in.tokens, kHeads, kHd};
  AttentionWorkspace ws;
  const TokenLayout layouts[] = {token_major_layout(kGrid, 16), block3d_layout(kGrid, {1, 2, 3}),
                                 block3d_layout(kGrid, {2, 5, 2}), frame_major_layout(kGrid, 9)};
  uint32_t seed = 4;
  for (const TokenLayout& layout : layouts) {
    const AttentionPlan plan = mixed_plan(seed++, layout);
    for (const bool bf16 : {false, true}) {
      std::vector<float> out(static_cast<size_t>(in.tokens * in.row), 7.0f);
      execute_attention_plan(plan, in.io(out.data(), bf16), ws, AttentionCall{});
      EXPECT_TRUE(
          all_close(Tensor::from_floats(out, shape),
                    Tensor::from_floats(reference(plan, in, bf16), shape), bf16 ? 4e-3 : 3e-6, 1e-5,
                    std::string(bf16 ? "bf16" : "f32") + " layout #" + std::to_string(seed - 5)));
    }
  }
}

TEST(SparseAttention, DiagnosticsRecordErrorAndRecall) {
  const Inputs in(5);
  std::vector<float> out(static_cast<size_t>(in.tokens * in.row));
  AttentionWorkspace ws;
  AttentionDiagnostics diag;
  diag.sample_rows = 1000;  // more than the tokens: every row
  AttentionCall call;
  call.layer = 3;
  call.step = 2;
  // A sparse group whose mask keeps everything: the same as dense.
  AttentionPlan full;
  HeadGroup g;
  g.heads = {0, 1, 2, 3};
  g.layout = block3d_layout(kGrid, {1, 2, 4});
  g.mask = BlockMask(4, g.layout.blocks.blocks(), g.layout.blocks.blocks());
  g.mask.fill(TileClass::kFull);
  g.mask.build_rows();
  full.groups.push_back(g);
  execute_attention_plan(full, in.io(out.data(), false), ws, call, &diag);
  ASSERT_EQ(diag.records.size(), 1u);
  EXPECT_EQ(diag.records[0].layer, 3);
  EXPECT_EQ(diag.records[0].step, 2);
  EXPECT_DOUBLE_EQ(diag.records[0].density, 1.0);
  EXPECT_LT(diag.records[0].rel_l2, 1e-6);
  EXPECT_NEAR(diag.records[0].recall, 1.0, 1e-12);
  // Half of each row's tiles: recall and error move, and agree in direction.
  for (int64_t h = 0; h < 4; ++h)
    for (int64_t qb = 0; qb < g.mask.q_blocks(); ++qb)
      for (int64_t kb = 0; kb < g.mask.k_blocks(); ++kb)
        if ((qb + kb) % 2) full.groups[0].mask.set(h, qb, kb, TileClass::kSkip);
  full.groups[0].mask.build_rows();
  execute_attention_plan(full, in.io(out.data(), false), ws, call, &diag);
  ASSERT_EQ(diag.records.size(), 2u);
  EXPECT_LT(diag.records[1].density, 0.6);
  EXPECT_GT(diag.records[1].rel_l2, 1e-3);
  EXPECT_LT(diag.records[1].recall, 0.8);
  EXPECT_GT(diag.records[1].recall, 0.2);
}

TEST(SparseAttention, BadPlansAreInputErrors) {
  AttentionPlan plan = mixed_plan(1, token_major_layout(kGrid, 16));
  EXPECT_NO_THROW(validate_plan(plan, kGrid.tokens(), kHeads));
  EXPECT_THROW(validate_plan(plan, kGrid.tokens(), kHeads + 1), InputError);  // head 4 missing
  EXPECT_THROW(validate_plan(plan, kGrid.tokens() + 1, kHeads), InputError);  // layout size
  plan.groups[0].heads.push_back(1);
  EXPECT_THROW(validate_plan(plan, kGrid.tokens(), kHeads), InputError);  // head in two groups
}

}  // namespace
}  // namespace vidax::sparse
