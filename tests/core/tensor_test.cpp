// Tensor: creation, views (reshape/slice/select/permute/unsqueeze), copies and conversions.

#include "core/tensor.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <numeric>
#include <vector>

#include "core/storage.h"
#include "support/test_support.h"

namespace vidax {
namespace {

// A [2, 3, 4] f32 tensor holding 0..23 in row-major order.
Tensor iota_234() {
  std::vector<float> v(24);
  std::iota(v.begin(), v.end(), 0.0f);
  return Tensor::from_floats(v, Shape{2, 3, 4});
}

// Element at a logical index of an f32 tensor with any strides.
float at(const Tensor& t, std::initializer_list<int64_t> idx) {
  const float* p = t.data<float>();
  int64_t off = 0;
  int i = 0;
  for (int64_t x : idx) off += x * t.stride(i++);
  return p[off];
}

TEST(Tensor, ZerosIsContiguousAndZeroFilled) {
  const Tensor t = Tensor::zeros(Shape{3, 5}, DType::kBF16);
  EXPECT_TRUE(t.defined());
  EXPECT_EQ(t.shape(), (Shape{3, 5}));
  EXPECT_EQ(t.rank(), 2);
  EXPECT_EQ(t.numel(), 15);
  EXPECT_EQ(t.itemsize(), 2u);
  EXPECT_EQ(t.nbytes(), 30u);
  EXPECT_EQ(t.stride(0), 5);
  EXPECT_EQ(t.stride(1), 1);
  EXPECT_EQ(t.stride(-1), 1);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_TRUE(t.writable());
  for (float f : t.to_float_vector()) EXPECT_EQ(f, 0.0f);
  EXPECT_EQ(t.describe(), "BF16 [3, 5]");
  EXPECT_FALSE(Tensor().defined());
}

TEST(Tensor, RankZeroAndEmptyTensors) {
  const Tensor scalar = Tensor::from_floats(std::vector<float>{2.5f}, Shape{});
  EXPECT_EQ(scalar.rank(), 0);
  EXPECT_EQ(scalar.numel(), 1);
  EXPECT_EQ(scalar.to_float_vector(), std::vector<float>{2.5f});
  EXPECT_EQ(scalar.to(DType::kBF16).to_float_vector(), std::vector<float>{2.5f});

  const Tensor empty = Tensor::zeros(Shape{0, 3});
  EXPECT_EQ(empty.numel(), 0);
  EXPECT_EQ(empty.clone().numel(), 0);
  EXPECT_EQ(empty.to(DType::kF16).numel(), 0);
  EXPECT_TRUE(empty.to_float_vector().empty());
  EXPECT_EQ(empty.permute({1, 0}).contiguous().shape(), (Shape{3, 0}));
}

// Note: Tensor::reshape documents "one extent may be -1", but Shape's constructor rejects
// negative extents, so the inference branch cannot be reached through the public API.
TEST(Tensor, ReshapeSharesStorage) {
  const Tensor t = iota_234();
  const Tensor r = t.reshape(Shape{6, 4});
  EXPECT_EQ(r.shape(), (Shape{6, 4}));
  EXPECT_EQ(r.storage(), t.storage());
  EXPECT_EQ(at(r, {5, 3}), 23.0f);
  r.mutable_data<float>()[0] = -1.0f;  // writes through to the original
  EXPECT_EQ(at(t, {0, 0, 0}), -1.0f);
  EXPECT_EQ(t.reshape(Shape{24}).shape(), (Shape{24}));
  EXPECT_EQ(t.reshape(Shape{2, 1, 12}).stride(0), 12);
}

TEST(Tensor, SliceOuterDimensionStaysContiguous) {
  const Tensor t = iota_234();
  const Tensor s = t.slice(0, 1, 2);  // [1, 3, 4]
  EXPECT_EQ(s.shape(), (Shape{1, 3, 4}));
  EXPECT_TRUE(s.is_contiguous());
  EXPECT_EQ(s.to_float_vector().front(), 12.0f);
  // A contiguous slice can be reshaped; the byte offset is kept.
  EXPECT_EQ(s.reshape(Shape{12}).to_float_vector().back(), 23.0f);
}

TEST(Tensor, SliceInnerDimensionIsAStridedView) {
  const Tensor t = iota_234();
  const Tensor s = t.slice(-1, 1, 3);  // [2, 3, 2]
  EXPECT_EQ(s.shape(), (Shape{2, 3, 2}));
  EXPECT_FALSE(s.is_contiguous());
  EXPECT_EQ(s.storage(), t.storage());
  const std::vector<float> want = {1, 2, 5, 6, 9, 10, 13, 14, 17, 18, 21, 22};
  EXPECT_EQ(s.to_float_vector(), want);
  const Tensor c = s.contiguous();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_NE(c.storage(), t.storage());
  EXPECT_EQ(c.to_float_vector(), want);
  // Empty slices are allowed.
  EXPECT_EQ(t.slice(1, 2, 2).numel(), 0);
}

TEST(Tensor, SelectDropsTheDimension) {
  const Tensor t = iota_234();
  const Tensor a = t.select(1, 2);  // [2, 4]: rows t[:, 2, :]
  EXPECT_EQ(a.shape(), (Shape{2, 4}));
  EXPECT_EQ(a.to_float_vector(), (std::vector<float>{8, 9, 10, 11, 20, 21, 22, 23}));
  const Tensor b = t.select(-1, 3);  // [2, 3]: a column, stride 4
  EXPECT_EQ(b.shape(), (Shape{2, 3}));
  EXPECT_EQ(b.stride(1), 4);
  EXPECT_EQ(b.to_float_vector(), (std::vector<float>{3, 7, 11, 15, 19, 23}));
  const Tensor s = b.select(0, 1).select(0, 2);  // rank 0
  EXPECT_EQ(s.rank(), 0);
  EXPECT_EQ(s.to_float_vector(), std::vector<float>{23});
}

TEST(Tensor, PermuteAndContiguousCopy) {
  const Tensor t = iota_234();
  const Tensor p = t.permute({2, 0, 1});  // [4, 2, 3]
  EXPECT_EQ(p.shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(p.stride(0), 1);
  EXPECT_EQ(p.stride(1), 12);
  EXPECT_EQ(p.stride(2), 4);
  EXPECT_FALSE(p.is_contiguous());
  const Tensor c = p.contiguous();
  EXPECT_TRUE(c.is_contiguous());
  const float* cp = c.data<float>();
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 2; ++j)
      for (int64_t k = 0; k < 3; ++k) EXPECT_EQ(cp[(i * 2 + j) * 3 + k], at(t, {j, k, i}));
  // Permuting back gives the original layout.
  EXPECT_TRUE(p.permute({1, 2, 0}).is_contiguous());
  // The identity permutation of a contiguous tensor is contiguous and shares storage.
  EXPECT_EQ(t.permute({0, 1, 2}).contiguous().storage(), t.storage());
}

TEST(Tensor, PermuteOfASliceAndCloneAreIndependent) {
  const Tensor t = iota_234();
  const Tensor v = t.slice(1, 1, 3).permute({1, 0, 2});  // [2, 2, 4]
  Tensor c = v.clone();
  EXPECT_EQ(c.to_float_vector(),
            (std::vector<float>{4, 5, 6, 7, 16, 17, 18, 19, 8, 9, 10, 11, 20, 21, 22, 23}));
  c.mutable_data<float>()[0] = 100.0f;
  EXPECT_EQ(at(t, {0, 1, 0}), 4.0f);
}

TEST(Tensor, Unsqueeze) {
  const Tensor t = iota_234();
  EXPECT_EQ(t.unsqueeze(0).shape(), (Shape{1, 2, 3, 4}));
  EXPECT_EQ(t.unsqueeze(1).shape(), (Shape{2, 1, 3, 4}));
  EXPECT_EQ(t.unsqueeze(3).shape(), (Shape{2, 3, 4, 1}));
  EXPECT_EQ(t.unsqueeze(-1).shape(), (Shape{2, 3, 4, 1}));
  EXPECT_EQ(t.unsqueeze(-4).shape(), (Shape{1, 2, 3, 4}));
  for (int d = 0; d <= 3; ++d) {
    const Tensor u = t.unsqueeze(d);
    EXPECT_TRUE(u.is_contiguous()) << d;
    EXPECT_EQ(u.to_float_vector(), t.to_float_vector()) << d;
  }
  // On a permuted view the remaining strides are kept.
  const Tensor p = t.permute({2, 0, 1}).unsqueeze(1);  // [4, 1, 2, 3]
  EXPECT_EQ(p.shape(), (Shape{4, 1, 2, 3}));
  EXPECT_EQ(p.stride(0), 1);
  EXPECT_EQ(p.stride(2), 12);
  EXPECT_EQ(p.stride(3), 4);
  EXPECT_EQ(p.contiguous().to_float_vector(), t.permute({2, 0, 1}).contiguous().to_float_vector());
}

TEST(Tensor, ToConvertsInLogicalOrder) {
  const Tensor t = iota_234();
  const Tensor p = t.permute({2, 1, 0});
  const Tensor b = p.to(DType::kBF16);
  EXPECT_EQ(b.dtype(), DType::kBF16);
  EXPECT_TRUE(b.is_contiguous());
  EXPECT_EQ(b.shape(), p.shape());
  EXPECT_EQ(b.to_float_vector(), p.to_float_vector());  // small integers are exact in bf16
  const Tensor h = b.to(DType::kF16);
  EXPECT_EQ(h.to_float_vector(), p.to_float_vector());
  EXPECT_EQ(h.to(DType::kF32).to_float_vector(), p.to_float_vector());
  // Rounding: 1 + 2^-8 + 2^-9 rounds up to 1 + 2^-7 in bf16 (nearest).
  const Tensor r = Tensor::from_floats(std::vector<float>{1.0f + 0.005859375f}, Shape{1});
  EXPECT_EQ(r.to(DType::kBF16).to_float_vector()[0], 1.0078125f);
  // A strided bf16 view converts through its strides.
  EXPECT_EQ(b.select(1, 2).to_float_vector(), p.select(1, 2).to_float_vector());
}

TEST(Tensor, CopyFromIntoAContiguousSliceWritesThrough) {
  const Tensor t = Tensor::zeros(Shape{3, 4});
  const Tensor src = iota_234().select(0, 1).slice(0, 0, 1);  // [1, 4] = 12..15
  t.slice(0, 2, 3).copy_from(src);
  // Strided source: column 0 of a [4, 6] view, transposed to [1, 4] = {0, 6, 12, 18}.
  const Tensor col = iota_234().reshape(Shape{4, 6}).slice(1, 0, 1).permute({1, 0});
  EXPECT_FALSE(col.is_contiguous() && col.stride(1) == 1);
  t.slice(0, 0, 1).copy_from(col);
  EXPECT_EQ(t.to_float_vector(), (std::vector<float>{0, 6, 12, 18, 0, 0, 0, 0, 12, 13, 14, 15}));
}

TEST(TensorDeathTest, InvalidViewsAreInternalErrors) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const Tensor t = iota_234();
  EXPECT_DEATH(t.permute({2, 0, 1}).reshape(Shape{24}), "non-contiguous");
  EXPECT_DEATH(t.reshape(Shape{5, 5}), "reshape");
  EXPECT_DEATH(t.slice(1, 2, 4), "slice");
  EXPECT_DEATH(t.select(0, 2), "slice");
  EXPECT_DEATH(t.permute({0, 0, 1}), "bad permutation");
  EXPECT_DEATH(t.permute({0, 1}), "rank mismatch");
  EXPECT_DEATH(t.data<BFloat16>(), "accessed as");
  EXPECT_DEATH(Tensor::zeros(Shape{2}).copy_from(Tensor::zeros(Shape{3})), "copy_from");
  EXPECT_DEATH(t.permute({1, 0, 2}).copy_from(t.permute({1, 0, 2})), "non-contiguous");
}

TEST(Tensor, FromStorageChecksBounds) {
  auto storage = allocate_storage(64);
  const Tensor a = Tensor::from_storage(storage, Shape{4, 4}, DType::kF32);  // exactly fits
  EXPECT_EQ(a.nbytes(), 64u);
  const Tensor b = Tensor::from_storage(storage, Shape{8}, DType::kBF16, 48);  // the last 16 bytes
  b.mutable_data<BFloat16>()[7].bits = 0x3f80;
  EXPECT_EQ(a.to_float_vector()[15], 1.0f);  // bf16 0x3f80 in the high half of the last float
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(Tensor::from_storage(storage, Shape{17}, DType::kF32), "exceeds its storage");
  EXPECT_DEATH(Tensor::from_storage(storage, Shape{4}, DType::kF32, 49), "exceeds its storage");
}

TEST(Tensor, MappedStorageIsReadOnly) {
  testing::TempDir dir;
  const std::string path = dir.file("t.bin");
  const float values[4] = {1.0f, -2.0f, 3.5f, 8.0f};
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(std::fwrite(values, sizeof(float), 4, f), 4u);
  std::fclose(f);
  auto file = MappedFile::open(path);
  const Tensor t = Tensor::from_storage(mapped_storage(file, 4, 12), Shape{3}, DType::kF32);
  EXPECT_FALSE(t.writable());
  EXPECT_EQ(t.to_float_vector(), (std::vector<float>{-2.0f, 3.5f, 8.0f}));
  EXPECT_EQ(t.to(DType::kBF16).to_float_vector(), (std::vector<float>{-2.0f, 3.5f, 8.0f}));
  EXPECT_TRUE(t.clone().writable());
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(t.mutable_data<float>(), "read-only");
  EXPECT_THROW(MappedFile::open(dir.file("missing.bin")), InputError);
}

}  // namespace
}  // namespace vidax
