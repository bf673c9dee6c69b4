#include "dist/group.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <thread>

#include "core/error.h"

namespace vidax::dist {

const char* collective_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllReduce:
      return "all_reduce";
    case CollectiveKind::kReduceScatter:
      return "reduce_scatter";
    case CollectiveKind::kAllGather:
      return "all_gather";
    case CollectiveKind::kAllToAll:
      return "all_to_all";
    case CollectiveKind::kBroadcast:
      return "broadcast";
    case CollectiveKind::kSendRecv:
      return "send_recv";
    case CollectiveKind::kBarrier:
      return "barrier";
    case CollectiveKind::kCount:
      break;
  }
  return "?";
}

void CommStats::add(const CommStats& o) {
  for (size_t i = 0; i < calls.size(); ++i) {
    calls[i] += o.calls[i];
    bytes_sent[i] += o.bytes_sent[i];
    seconds[i] += o.seconds[i];
  }
}

// Counts one collective: calls, bytes sent, wall time (nested calls are not double counted:
// reductions time themselves and their inner data movement is not added again).
namespace {
CollectiveStretch& stretch_hook() {
  static CollectiveStretch hook;
  return hook;
}
}  // namespace

void set_collective_stretch(CollectiveStretch stretch) { stretch_hook() = std::move(stretch); }
bool collective_stretch_installed() { return static_cast<bool>(stretch_hook()); }

class Group::Timed {
 public:
  Timed(Group& g, CollectiveKind kind, int64_t bytes)
      : g_(g), kind_(static_cast<size_t>(kind)), bytes_(bytes), outer_(g.depth_++ == 0) {
    if (outer_) {
      g_.stats_.calls[kind_] += 1;
      g_.stats_.bytes_sent[kind_] += bytes;
      t0_ = std::chrono::steady_clock::now();
    }
    ++g_.sequence_;
  }
  ~Timed() {
    --g_.depth_;
    if (!outer_) return;
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    if (stretch_hook() && g_.size() > 1) {
      const double target = stretch_hook()(static_cast<CollectiveKind>(kind_), bytes_, g_);
      if (target > elapsed) {
        std::this_thread::sleep_for(std::chrono::duration<double>(target - elapsed));
        elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
      }
    }
    g_.stats_.seconds[kind_] += elapsed;
  }

 private:
  Group& g_;
  size_t kind_;
  int64_t bytes_;
  bool outer_;
  std::chrono::steady_clock::time_point t0_;
};

namespace {

int64_t bytes_of(int64_t count, DType dtype) {
  return count * static_cast<int64_t>(dtype_size(dtype));
}

void check_counts(const Group& g, std::span<const int64_t> counts, const char* what) {
  VIDAX_CHECK(static_cast<int>(counts.size()) == g.size(), what, ": ", counts.size(),
              " counts for a group of ", g.size());
  for (int64_t c : counts) VIDAX_CHECK(c >= 0, what, ": negative count");
}

// Balanced split of `count` elements into `parts` blocks (the first count % parts get one more).
std::vector<int64_t> balanced_blocks(int64_t count, int parts) {
  std::vector<int64_t> b(static_cast<size_t>(parts), count / parts);
  for (int64_t i = 0; i < count % parts; ++i) b[static_cast<size_t>(i)] += 1;
  return b;
}

// out[i] = in_0[i] (op) in_1[i] (op) ... in rank order; `blocks` holds `n` consecutive blocks.
template <typename T>
void reduce_blocks(const T* blocks, int n, int64_t count, T* out, ReduceOp op) {
  std::memcpy(out, blocks, sizeof(T) * static_cast<size_t>(count));
  for (int r = 1; r < n; ++r) {
    const T* b = blocks + static_cast<int64_t>(r) * count;
    if (op == ReduceOp::kSum) {
      for (int64_t i = 0; i < count; ++i) out[i] = out[i] + b[i];
    } else {
      for (int64_t i = 0; i < count; ++i) out[i] = std::max(out[i], b[i]);
    }
  }
}

void reduce_any(const void* blocks, int n, int64_t count, void* out, DType dtype, ReduceOp op) {
  if (dtype == DType::kF32) {
    reduce_blocks(static_cast<const float*>(blocks), n, count, static_cast<float*>(out), op);
  } else {
    reduce_blocks(static_cast<const int64_t*>(blocks), n, count, static_cast<int64_t*>(out), op);
  }
}

void require_reducible(DType dtype, const char* what) {
  VIDAX_CHECK(dtype == DType::kF32 || dtype == DType::kI64, what, ": reductions take F32 or I64, ",
              "got ", dtype_name(dtype));
}

}  // namespace

