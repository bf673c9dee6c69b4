// The Open MPI process group. Built only with VIDAX_MPI.
//
// Every collective is non-blocking point-to-point (or MPI_Ibcast / MPI_Ibarrier) completed by a
// polling wait: the wait backs off to short sleeps (ranks often share cores with other ranks'
// compute, so spinning would steal their time) and gives up after the watchdog timeout with an
// error naming the collective, the group and its ranks. Messages longer than the per-call limit
// (VIDAX_DIST_MAX_BYTES, default 1 GiB; MPI counts are int) are sent as several messages.
#define OMPI_SKIP_MPICXX 1  // the C API only
#include <mpi.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "core/error.h"
#include "dist/group.h"
#include "dist/mpi_world.h"

namespace vidax::dist {
namespace {

int64_t max_message_bytes() {
  static const int64_t limit = [] {
    int64_t v = int64_t{1} << 30;
    if (const char* env = std::getenv("VIDAX_DIST_MAX_BYTES"); env && *env) {
      const long long parsed = std::atoll(env);
      if (parsed > 0 && parsed <= INT_MAX) v = parsed;
    }
    return v;
  }();
  return limit;
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i) s.push_back(',');
    s.append(std::to_string(ranks[i]));
  }
  return s;
}

class MpiGroup final : public Group {
 public:
  MpiGroup(MPI_Comm comm, int rank, int size, std::string name, std::vector<int> world_ranks)
      : Group(rank, size, std::move(name), std::move(world_ranks)), comm_(comm) {
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  }
  ~MpiGroup() override {
    if (comm_ != MPI_COMM_WORLD && comm_ != MPI_COMM_NULL) {
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (!finalized) MPI_Comm_free(&comm_);
    }
  }

  std::unique_ptr<Group> split(int color, int key, const std::string& name) override {
    MPI_Comm sub = MPI_COMM_NULL;
    check(MPI_Comm_split(comm_, color, key, &sub), "split");
    int r = 0, n = 0;
    MPI_Comm_rank(sub, &r);
    MPI_Comm_size(sub, &n);
    int me = world_rank();
    std::vector<int> members(static_cast<size_t>(n));
    check(MPI_Allgather(&me, 1, MPI_INT, members.data(), 1, MPI_INT, sub), "split");
    return std::make_unique<MpiGroup>(sub, r, n, name, std::move(members));
  }

  [[noreturn]] void abort_job(int code) override {
    std::fflush(stdout);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }

 protected:
  void do_all_gather_v(const void* in, void* out, std::span<const int64_t> counts,
                       DType dtype) override {
    const int64_t es = static_cast<int64_t>(dtype_size(dtype));
    std::vector<int64_t> offset(counts.size() + 1, 0);
    for (size_t i = 0; i < counts.size(); ++i) offset[i + 1] = offset[i] + counts[i] * es;
    auto* o = static_cast<std::byte*>(out);
    const int me = rank();
    Requests reqs;
    for (int i = 1; i < size(); ++i) {
      const int src = (me - i + size()) % size();
      post_recv(reqs, o + offset[static_cast<size_t>(src)], counts[static_cast<size_t>(src)] * es,
                src);
    }
    for (int i = 1; i < size(); ++i) {
      const int dst = (me + i) % size();
      post_send(reqs, in, counts[static_cast<size_t>(me)] * es, dst);
    }
    if (o + offset[static_cast<size_t>(me)] != in)
      std::memmove(o + offset[static_cast<size_t>(me)], in,
                   static_cast<size_t>(counts[static_cast<size_t>(me)] * es));
    wait(reqs, "all_gather");
  }

  void do_all_to_all_v(const void* in, std::span<const int64_t> send_counts, void* out,
                       std::span<const int64_t> recv_counts, DType dtype) override {
    const int64_t es = static_cast<int64_t>(dtype_size(dtype));
    std::vector<int64_t> soff(send_counts.size() + 1, 0), roff(recv_counts.size() + 1, 0);
    for (size_t i = 0; i < send_counts.size(); ++i) {
      soff[i + 1] = soff[i] + send_counts[i] * es;
      roff[i + 1] = roff[i] + recv_counts[i] * es;
    }
    const auto* src_bytes = static_cast<const std::byte*>(in);
    auto* dst_bytes = static_cast<std::byte*>(out);
    const int me = rank();
    Requests reqs;
    for (int i = 1; i < size(); ++i) {
      const int src = (me - i + size()) % size();
      post_recv(reqs, dst_bytes + roff[static_cast<size_t>(src)],
                recv_counts[static_cast<size_t>(src)] * es, src);
    }
    for (int i = 1; i < size(); ++i) {
      const int dst = (me + i) % size();
      post_send(reqs, src_bytes + soff[static_cast<size_t>(dst)],
                send_counts[static_cast<size_t>(dst)] * es, dst);
    }
    VIDAX_CHECK(send_counts[static_cast<size_t>(me)] == recv_counts[static_cast<size_t>(me)],
                "all_to_all_v: own block sizes differ");
    std::memmove(dst_bytes + roff[static_cast<size_t>(me)],
                 src_bytes + soff[static_cast<size_t>(me)],
                 static_cast<size_t>(send_counts[static_cast<size_t>(me)] * es));
    wait(reqs, "all_to_all");
  }

