// vidax command-line entry point: subcommands, global --threads, and the error policy (an input
// error prints one line naming the file/tensor/flag and exits 1; internal errors abort).
#include <omp.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <new>
#include <set>
#include <string>
#include <thread>

#include "apps/vidax/commands.h"
#include "apps/vidax/mesh_args.h"
#include "core/error.h"
#include "dist/world.h"
#include "kernels/cpu/kernel_choices.h"

namespace vidax::cli {

std::vector<int64_t> parse_int_list(const std::string& text, const std::string& flag) {
  std::vector<int64_t> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = text.find(',', pos);
    const std::string part =
        text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(part, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (part.empty() || used != part.size() || v <= 0)
      throw_input_error(flag, ": expected comma-separated positive integers, got '", text, "'");
    out.push_back(v);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

std::pair<int64_t, int64_t> parse_size(const std::string& text, const std::string& flag) {
  const size_t x = text.find('x');
  if (x == std::string::npos)
    throw_input_error(flag, ": expected WIDTHxHEIGHT such as 832x480, got '", text, "'");
  const auto w = parse_int_list(text.substr(0, x), flag);
  const auto h = parse_int_list(text.substr(x + 1), flag);
  if (w.size() != 1 || h.size() != 1)
    throw_input_error(flag, ": expected WIDTHxHEIGHT such as 832x480, got '", text, "'");
  return {w[0], h[0]};
}

ExecContext& mutable_cli_context() {
  static ExecContext ctx;
  return ctx;
}
const ExecContext& cli_context() { return mutable_cli_context(); }

}  // namespace vidax::cli

int run_cli(int argc, char** argv);

namespace {

// An error under mpirun ends every process (dist::fail_job: MPI_Abort), so no rank waits for a
// dead peer. An error every rank raises alike (a JobInputError, or any error before the first
// collective: the ranks run the same arguments) should be printed once: rank 0 prints it and
// ends the job at once, the other ranks give it two seconds to do so before they print theirs
// (with their rank) and end it themselves, so an error only some ranks raise is never lost. Any
// other error is printed by the rank that raised it, with its rank.
int report_error(const std::string& message, bool same_on_every_rank = false) {
  const vidax::dist::Group& world = vidax::dist::world();
  if (world.size() == 1) {
    std::fprintf(stderr, "vidax: error: %s\n", message.c_str());
    return 1;
  }
  const bool once = same_on_every_rank || world.sequence() == 0;
  if (once && world.rank() == 0) {
    std::fprintf(stderr, "vidax: error: %s\n", message.c_str());
    vidax::dist::fail_job(message, false);
  }
  if (once) std::this_thread::sleep_for(std::chrono::seconds(2));
  vidax::dist::fail_job(message, true);
}

std::string selected_command(const CLI::App& app);

// "run dit", "generate", ...: the subcommands the user selected.
std::string selected_command(const CLI::App& app) {
  std::string cmd;
  const CLI::App* a = &app;
  while (!a->get_subcommands().empty()) {
    a = a->get_subcommands().front();
    cmd += (cmd.empty() ? "" : " ") + a->get_name();
  }
  return cmd;
}

// The commands that split their work over a mesh; any other one would run N whole copies that
// write the same outputs.
void require_mesh_command(const std::string& cmd, int world_size) {
  static const std::set<std::string> kMeshCommands = {"generate", "run dit", "run denoise",
                                                      "bench dit", "bench comm"};
  if (world_size > 1 && kMeshCommands.count(cmd) == 0)
    vidax::throw_job_input_error("'", cmd, "' runs in one process; under mpirun only generate, ",
                                 "run dit, run denoise, bench dit and bench comm split their work ",
                                 "(--mesh; docs/mesh.md)");
}

// Default OpenMP threads of a rank: the cores mpirun bound it to, or the node's cores divided by
// its ranks when it is not bound (--bind-to none). Rank 0 notes when cores stay idle.
int default_rank_threads(int local_ranks) {
  const int bound = omp_get_num_procs();  // the affinity mask
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  if (online > 0 && bound < online) {
    if (vidax::dist::world().rank() == 0 && static_cast<long>(bound) * local_ranks < online)
      std::fprintf(stderr,
                   "vidax: note: each rank is bound to %d core(s); %ld of this node's %ld cores "
                   "stay idle (mpirun --bind-to none, or --map-by slot:PE=N, gives them out)\n",
                   bound, online - static_cast<long>(bound) * local_ranks, online);
    return std::max(1, bound);
  }
  return std::max(1, static_cast<int>(online > 0 ? online : bound) / local_ranks);
}

}  // namespace

int main(int argc, char** argv) {
  vidax::cli::set_command_line(argc, argv);
  try {
    vidax::dist::init_world(&argc, &argv);
  } catch (const vidax::InputError& e) {
    std::fprintf(stderr, "vidax: error: %s\n", e.what());
    return 1;
  }
  const int rc = run_cli(argc, argv);
  vidax::dist::finalize_world();
  return rc;
}

int run_cli(int argc, char** argv) {
  CLI::App app{"vidax: video diffusion transformers (Wan 2.1) on the CPU"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "vidax 0.1.0");
  int threads = 0;
  double dist_timeout = 600;
  app.add_option("--threads", threads,
                 "OpenMP threads (default: all cores, divided among the ranks on this node)")
      ->check(CLI::PositiveNumber);
  app.add_option("--dist-timeout", dist_timeout,
                 "seconds a collective waits for its peers before the job is ended (default 600)")
      ->check(CLI::PositiveNumber);
  app.parse_complete_callback([&] {
    // The one place the environment is read for the execution context (core/exec_context.h).
    vidax::ExecContext& ctx = vidax::cli::mutable_cli_context();
    ctx = vidax::ExecContext::from_environment();
    require_mesh_command(selected_command(app), vidax::dist::world().size());
    const int local = vidax::dist::local_process_count();
    ctx.threads = threads > 0 ? threads : local > 1 ? default_rank_threads(local) : 0;
    vidax::apply_exec_context(ctx);
    vidax::dist::set_collective_timeout_seconds(dist_timeout);
  });
  vidax::cli::register_inspect(app);
  vidax::cli::register_run(app);
  vidax::cli::register_bench(app);
  vidax::cli::register_generate(app, argc, argv);
  vidax::cli::register_random_model(app);
  vidax::cli::register_demo(app);
  vidax::cli::register_synth(app);
  vidax::cli::register_eval(app);
  vidax::cli::register_calibrate(app);
  vidax::cli::register_serve(app, argc, argv);
  vidax::cli::register_plan(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const vidax::JobInputError& e) {
    return report_error(e.what(), true);
  } catch (const vidax::InputError& e) {
    return report_error(e.what());
  } catch (const std::bad_alloc&) {
    return report_error("out of memory");
  } catch (const std::exception& e) {
    // An InternalError, or an exception no layer translated (oneDNN, the standard library):
    // not the user's input as far as vidax knows; one line naming the command and the type.
    return report_error(vidax::describe_internal_error(selected_command(app), e));
  }
  return 0;
}