void Group::all_gather_v(const void* in, void* out, std::span<const int64_t> counts, DType dtype) {
  check_counts(*this, counts, "all_gather_v");
  Timed t(*this, CollectiveKind::kAllGather,
          bytes_of(counts[static_cast<size_t>(rank_)], dtype) * (size_ - 1));
  do_all_gather_v(in, out, counts, dtype);
}

void Group::all_gather(const void* in, void* out, int64_t count, DType dtype) {
  const std::vector<int64_t> counts(static_cast<size_t>(size_), count);
  all_gather_v(in, out, counts, dtype);
}

void Group::all_to_all_v(const void* in, std::span<const int64_t> send_counts, void* out,
                         std::span<const int64_t> recv_counts, DType dtype) {
  check_counts(*this, send_counts, "all_to_all_v");
  check_counts(*this, recv_counts, "all_to_all_v");
  const int64_t total = std::accumulate(send_counts.begin(), send_counts.end(), int64_t{0});
  Timed t(*this, CollectiveKind::kAllToAll,
          bytes_of(total - send_counts[static_cast<size_t>(rank_)], dtype));
  do_all_to_all_v(in, send_counts, out, recv_counts, dtype);
}

void Group::all_to_all(const void* in, void* out, int64_t count_per_rank, DType dtype) {
  const std::vector<int64_t> counts(static_cast<size_t>(size_), count_per_rank);
  all_to_all_v(in, counts, out, counts, dtype);
}

void Group::broadcast(void* data, int64_t count, DType dtype, int root) {
  VIDAX_CHECK(root >= 0 && root < size_, "broadcast root ", root, " outside group ", name_);
  Timed t(*this, CollectiveKind::kBroadcast, rank_ == root ? bytes_of(count, dtype) : 0);
  if (size_ > 1) do_broadcast(data, count, dtype, root);
}

void Group::send_recv(const void* send, int64_t send_count, int dst, void* recv, int64_t recv_count,
                      int src, DType dtype) {
  VIDAX_CHECK(dst >= 0 && dst < size_ && src >= 0 && src < size_, "send_recv peers ", dst, "/", src,
              " outside group ", name_);
  Timed t(*this, CollectiveKind::kSendRecv, bytes_of(send_count, dtype));
  do_send_recv(send, send_count, dst, recv, recv_count, src, dtype);
}

void Group::send(const void* data, int64_t count, int dst, DType dtype) {
  VIDAX_CHECK(dst >= 0 && dst < size_ && dst != rank_, "send to ", dst, " in group ", name_);
  Timed t(*this, CollectiveKind::kSendRecv, bytes_of(count, dtype));
  do_send(data, count, dst, dtype);
}

void Group::recv(void* data, int64_t count, int src, DType dtype) {
  VIDAX_CHECK(src >= 0 && src < size_ && src != rank_, "recv from ", src, " in group ", name_);
  Timed t(*this, CollectiveKind::kSendRecv, 0);
  do_recv(data, count, src, dtype);
}

void Group::barrier() {
  Timed t(*this, CollectiveKind::kBarrier, 0);
  if (size_ > 1) do_barrier();
}

