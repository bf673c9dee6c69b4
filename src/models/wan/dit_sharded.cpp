// ShardedBlocks: the chunk layout, the keeping of this rank's bytes, the gather.
#include "models/wan/dit_sharded.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "dist/group.h"
#include "models/wan/dit_tensors.h"

namespace vidax::wan {
namespace {

constexpr size_t kAlign = 64;
size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// Tensor-parallel rank `tp`'s part of the declared tensor `t` (io/tensor_decl.h), contiguous;
// the whole tensor when it is replicated. A vector is cut in any stored shape.
Tensor tp_slice(const TensorDecl& d, const Tensor& t, TpShard tp) {
  const ShardSlice s = shard_slice(d, tp.rank, tp.size);
  if (s.dim < 0) return t.contiguous();
  Tensor whole = t.contiguous();
  if (d.role == TensorRole::kVector) whole = whole.reshape(Shape{whole.numel()});
  if (whole.rank() <= s.dim || whole.dim(s.dim) != d.shape[s.dim])
    throw_input_error(d.name, ": expected ", d.shape.str(), " to cut for tp, got ", t.describe());
  return whole.slice(s.dim, s.begin, s.begin + s.length).contiguous();
}

}  // namespace

ShardedBlocks::ShardedBlocks(const DitConfig& config, const WeightFn& w,
                             std::shared_ptr<dist::Group> group, TpShard tp)
    : group_(std::move(group)) {
  const auto size = static_cast<size_t>(group_->size());
  const auto rank = static_cast<size_t>(group_->rank());
  blocks_.resize(static_cast<size_t>(config.num_layers));
  std::vector<std::vector<TensorDecl>> decls(blocks_.size());
  for (TensorDecl& d : dit_tensor_decls(config)) {
    if (d.name.rfind("blocks.", 0) != 0) continue;
    const size_t index = std::stoul(d.name.substr(7, d.name.find('.', 7) - 7));
    if (index < decls.size()) decls[index].push_back(std::move(d));
  }
  for (size_t i = 0; i < blocks_.size(); ++i) {
    Block& b = blocks_[i];
    // The layout first (shapes and dtypes as the checkpoint gives them, cut to the tp rank's
    // slice), then this rank's bytes.
    std::vector<Tensor> tensors;
    size_t total = 0;
    for (const TensorDecl& d : decls[i]) {
      Tensor t = tp_slice(d, w(d.name), tp);
      b.entries.push_back({d.name, t.shape(), t.dtype(), total});
      total = align_up(total + t.nbytes());
      tensors.push_back(std::move(t));
    }
    b.chunk = align_up((total + size - 1) / size);
    b.mine = allocate_storage(b.chunk);
    const size_t lo = rank * b.chunk, hi = lo + b.chunk;
    for (size_t e = 0; e < tensors.size(); ++e) {
      const size_t begin = b.entries[e].offset, end = begin + tensors[e].nbytes();
      const size_t from = std::max(begin, lo), to = std::min(end, hi);
      if (from < to)
        std::memcpy(b.mine->data() + (from - lo),
                    static_cast<const std::byte*>(tensors[e].raw_data()) + (from - begin),
                    to - from);
    }
  }
}

WeightFn ShardedBlocks::gather(int64_t index) const {
  const Block& b = blocks_.at(static_cast<size_t>(index));
  std::shared_ptr<Storage> whole = allocate_storage(b.chunk * static_cast<size_t>(group_->size()));
  group_->all_gather(b.mine->data(), whole->data(), static_cast<int64_t>(b.chunk), DType::kU8);
  const std::vector<Entry>* entries = &b.entries;  // the blocks outlive every returned function
  return [whole, entries, index](const std::string& name) {
    for (const Entry& e : *entries)
      if (e.name == name) return Tensor::from_storage(whole, e.shape, e.dtype, e.offset);
    throw_input_error("sharded DiT block ", index, ": no tensor ", name);
  };
}

size_t ShardedBlocks::held_bytes() const {
  size_t n = 0;
  for (const Block& b : blocks_) n += b.chunk;
  return n;
}

int64_t ShardedBlocks::block_bytes(int64_t index) const {
  return static_cast<int64_t>(blocks_.at(static_cast<size_t>(index)).chunk) * group_->size();
}

}  // namespace vidax::wan
