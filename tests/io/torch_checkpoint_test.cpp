// TorchCheckpoint: real torch.save files (tests/data/pth, made by tools/make_pth_test_files.py),
// the writer's files, TensorSource integration, and the checkpoint-level failure modes.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "io/pth_test_util.h"
#include "io/safetensors.h"
#include "io/safetensors_test_util.h"
#include "io/torch_checkpoint.h"
#include "support/test_support.h"

namespace vidax {
namespace {

namespace pk = testing::pk;
using testing::make_pth;
using testing::throws_input_error;

std::string data_file(const std::string& name) {
  return std::string(VIDAX_SOURCE_DIR) + "/tests/data/pth/" + name;
}

TorchCheckpointIndex validate(const std::string& bytes) {
  return TorchCheckpoint::validate_buffer(reinterpret_cast<const std::byte*>(bytes.data()),
                                          bytes.size(), "m.pth");
}

std::vector<float> values(const Tensor& t) { return t.to_float_vector(); }

// --- real torch.save files ---

TEST(TorchCheckpoint, ReadsNestedTrainingCheckpoints) {
  const TorchCheckpoint ck = TorchCheckpoint::open(data_file("nested.pth"));
  ASSERT_EQ(ck.entries().size(), 3u);  // "step": 5 is skipped
  EXPECT_EQ(values(ck.tensor("generator_ema.model.blocks.0.w")),
            (std::vector<float>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(ck.tensor("generator_ema.model.head.b").dtype(), DType::kBF16);
  EXPECT_EQ(values(ck.tensor("generator_ema.model.head.b")), (std::vector<float>{1.5f, -2.0f}));
  EXPECT_EQ(ck.tensor("critic.inner.x").contiguous().data<int64_t>()[0], 7);
}

TEST(TorchCheckpoint, ReadsRealViewsAndSharedStorage) {
  const TorchCheckpoint ck = TorchCheckpoint::open(data_file("f32_views.pth"));
  EXPECT_EQ(ck.prefix(), "f32_views/");
  ASSERT_EQ(ck.entries().size(), 7u);

  const Tensor base = ck.tensor("base");  // 0.5 * i - 3, [4, 6]
  ASSERT_EQ(base.shape(), Shape({4, 6}));
  ASSERT_EQ(base.dtype(), DType::kF32);
  EXPECT_FALSE(base.writable());  // a view into the mapping
  const std::vector<float> b = values(base);
  for (int i = 0; i < 24; ++i) EXPECT_EQ(b[static_cast<size_t>(i)], 0.5f * i - 3) << i;

  const Tensor slice = ck.tensor("slice");  // base[1:3, 2:5]
  EXPECT_EQ(slice.shape(), Shape({2, 3}));
  EXPECT_EQ(ck.info("slice").storage_offset, 8);
  EXPECT_EQ(slice.stride(0), 6);
  // Shared storage: the slice views the very bytes of base.
  EXPECT_EQ(static_cast<const float*>(slice.raw_data()), base.data<float>() + 8);
  const std::vector<float> s = values(slice);
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 3; ++c)
      EXPECT_EQ(s[static_cast<size_t>(r * 3 + c)], 0.5f * ((r + 1) * 6 + c + 2) - 3);

  const Tensor tr = ck.tensor("transposed");
  EXPECT_EQ(tr.shape(), Shape({6, 4}));
  EXPECT_EQ(tr.stride(0), 1);
  EXPECT_EQ(tr.stride(1), 6);
  const std::vector<float> t = values(tr);
  for (int r = 0; r < 6; ++r)
    for (int c = 0; c < 4; ++c)
      EXPECT_EQ(t[static_cast<size_t>(r * 4 + c)], 0.5f * (c * 6 + r) - 3);

  const Tensor ex = ck.tensor("row_expanded");  // base[2] expanded to 3 rows: stride 0
  EXPECT_EQ(ex.shape(), Shape({3, 6}));
  EXPECT_EQ(ex.stride(0), 0);
  const std::vector<float> e = values(ex);
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 6; ++c) EXPECT_EQ(e[static_cast<size_t>(r * 6 + c)], 0.5f * (12 + c) - 3);

  EXPECT_EQ(ck.tensor("scalar").rank(), 0);
  EXPECT_EQ(values(ck.tensor("scalar"))[0], 1.25f);
  EXPECT_EQ(ck.tensor("empty").shape(), Shape({0, 3}));
  const Tensor l = ck.tensor("long");
  ASSERT_EQ(l.dtype(), DType::kI64);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(l.data<int64_t>()[i], i);
}

TEST(TorchCheckpoint, ReadsRealHalfTypesAndParameters) {
  const TorchCheckpoint ck = TorchCheckpoint::open(data_file("half_types.pth"));
  EXPECT_EQ(ck.prefix(), "archive/");
  const Tensor bf = ck.tensor("bf16");
  ASSERT_EQ(bf.dtype(), DType::kBF16);
  const std::vector<float> b = values(bf);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(b[static_cast<size_t>(i)], 0.25f * i - 1);
  const Tensor h = ck.tensor("f16");
  ASSERT_EQ(h.dtype(), DType::kF16);
  EXPECT_EQ(h.shape(), Shape({2, 5}));
  const std::vector<float> f = values(h);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(f[static_cast<size_t>(i)], 0.125f * i - 0.5f);
  const Tensor i32 = ck.tensor("int32");
  ASSERT_EQ(i32.dtype(), DType::kI32);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(i32.data<int32_t>()[i], i - 1);

  // Parameters (_rebuild_parameter) and the OrderedDict's _metadata (BUILD) of state_dict().
  const TorchCheckpoint p = TorchCheckpoint::open(data_file("parameters.pth"));
  ASSERT_EQ(p.entries().size(), 2u);
  const std::vector<float> w = values(p.tensor("weight"));
  ASSERT_EQ(p.entry("weight").shape, Shape({2, 3}));
  for (int i = 0; i < 6; ++i)
    EXPECT_FLOAT_EQ(w[static_cast<size_t>(i)], 0.1f * static_cast<float>(i));
  EXPECT_EQ(values(p.tensor("bias")), (std::vector<float>{0.0f, -1.0f}));
}

// --- writer ---

TEST(TorchCheckpoint, WriterRoundTripsEveryDtypeAndLayout) {
  testing::TempDir dir;
  const std::string path = dir.file("w.pth");
  const Tensor f32 = testing::random_tensor({3, 5}, 7);
  const Tensor bf16 = f32.to(DType::kBF16);
  const Tensor f16 = f32.to(DType::kF16);
  const Tensor permuted = f32.permute({1, 0});  // a strided view: stored contiguous
  Tensor i64 = Tensor::zeros({4}, DType::kI64);
  for (int i = 0; i < 4; ++i) i64.mutable_data<int64_t>()[i] = (int64_t{1} << 40) * i - 3;
  Tensor i32 = Tensor::zeros({2}, DType::kI32);
  i32.mutable_data<int32_t>()[1] = -7;
  Tensor f8 = Tensor::zeros({3}, DType::kF8E4M3);
  static_cast<uint8_t*>(f8.raw_mutable_data())[2] = 0x38;  // 1.0
  const std::vector<std::pair<std::string, Tensor>> tensors = {
      {"a.f32", f32},
      {"a.bf16", bf16},
      {"a.f16", f16},
      {"p", permuted},
      {"i64", i64},
      {"i32", i32},
      {"f8", f8},
      {"scalar", Tensor::from_floats(std::vector<float>{2}, Shape{})},
      {"empty", Tensor::zeros({0, 2})}};
  write_torch_checkpoint(path, tensors);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp." + std::to_string(::getpid())));

  const TorchCheckpoint ck = TorchCheckpoint::open(path);
  ASSERT_EQ(ck.entries().size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    const Tensor r = ck.tensor(name);
    ASSERT_EQ(r.dtype(), t.dtype()) << name;
    ASSERT_EQ(r.shape(), t.shape()) << name;
    EXPECT_EQ(ck.info(name).record_offset % 64, 0u) << name;  // torch's alignment
    const Tensor a = r.contiguous(), b = t.contiguous();
    EXPECT_EQ(std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()), 0) << name;
  }
  // Storage order: entries sorted by file offset.
  for (size_t i = 1; i < ck.entries().size(); ++i)
    EXPECT_LE(ck.entries()[i - 1].begin, ck.entries()[i].begin);