void Group::all_reduce(void* data, int64_t count, DType dtype, ReduceOp op) {
  require_reducible(dtype, "all_reduce");
  if (size_ == 1 || count == 0) return;
  const int64_t esize = static_cast<int64_t>(dtype_size(dtype));
  Timed t(*this, CollectiveKind::kAllReduce,
          2 * bytes_of(count, dtype) * (size_ - 1) / size_);  // traffic of a ring all-reduce
  // Block q of every rank goes to rank q, which reduces the n copies in rank order and sends
  // the result to everyone: the bits are the same on every rank and every run.
  const std::vector<int64_t> blocks = balanced_blocks(count, size_);
  const int64_t mine = blocks[static_cast<size_t>(rank_)];
  std::vector<int64_t> recv_counts(static_cast<size_t>(size_), mine);
  std::vector<std::byte> gathered(static_cast<size_t>(mine * esize * size_));
  std::vector<std::byte> reduced(static_cast<size_t>(mine * esize));
  do_all_to_all_v(data, blocks, gathered.data(), recv_counts, dtype);
  if (mine > 0) reduce_any(gathered.data(), size_, mine, reduced.data(), dtype, op);
  do_all_gather_v(reduced.data(), data, blocks, dtype);
}

void Group::reduce_scatter(const void* in, void* out, int64_t count, DType dtype, ReduceOp op) {
  require_reducible(dtype, "reduce_scatter");
  const int64_t esize = static_cast<int64_t>(dtype_size(dtype));
  if (size_ == 1) {
    std::memcpy(out, in, static_cast<size_t>(count * esize));
    return;
  }
  Timed t(*this, CollectiveKind::kReduceScatter, bytes_of(count, dtype) * (size_ - 1));
  const std::vector<int64_t> counts(static_cast<size_t>(size_), count);
  std::vector<std::byte> gathered(static_cast<size_t>(count * esize * size_));
  do_all_to_all_v(in, counts, gathered.data(), counts, dtype);
  reduce_any(gathered.data(), size_, count, out, dtype, op);
}

// ---- The size-1 group.

namespace {

class SelfGroup final : public Group {
 public:
  explicit SelfGroup(std::string name) : Group(0, 1, std::move(name), {0}) {}
  std::unique_ptr<Group> split(int, int, const std::string& name) override {
    return std::make_unique<SelfGroup>(name);
  }
  [[noreturn]] void abort_job(int code) override { std::_Exit(code); }

 protected:
  void do_all_gather_v(const void* in, void* out, std::span<const int64_t> counts,
                       DType dtype) override {
    if (in != out) std::memmove(out, in, static_cast<size_t>(bytes_of(counts[0], dtype)));
  }
  void do_all_to_all_v(const void* in, std::span<const int64_t> send_counts, void* out,
                       std::span<const int64_t> recv_counts, DType dtype) override {
    VIDAX_CHECK(send_counts[0] == recv_counts[0], "self all_to_all count mismatch");
    if (in != out) std::memmove(out, in, static_cast<size_t>(bytes_of(send_counts[0], dtype)));
  }
  void do_broadcast(void*, int64_t, DType, int) override {}
  void do_send_recv(const void* send, int64_t send_count, int, void* recv, int64_t recv_count, int,
                    DType dtype) override {
    VIDAX_CHECK(send_count == recv_count, "self send_recv count mismatch");
    if (send != recv) std::memmove(recv, send, static_cast<size_t>(bytes_of(send_count, dtype)));
  }
  void do_send(const void*, int64_t, int, DType) override {
    VIDAX_CHECK(false, "send in a size-1 group");
  }
  void do_recv(void*, int64_t, int, DType) override {
    VIDAX_CHECK(false, "recv in a size-1 group");
  }
  void do_barrier() override {}
};

}  // namespace

std::unique_ptr<Group> make_self_group(const std::string& name) {
  return std::make_unique<SelfGroup>(name);
}

}  // namespace vidax::dist
