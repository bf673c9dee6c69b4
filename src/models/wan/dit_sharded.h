// FSDP-style residency of the DiT's blocks (`--weights sharded`, WeightResidency::shard_group):
// every rank of a shard group keeps 1/size of each block's tensors, as the checkpoint stores them
// (bytes laid end to end, each tensor 64-byte aligned, the block cut into `size` equal chunks),
// and a block is gathered from all of them just before it is used. Under tensor parallel the
// group's ranks share one tp rank, and what they split is that rank's slice of each tensor (the
// declaration's shard axis, io/tensor_decl.h), so a rank holds 1/(size * tp) of the blocks. The
// gathered tensors are the checkpoint's bytes (sliced as the resident shard slices them), so the
// packed block, and every result, equal the resident model's bit for bit. The official code's
// `--dit_fsdp` does the same with PyTorch FSDP.
//
// Thread-safety: gather() is called by one thread (the DiT's block loader), which alone uses the
// group; the constructor runs on the thread that builds the model.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/shape.h"
#include "core/storage.h"
#include "models/wan/dit.h"
#include "nn/linear.h"

namespace vidax::dist {
class Group;
}

namespace vidax::wan {

class ShardedBlocks {
 public:
  // Reads every block tensor declared for `config` (dit_tensors.h) through `w` once, cuts tp
  // rank `tp`'s slice of each, and keeps this rank's chunk of each block. `group` must stay
  // alive and be used by gather()'s thread only.
  ShardedBlocks(const DitConfig& config, const WeightFn& w, std::shared_ptr<dist::Group> group,
                TpShard tp = {});

  // Block `index`'s tensors, gathered from every rank of the group (a collective: every rank
  // gathers the same blocks in the same order). The returned function serves them by official
  // name (tp-sliced: WanDit::Impl::load_block's `presliced`), viewing one buffer it keeps alive;
  // an undeclared name is an InputError.
  WeightFn gather(int64_t index) const;

  size_t held_bytes() const;                 // this rank's chunks, all blocks
  int64_t block_bytes(int64_t index) const;  // one whole block as gathered (with padding)

 private:
  struct Entry {
    std::string name;
    Shape shape;
    DType dtype;
    size_t offset = 0;  // in the gathered block
  };
  struct Block {
    std::vector<Entry> entries;
    size_t chunk = 0;  // bytes per rank; the block is chunk * size bytes gathered
    std::shared_ptr<Storage> mine;
  };
  std::vector<Block> blocks_;
  std::shared_ptr<dist::Group> group_;
};

}  // namespace vidax::wan