  TorchWriteOptions z64;
  z64.force_zip64 = true;
  z64.prefix = "other";
  write_torch_checkpoint(path, tensors, z64);
  const TorchCheckpoint ck64 = TorchCheckpoint::open(path);
  EXPECT_EQ(ck64.prefix(), "other/");
  EXPECT_EQ(values(ck64.tensor("a.f32")), values(f32));
}

TEST(TorchCheckpoint, WriterRefusesBadInput) {
  testing::TempDir dir;
  const Tensor t = Tensor::zeros({2});
  EXPECT_TRUE(throws_input_error(
      [&] {
        write_torch_checkpoint(dir.file("d.pth"), {{"x", t}, {"x", t}});
      },
      {"d.pth", "duplicate tensor name 'x'"}));
  EXPECT_TRUE(throws_input_error(
      [&] {
        write_torch_checkpoint(dir.file("u.pth"), {{"x", {}}});
      },
      {"u.pth", "'x' is undefined"}));
  EXPECT_FALSE(std::filesystem::exists(dir.file("d.pth")));
}

// --- TensorSource ---

TEST(TorchCheckpoint, TensorSourceOpensPthByMagicBytes) {
  testing::TempDir dir;
  const Tensor a = Tensor::from_floats(std::vector<float>{1, 2, 3}, {3});
  for (const std::string name :
       {"m.pth", "m.pt", "m.ckpt", "pytorch_model.bin", "odd.safetensors"}) {
    write_torch_checkpoint(dir.file(name), {{"x.weight", a}});
    const TensorSource src = TensorSource::open(dir.file(name));
    EXPECT_EQ(src.format(), "pytorch") << name;
    EXPECT_EQ(src.names(), std::vector<std::string>{"x.weight"});
    EXPECT_EQ(values(src.tensor("x.weight")), values(a));
    EXPECT_TRUE(src.metadata().empty());
    ASSERT_EQ(src.files().size(), 1u);
    EXPECT_EQ(src.files()[0]->format(), "pytorch");
  }
  // And the real torch files.
  const TensorSource real = TensorSource::open(data_file("half_types.pth"));
  EXPECT_EQ(real.names(), (std::vector<std::string>{"bf16", "f16", "int32"}));

  // A sharded index may mix formats: a .bin shard next to a .safetensors shard.
  write_torch_checkpoint(dir.file("s1.bin"), {{"a", a}});
  write_safetensors(dir.file("s2.safetensors"), {{"b", a}});
  testing::write_bytes(dir.file("m.bin.index.json"),
                       R"({"weight_map": {"a": "s1.bin", "b": "s2.safetensors"}})");
  const TensorSource sharded = TensorSource::open(dir.file("m.bin.index.json"));
  EXPECT_EQ(sharded.names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(values(sharded.tensor("a")), values(a));
  EXPECT_EQ(sharded.file_of("a"), dir.file("s1.bin"));
}

TEST(TorchCheckpoint, TensorSourceReportsPthErrorsWithThePath) {
  testing::TempDir dir;
  const std::string legacy = dir.file("old.pth");
  testing::write_bytes(legacy, std::string("\x80\x02\x8a\x0a", 4) + std::string(40, 'x'));
  EXPECT_TRUE(throws_input_error([&] { TensorSource::open(legacy); },
                                 {legacy, "legacy PyTorch checkpoint", "before PyTorch 1.6"}));
}

// --- failure modes of the archive as a checkpoint ---

std::string one_tensor(std::string_view type = "FloatStorage", uint8_t numel = 4) {
  return pk::state_dict({{"w", pk::tensor(type, "0", numel, 0, {numel}, {1})}});
}

TEST(TorchCheckpoint, RefusesASharedNestedDict) {
  // {"a": D, "b": D} with D = {"w": tensor} shared through the memo: walking every reference of
  // such dicts could name exponentially many tensors from a tiny file.
  const std::string inner = pk::str("w") + pk::tensor("FloatStorage", "0", 4, 0, {4}, {1});
  const std::string pickle = pk::op(0x80) + pk::op(2) + pk::op('}') + pk::op('(') + pk::str("a") +
                             pk::op('}') + pk::op('q') + pk::op(0) + pk::op('(') + inner +
                             pk::op('u') + pk::str("b") + pk::op('h') + pk::op(0) + pk::op('u') +
                             pk::op('.');
  const std::string data = testing::floats_bytes({1, 2, 3, 4});
  EXPECT_TRUE(throws_input_error(
      [&] {
        validate(make_pth(pickle, {{"0", data}}));
      },
      {"reached twice", "'b.'"}));
}

TEST(TorchCheckpoint, AcceptsMinimalAndDeflatedPickle) {
  const std::string data = testing::floats_bytes({1, 2, 3, 4});
  EXPECT_EQ(validate(make_pth(one_tensor(), {{"0", data}})).tensors.size(), 1u);
  const TorchCheckpointIndex idx = validate(make_pth(one_tensor(), {{"0", data}}, true));
  ASSERT_EQ(idx.tensors.size(), 1u);
  EXPECT_EQ(idx.tensors[0].entry.name, "w");
  EXPECT_EQ(idx.tensors[0].entry.end - idx.tensors[0].entry.begin, 16u);
}

TEST(TorchCheckpoint, RefusesBadFiles) {
  const std::string data = testing::floats_bytes({1, 2, 3, 4});
  struct Case {
    std::string bytes;
    std::vector<std::string> phrases;
  };
  const std::vector<Case> cases = {
      {"hello world", {"m.pth: not a PyTorch zip checkpoint", "68 65 6c 6c"}},
      {std::string("\x80\x02\x8a\x0a\x6c\xfc", 6), {"legacy PyTorch checkpoint"}},
      {testing::build_zip({{"archive/other", "x", false, 0}}), {"no '<folder>/data.pkl' record"}},
      {testing::build_zip(
           {{"a/data.pkl", one_tensor(), false, 0}, {"b/data.pkl", one_tensor(), false, 0}}),
       {"2 '<folder>/data.pkl' records"}},
      {testing::build_zip({{"archive/data.pkl", one_tensor(), false, 0},
                           {"archive/data/0", data, false, 0},
                           {"elsewhere/x", "", false, 0}}),
       {"entry 'elsewhere/x' is outside the folder 'archive/'"}},
      {testing::build_zip({{"archive/data.pkl", one_tensor(), false, 0},
                           {"archive/byteorder", "big", false, 0},
                           {"archive/data/0", data, false, 0}}),
       {"big-endian"}},
      {testing::build_zip({{"archive/data.pkl", one_tensor(), false, 0},
                           {"archive/byteorder", "middle", false, 0}}),
       {"byteorder record holds 'middle'"}},
      {testing::build_zip(
           {{"archive/data.pkl", one_tensor(), false, 0}, {"archive/version", "three", false, 0}}),
       {"version record holds 'three'"}},
      {make_pth(one_tensor(), {}), {"tensor 'w'", "storage record 'archive/data/0' is missing"}},
      {make_pth(one_tensor("FloatStorage", 12), {{"0", data}}),
       {"tensor 'w'", "needs 12 x 4 bytes but its record holds 16"}},
      {make_pth(one_tensor("DoubleStorage", 2), {{"0", data}}),
       {"tensor 'w'", "storage type torch.DoubleStorage is not supported"}},
      {testing::build_zip(
           {{"archive/data.pkl", one_tensor(), false, 0}, {"archive/data/0", data, true, 0}}),
       {"tensor 'w'", "compressed"}},
      {make_pth(pk::op(0x80) + pk::op(2) + pk::op(']') + pk::op('.'), {}),
       {"archive/data.pkl holds a list, expected a state dict"}},
      {make_pth(pk::op(0x80) + pk::op(2) + pk::op('}') + pk::int1(3) + pk::str("x") + pk::op('s') +
                    pk::op('.'),
                {}),
       {"archive/data.pkl: byte 3: state dict key is an int"}},
      {make_pth(pk::state_dict({{"w", pk::str("not a tensor")}}), {}),
       {"tensor 'w'", "value is a string, expected a tensor"}},
      {make_pth(pk::state_dict({{"w", pk::tensor("FloatStorage", "0", 4, 0, {4}, {1})},
                                {"w", pk::tensor("FloatStorage", "0", 4, 0, {2}, {1})}}),
                {{"0", data}}),
       {"tensor 'w'", "appears twice"}},
      {make_pth(pk::state_dict(
                    {{"w", pk::global("os", "system") + pk::tuple({pk::str("ls")}) + pk::op('R')}}),
                {}),
       {"m.pth: archive/data.pkl: byte", "global 'os.system' is not allowed"}},
  };
  for (const Case& c : cases) {
    for (const std::string& phrase : c.phrases) {
      EXPECT_TRUE(throws_input_error([&] { validate(c.bytes); }, {"m.pth", phrase}));
    }
  }
}

TEST(TorchCheckpoint, TruncationAtEveryByteIsAnInputError) {
  testing::TempDir dir;
  write_torch_checkpoint(dir.file("t.pth"),
                         {{"a", Tensor::from_floats(std::vector<float>{1, 2}, {2})},
                          {"b", Tensor::zeros({3}, DType::kBF16)}});
  const std::string bytes = testing::read_bytes(dir.file("t.pth"));
  validate(bytes);
  for (size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_TRUE(throws_input_error([&] { validate(bytes.substr(0, n)); }, {"m.pth"}))
        << "cut at " << n;
  }
}

TEST(TorchCheckpoint, CorruptingAnyByteOfARealFileNeverCrashes) {
  const std::string bytes = testing::read_bytes(data_file("parameters.pth"));
  validate(bytes);
  size_t refused = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (const unsigned char v : {0x00, 0xff, 0x41}) {
      std::string bad = bytes;
      if (bad[i] == static_cast<char>(v)) continue;
      bad[i] = static_cast<char>(v);
      try {
        const TorchCheckpointIndex idx = validate(bad);
        for (const TorchTensorInfo& t : idx.tensors) {
          // Whatever was accepted lies inside the file.
          ASSERT_LE(t.entry.end, bad.size());
          ASSERT_LE(t.record_offset + t.record_bytes, bad.size());
        }
      } catch (const InputError& e) {
        ++refused;
        EXPECT_EQ(std::string(e.what()).rfind("m.pth", 0), 0u) << e.what();
      }
    }
  }
  EXPECT_GT(refused, 0u);
}

}  // namespace
}  // namespace vidax
