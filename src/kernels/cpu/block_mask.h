// Block masks for block-sparse attention: which (query block, key block) tiles of each head are
// computed, and whether a computed tile needs an element-level rule (BOUNDARY) or not (FULL).
//
// The tokens are assumed already permuted so that every block is a contiguous range of rows
// (see sparse/token_layout.h); a BlockPartition gives those ranges. Masks are produced by the
// policies in src/sparse/ and consumed by block_sparse_attention (block_sparse_attention.h);
// neither side knows the other's internals, they only share this header.
//
// Storage: per head, two packed bitsets over [q_blocks, k_blocks] (active, boundary) and, after
// build_rows(), a compressed per-row list of active key blocks made by bit iteration. A mask
// is not thread-safe while it is being filled; once build_rows() returned, const access from
// several threads is safe.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace vidax {

// Contiguous blocks of a token sequence: block b holds tokens [offsets[b], offsets[b + 1]).
struct BlockPartition {
  std::vector<int64_t> offsets;  // [blocks + 1]; offsets[0] == 0, strictly increasing

  // Blocks of `block` tokens; the last one is ragged when block does not divide tokens.
  static BlockPartition uniform(int64_t tokens, int64_t block);

  int64_t blocks() const { return static_cast<int64_t>(offsets.size()) - 1; }
  int64_t tokens() const { return offsets.empty() ? 0 : offsets.back(); }
  int64_t begin(int64_t b) const { return offsets[static_cast<size_t>(b)]; }
  int64_t size(int64_t b) const {
    return offsets[static_cast<size_t>(b) + 1] - offsets[static_cast<size_t>(b)];
  }
  int64_t max_block() const;
  // Throws InputError (naming `what`) unless offsets are a valid partition.
  void validate(const char* what) const;
};

enum class TileClass : uint8_t {
  kSkip = 0,      // not computed
  kFull = 1,      // every (query, key) pair of the tile attends; no element mask evaluated
  kBoundary = 2,  // computed, but the TilePredicate decides per element
};

// Element-level rule for BOUNDARY tiles. Fills keep[i * nk + j] (1: attend, 0: masked) for the
// query rows [q0, q0 + nq) and key rows [k0, k0 + nk) (positions in the permuted sequence) of
// `head` (index within the mask). Called once per boundary tile, from several threads at once.
using TilePredicate = std::function<void(int64_t head, int64_t q0, int64_t nq, int64_t k0,
                                         int64_t nk, uint8_t* keep)>;

class BlockMask {
 public:
  BlockMask() = default;
  BlockMask(int64_t heads, int64_t q_blocks, int64_t k_blocks);

  int64_t heads() const { return heads_; }
  int64_t q_blocks() const { return q_blocks_; }
  int64_t k_blocks() const { return k_blocks_; }

  void set(int64_t head, int64_t qb, int64_t kb, TileClass c);
  TileClass get(int64_t head, int64_t qb, int64_t kb) const;
  void fill(TileClass c);                               // every tile of every head
  void fill_head(int64_t head, TileClass c);            // every tile of one head
  void set_row(int64_t head, int64_t qb, TileClass c);  // every key block of one row
  // Marks FULL every key block whose bit is set in `bits` (ceil(k_blocks / 64) words, bit kb % 64
  // of word kb / 64; bits past k_blocks must be 0); others keep their class. For policies that
  // select whole rows at once.
  void set_full_bits(int64_t head, int64_t qb, const uint64_t* bits);

  // Builds the per-row active lists; must be called after the last set() and before rows().
  void build_rows();
  bool rows_built() const { return rows_built_; }

  struct Row {
    std::span<const int32_t> key_blocks;  // ascending
    std::span<const uint8_t> boundary;    // 1 where the tile is kBoundary
  };
  Row row(int64_t head, int64_t qb) const;

  int64_t active_tiles() const;  // over all heads
  int64_t active_tiles(int64_t head) const;
  // Share of (query, key) token pairs inside active tiles, over all heads (boundary tiles count
  // whole); `q` and `k` give the block sizes. 1.0 for a dense mask.
  double density(const BlockPartition& q, const BlockPartition& k) const;

 private:
  size_t word_index(int64_t head, int64_t qb, int64_t kb) const;
  int64_t heads_ = 0, q_blocks_ = 0, k_blocks_ = 0, words_ = 0;
  std::vector<uint64_t> active_;    // [heads][q_blocks][words]
  std::vector<uint64_t> boundary_;  // same layout; subset of active_
  std::vector<int64_t> row_begin_;  // [heads * q_blocks + 1] into row_cols_
  std::vector<int32_t> row_cols_;
  std::vector<uint8_t> row_boundary_;
  bool rows_built_ = false;
};

}  // namespace vidax
