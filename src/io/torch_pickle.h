// A restricted unpickler for the `data.pkl` record of torch.save checkpoints. It is an
// interpreter for the pickle opcodes torch.save emits (protocols 2-5) that builds plain data
// only: None, bools, ints (64-bit), floats, strings, bytes, tuples, lists, dicts (plain and
// collections.OrderedDict), storages (from BINPERSID) and tensors. Nothing is ever imported or
// executed: GLOBAL resolves only a fixed whitelist (collections.OrderedDict,
// torch._utils._rebuild_tensor_v2 / _rebuild_parameter / _rebuild_parameter_with_state and the
// torch.<X>Storage type names), and REDUCE runs our own implementation of those few callables.
// Every other global (os.system, builtins.eval, subprocess.Popen, any class...) is refused with
// an error naming it.
//
// Objects live in one flat table and refer to each other by index, so a hostile stream cannot
// cause deep recursion (no destructor or walk recurses over the graph) and cycles built through
// the memo cost nothing. Every resource is bounded (TorchPickleLimits). Malformed streams throw
// InputError "<label>: byte <offset>: <what>".
//
// Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/shape.h"

namespace vidax {

using PickleId = uint32_t;

enum class PickleKind : uint8_t {
  kNone,
  kBool,
  kInt,
  kFloat,
  kString,
  kBytes,
  kTuple,
  kList,
  kDict,
  kGlobal,   // a whitelisted callable or storage type (see PickleGlobal)
  kStorage,  // index into PickleGraph::storages
  kTensor,   // index into PickleGraph::tensors
};
std::string_view pickle_kind_name(PickleKind kind);

enum class PickleGlobal : uint8_t {
  kNone,
  kOrderedDict,
  kRebuildTensorV2,
  kRebuildParameter,
  kRebuildParameterWithState,
  kStorageType,  // torch.<X>Storage; the object's text holds "<X>Storage"
};

struct PickleObject {
  PickleKind kind = PickleKind::kNone;
  PickleGlobal global = PickleGlobal::kNone;
  bool ordered = false;   // kDict built by collections.OrderedDict
  uint16_t depth = 0;     // container nesting depth when last extended
  size_t offset = 0;      // stream offset of the opcode that created it (for messages)
  int64_t int_value = 0;  // kInt, kBool; storage/tensor index for kStorage/kTensor
  double float_value = 0;
  std::string text;             // kString, kBytes; storage type name for kGlobal
  std::vector<PickleId> items;  // kTuple, kList; kDict: key0, value0, key1, value1, ...
};

// A storage named by a BINPERSID record: ('storage', torch.<X>Storage, key, location, numel).
struct TorchStorageRef {
  std::string type_name;  // "FloatStorage", "BFloat16Storage", ...
  std::string key;        // record name under <prefix>/data/
  std::string location;   // "cpu", "cuda:0", ... (informational)
  int64_t numel = 0;      // elements of the storage's type
  size_t offset = 0;      // stream offset of the BINPERSID
};

// What _rebuild_tensor_v2 received (shape and strides in elements, both of equal rank <= 8).
struct TorchTensorRef {
  uint32_t storage = 0;  // index into PickleGraph::storages
  int64_t storage_offset = 0;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  size_t offset = 0;  // stream offset of the REDUCE that built it
};

struct PickleGraph {
  std::vector<PickleObject> objects;
  std::vector<TorchStorageRef> storages;
  std::vector<TorchTensorRef> tensors;
  PickleId root = 0;
  const PickleObject& at(PickleId id) const { return objects[id]; }
};

struct TorchPickleLimits {
  size_t max_objects = size_t{2} << 20;  // objects created (ints, strings, containers...)
  size_t max_items = size_t{16} << 20;   // container slots over all containers
  size_t max_stack = size_t{1} << 20;    // value stack entries
  size_t max_marks = 256;                // open MARKs (nesting of tuple/list/dict literals)
  size_t max_memo = size_t{4} << 20;     // memo entries
  size_t max_string = size_t{16} << 20;  // bytes of one string
  size_t max_depth = 64;                 // container nesting depth
};

// Runs the restricted unpickler over `data`; `label` prefixes every error (e.g.
// "model.pth: archive/data.pkl").
PickleGraph unpickle_torch(std::span<const std::byte> data, const std::string& label,
                           const TorchPickleLimits& limits = {});

// Our dtype for a torch storage type name; nullopt for names torch has but vidax cannot hold
// (DoubleStorage, ByteStorage, BoolStorage, ...).
std::optional<DType> torch_storage_dtype(std::string_view type_name);
// "FloatStorage" for F32 etc. (the writer's side of the same table).
std::string_view torch_storage_name(DType dtype);

}  // namespace vidax
