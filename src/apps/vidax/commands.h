// Registration of the vidax CLI subcommands. Each command file adds its subcommand(s) to the
// app and sets a callback; errors are thrown as InputError and reported by main().
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "core/exec_context.h"

namespace vidax::cli {

// The execution context main() built from the environment and the global flags (threads,
// kernel choices) and applied; commands copy it and add their mesh.
const ExecContext& cli_context();
ExecContext& mutable_cli_context();  // main.cpp only

void register_inspect(CLI::App& app);
void register_run(CLI::App& app);
void register_bench(CLI::App& app);
void register_generate(CLI::App& app, int argc, char** argv);
void register_random_model(CLI::App& app);
void register_demo(CLI::App& app);
void register_run_t5(CLI::App& run);             // cmd_t5.cpp
void register_bench_t5(CLI::App& bench);         // cmd_t5.cpp
void register_run_vae(CLI::App* run);            // cmd_vae.cpp
void register_bench_vae(CLI::App* bench);        // cmd_vae.cpp
void register_bench_accel(CLI::App* bench);      // cmd_bench_accel.cpp
void register_bench_attention(CLI::App* bench);  // cmd_bench_attention.cpp
void register_bench_comm(CLI::App* bench);       // cmd_bench_comm.cpp
void register_bench_rollout(CLI::App* bench);    // cmd_bench_rollout.cpp
void register_synth(CLI::App& app);
void register_calibrate(CLI::App& app);                     // cmd_calibrate.cpp
void register_eval(CLI::App& app);                          // cmd_eval.cpp
void register_serve(CLI::App& app, int argc, char** argv);  // cmd_serve.cpp
void register_plan(CLI::App& app);                          // cmd_plan.cpp

// The shipped vidax-tiny folder: `flag` when set, else $VIDAX_TINY_MODEL, next to the build
// folder, or ./models/vidax-tiny (cmd_demo.cpp). InputError when none exists.
std::string find_tiny_model(const std::string& flag);

// "16,5,30,52" -> {16, 5, 30, 52}; `flag` names the option in errors.
std::vector<int64_t> parse_int_list(const std::string& text, const std::string& flag);
// "832x480" -> {width, height}.
std::pair<int64_t, int64_t> parse_size(const std::string& text, const std::string& flag);

}  // namespace vidax::cli
