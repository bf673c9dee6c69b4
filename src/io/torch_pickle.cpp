// The restricted unpickler: a bounded stack machine over a flat object table. Each opcode handler
// checks its operands (count, kinds, lengths) before touching them.
#include "io/torch_pickle.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <map>
#include <unordered_map>
#include <utility>

#include "core/error.h"
#include "io/text_escape.h"

namespace vidax {
namespace {

constexpr size_t kMaxGlobalLine = 256;

struct StorageTypeInfo {
  std::string_view name;
  std::optional<DType> dtype;
};

// Every storage type name torch.save may write; only some map onto vidax dtypes.
constexpr std::array<StorageTypeInfo, 24> kStorageTypes = {{
    {"FloatStorage", DType::kF32},
    {"BFloat16Storage", DType::kBF16},
    {"HalfStorage", DType::kF16},
    {"LongStorage", DType::kI64},
    {"IntStorage", DType::kI32},
    {"Float8_e4m3fnStorage", DType::kF8E4M3},
    {"Float8_e5m2Storage", DType::kF8E5M2},
    {"DoubleStorage", std::nullopt},
    {"ByteStorage", std::nullopt},
    {"CharStorage", std::nullopt},
    {"ShortStorage", std::nullopt},
    {"BoolStorage", std::nullopt},
    {"ComplexHalfStorage", std::nullopt},
    {"ComplexFloatStorage", std::nullopt},
    {"ComplexDoubleStorage", std::nullopt},
    {"QInt8Storage", std::nullopt},
    {"QUInt8Storage", std::nullopt},
    {"QInt32Storage", std::nullopt},
    {"QUInt4x2Storage", std::nullopt},
    {"QUInt2x4Storage", std::nullopt},
    {"Float8_e4m3fnuzStorage", std::nullopt},
    {"Float8_e5m2fnuzStorage", std::nullopt},
    {"UntypedStorage", std::nullopt},
    {"UInt16Storage", std::nullopt},
}};

const StorageTypeInfo* find_storage_type(std::string_view name) {
  for (const StorageTypeInfo& t : kStorageTypes) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

// Opcodes that exist in the pickle protocol but that torch.save never writes; named in errors so
// a refusal says what was seen.
std::string_view refused_opcode_name(uint8_t op) {
  switch (op) {
    case 'i':
      return "INST";
    case 'o':
      return "OBJ";
    case 0x81:
      return "NEWOBJ";
    case 0x92:
      return "NEWOBJ_EX";
    case 'P':
      return "PERSID";
    case 0x82:
    case 0x83:
    case 0x84:
      return "EXT";
    case 0x96:
      return "BYTEARRAY8";
    case 0x97:
      return "NEXT_BUFFER";
    case 0x98:
      return "READONLY_BUFFER";
    case 0x8f:
      return "EMPTY_SET";
    case 0x90:
      return "ADDITEMS";
    case 0x91:
      return "FROZENSET";
    case 'I':
      return "INT";
    case 'L':
      return "LONG";
    case 'S':
      return "STRING";
    case 'T':
      return "BINSTRING";
    case 'U':
      return "SHORT_BINSTRING";
    case 'V':
      return "UNICODE";
    case 'F':
      return "FLOAT";
    case 'g':
      return "GET";
    case 'p':
      return "PUT";
    default:
      return {};
  }
}

class Unpickler {
 public:
  Unpickler(std::span<const std::byte> data, const std::string& label,
            const TorchPickleLimits& limits)
      : data_(data), label_(label), limits_(limits) {
    // Shared singletons: None, False, True.
    new_object(PickleKind::kNone);
    new_object(PickleKind::kBool).int_value = 0;
    new_object(PickleKind::kBool).int_value = 1;
  }

  PickleGraph run();

 private:
  template <typename... Args>
  [[noreturn]] void fail(Args&&... args) const {
    throw_input_error(label_, ": byte ", op_offset_, ": ", std::forward<Args>(args)...);
  }

  // --- reading the stream ---
  const std::byte* take(size_t n, const char* what) {
    if (n > data_.size() - pos_) {
      fail("truncated ", what, " (needs ", n, " bytes, ", data_.size() - pos_, " left)");
    }
    const std::byte* p = data_.data() + pos_;
    pos_ += n;
    return p;
  }
  uint64_t read_le(size_t n, const char* what) {
    const std::byte* p = take(n, what);
    uint64_t v = 0;
    for (size_t i = n; i-- > 0;) v = (v << 8) | static_cast<uint64_t>(p[i]);
    return v;
  }
  std::string read_line(const char* what) {
    const size_t start = pos_;
    const size_t limit = std::min(data_.size(), start + kMaxGlobalLine + 1);
    for (size_t i = start; i < limit; ++i) {
      if (data_[i] == std::byte{'\n'}) {
        pos_ = i + 1;
        std::string line(reinterpret_cast<const char*>(data_.data() + start), i - start);
        for (char c : line) {
          if (c < 0x20 || c > 0x7e) fail(what, " holds a non-printable byte");
        }
        return line;
      }
    }
    if (limit == data_.size()) fail("truncated ", what, " (no newline before the end)");
    fail(what, " is longer than ", kMaxGlobalLine, " bytes");
  }

  // --- objects ---
  PickleObject& new_object(PickleKind kind) {
    if (graph_.objects.size() >= limits_.max_objects) {
      fail("more than ", limits_.max_objects, " objects");
    }
    PickleObject& o = graph_.objects.emplace_back();
    o.kind = kind;
    o.offset = op_offset_;
    return o;
  }
  PickleId new_id(PickleKind kind) {
    new_object(kind);
    return static_cast<PickleId>(graph_.objects.size() - 1);
  }
  PickleObject& obj(PickleId id) { return graph_.objects[id]; }

  void add_item(PickleId container, PickleId item) {
    if (items_ >= limits_.max_items) fail("more than ", limits_.max_items, " container items");
    ++items_;
    PickleObject& c = obj(container);
    const size_t depth = size_t{obj(item).depth} + 1;
    if (depth > limits_.max_depth) {
      fail("containers nest deeper than ", limits_.max_depth, " levels");
    }
    c.depth = static_cast<uint16_t>(std::max<size_t>(c.depth, depth));
    c.items.push_back(item);
  }

  // --- the value stack ---
  void push(PickleId id) {
    if (stack_.size() >= limits_.max_stack) fail("stack holds more than ", limits_.max_stack);
    stack_.push_back(id);
  }
  PickleId pop(const char* op) {
    if (stack_.size() <= stack_floor()) fail(op, " on an empty stack (stack underflow)");
    const PickleId id = stack_.back();
    stack_.pop_back();
    return id;
  }
  PickleId top(const char* op) const {
    if (stack_.size() <= stack_floor()) fail(op, " on an empty stack (stack underflow)");
    return stack_.back();
  }
  size_t stack_floor() const { return marks_.empty() ? 0 : marks_.back(); }
  // Pops everything above the last MARK and the MARK itself.
  std::vector<PickleId> pop_mark(const char* op) {
    if (marks_.empty()) fail(op, " without a preceding MARK");
    const size_t mark = marks_.back();
    marks_.pop_back();
    std::vector<PickleId> items(stack_.begin() + static_cast<std::ptrdiff_t>(mark), stack_.end());
    stack_.resize(mark);
    return items;
  }

  // --- opcode helpers ---
  void push_string(size_t len, PickleKind kind) {
    if (len > limits_.max_string) fail("string of ", len, " bytes exceeds ", limits_.max_string);
    const std::byte* p = take(len, kind == PickleKind::kString ? "string" : "bytes");
    PickleObject& o = new_object(kind);
    o.text.assign(reinterpret_cast<const char*>(p), len);
    push(static_cast<PickleId>(graph_.objects.size() - 1));
  }
  void push_int(int64_t v) {
    new_object(PickleKind::kInt).int_value = v;
    push(static_cast<PickleId>(graph_.objects.size() - 1));
  }
  void push_long(size_t n) {
    if (n > 8) fail("integer of ", n, " bytes does not fit 64 bits");
    const uint64_t raw = n == 0 ? 0 : read_le(n, "LONG argument");
    uint64_t v = raw;
    if (n > 0 && n < 8 && (raw >> (8 * n - 1)) & 1) v |= ~uint64_t{0} << (8 * n);  // sign
    push_int(static_cast<int64_t>(v));
  }
  PickleId make_tuple(const std::vector<PickleId>& items) {
    const PickleId t = new_id(PickleKind::kTuple);
    obj(t).items.reserve(items.size());
    for (PickleId i : items) add_item(t, i);
    return t;
  }
  void memo_put(uint64_t index) {
    const PickleId value = top("memo put");
    if (memo_.size() >= limits_.max_memo && memo_.count(static_cast<uint32_t>(index)) == 0) {
      fail("memo holds more than ", limits_.max_memo, " entries");
    }
    memo_[static_cast<uint32_t>(index)] = value;
  }
  void memo_get(uint64_t index) {
    const auto it = memo_.find(static_cast<uint32_t>(index));
    if (it == memo_.end()) fail("memo index ", index, " was never stored");
    push(it->second);
  }

  void op_global(const std::string& module, const std::string& name);
  void op_reduce();
  void op_build();
  void op_persid();
  void op_setitems(const std::vector<PickleId>& items, PickleId dict);
  PickleId rebuild_tensor(const std::vector<PickleId>& args);

  std::span<const std::byte> data_;
  const std::string& label_;
  const TorchPickleLimits& limits_;
  size_t pos_ = 0;
  size_t op_offset_ = 0;
  size_t items_ = 0;
  PickleGraph graph_;
  std::vector<PickleId> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint32_t, PickleId> memo_;
  std::map<std::string, uint32_t> storage_by_key_;
};

void Unpickler::op_global(const std::string& module, const std::string& name) {
  PickleGlobal g = PickleGlobal::kNone;
  const StorageTypeInfo* storage = nullptr;
  if (module == "collections" && name == "OrderedDict") {
    g = PickleGlobal::kOrderedDict;
  } else if (module == "torch._utils" && name == "_rebuild_tensor_v2") {
    g = PickleGlobal::kRebuildTensorV2;
  } else if (module == "torch._utils" && name == "_rebuild_parameter") {
    g = PickleGlobal::kRebuildParameter;
  } else if (module == "torch._utils" && name == "_rebuild_parameter_with_state") {
    g = PickleGlobal::kRebuildParameterWithState;
  } else if ((module == "torch" || (module == "torch.storage" && name == "UntypedStorage")) &&
             (storage = find_storage_type(name)) != nullptr) {
    g = PickleGlobal::kStorageType;
  } else {
    fail("global ", quote_name(module + "." + name),
         " is not allowed (a weights checkpoint only needs collections.OrderedDict, "
         "torch._utils._rebuild_tensor_v2/_rebuild_parameter and torch.<X>Storage; nothing is "
         "imported or executed)");
  }
  PickleObject& o = new_object(PickleKind::kGlobal);
  o.global = g;
  if (storage != nullptr) o.text = std::string(storage->name);
  push(static_cast<PickleId>(graph_.objects.size() - 1));
}

void Unpickler::op_persid() {
  // ('storage', torch.<X>Storage, key, location, numel)
  const PickleId pid_id = pop("BINPERSID");
  const PickleObject& pid = obj(pid_id);
  auto bad = [&](const char* why) {
    fail("persistent id must be ('storage', torch.<X>Storage, key, location, numel): ", why);
  };
  if (pid.kind != PickleKind::kTuple) bad("not a tuple");
  if (pid.items.size() != 5) bad("wrong number of fields");
  const PickleObject& tag = obj(pid.items[0]);
  const PickleObject& type = obj(pid.items[1]);
  const PickleObject& key = obj(pid.items[2]);
  const PickleObject& location = obj(pid.items[3]);
  const PickleObject& numel = obj(pid.items[4]);
  if (tag.kind != PickleKind::kString || tag.text != "storage") bad("first field is not 'storage'");
  if (type.kind != PickleKind::kGlobal || type.global != PickleGlobal::kStorageType) {
    bad("second field is not a torch storage type");
  }
  if (key.kind != PickleKind::kString || key.text.empty() ||
      key.text.find_first_of(std::string_view("/\\\0", 3)) != std::string::npos ||
      key.text == "." || key.text == "..") {
    bad("key is not a plain record name");
  }
  if (location.kind != PickleKind::kString) bad("location is not a string");
  if (numel.kind != PickleKind::kInt || numel.int_value < 0) bad("numel is not an integer >= 0");

  uint32_t index = 0;
  const auto it = storage_by_key_.find(key.text);
  if (it != storage_by_key_.end()) {
    // The same storage shared by several tensors: torch pickles its id again each time.
    index = it->second;
    const TorchStorageRef& s = graph_.storages[index];
    if (s.type_name != type.text || s.numel != numel.int_value) {
      fail("storage ", quote_name(key.text), " is described twice differently (", s.type_name,
           " x ", s.numel, " and ", type.text, " x ", numel.int_value, ")");
    }
  } else {
    index = static_cast<uint32_t>(graph_.storages.size());
    graph_.storages.push_back({type.text, key.text, location.text, numel.int_value, op_offset_});
    storage_by_key_.emplace(key.text, index);
  }
  PickleObject& o = new_object(PickleKind::kStorage);
  o.int_value = index;
  push(static_cast<PickleId>(graph_.objects.size() - 1));
}

PickleId Unpickler::rebuild_tensor(const std::vector<PickleId>& args) {
  // (storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata])
  if (args.size() != 6 && args.size() != 7) {
    fail("_rebuild_tensor_v2 takes 6 or 7 arguments, got ", args.size());
  }
  const PickleObject& storage = obj(args[0]);
  const PickleObject& offset = obj(args[1]);
  const PickleObject& size = obj(args[2]);
  const PickleObject& stride = obj(args[3]);
  const PickleObject& requires_grad = obj(args[4]);
  const PickleObject& hooks = obj(args[5]);
  if (storage.kind != PickleKind::kStorage) {
    fail("_rebuild_tensor_v2: storage argument is ", pickle_kind_name(storage.kind),
         ", expected a persistent storage");
  }
  if (offset.kind != PickleKind::kInt || offset.int_value < 0) {
    fail("_rebuild_tensor_v2: storage_offset must be an integer >= 0");
  }
  if (size.kind != PickleKind::kTuple || stride.kind != PickleKind::kTuple) {
    fail("_rebuild_tensor_v2: size and stride must be tuples");
  }
  if (size.items.size() != stride.items.size()) {
    fail("_rebuild_tensor_v2: size has ", size.items.size(), " dimensions, stride ",
         stride.items.size());
  }
  if (size.items.size() > static_cast<size_t>(kMaxDims)) {
    fail("_rebuild_tensor_v2: rank ", size.items.size(), " exceeds the maximum of ", kMaxDims);
  }
  if (requires_grad.kind != PickleKind::kBool) fail("_rebuild_tensor_v2: requires_grad not bool");
  if (hooks.kind != PickleKind::kDict) fail("_rebuild_tensor_v2: backward_hooks not a dict");
  if (args.size() == 7) {
    const PickleObject& metadata = obj(args[6]);
    if (metadata.kind != PickleKind::kNone &&
        (metadata.kind != PickleKind::kDict || !metadata.items.empty())) {
      fail("_rebuild_tensor_v2: tensor metadata (", pickle_kind_name(metadata.kind),
           ") is not supported (expected an empty dict)");
    }
  }

  TorchTensorRef t;
  t.storage = static_cast<uint32_t>(storage.int_value);
  t.storage_offset = offset.int_value;
  t.offset = op_offset_;
  const int64_t storage_numel = graph_.storages[t.storage].numel;
  // The last element addressed: storage_offset + sum((size_i - 1) * stride_i), overflow-checked.
  bool empty = false;
  int64_t last = t.storage_offset;
  int64_t numel = 1;
  for (size_t i = 0; i < size.items.size(); ++i) {
    const PickleObject& s = obj(size.items[i]);
    const PickleObject& st = obj(stride.items[i]);
    if (s.kind != PickleKind::kInt || s.int_value < 0) {
      fail("_rebuild_tensor_v2: size[", i, "] must be an integer >= 0");
    }
    if (st.kind != PickleKind::kInt || st.int_value < 0) {
      fail("_rebuild_tensor_v2: stride[", i, "] must be an integer >= 0");
    }
    t.sizes.push_back(s.int_value);
    t.strides.push_back(st.int_value);
    if (s.int_value == 0) empty = true;
  }
  if (!empty) {
    for (size_t i = 0; i < t.sizes.size(); ++i) {
      int64_t span = 0;
      if (__builtin_mul_overflow(t.sizes[i] - 1, t.strides[i], &span) ||
          __builtin_add_overflow(last, span, &last) ||
          __builtin_mul_overflow(numel, t.sizes[i], &numel)) {
        fail("_rebuild_tensor_v2: size/stride overflow 64 bits");
      }
    }
    if (last >= storage_numel) {
      fail("_rebuild_tensor_v2: the view (offset ", t.storage_offset, ", last element ", last,
           ") reaches past its storage of ", storage_numel, " elements");
    }
  } else if (t.storage_offset > storage_numel) {
    fail("_rebuild_tensor_v2: storage_offset ", t.storage_offset, " is past its storage of ",
         storage_numel, " elements");
  }

  const PickleId id = new_id(PickleKind::kTensor);
  obj(id).int_value = static_cast<int64_t>(graph_.tensors.size());
  graph_.tensors.push_back(std::move(t));
  return id;
}

void Unpickler::op_reduce() {
  const PickleId args_id = pop("REDUCE");
  const PickleId callable_id = pop("REDUCE");
  const PickleObject& callable = obj(callable_id);
  if (obj(args_id).kind != PickleKind::kTuple) fail("REDUCE arguments are not a tuple");
  if (callable.kind != PickleKind::kGlobal) {
    fail("REDUCE calls ", pickle_kind_name(callable.kind), ", not an allowed global");
  }
  const std::vector<PickleId> args = obj(args_id).items;  // copy: new objects may reallocate
  switch (callable.global) {
    case PickleGlobal::kOrderedDict: {
      if (!args.empty()) fail("collections.OrderedDict() takes no arguments here");
      const PickleId d = new_id(PickleKind::kDict);
      obj(d).ordered = true;
      push(d);
      return;
    }
    case PickleGlobal::kRebuildTensorV2:
      push(rebuild_tensor(args));
      return;
    case PickleGlobal::kRebuildParameter:
    case PickleGlobal::kRebuildParameterWithState: {
      const size_t want = callable.global == PickleGlobal::kRebuildParameter ? 3 : 4;
      if (args.size() != want) fail("_rebuild_parameter takes ", want, " arguments");
      if (obj(args[0]).kind != PickleKind::kTensor) fail("_rebuild_parameter: data not a tensor");
      if (obj(args[1]).kind != PickleKind::kBool) fail("_rebuild_parameter: requires_grad");
      if (obj(args[2]).kind != PickleKind::kDict) fail("_rebuild_parameter: backward_hooks");
      // The Parameter is its data tensor; Python attributes in `state` are ignored.
      const int64_t tensor = obj(args[0]).int_value;
      const PickleId p = new_id(PickleKind::kTensor);
      obj(p).int_value = tensor;
      push(p);
      return;
    }
    case PickleGlobal::kStorageType:
      fail("REDUCE on storage type torch.", callable.text, " is not allowed");
    case PickleGlobal::kNone:
      break;
  }
  fail("REDUCE on an unknown global");
}

void Unpickler::op_build() {
  const PickleId state = pop("BUILD");
  const PickleId target = top("BUILD");
  // OrderedDict state: instance attributes such as state_dict()'s `_metadata`. Kept out of the
  // result (they describe module versions, not weights).
  if (obj(target).kind != PickleKind::kDict) {
    fail("BUILD on ", pickle_kind_name(obj(target).kind), " (only dict state is supported)");
  }
  const PickleKind k = obj(state).kind;
  if (k != PickleKind::kDict && k != PickleKind::kNone) {
    fail("BUILD with ", pickle_kind_name(k), " state (expected a dict of attributes)");
  }
}

void Unpickler::op_setitems(const std::vector<PickleId>& items, PickleId dict) {
  if (obj(dict).kind != PickleKind::kDict) {
    fail("SETITEM(S) on ", pickle_kind_name(obj(dict).kind), ", expected a dict");
  }
  if (items.size() % 2 != 0) fail("SETITEMS with an odd number of stack items");
  for (PickleId i : items) add_item(dict, i);
}

PickleGraph Unpickler::run() {
  while (true) {
    op_offset_ = pos_;
    if (pos_ >= data_.size()) fail("stream ends without STOP");
    const auto op = static_cast<uint8_t>(data_[pos_++]);
    switch (op) {
      case 0x80: {  // PROTO
        const auto v = static_cast<uint8_t>(*take(1, "PROTO argument"));
        if (v < 2 || v > 5) fail("pickle protocol ", unsigned{v}, " (expected 2 to 5)");
        break;
      }
      case 0x95: {  // FRAME: a length prefix for buffered reading; nothing to do but check it.
        const uint64_t n = read_le(8, "FRAME length");
        if (n > data_.size() - pos_) fail("FRAME of ", n, " bytes runs past the end");
        break;
      }
      case '.': {  // STOP
        if (!marks_.empty()) fail("STOP with an open MARK");
        if (stack_.size() != 1) fail("STOP with ", stack_.size(), " values on the stack, not 1");
        if (pos_ != data_.size()) fail(data_.size() - pos_, " bytes after STOP");
        graph_.root = stack_.back();
        return std::move(graph_);
      }
      case '(':  // MARK
        if (marks_.size() >= limits_.max_marks) {
          fail("MARKs nest deeper than ", limits_.max_marks);
        }
        marks_.push_back(stack_.size());
        break;
      case '0':  // POP
        pop("POP");
        break;
      case '1':  // POP_MARK
        pop_mark("POP_MARK");
        break;
      case '2':  // DUP
        push(top("DUP"));
        break;
      case '}':  // EMPTY_DICT
        push(new_id(PickleKind::kDict));
        break;
      case ']':  // EMPTY_LIST
        push(new_id(PickleKind::kList));
        break;
      case ')':  // EMPTY_TUPLE
        push(new_id(PickleKind::kTuple));
        break;
      case 't':  // TUPLE
        push(make_tuple(pop_mark("TUPLE")));
        break;
      case 0x85:    // TUPLE1
      case 0x86:    // TUPLE2
      case 0x87: {  // TUPLE3
        std::vector<PickleId> items(op - 0x84u);
        for (size_t i = items.size(); i-- > 0;) items[i] = pop("TUPLEn");
        push(make_tuple(items));
        break;
      }
      case 'l': {  // LIST
        const std::vector<PickleId> items = pop_mark("LIST");
        const PickleId l = new_id(PickleKind::kList);
        for (PickleId i : items) add_item(l, i);
        push(l);
        break;
      }
      case 'd': {  // DICT
        const std::vector<PickleId> items = pop_mark("DICT");
        const PickleId d = new_id(PickleKind::kDict);
        op_setitems(items, d);
        push(d);
        break;
      }
      case 'X':  // BINUNICODE
        push_string(read_le(4, "BINUNICODE length"), PickleKind::kString);
        break;
      case 0x8c:  // SHORT_BINUNICODE
        push_string(read_le(1, "SHORT_BINUNICODE length"), PickleKind::kString);
        break;
      case 0x8d: {  // BINUNICODE8
        const uint64_t n = read_le(8, "BINUNICODE8 length");
        if (n > data_.size()) fail("string length ", n, " is longer than the stream");
        push_string(static_cast<size_t>(n), PickleKind::kString);
        break;
      }
      case 'B':  // BINBYTES
        push_string(read_le(4, "BINBYTES length"), PickleKind::kBytes);
        break;
      case 'C':  // SHORT_BINBYTES
        push_string(read_le(1, "SHORT_BINBYTES length"), PickleKind::kBytes);
        break;
      case 0x8e: {  // BINBYTES8
        const uint64_t n = read_le(8, "BINBYTES8 length");
        if (n > data_.size()) fail("bytes length ", n, " is longer than the stream");
        push_string(static_cast<size_t>(n), PickleKind::kBytes);
        break;
      }
      case 'J':  // BININT (signed 32-bit)
        push_int(static_cast<int32_t>(static_cast<uint32_t>(read_le(4, "BININT argument"))));
        break;
      case 'K':  // BININT1
        push_int(static_cast<int64_t>(read_le(1, "BININT1 argument")));
        break;
      case 'M':  // BININT2
        push_int(static_cast<int64_t>(read_le(2, "BININT2 argument")));
        break;
      case 0x8a:  // LONG1
        push_long(static_cast<size_t>(read_le(1, "LONG1 length")));
        break;
      case 0x8b: {  // LONG4
        const auto n = static_cast<int32_t>(static_cast<uint32_t>(read_le(4, "LONG4 length")));
        if (n < 0) fail("LONG4 with negative length");
        push_long(static_cast<size_t>(n));
        break;
      }
      case 'G': {  // BINFLOAT (big-endian IEEE double)
        const std::byte* p = take(8, "BINFLOAT argument");
        uint64_t bits = 0;
        for (int i = 0; i < 8; ++i) bits = (bits << 8) | static_cast<uint64_t>(p[i]);
        double v = 0;
        std::memcpy(&v, &bits, 8);
        new_object(PickleKind::kFloat).float_value = v;
        push(static_cast<PickleId>(graph_.objects.size() - 1));
        break;
      }
      case 'N':  // NONE
        push(0);
        break;
      case 0x89:  // NEWFALSE
        push(1);
        break;
      case 0x88:  // NEWTRUE
        push(2);
        break;
      case 'q':  // BINPUT
        memo_put(read_le(1, "BINPUT index"));
        break;
      case 'r':  // LONG_BINPUT
        memo_put(read_le(4, "LONG_BINPUT index"));
        break;
      case 0x94:  // MEMOIZE
        memo_put(memo_.size());
        break;
      case 'h':  // BINGET
        memo_get(read_le(1, "BINGET index"));
        break;
      case 'j':  // LONG_BINGET
        memo_get(read_le(4, "LONG_BINGET index"));
        break;
      case 's': {  // SETITEM
        const PickleId value = pop("SETITEM");
        const PickleId key = pop("SETITEM");
        op_setitems({key, value}, top("SETITEM"));
        break;
      }
      case 'u': {  // SETITEMS
        const std::vector<PickleId> items = pop_mark("SETITEMS");
        op_setitems(items, top("SETITEMS"));
        break;
      }
      case 'a': {  // APPEND
        const PickleId value = pop("APPEND");
        const PickleId list = top("APPEND");
        if (obj(list).kind != PickleKind::kList) {
          fail("APPEND to ", pickle_kind_name(obj(list).kind), ", expected a list");
        }
        add_item(list, value);
        break;
      }
      case 'e': {  // APPENDS
        const std::vector<PickleId> items = pop_mark("APPENDS");
        const PickleId list = top("APPENDS");
        if (obj(list).kind != PickleKind::kList) {
          fail("APPENDS to ", pickle_kind_name(obj(list).kind), ", expected a list");
        }
        for (PickleId i : items) add_item(list, i);
        break;
      }
      case 'c': {  // GLOBAL "module\nname\n"
        const std::string module = read_line("GLOBAL module name");
        const std::string name = read_line("GLOBAL attribute name");
        op_global(module, name);
        break;
      }
      case 0x93: {  // STACK_GLOBAL
        const PickleId name = pop("STACK_GLOBAL");
        const PickleId module = pop("STACK_GLOBAL");
        if (obj(module).kind != PickleKind::kString || obj(name).kind != PickleKind::kString) {
          fail("STACK_GLOBAL needs two strings (module, name)");
        }
        op_global(obj(module).text, obj(name).text);
        break;
      }
      case 'R':  // REDUCE
        op_reduce();
        break;
      case 'b':  // BUILD
        op_build();
        break;
      case 'Q':  // BINPERSID
        op_persid();
        break;
      default: {
        const std::string_view refused = refused_opcode_name(op);
        if (!refused.empty()) {
          fail("opcode ", refused, " is not supported in a weights checkpoint");
        }
        static constexpr char kHex[] = "0123456789abcdef";
        fail("unknown opcode 0x", kHex[op >> 4], kHex[op & 15]);
      }
    }
  }
}

}  // namespace

std::string_view pickle_kind_name(PickleKind kind) {
  switch (kind) {
    case PickleKind::kNone:
      return "None";
    case PickleKind::kBool:
      return "a bool";
    case PickleKind::kInt:
      return "an int";
    case PickleKind::kFloat:
      return "a float";
    case PickleKind::kString:
      return "a string";
    case PickleKind::kBytes:
      return "bytes";
    case PickleKind::kTuple:
      return "a tuple";
    case PickleKind::kList:
      return "a list";
    case PickleKind::kDict:
      return "a dict";
    case PickleKind::kGlobal:
      return "a global";
    case PickleKind::kStorage:
      return "a storage";
    case PickleKind::kTensor:
      return "a tensor";
  }
  return "?";
}

PickleGraph unpickle_torch(std::span<const std::byte> data, const std::string& label,
                           const TorchPickleLimits& limits) {
  Unpickler u(data, label, limits);
  return u.run();
}

std::optional<DType> torch_storage_dtype(std::string_view type_name) {
  const StorageTypeInfo* t = find_storage_type(type_name);
  return t == nullptr ? std::nullopt : t->dtype;
}

std::string_view torch_storage_name(DType dtype) {
  for (const StorageTypeInfo& t : kStorageTypes) {
    if (t.dtype == dtype) return t.name;
  }
  VIDAX_CHECK(false, "no torch storage type for ", dtype_name(dtype));
  return {};
}

}  // namespace vidax
