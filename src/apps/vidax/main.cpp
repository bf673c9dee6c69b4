// vidax command-line entry point: subcommands, global --threads, and the error policy (an input
// error prints one line naming the file/tensor/flag and exits 1; internal errors abort).
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <new>
#include <string>

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

// An error under mpirun: printed once, by rank 0, when every rank raises it alike (a
// JobInputError, or any error before the first collective: the ranks run the same arguments),
// else by the failing rank; then every process ends (dist::fail_job), so no rank waits for a
// dead peer.
int report_error(const std::string& message, bool same_on_every_rank = false) {
  const vidax::dist::Group& world = vidax::dist::world();
  if (world.size() == 1) {
    std::fprintf(stderr, "vidax: error: %s\n", message.c_str());
    return 1;
  }
  const bool once = same_on_every_rank || world.sequence() == 0;
  if (once && world.rank() == 0) std::fprintf(stderr, "vidax: error: %s\n", message.c_str());
  vidax::dist::fail_job(message, !once);
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
    const int local = vidax::dist::local_process_count();
    ctx.threads = threads > 0 ? threads : local > 1 ? std::max(1, omp_get_num_procs() / local) : 0;
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
    // A library error we did not translate (oneDNN, filesystem, ...): still one line.
    std::string msg = e.what();
    for (char& ch : msg)
      if (ch == '\n' || ch == '\r') ch = ' ';
    return report_error(msg);
  }
  return 0;
}
