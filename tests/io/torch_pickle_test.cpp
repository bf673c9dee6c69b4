// The restricted unpickler: what torch.save writes is rebuilt; hostile and malformed streams are
// refused with an error naming the problem and the byte offset.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "io/pth_test_util.h"
#include "io/safetensors_test_util.h"
#include "io/torch_pickle.h"

namespace vidax {
namespace {

namespace pk = testing::pk;
using testing::throws_input_error;

PickleGraph run(const std::string& bytes, const TorchPickleLimits& limits = {}) {
  return unpickle_torch(
      std::span<const std::byte>(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()),
      "f.pth: archive/data.pkl", limits);
}

std::string proto() { return pk::op(0x80) + pk::op(2); }

TEST(TorchPickle, RebuildsAStateDict) {
  const std::string p =
      pk::state_dict({{"w", pk::tensor("FloatStorage", "0", 12, 2, {2, 3}, {4, 1})},
                      {"b", pk::tensor("BFloat16Storage", "1", 3, 0, {3}, {1})},
                      {"w_again", pk::tensor("FloatStorage", "0", 12, 0, {12}, {1})}});
  const PickleGraph g = run(p);
  const PickleObject& root = g.at(g.root);
  ASSERT_EQ(root.kind, PickleKind::kDict);
  EXPECT_TRUE(root.ordered);
  ASSERT_EQ(root.items.size(), 6u);
  EXPECT_EQ(g.at(root.items[0]).text, "w");
  const PickleObject& w = g.at(root.items[1]);
  ASSERT_EQ(w.kind, PickleKind::kTensor);
  const TorchTensorRef& t = g.tensors[static_cast<size_t>(w.int_value)];
  EXPECT_EQ(t.storage_offset, 2);
  EXPECT_EQ(t.sizes, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(t.strides, (std::vector<int64_t>{4, 1}));
  // The shared storage is one storage.
  ASSERT_EQ(g.storages.size(), 2u);
  EXPECT_EQ(g.storages[t.storage].type_name, "FloatStorage");
  EXPECT_EQ(g.storages[t.storage].key, "0");
  EXPECT_EQ(g.storages[t.storage].numel, 12);
  EXPECT_EQ(g.tensors[2].storage, t.storage);
  EXPECT_EQ(torch_storage_dtype("BFloat16Storage"), DType::kBF16);
  EXPECT_EQ(torch_storage_dtype("DoubleStorage"), std::nullopt);
}

TEST(TorchPickle, PlainValuesAndMemo) {
  // [None, True, False, -5 (BININT), 300 (BININT2), 2**40 (LONG1), 1.5, "s", b"b"] memoized
  // and fetched again.
  std::string p = proto() + pk::op(']') + pk::op('q') + pk::op(0) + pk::op('(');
  p += pk::op('N') + pk::op(0x88) + pk::op(0x89);
  p += pk::op('J');
  testing::put_le(p, static_cast<uint32_t>(-5), 4);
  p += pk::op('M') + pk::op(0x2c) + pk::op(0x01);
  p += pk::op(0x8a) + pk::op(6) + std::string("\0\0\0\0\0\x01", 6);
  p += pk::op('G') + std::string("\x3f\xf8\0\0\0\0\0\0", 8);
  p += pk::op(0x8c) + pk::op(1) + "s" + pk::op('C') + pk::op(1) + "b";
  p += pk::op('e') + pk::op('0') + pk::op('h') + pk::op(0) + pk::op('.');
  const PickleGraph g = run(p);
  const PickleObject& list = g.at(g.root);
  ASSERT_EQ(list.kind, PickleKind::kList);
  ASSERT_EQ(list.items.size(), 9u);
  EXPECT_EQ(g.at(list.items[0]).kind, PickleKind::kNone);
  EXPECT_EQ(g.at(list.items[1]).int_value, 1);
  EXPECT_EQ(g.at(list.items[2]).int_value, 0);
  EXPECT_EQ(g.at(list.items[3]).int_value, -5);
  EXPECT_EQ(g.at(list.items[4]).int_value, 300);
  EXPECT_EQ(g.at(list.items[5]).int_value, int64_t{1} << 40);
  EXPECT_EQ(g.at(list.items[6]).float_value, 1.5);
  EXPECT_EQ(g.at(list.items[7]).text, "s");
  EXPECT_EQ(g.at(list.items[8]).kind, PickleKind::kBytes);
}

TEST(TorchPickle, RefusesEveryNonWhitelistedGlobal) {
  for (const auto& [module, name] : std::vector<std::pair<std::string, std::string>>{
           {"os", "system"},
           {"posix", "system"},
           {"builtins", "eval"},
           {"builtins", "exec"},
           {"__builtin__", "eval"},
           {"subprocess", "Popen"},
           {"torch", "load"},
           {"torch.nn.modules.linear", "Linear"},
           {"collections", "defaultdict"},
           {"torch._utils", "_rebuild_device_tensor_from_numpy"}}) {
    const std::string qualified = module + "." + name;
    // GLOBAL opcode, called with REDUCE as an exploit would.
    const std::string direct =
        proto() + pk::global(module, name) + pk::tuple({pk::str("id")}) + pk::op('R') + pk::op('.');
    EXPECT_TRUE(throws_input_error(
        [&] { run(direct); },
        {"f.pth: archive/data.pkl: byte 2: global '" + qualified + "' is not allowed",
         "nothing is imported or executed"}));
    // STACK_GLOBAL (protocol 4) with the names as strings.
    const std::string stacked = pk::op(0x80) + pk::op(4) + pk::op(0x8c) +
                                pk::op(static_cast<unsigned char>(module.size())) + module +
                                pk::op(0x8c) + pk::op(static_cast<unsigned char>(name.size())) +
                                name + pk::op(0x93) + pk::op('.');
    EXPECT_TRUE(throws_input_error([&] { run(stacked); }, {"global '" + qualified + "'"}));
  }
}

TEST(TorchPickle, AllowedGlobalsOnlyDoWhatTheyAreFor) {
  // A storage type cannot be called, OrderedDict takes no arguments, tensors need storages.
  EXPECT_TRUE(throws_input_error(
      [] {
        run(proto() + pk::global("torch", "FloatStorage") + pk::op(')') + pk::op('R') +
            pk::op('.'));
      },
      {"REDUCE on storage type torch.FloatStorage"}));
  EXPECT_TRUE(throws_input_error(
      [] {
        run(proto() + pk::global("collections", "OrderedDict") + pk::tuple({pk::str("x")}) +
            pk::op('R') + pk::op('.'));
      },
      {"OrderedDict() takes no arguments"}));
  EXPECT_TRUE(throws_input_error(
      [] {
        run(proto() + pk::global("torch._utils", "_rebuild_tensor_v2") +
            pk::tuple({pk::str("x"), pk::int1(0), pk::tuple({}), pk::tuple({}), pk::op(0x89),
                       pk::ordered_dict()}) +
            pk::op('R') + pk::op('.'));
      },
      {"storage argument is a string"}));
  // REDUCE on something that is not a global at all.
  EXPECT_TRUE(throws_input_error(
      [] { run(proto() + pk::str("os.system") + pk::op(')') + pk::op('R') + pk::op('.')); },
      {"REDUCE calls a string, not an allowed global"}));
}

TEST(TorchPickle, TensorViewsMustStayInsideTheirStorage) {
  // 12 elements; offset 8 + (2-1)*4 + (3-1)*1 = 14 > 11.
  EXPECT_TRUE(throws_input_error(
      [] {
        run(pk::state_dict({{"w", pk::tensor("FloatStorage", "0", 12, 8, {2, 3}, {4, 1})}}));
      },
      {"reaches past its storage of 12 elements"}));
  EXPECT_TRUE(throws_input_error(
      [] {
        run(pk::state_dict({{"w", pk::tensor("FloatStorage", "0", 4, 0, {2}, {1, 1})}}));
      },
      {"size has 1 dimensions, stride 2"}));
  EXPECT_TRUE(throws_input_error(
      [] {
        run(pk::state_dict({{"w", pk::tensor("FloatStorage", "0", 4, 0, {1, 1, 1, 1, 1, 1, 1, 1, 1},
                                             {1, 1, 1, 1, 1, 1, 1, 1, 1})}}));
      },
      {"rank 9 exceeds the maximum of 8"}));
  // The same key described twice with different sizes.
  EXPECT_TRUE(throws_input_error(
      [] {
        run(pk::state_dict({{"a", pk::tensor("FloatStorage", "0", 4, 0, {4}, {1})},
                            {"b", pk::tensor("FloatStorage", "0", 8, 0, {8}, {1})}}));
      },
      {"storage '0' is described twice differently"}));
  // A persistent id that is not a storage record.
  EXPECT_TRUE(throws_input_error(
      [] {
        run(proto() + pk::tuple({pk::str("module"), pk::str("x")}) + pk::op('Q') + pk::op('.'));
      },
      {"persistent id must be ('storage'"}));
  EXPECT_TRUE(throws_input_error(
      [] {
        run(proto() +
            pk::tuple({pk::str("storage"), pk::global("torch", "FloatStorage"), pk::str("../x"),
                       pk::str("cpu"), pk::int1(1)}) +
            pk::op('Q') + pk::op('.'));
      },
      {"key is not a plain record name"}));
}

TEST(TorchPickle, MalformedStreamsNameTheByteOffset) {
  struct Case {
    std::string bytes;
    std::vector<std::string> phrases;
  };
  const std::vector<Case> cases = {
      {"", {"byte 0", "stream ends without STOP"}},
      {proto() + pk::op(']'), {"byte 3", "stream ends without STOP"}},
      {proto() + pk::op(0xfe), {"byte 2", "unknown opcode 0xfe"}},
      {proto() + pk::op('i'), {"opcode INST is not supported"}},
      {proto() + pk::op(0x81), {"opcode NEWOBJ is not supported"}},
      {pk::op(0x80) + pk::op(9), {"pickle protocol 9"}},
      {proto() + pk::op('0'), {"byte 2", "stack underflow"}},
      {proto() + pk::op('a'), {"APPEND on an empty stack"}},
      {proto() + pk::op('t'), {"byte 2", "TUPLE without a preceding MARK"}},
      {proto() + pk::op('(') + pk::op('N') + pk::op('.'), {"STOP with an open MARK"}},
      {proto() + pk::op('h') + pk::op(7), {"byte 2", "memo index 7 was never stored"}},
      {proto() + pk::op('j') + std::string("\xff\xff\xff\x7f", 4), {"memo index 2147483647"}},
      {proto() + pk::op('X') + std::string("\x10\0\0\0abc", 7),
       {"byte 2", "truncated string (needs 16 bytes, 3 left)"}},
      {proto() + pk::op('J') + std::string("\1\2", 2), {"truncated BININT argument"}},
      {proto() + pk::op(0x8d) + std::string("\xff\xff\xff\xff\xff\xff\xff\x7f", 8),
       {"string length", "longer than the stream"}},
      {proto() + pk::op(0x8a) + pk::op(9) + std::string(9, '\1'),
       {"integer of 9 bytes does not fit 64 bits"}},
      {proto() + pk::op('c') + "os", {"truncated GLOBAL module name"}},
      {proto() + pk::op('c') + std::string(300, 'a') + "\nb\n", {"longer than 256 bytes"}},
      {proto() + pk::op('N') + pk::op('N') + pk::op('.'), {"STOP with 2 values on the stack"}},
      {proto() + pk::op('N') + pk::op('.') + "junk", {"4 bytes after STOP"}},
      {proto() + pk::op('N') + pk::op('N') + pk::op('a') + pk::op('.'),
       {"APPEND to None, expected a list"}},
      {proto() + pk::op(']') + pk::op('(') + pk::op('N') + pk::op('u') + pk::op('.'),
       {"SETITEM(S) on a list"}},
      {proto() + pk::op('}') + pk::op('(') + pk::op('N') + pk::op('u') + pk::op('.'),
       {"odd number"}},
      {proto() + pk::op('N') + pk::op('}') + pk::op('b') + pk::op('.'), {"BUILD on None"}},
      {proto() + pk::op(0x95) + std::string("\xff\0\0\0\0\0\0\0", 8), {"FRAME of 255 bytes"}},
  };
  for (const Case& c : cases) {
    for (const std::string& phrase : c.phrases) {
      EXPECT_TRUE(
          throws_input_error([&] { run(c.bytes); }, {"f.pth: archive/data.pkl: byte ", phrase}));
    }
  }
}

TEST(TorchPickle, ResourcesAreBounded) {
  // Deep nesting through MARKs.
  EXPECT_TRUE(throws_input_error([] { run(proto() + std::string(1000, '(')); },
                                 {"MARKs nest deeper than 256"}));
  // Deep nesting through list appends (no MARK involved): [[[[...]]]].
  std::string nested = proto();
  for (int i = 0; i < 100; ++i) nested += pk::op(']');
  for (int i = 0; i < 99; ++i) nested += pk::op('a');
  EXPECT_TRUE(throws_input_error([&] { run(nested + pk::op('.')); },
                                 {"containers nest deeper than 64 levels"}));
  // A list appended to itself is a cycle, not a problem: nothing walks the graph recursively.
  const std::string cycle = proto() + pk::op(']') + pk::op('q') + pk::op(0) + pk::op('h') +
                            pk::op(0) + pk::op('a') + pk::op('.');
  EXPECT_EQ(run(cycle).at(run(cycle).root).items.size(), 1u);

  TorchPickleLimits small;
  small.max_objects = 50;
  small.max_stack = 40;
  small.max_memo = 5;
  small.max_string = 8;
  small.max_items = 30;
  std::string objects = proto();
  for (int i = 0; i < 60; ++i) objects += pk::op(']') + pk::op('0');  // create and drop
  EXPECT_TRUE(throws_input_error([&] { run(objects, small); }, {"more than 50 objects"}));
  EXPECT_TRUE(throws_input_error([&] { run(proto() + std::string(45, 'N'), small); },
                                 {"stack holds more than 40"}));
  std::string memo = proto() + pk::op('N');
  for (int i = 0; i < 6; ++i) memo += pk::op('q') + pk::op(static_cast<unsigned char>(i));
  EXPECT_TRUE(throws_input_error([&] { run(memo, small); }, {"memo holds more than 5"}));
  EXPECT_TRUE(throws_input_error([&] { run(proto() + pk::str("123456789"), small); },
                                 {"string of 9 bytes exceeds 8"}));
  std::string items = proto() + pk::op(']') + pk::op('(');
  for (int i = 0; i < 35; ++i) items += pk::op('N');
  EXPECT_TRUE(throws_input_error([&] { run(items + pk::op('e'), small); },
                                 {"more than 30 container items"}));
}

TEST(TorchPickle, TruncationAtEveryByteIsAnInputError) {
  const std::string p =
      pk::state_dict({{"w", pk::tensor("FloatStorage", "0", 12, 2, {2, 3}, {4, 1})},
                      {"b", pk::tensor("HalfStorage", "1", 3, 0, {3}, {1})}});
  run(p);  // the whole stream is valid
  for (size_t n = 0; n < p.size(); ++n) {
    EXPECT_TRUE(throws_input_error([&] { run(p.substr(0, n)); }, {"f.pth: archive/data.pkl: byte"}))
        << "cut at " << n;
  }
}

}  // namespace
}  // namespace vidax
