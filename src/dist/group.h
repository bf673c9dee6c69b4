// A process group: the ordered set of processes that run one collective together. vidax splits
// one generation across the processes of a device mesh (dist/mesh.h); every mesh axis is a
// Group obtained by split().
//
// Two implementations: SelfGroup (size 1, always built: every collective is a copy or nothing)
// and MpiGroup (Open MPI, built with VIDAX_MPI). Backends implement only data movement
// (all_gather_v, all_to_all_v, broadcast, send_recv, barrier, split); the reductions are built
// here from all_to_all plus a local sum in rank order 0..n-1, so a reduction gives the same bits
// on every rank and every run whatever algorithm the MPI library would have picked.
//
// Buffers are raw pointers with an element count and a dtype; counts are int64 (the MPI backend
// chunks messages above its per-call limit). bf16 travels as 16-bit words. Reductions take F32
// or I64 only (never bf16: reduce in f32).
//
// Thread-safety: one calling thread per group (the thread that drives the model; a sharded
// model's loader thread issues its gathers on a group of its own, which needs
// dist::collectives_from_any_thread()); OpenMP threads compute between calls. Every member must
// issue the same collectives in the same order.
// A collective that does not complete within the group's timeout (dist/watchdog) ends the
// process with an error naming the collective, the group and the peers.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace vidax::dist {

enum class ReduceOp { kSum, kMax };

enum class CollectiveKind : int {
  kAllReduce,
  kReduceScatter,
  kAllGather,
  kAllToAll,
  kBroadcast,
  kSendRecv,
  kBarrier,
  kCount
};
const char* collective_name(CollectiveKind kind);

// Calls, bytes this rank sent, and wall seconds spent, per collective kind (for benchmarks).
struct CommStats {
  std::array<int64_t, static_cast<int>(CollectiveKind::kCount)> calls{};
  std::array<int64_t, static_cast<int>(CollectiveKind::kCount)> bytes_sent{};
  std::array<double, static_cast<int>(CollectiveKind::kCount)> seconds{};
  void add(const CommStats& other);
};

class Group {
 public:
  virtual ~Group() = default;
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string& name() const { return name_; }
  // World ranks of the members, in group rank order (for error messages).
  const std::vector<int>& world_ranks() const { return world_ranks_; }

  // ---- Data movement (backend primitives). `count`s are elements of `dtype`.
  // out = concatenation of every rank's `in` in rank order; counts[r] elements from rank r.
  void all_gather_v(const void* in, void* out, std::span<const int64_t> counts, DType dtype);
  void all_gather(const void* in, void* out, int64_t count, DType dtype);  // equal counts
  // Rank r sends send_counts[q] elements (consecutive in `in`, in q order) to rank q and
  // receives recv_counts[q] from rank q into `out` (consecutive, in q order).
  void all_to_all_v(const void* in, std::span<const int64_t> send_counts, void* out,
                    std::span<const int64_t> recv_counts, DType dtype);
  void all_to_all(const void* in, void* out, int64_t count_per_rank, DType dtype);
  void broadcast(void* data, int64_t count, DType dtype, int root);
  // Sends to `dst` and receives from `src` at once (ring steps). Either count may be 0.
  void send_recv(const void* send, int64_t send_count, int dst, void* recv, int64_t recv_count,
                 int src, DType dtype);
  // One-sided halves of send_recv: `dst` must post the matching recv (and vice versa).
  void send(const void* data, int64_t count, int dst, DType dtype);
  void recv(void* data, int64_t count, int src, DType dtype);
  void barrier();

  // ---- Deterministic reductions (F32 or I64).
  void all_reduce(void* data, int64_t count, DType dtype, ReduceOp op);
  // `in` holds size() * count elements; rank r gets the reduction of block r in `out`.
  void reduce_scatter(const void* in, void* out, int64_t count, DType dtype, ReduceOp op);

  // The sub-group of the ranks that pass the same `color`, ordered by `key` (then rank).
  // Collective over this group.
  virtual std::unique_ptr<Group> split(int color, int key, const std::string& name) = 0;

  // Ends every process of the job with exit status `code` (after printing nothing more).
  [[noreturn]] virtual void abort_job(int code) = 0;

  const CommStats& stats() const { return stats_; }
  void reset_stats() { stats_ = CommStats{}; }
  // Collectives issued on this group so far (reported by the watchdog).
  int64_t sequence() const { return sequence_; }

 protected:
  Group(int rank, int size, std::string name, std::vector<int> world_ranks)
      : rank_(rank), size_(size), name_(std::move(name)), world_ranks_(std::move(world_ranks)) {}

  virtual void do_all_gather_v(const void* in, void* out, std::span<const int64_t> counts,
                               DType dtype) = 0;
  virtual void do_all_to_all_v(const void* in, std::span<const int64_t> send_counts, void* out,
                               std::span<const int64_t> recv_counts, DType dtype) = 0;
  virtual void do_broadcast(void* data, int64_t count, DType dtype, int root) = 0;
  virtual void do_send_recv(const void* send, int64_t send_count, int dst, void* recv,
                            int64_t recv_count, int src, DType dtype) = 0;
  virtual void do_send(const void* data, int64_t count, int dst, DType dtype) = 0;
  virtual void do_recv(void* data, int64_t count, int src, DType dtype) = 0;
  virtual void do_barrier() = 0;

 private:
  class Timed;
  int rank_, size_;
  std::string name_;
  std::vector<int> world_ranks_;
  CommStats stats_;
  int64_t sequence_ = 0;
  int depth_ = 0;  // nesting of collectives (reductions call data movement)
};

// Link emulation (`VIDAX_SIMULATE_LINKS`, plan/link_emulation.h): when set, every outer
// collective on a group of more than one rank lasts at least the seconds `stretch` returns for it
// (its modelled duration on a slower topology): the rank sleeps after the collective completes
// for what is left. Set before the first collective; called on the thread that issues it (it
// must be thread-safe when several threads issue collectives). Null: off.
using CollectiveStretch =
    std::function<double(CollectiveKind kind, int64_t bytes_sent, const Group& group)>;
void set_collective_stretch(CollectiveStretch stretch);
// Whether a stretch is installed.
bool collective_stretch_installed();

// The size-1 group: collectives copy `in` to `out` (or do nothing).
std::unique_ptr<Group> make_self_group(const std::string& name = "self");

}  // namespace vidax::dist
