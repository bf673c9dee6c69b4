#include "kernels/cpu/block_mask.h"

#include <algorithm>
#include <bit>
#include <string>

#include "core/error.h"

namespace vidax {

BlockPartition BlockPartition::uniform(int64_t tokens, int64_t block) {
  if (tokens <= 0 || block <= 0)
    throw InputError("block partition: expected tokens > 0 and block > 0, got tokens " +
                     std::to_string(tokens) + ", block " + std::to_string(block));
  BlockPartition p;
  for (int64_t t = 0; t < tokens; t += block) p.offsets.push_back(t);
  p.offsets.push_back(tokens);
  return p;
}

int64_t BlockPartition::max_block() const {
  int64_t m = 0;
  for (int64_t b = 0; b < blocks(); ++b) m = std::max(m, size(b));
  return m;
}

void BlockPartition::validate(const char* what) const {
  if (offsets.size() < 2 || offsets.front() != 0)
    throw InputError(std::string(what) +
                     ": a block partition needs offsets starting at 0 and at "
                     "least one block");
  for (size_t i = 1; i < offsets.size(); ++i)
    if (offsets[i] <= offsets[i - 1])
      throw InputError(std::string(what) + ": block offsets must increase strictly (block " +
                       std::to_string(i - 1) + " is empty or negative)");
}

BlockMask::BlockMask(int64_t heads, int64_t q_blocks, int64_t k_blocks)
    : heads_(heads), q_blocks_(q_blocks), k_blocks_(k_blocks), words_((k_blocks + 63) / 64) {
  if (heads <= 0 || q_blocks <= 0 || k_blocks <= 0)
    throw InputError("block mask: expected heads, query blocks and key blocks > 0, got " +
                     std::to_string(heads) + ", " + std::to_string(q_blocks) + ", " +
                     std::to_string(k_blocks));
  const size_t n = static_cast<size_t>(heads * q_blocks * words_);
  active_.assign(n, 0);
  boundary_.assign(n, 0);
}

size_t BlockMask::word_index(int64_t head, int64_t qb, int64_t kb) const {
  VIDAX_CHECK(head >= 0 && head < heads_ && qb >= 0 && qb < q_blocks_ && kb >= 0 && kb < k_blocks_);
  return static_cast<size_t>((head * q_blocks_ + qb) * words_ + kb / 64);
}

void BlockMask::set(int64_t head, int64_t qb, int64_t kb, TileClass c) {
  const size_t w = word_index(head, qb, kb);
  const uint64_t bit = uint64_t{1} << (kb % 64);
  active_[w] = c == TileClass::kSkip ? active_[w] & ~bit : active_[w] | bit;
  boundary_[w] = c == TileClass::kBoundary ? boundary_[w] | bit : boundary_[w] & ~bit;
  rows_built_ = false;
}

TileClass BlockMask::get(int64_t head, int64_t qb, int64_t kb) const {
  const size_t w = word_index(head, qb, kb);
  const uint64_t bit = uint64_t{1} << (kb % 64);
  if (!(active_[w] & bit)) return TileClass::kSkip;
  return (boundary_[w] & bit) ? TileClass::kBoundary : TileClass::kFull;
}

void BlockMask::set_row(int64_t head, int64_t qb, TileClass c) {
  for (int64_t kb = 0; kb < k_blocks_; ++kb) set(head, qb, kb, c);
}

void BlockMask::set_full_bits(int64_t head, int64_t qb, const uint64_t* bits) {
  const size_t w0 = word_index(head, qb, 0);
  const int64_t tail = k_blocks_ % 64;
  VIDAX_CHECK(tail == 0 || (bits[words_ - 1] >> tail) == 0, "set_full_bits: bits past k_blocks");
  for (int64_t w = 0; w < words_; ++w) {
    active_[w0 + static_cast<size_t>(w)] |= bits[w];
    boundary_[w0 + static_cast<size_t>(w)] &= ~bits[w];
  }
  rows_built_ = false;
}

void BlockMask::fill_head(int64_t head, TileClass c) {
  for (int64_t qb = 0; qb < q_blocks_; ++qb) set_row(head, qb, c);
}

void BlockMask::fill(TileClass c) {
  for (int64_t h = 0; h < heads_; ++h) fill_head(h, c);
}

void BlockMask::build_rows() {
  const int64_t rows = heads_ * q_blocks_;
  row_begin_.assign(static_cast<size_t>(rows + 1), 0);
  row_cols_.clear();
  row_boundary_.clear();
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t wi = 0; wi < words_; ++wi) {
      const size_t w = static_cast<size_t>(r * words_ + wi);
      // Visit set bits only: cost proportional to the active tiles, not to k_blocks.
      for (uint64_t bits = active_[w]; bits != 0; bits &= bits - 1) {
        const int bit = std::countr_zero(bits);
        row_cols_.push_back(static_cast<int32_t>(wi * 64 + bit));
        row_boundary_.push_back(static_cast<uint8_t>((boundary_[w] >> bit) & 1));
      }
    }
    row_begin_[static_cast<size_t>(r + 1)] = static_cast<int64_t>(row_cols_.size());
  }
  rows_built_ = true;
}

BlockMask::Row BlockMask::row(int64_t head, int64_t qb) const {
  VIDAX_CHECK(rows_built_);
  VIDAX_CHECK(head >= 0 && head < heads_ && qb >= 0 && qb < q_blocks_);
  const size_t r = static_cast<size_t>(head * q_blocks_ + qb);
  const size_t b = static_cast<size_t>(row_begin_[r]);
  const size_t n = static_cast<size_t>(row_begin_[r + 1]) - b;
  return Row{std::span<const int32_t>(row_cols_.data() + b, n),
             std::span<const uint8_t>(row_boundary_.data() + b, n)};
}

int64_t BlockMask::active_tiles(int64_t head) const {
  int64_t n = 0;
  const size_t b = static_cast<size_t>(head * q_blocks_ * words_);
  for (size_t i = 0; i < static_cast<size_t>(q_blocks_ * words_); ++i)
    n += std::popcount(active_[b + i]);
  return n;
}

int64_t BlockMask::active_tiles() const {
  int64_t n = 0;
  for (int64_t h = 0; h < heads_; ++h) n += active_tiles(h);
  return n;
}

double BlockMask::density(const BlockPartition& q, const BlockPartition& k) const {
  VIDAX_CHECK(q.blocks() == q_blocks_ && k.blocks() == k_blocks_);
  double kept = 0;
  for (int64_t h = 0; h < heads_; ++h)
    for (int64_t qb = 0; qb < q_blocks_; ++qb)
      for (int64_t kb = 0; kb < k_blocks_; ++kb)
        if (get(h, qb, kb) != TileClass::kSkip)
          kept += static_cast<double>(q.size(qb)) * static_cast<double>(k.size(kb));
  return kept / (static_cast<double>(heads_) * static_cast<double>(q.tokens()) *
                 static_cast<double>(k.tokens()));
}

}  // namespace vidax