  void do_broadcast(void* data, int64_t count, DType dtype, int root) override {
    auto* p = static_cast<std::byte*>(data);
    int64_t bytes = count * static_cast<int64_t>(dtype_size(dtype));
    Requests reqs;
    while (bytes > 0) {
      const int n = static_cast<int>(std::min(bytes, max_message_bytes()));
      reqs.emplace_back();
      check(MPI_Ibcast(p, n, MPI_BYTE, root, comm_, &reqs.back()), "broadcast");
      p += n;
      bytes -= n;
    }
    wait(reqs, "broadcast");
  }

  void do_send_recv(const void* send, int64_t send_count, int dst, void* recv, int64_t recv_count,
                    int src, DType dtype) override {
    const int64_t es = static_cast<int64_t>(dtype_size(dtype));
    Requests reqs;
    post_recv(reqs, recv, recv_count * es, src);
    post_send(reqs, send, send_count * es, dst);
    wait(reqs, "send_recv");
  }

  void do_send(const void* data, int64_t count, int dst, DType dtype) override {
    Requests reqs;
    post_send(reqs, data, count * static_cast<int64_t>(dtype_size(dtype)), dst);
    wait(reqs, "send");
  }

  void do_recv(void* data, int64_t count, int src, DType dtype) override {
    Requests reqs;
    post_recv(reqs, data, count * static_cast<int64_t>(dtype_size(dtype)), src);
    wait(reqs, "recv");
  }

  void do_barrier() override {
    Requests reqs(1);
    check(MPI_Ibarrier(comm_, &reqs[0]), "barrier");
    wait(reqs, "barrier");
  }

 private:
  using Requests = std::vector<MPI_Request>;
  static constexpr int kTag = 7001;

  int world_rank() const {
    int r = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
  }

  void post_send(Requests& reqs, const void* data, int64_t bytes, int dst) {
    const auto* p = static_cast<const std::byte*>(data);
    do {  // a zero-byte message still goes, so both sides post the same number
      const int n = static_cast<int>(std::min(bytes, max_message_bytes()));
      reqs.emplace_back();
      check(MPI_Isend(p, n, MPI_BYTE, dst, kTag, comm_, &reqs.back()), "send");
      p += n;
      bytes -= n;
    } while (bytes > 0);
  }
  void post_recv(Requests& reqs, void* data, int64_t bytes, int src) {
    auto* p = static_cast<std::byte*>(data);
    do {
      const int n = static_cast<int>(std::min(bytes, max_message_bytes()));
      reqs.emplace_back();
      check(MPI_Irecv(p, n, MPI_BYTE, src, kTag, comm_, &reqs.back()), "recv");
      p += n;
      bytes -= n;
    } while (bytes > 0);
  }

  // Polls until every request completed: spins for the first 50 us (a rank with a core of its
  // own answers fastest this way), then yields the core between polls for 2 ms (oversubscribed
  // ranks let the others compute), then sleeps 50 us between polls. The watchdog deadline ends
  // the job.
  void wait(Requests& reqs, const char* what) {
    if (reqs.empty()) return;
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    const double timeout = collective_timeout_seconds();
    for (long poll = 0;; ++poll) {
      int done = 0;
      check(MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &done, MPI_STATUSES_IGNORE),
            what);
      if (done) return;
      if ((poll & 15) != 15) continue;  // the clock is read every 16 polls
      const double waited = std::chrono::duration<double>(Clock::now() - start).count();
      if (waited < 50e-6) continue;
      if (waited < 2e-3) {
        sched_yield();
        continue;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
      if (waited > timeout) {
        std::fprintf(stderr,
                     "vidax: error: rank %d: %s on group '%s' (world ranks %s), collective #%lld, "
                     "did not complete within %.0f s (--dist-timeout): a peer rank is stopped, "
                     "hung or dead\n",
                     world_rank(), what, name().c_str(), rank_list(world_ranks()).c_str(),
                     static_cast<long long>(sequence()), timeout);
        abort_job(1);
      }
    }
  }

  void check(int rc, const char* what) {
    if (rc == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    std::fprintf(stderr,
                 "vidax: error: rank %d: MPI %s on group '%s' (world ranks %s) failed: %s\n",
                 world_rank(), what, name().c_str(), rank_list(world_ranks()).c_str(), text);
    abort_job(1);
  }

  MPI_Comm comm_;
};

}  // namespace

std::unique_ptr<Group> make_mpi_world_group() {
  int r = 0, n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  std::vector<int> ranks(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) ranks[static_cast<size_t>(i)] = i;
  return std::make_unique<MpiGroup>(MPI_COMM_WORLD, r, n, "world", std::move(ranks));
}

}  // namespace vidax::dist
