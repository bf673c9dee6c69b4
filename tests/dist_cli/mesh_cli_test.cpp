// The real `vidax` under the real `mpirun`: every mesh shape gives the single-process result
// (run dit, run denoise; the golden fixtures; random models with other head counts and sequence
// lengths that do not divide), and every failure (bad mesh, ranks started differently, an error
// on one rank, a killed rank, a stopped rank) ends every process with an error and no output.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>
#include <tuple>

#include "dist/mesh.h"
#include "io/safetensors.h"
#include "models/wan/dit_random.h"
#include "models/wan/dit_tensors.h"
#include "support/test_support.h"

namespace vidax {
namespace {

using vidax::testing::TempDir;
using Result = vidax::testing::CommandResult;
using vidax::testing::count_lines;

std::string mpirun(int n, const std::string& args, const std::string& env = "") {
  return "env " + env +
         " " VIDAX_MPIEXEC
         " --allow-run-as-root --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 -n " +
         std::to_string(n) + " " VIDAX_BINARY " " + args;
}
Result run_mpi(int n, const std::string& args, const std::string& env = "") {
  return vidax::testing::run_shell(mpirun(n, args, env) + " 2>&1");
}
Result run_one(const std::string& args) {
  return vidax::testing::run_shell("OMP_NUM_THREADS=1 " VIDAX_BINARY " " + args + " 2>&1");
}

// Largest |a - b| relative to max |b|.
// A random Wan DiT folder (weights + config.json) with `heads` heads of width 32.
std::string write_random_dit(const TempDir& dir, int64_t heads, int64_t layers, uint64_t seed) {
  wan::DitConfig c;
  c.dim = heads * 32;
  c.num_heads = heads;
  c.ffn_dim = 96;
  c.num_layers = layers;
  c.text_dim = 48;
  c.text_len = 24;
  c.freq_dim = 32;
  const std::string folder = dir.file("dit" + std::to_string(heads));
  std::filesystem::create_directories(folder);
  const wan::WeightFn w = wan::random_dit_weights(c, DType::kF32, seed);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& d : wan::dit_tensor_decls(c)) tensors.emplace_back(d.name, w(d.name));
  write_safetensors(folder + "/model.safetensors", tensors, {});
  std::ofstream(folder + "/config.json") << c.to_json();
  return folder;
}

// Inputs for `run dit` on a latent of f x h x w (tokens f * h/2 * w/2); per_token gives the
// Wan 2.2 form (one timestep per token, two values).
std::string write_dit_inputs(const TempDir& dir, int64_t f, int64_t h, int64_t w, bool per_token) {
  const int64_t tokens = f * (h / 2) * (w / 2);
  Tensor x =
      Tensor::from_floats(vidax::testing::random_floats(16 * f * h * w, 11), Shape{16, f, h, w});
  Tensor ctx = Tensor::from_floats(vidax::testing::random_floats(5 * 48, 12), Shape{5, 48});
  Tensor t;
  if (per_token) {
    std::vector<float> v(static_cast<size_t>(tokens));
    for (int64_t i = 0; i < tokens; ++i) v[static_cast<size_t>(i)] = i < tokens / 3 ? 0.0f : 640.0f;
    t = Tensor::from_floats(v, Shape{tokens});
  } else {
    t = Tensor::from_floats(std::vector<float>{731.0f}, Shape{1});
  }
  const std::string path = dir.file("in_" + std::to_string(tokens) + ".safetensors");
  write_safetensors(path, {{"x", x}, {"t", t}, {"context", ctx}}, {});
  return path;
}

Tensor output(const std::string& path, const std::string& name) {
  return SafetensorsFile::open(path).tensor(name);
}

// `run dit`'s input from the fixture's first call (x, its timestep, the context, seq_len).
std::string write_fixture_dit_input(const TempDir& dir, const SafetensorsFile& io) {
  const std::string in = dir.file("in.safetensors");
  write_safetensors(in, {{"x", io.tensor("x")},
                         {"t", io.tensor("call0.t")},
                         {"context", io.tensor("context")},
                         {"seq_len", io.tensor("seq_len")}});
  return in;
}

struct MeshCase {
  int ranks;
  std::string mesh;
  double tolerance;  // relative to max |single-process result|
};

TEST(MeshCli, RunDitOnTheFixtureEqualsOneProcessAndTheReference) {
  VIDAX_REQUIRE_FIXTURE(weights, "dit_t2v_tiny.weights.safetensors");
  VIDAX_REQUIRE_FIXTURE(io_path, "dit_t2v_tiny.io.safetensors");
  TempDir dir;
  auto io = SafetensorsFile::open(io_path);
  const std::string in = write_fixture_dit_input(dir, io);
  const std::string common = "run dit --weights " + weights + " --in " + in + " --out ";
  const Result one = run_one(common + dir.file("one.safetensors"));
  ASSERT_EQ(one.code, 0) << one.out;
  const Tensor ref = output(dir.file("one.safetensors"), "out");
  // 18 tokens, 2 heads: ulysses 2, ring 3 (divides), ring 4 / 8 (padding), tp 2, combinations.
  for (const MeshCase& c :
       {MeshCase{2, "ulysses=2", 1e-6}, MeshCase{3, "ring=3", 1e-5}, MeshCase{4, "ring=4", 1e-5},
        MeshCase{4, "ulysses=2,ring=2", 1e-5}, MeshCase{8, "ulysses=2,ring=4", 1e-5},
        MeshCase{2, "tp=2", 1e-5}, MeshCase{6, "ring=3,tp=2", 1e-5}}) {
    const std::string out = dir.file("mesh.safetensors");
    const Result r = run_mpi(c.ranks, common + out + " --mesh " + c.mesh);
    ASSERT_EQ(r.code, 0) << c.mesh << "\n" << r.out;
    const Tensor got = output(out, "out");
    EXPECT_LE(vidax::testing::max_rel_diff(got, ref), c.tolerance) << c.mesh;
    EXPECT_TRUE(vidax::testing::all_close(got, io.tensor("call0.out"), 1e-4, 1e-4, c.mesh));
    std::filesystem::remove(out);
  }
}

// --weights-mode sharded (run dit's --weights is the file): the blocks split over the ring x
// ulysses ranks of each tp rank and gathered before use give the resident run's bytes exactly.
TEST(MeshCli, ShardedWeightsGiveTheResidentResultBitForBit) {
  VIDAX_REQUIRE_FIXTURE(weights, "dit_t2v_tiny.weights.safetensors");
  VIDAX_REQUIRE_FIXTURE(io_path, "dit_t2v_tiny.io.safetensors");
  TempDir dir;
  auto io = SafetensorsFile::open(io_path);
  const std::string in = write_fixture_dit_input(dir, io);
  const std::string common = "run dit --weights " + weights + " --in " + in + " --out ";
  for (const MeshCase& c :
       {MeshCase{2, "ulysses=2", 0}, MeshCase{4, "ring=2,tp=2", 0}, MeshCase{3, "ring=3", 0}}) {
    const Result resident =
        run_mpi(c.ranks, common + dir.file("r.safetensors") + " --mesh " + c.mesh);
    ASSERT_EQ(resident.code, 0) << resident.out;
    const Result sharded = run_mpi(c.ranks, common + dir.file("s.safetensors") + " --mesh " +
                                                c.mesh + " --weights-mode sharded");
    ASSERT_EQ(sharded.code, 0) << c.mesh << "\n" << sharded.out;
    EXPECT_EQ(vidax::testing::max_rel_diff(output(dir.file("s.safetensors"), "out"),
                                           output(dir.file("r.safetensors"), "out")),
              0.0)
        << c.mesh;
  }
  // Nothing to shard over, a budget on top, a misspelt mode: one line, non-zero exit, no output.
  for (const auto& [n, args, message] :
       {std::tuple{1, std::string("--weights-mode sharded"), std::string("run under mpirun")},
        std::tuple{2, std::string("--mesh tp=2 --weights-mode sharded"),
                   std::string("ring x ulysses is at least 2")},
        std::tuple{2, std::string("--mesh ulysses=2 --weights-mode sharded --weights-budget 1GiB"),
                   std::string("choose one")},
        std::tuple{1, std::string("--weights-mode shared"),
                   std::string("expected resident or sharded")}}) {
    const std::string out = dir.file("bad.safetensors");
    const Result r =
        n == 1 ? run_one(common + out + " " + args) : run_mpi(n, common + out + " " + args);
    EXPECT_NE(r.code, 0) << args;
    EXPECT_NE(r.out.find(message), std::string::npos) << args << "\n" << r.out;
    EXPECT_FALSE(std::filesystem::exists(out)) << args;
  }
}

TEST(MeshCli, RunDitOnRandomModelsWithRaggedSequences) {
  TempDir dir;
  // 4 heads; 3 x 5 x 3 = 45 tokens (divides by none of 2, 4, 8 ranks) and per-token timesteps.
  const std::string model = write_random_dit(dir, 4, 2, 7);
  for (bool per_token : {false, true}) {
    const std::string in = write_dit_inputs(dir, 3, 10, 6, per_token);
    const std::string common = "run dit --weights " + model + " --in " + in + " --out ";
    const Result one = run_one(common + dir.file("one.safetensors"));
    ASSERT_EQ(one.code, 0) << one.out;
    const Tensor ref = output(dir.file("one.safetensors"), "out");
    for (const MeshCase& c :
         {MeshCase{4, "ulysses=4", 1e-6}, MeshCase{2, "ring=2", 1e-5},
          MeshCase{8, "ulysses=4,ring=2", 1e-5}, MeshCase{6, "ulysses=2,ring=3", 1e-5},
          MeshCase{4, "tp=4", 1e-5}, MeshCase{8, "ring=2,ulysses=2,tp=2", 1e-5}}) {
      const std::string out = dir.file("mesh.safetensors");
      const Result r = run_mpi(c.ranks, common + out + " --mesh " + c.mesh);
      ASSERT_EQ(r.code, 0) << c.mesh << "\n" << r.out;
      EXPECT_LE(vidax::testing::max_rel_diff(output(out, "out"), ref), c.tolerance)
          << c.mesh << (per_token ? " per-token t" : "");
      std::filesystem::remove(out);
    }
  }
}

TEST(MeshCli, Bf16UlyssesEqualsOneProcess) {
  TempDir dir;
  const std::string model = write_random_dit(dir, 6, 2, 3);
  const std::string in = write_dit_inputs(dir, 2, 6, 8, false);  // 24 tokens
  const std::string common =
      "run dit --precision bf16 --weights " + model + " --in " + in + " --out ";
  ASSERT_EQ(run_one(common + dir.file("one.safetensors")).code, 0);
  const Result r = run_mpi(3, common + dir.file("mesh.safetensors") + " --mesh ulysses=3");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_LE(vidax::testing::max_rel_diff(output(dir.file("mesh.safetensors"), "out"),
                                         output(dir.file("one.safetensors"), "out")),
            1e-6);
}

// run denoise's input from the CFG-loop fixture (noise, both contexts, seq_len), in `dir`.
std::string write_denoise_input(const SafetensorsFile& io, const TempDir& dir) {
  const std::string in = dir.file("in.safetensors");
  write_safetensors(in, {{"noise", io.tensor("noise")},
                         {"context", io.tensor("context")},
                         {"context_null", io.tensor("context_null")},
                         {"seq_len", io.tensor("seq_len")}});
  return in;
}

TEST(MeshCli, RunDenoiseWithCfgUlyssesAndRingEqualsOneProcess) {
  VIDAX_REQUIRE_FIXTURE(weights, "dit_t2v_tiny.weights.safetensors");
  VIDAX_REQUIRE_FIXTURE(io_path, "cfg_loop_tiny.io.safetensors");
  TempDir dir;
  auto io = SafetensorsFile::open(io_path);
  const std::string in = write_denoise_input(io, dir);
  const std::string common = "run denoise --steps 4 --shift 5 --guide-scale 5 --weights " +
                             weights + " --in " + in + " --out ";
  const Result one = run_one(common + dir.file("one.safetensors"));
  ASSERT_EQ(one.code, 0) << one.out;
  const Tensor ref = output(dir.file("one.safetensors"), "final_latent");
  EXPECT_TRUE(vidax::testing::all_close(ref, io.tensor("final_latent"), 1e-4, 1e-4, "one"));
  for (const MeshCase& c : {MeshCase{2, "cfg=2", 0.0}, MeshCase{4, "cfg=2,ulysses=2", 1e-6},
                            MeshCase{8, "cfg=2,ulysses=2,ring=2", 1e-5},
                            MeshCase{3, "ring=3", 1e-5}, MeshCase{4, "cfg=2,tp=2", 1e-5}}) {
    const std::string out = dir.file("mesh.safetensors");
    const Result r = run_mpi(c.ranks, common + out + " --mesh " + c.mesh);
    ASSERT_EQ(r.code, 0) << c.mesh << "\n" << r.out;
    const Tensor got = output(out, "final_latent");
    EXPECT_LE(vidax::testing::max_rel_diff(got, ref), c.tolerance) << c.mesh;
    EXPECT_TRUE(vidax::testing::all_close(got, io.tensor("final_latent"), 1e-4, 1e-4, c.mesh));
    // Progress lines come from rank 0 alone.
    EXPECT_EQ(vidax::testing::count_lines(r.out), 4) << r.out;
    std::filesystem::remove(out);
  }
}

// Step methods under a mesh: every rank makes the same decisions (the block-stack hook sees the
// same time embedding on each; EasyCache decides from outputs every rank holds after the
// exchange), so the result and the recorded schedule equal one process's.
TEST(MeshCli, RunDenoiseWithStepMethodsEqualsOneProcess) {
  VIDAX_REQUIRE_FIXTURE(weights, "dit_t2v_tiny.weights.safetensors");
  VIDAX_REQUIRE_FIXTURE(io_path, "cfg_loop_tiny.io.safetensors");
  TempDir dir;
  auto io = SafetensorsFile::open(io_path);
  const std::string in = write_denoise_input(io, dir);
  for (const std::string spec :
       {"teacache:thresh=2,coeffs=0/0/0/1/0", "magcache:thresh=0.5,k=4,model=t2v-1.3b",
        "easycache:thresh=1,ret=2", "hsa:budget=0.5,warmup=2", "dvg:mode=joint,switch=0.5"}) {
    const bool hsa = spec.starts_with("hsa");
    const std::string common = "run denoise --steps 10 --shift 5 --guide-scale 5 --weights " +
                               weights + " --in " + in + " --accel " + spec +
                               (hsa ? " --sampler euler" : "") + " --out ";
    const Result one = run_one(common + dir.file("one.safetensors"));
    ASSERT_EQ(one.code, 0) << spec << "\n" << one.out;
    const Tensor ref = output(dir.file("one.safetensors"), "final_latent");
    const std::string ref_report =
        SafetensorsFile::open(dir.file("one.safetensors")).metadata().at("accel");
    EXPECT_NE(ref_report.find("\"schedule_cond\""), std::string::npos) << ref_report;
    for (const MeshCase& c : {MeshCase{2, "cfg=2", 0.0}, MeshCase{4, "cfg=2,ulysses=2", 1e-6}}) {
      const std::string out = dir.file("mesh.safetensors");
      if (hsa && c.mesh != std::string("cfg=2")) {  // token subsets are not split over ranks
        const Result r = run_mpi(c.ranks, common + out + " --mesh " + c.mesh);
        EXPECT_NE(r.code, 0);
        EXPECT_NE(r.out.find("--accel hsa: runs in one process or under --mesh cfg=2"),
                  std::string::npos)
            << r.out;
        continue;
      }
      const Result r = run_mpi(c.ranks, common + out + " --mesh " + c.mesh);
      ASSERT_EQ(r.code, 0) << spec << " " << c.mesh << "\n" << r.out;
      EXPECT_LE(vidax::testing::max_rel_diff(output(out, "final_latent"), ref), c.tolerance)
          << spec << " " << c.mesh;
      EXPECT_EQ(SafetensorsFile::open(out).metadata().at("accel"), ref_report)
          << spec << " " << c.mesh;
      EXPECT_EQ(vidax::testing::count_lines(r.out), 11) << r.out;  // 10 steps + the summary
      std::filesystem::remove(out);
    }
  }
}

// The frames of a PNG-folder video as raw RGB bytes (ffmpeg, which setup installs).
std::string raw_frames(const std::string& folder) {
  const std::string raw = folder + ".rgb";
  const Result r = vidax::testing::run_shell("ffmpeg -v error -y -i " + folder +
                                             "/frame_%05d.png -f rawvideo -pix_fmt rgb24 " + raw);
  EXPECT_EQ(r.code, 0) << r.out;
  std::ifstream in(raw, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

int max_byte_diff(const std::string& a, const std::string& b) {
  EXPECT_EQ(a.size(), b.size());
  int d = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    d = std::max(d, std::abs(static_cast<int>(static_cast<uint8_t>(a[i])) -
                             static_cast<int>(static_cast<uint8_t>(b[i]))));
  return d;
}

// A tiny random model folder with 2 heads (random-model) in `dir`.
std::string write_model_folder(const TempDir& dir) {
  const std::string model = dir.file("model");
  const Result r = vidax::testing::run_vidax("random-model " + model + " --heads 2 --tokenizer " +
                                             std::string(VIDAX_SOURCE_DIR) +
                                             "/tests/data/tokenizer/spiece.model");
  EXPECT_EQ(r.code, 0) << r.out;
  return model;
}

TEST(MeshCli, GenerateWritesTheSameFramesOnEveryMesh) {
  TempDir dir;
  const std::string model = write_model_folder(dir);
  const std::string common = "generate --model " + model +
                             " --prompt 'a red square' --size 64x64 --frames 5 --steps 3 "
                             "--seed 11 --no-hash --precision fp32 ";
  ASSERT_EQ(run_one(common + "-o " + dir.file("one")).code, 0);
  ASSERT_EQ(run_one(common + "--vae-tile 4 -o " + dir.file("one_tiled")).code, 0);
  const std::string one = raw_frames(dir.file("one")), tiled = raw_frames(dir.file("one_tiled"));
  ASSERT_EQ(one.size(), 5u * 64 * 64 * 3);
  struct Case {
    int ranks;
    std::string mesh, extra;
    int max_diff;  // 8-bit levels; 0 where the mesh is bitwise
  };
  for (const Case& c :
       {Case{2, "cfg=2", "", 0}, Case{2, "ulysses=2", "", 0},
        Case{4, "cfg=2,ulysses=2", "--vae-tile 4", 0}, Case{3, "ring=3", "--vae-tile 4", 1},
        Case{8, "cfg=2,ring=2,ulysses=2", "", 1}, Case{4, "cfg=2,tp=2", "", 1}}) {
    const std::string out = dir.file("mesh_" + std::to_string(c.ranks));
    const Result r = run_mpi(c.ranks, common + c.extra + " --mesh " + c.mesh + " -o " + out);
    ASSERT_EQ(r.code, 0) << c.mesh << "\n" << r.out;
    EXPECT_EQ(count_lines(r.out), 1) << "one summary line, from rank 0\n" << r.out;
    EXPECT_LE(max_byte_diff(raw_frames(out), c.extra.empty() ? one : tiled), c.max_diff) << c.mesh;
    std::ifstream sidecar(out + ".json");
    const std::string text((std::istreambuf_iterator<char>(sidecar)), {});
    EXPECT_NE(text.find("\"mesh\": \"" + dist::parse_mesh_spec(c.mesh).str()), std::string::npos)
        << text;
    std::filesystem::remove_all(out);
    std::filesystem::remove(out + ".json");
  }
}

// `vidax plan --topology local` on this machine, then `mpirun generate --plan`: the run takes the
// plan's mesh (and size and frames), writes the frames that mesh writes given by --mesh, and the
// sidecar records the plan; a job of another size or a contradicting flag is refused.
TEST(MeshCli, GenerateRunsThePlannersPlan) {
  TempDir dir;
  const std::string model = write_model_folder(dir);
  const std::string plan = dir.file("plan.json"), rankfile = dir.file("ranks");
  const Result p = vidax::testing::run_vidax("plan --model " + model +
                                             " --topology local --devices 2 --size 64x64 "
                                             "--frames 5 --steps 3 --precision fp32 -o " +
                                             plan + " --rankfile " + rankfile);
  ASSERT_EQ(p.code, 0) << p.out;
  std::ifstream in(plan);
  const nlohmann::json j = nlohmann::json::parse(in);
  const std::string mesh = j["mesh"]["spec"];
  const std::string common = "generate --model " + model +
                             " --prompt 'a red square' --steps 3 --seed 5 --no-hash "
                             "--precision fp32 ";
  const Result planned = run_mpi(2, common + "--plan " + plan + " -o " + dir.file("planned"));
  ASSERT_EQ(planned.code, 0) << planned.out;
  const Result given = run_mpi(2, common + "--size 64x64 --frames 5 --mesh " + mesh +
                                      (j["weights"] == "sharded" ? " --weights sharded" : "") +
                                      " -o " + dir.file("given"));
  ASSERT_EQ(given.code, 0) << given.out;
  EXPECT_EQ(raw_frames(dir.file("planned")), raw_frames(dir.file("given")));
  std::ifstream sidecar(dir.file("planned") + ".json");
  const nlohmann::json side = nlohmann::json::parse(sidecar);
  EXPECT_EQ(side["mesh"], mesh);
  EXPECT_EQ(side["topology_plan"]["mesh"], mesh);
  EXPECT_EQ(side["topology_plan"]["file"], plan);
  EXPECT_GT(side["topology_plan"]["predicted_step_seconds"].get<double>(), 0);
  EXPECT_EQ(side["frames"], 5);
  // Link emulation on the same run: a bad topology or placement is one error, nothing written.
  for (const auto& [env, needle] :
       {std::pair{std::string("VIDAX_SIMULATE_LINKS=no-such"), std::string("VIDAX_SIMULATE_LINKS")},
        std::pair{std::string("VIDAX_SIMULATE_LINKS=h100-nvswitch-x8 VIDAX_SIMULATE_PLACEMENT=0,0"),
                  std::string("VIDAX_SIMULATE_PLACEMENT")}}) {
    const Result r = run_mpi(2, common + "--plan " + plan + " -o " + dir.file("emulated"), env);
    EXPECT_NE(r.code, 0) << env;
    EXPECT_NE(r.out.find(needle), std::string::npos) << r.out;
    EXPECT_FALSE(std::filesystem::exists(dir.file("emulated")));
  }
  // A slow modelled network makes the same run take longer and write the same frames.
  {
    const Result r = run_mpi(2, common + "--plan " + plan + " -o " + dir.file("emulated"),
                             "VIDAX_SIMULATE_LINKS=h100-nvswitch-x8-ib-x2 "
                             "VIDAX_SIMULATE_PLACEMENT=0,8");
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_EQ(raw_frames(dir.file("emulated")), raw_frames(dir.file("planned")));
  }
  // The rankfile names a slot per rank.
  std::ifstream rf(rankfile);
  const std::string ranks((std::istreambuf_iterator<char>(rf)), {});
  EXPECT_NE(ranks.find("rank 0=localhost slot="), std::string::npos) << ranks;
  EXPECT_NE(ranks.find("rank 1=localhost slot="), std::string::npos) << ranks;
  // Refusals: another process count, a contradicting --mesh, --weights or --size; nothing
  // written.
  const std::string other = j["weights"] == "sharded" ? "resident" : "sharded";
  for (const auto& [n, extra, needle] :
       {std::tuple{3, std::string(""), std::string("is for 2 processes; this job has 3")},
        std::tuple{2, std::string("--mesh tp=2"), std::string("--mesh says tp=2")},
        std::tuple{2, "--weights " + other, "--weights says " + other},
        std::tuple{2, std::string("--size 96x64"), std::string("--size says 96x64")}}) {
    const Result r =
        run_mpi(n, common + "--plan " + plan + " " + extra + " -o " + dir.file("refused"));
    EXPECT_NE(r.code, 0) << extra;
    EXPECT_NE(r.out.find(needle), std::string::npos) << r.out;
    EXPECT_FALSE(std::filesystem::exists(dir.file("refused")));
  }
}

TEST(MeshCli, BenchDitCountsTheBytesTheCommunicationModelPredicts) {
  TempDir dir;
  const std::string model = write_random_dit(dir, 4, 2, 9);
  // 5 frames at 80x48: 2 x 6 x 5 = 60 tokens; 4 ranks: 15 rows each. bf16 and fp32.
  for (const std::string precision : {"bf16", "fp32"}) {
    for (const std::string mesh :
         {"ulysses=4", "cfg=2,ring=2", "ulysses=2,ring=2", "tp=4", "ulysses=2,tp=2"}) {
      const Result r = run_mpi(4, "bench dit --weights " + model +
                                      " --frames 5 --size 80x48 "
                                      "--iters 2 --warmup 0 --json --precision " +
                                      precision + " --mesh " + mesh);
      ASSERT_EQ(r.code, 0) << r.out;
      const auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
      EXPECT_EQ(j["mesh"], dist::parse_mesh_spec(mesh).str());
      for (const auto& [kind, bytes] : j["comm_model_bytes"].items()) {
        const double measured = j["comm_measured"].contains(kind)
                                    ? j["comm_measured"][kind]["bytes_sent"].get<double>()
                                    : 0.0;
        EXPECT_NEAR(measured, bytes.get<double>(), 1e-9 * bytes.get<double>() + 1e-9)
            << mesh << " " << precision << " " << kind;
      }
      EXPECT_GT(j["seconds_per_forward"].get<double>(), 0.0);
    }
  }
}

TEST(MeshCli, BenchCommReportsEveryCollectiveOfTheMesh) {
  const Result r = run_mpi(4,
                           "bench comm --mesh cfg=2,ulysses=2 --frames 1 --size 64x64 "
                           "--iters 2 --waits-compute-ms 1,4 --loaded-compute-ms 2 "
                           "--waits-rounds 1 --waits-point-seconds 0.01");
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string text = r.out.substr(r.out.find('{'));
  const auto j = nlohmann::json::parse(text);
  std::set<std::string> seen;
  for (const auto& c : j["block_collectives"]) {
    seen.insert(c["collective"].get<std::string>() + "@" + c["group"].get<std::string>());
    EXPECT_GT(c["seconds"].get<double>(), 0.0);
  }
  EXPECT_TRUE(seen.count("all_to_all@ulysses")) << r.out;
  EXPECT_TRUE(seen.count("all_gather@sp")) << r.out;
  EXPECT_TRUE(seen.count("all_gather@cfg")) << r.out;
  for (const char* kind : {"all_to_all", "all_gather", "send_recv", "all_reduce", "broadcast"})
    EXPECT_TRUE(j["alpha_beta"].contains(kind)) << kind;
  // The collectives between computing ranks: waits per group size (2 and 4 divide 4 ranks) at
  // growing compute, and every kind at three sizes per group size.
  std::map<int, std::vector<double>> computes;
  for (const auto& w : j["collective_waits"]) {
    computes[w["group"].get<int>()].push_back(w["compute_us"].get<double>());
    EXPECT_GE(w["wait_us"].get<double>(), 0.0);
  }
  ASSERT_EQ(computes.size(), 2u) << j["collective_waits"].dump();
  for (const auto& [group, c] : computes) {
    EXPECT_TRUE(group == 2 || group == 4) << group;
    EXPECT_FALSE(c.empty());
  }
  std::map<std::pair<std::string, int>, int> sizes;
  for (const auto& l : j["loaded_collectives"]) {
    ++sizes[{l["collective"].get<std::string>(), l["group"].get<int>()}];
    EXPECT_GE(l["loaded_us"].get<double>(), 0.0);
    EXPECT_GT(l["idle_us"].get<double>(), 0.0);
  }
  EXPECT_EQ(sizes.size(), 10u);  // 5 kinds x 2 group sizes
  for (const auto& [key, n] : sizes) EXPECT_EQ(n, 3) << key.first << "@" << key.second;
  // The planner takes them as the local topology's collective_fits and collective_waits.
  TempDir dir;
  const std::string comm = dir.file("comm.json"), topo = dir.file("local.json");
  const std::string model = write_model_folder(dir);
  std::ofstream(comm) << text;
  const Result p = vidax::testing::run_vidax(
      "plan --model " + model +
      " --topology local --devices 4 --size 64x64 --frames 5 --steps 3 --precision fp32 --comm " +
      comm + " --write-topology " + topo + " --json");
  ASSERT_EQ(p.code, 0) << p.out;
  std::ifstream in(topo);
  const auto t = nlohmann::json::parse(in);
  EXPECT_FALSE(t["collective_fits"].empty()) << t.dump();
  EXPECT_FALSE(t["collective_waits"].empty()) << t.dump();
  const auto plan = nlohmann::json::parse(p.out.substr(p.out.find('{')));
  EXPECT_TRUE(plan["predicted"].contains("waits_s")) << p.out;
  // The phases priced with the folder's own VAE, its convolutions and a real decode timed.
  EXPECT_GT(plan["predicted"]["phases"]["decode_s"].get<double>(), 0) << p.out;
  EXPECT_GT(t["device"]["efficiency"]["conv_fp32"].get<double>(), 0) << t.dump();
  // A malformed comm file is one line naming the flag.
  std::ofstream(comm) << R"({"alpha_beta":{"all_to_all":{"latency_seconds":1e-5,)"
                         R"("gbytes_per_second":1}},"collective_waits":[{"group":2}]})";
  const Result bad = vidax::testing::run_vidax("plan --model " + model +
                                               " --topology local --devices 4 --size 64x64 "
                                               "--frames 5 --comm " +
                                               comm);
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.out.find("--comm: expected the JSON of `vidax bench comm --json`"),
            std::string::npos)
      << bad.out;
  // A measurement of no time is refused, not taken as the default.
  const Result zero = run_mpi(2,
                              "bench comm --mesh ulysses=2 --frames 1 --size 64x64 "
                              "--waits-point-seconds 0");
  EXPECT_NE(zero.code, 0);
  EXPECT_NE(zero.out.find("--waits-point-seconds: expected a number in (0, 60], got 0"),
            std::string::npos)
      << zero.out;
}

// ---- Failures: a one-line error, non-zero exit of the job, no output file.

void expect_job_error(const Result& r, const std::string& needle, const std::string& out) {
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.out.find(needle), std::string::npos) << "expected '" << needle << "' in:\n" << r.out;
  EXPECT_FALSE(std::filesystem::exists(out)) << out;
}

int count_vidax_errors(const std::string& text) {
  int n = 0;
  for (size_t p = text.find("vidax: error:"); p != std::string::npos;
       p = text.find("vidax: error:", p + 1))
    ++n;
  return n;
}

TEST(MeshCli, BadMeshesAreRefusedBeforeAnyWork) {
  VIDAX_REQUIRE_FIXTURE(weights, "dit_t2v_tiny.weights.safetensors");
  TempDir dir;
  const std::string in = write_dit_inputs(dir, 1, 4, 4, false);
  const std::string out = dir.file("out.safetensors");
  const std::string common = "run dit --weights " + weights + " --in " + in + " --out " + out;
  struct Bad {
    int ranks;
    std::string mesh, needle;
  };
  for (const Bad& b : {Bad{2, "ulysses=4", "has 4 ranks, but the job has 2 processes"},
                       Bad{2, "pipeline=2", "unknown axis 'pipeline'"},
                       Bad{2, "ulysses=x", "needs a positive integer"},
                       Bad{3, "tp=3", "tp=3 does not divide the model's 2 attention heads"},
                       Bad{3, "ulysses=3", "does not divide the model's 2 attention heads"},
                       Bad{2, "cfg=2", "needs run denoise or generate"}}) {
    const Result r = run_mpi(b.ranks, common + " --mesh " + b.mesh);
    expect_job_error(r, b.needle, out);
    EXPECT_EQ(count_vidax_errors(r.out), 1) << b.mesh << ": one line from rank 0\n" << r.out;
  }
  // A command that does not split its work, started on two ranks.
  {
    const Result r = run_mpi(2, "inspect " + weights);
    expect_job_error(r, "'inspect' runs in one process", out);
    EXPECT_EQ(count_vidax_errors(r.out), 1) << r.out;
  }
  // One process asked for a two-rank mesh.
  expect_job_error(run_one(common + " --mesh cfg=2,ring=1"), "start it with mpirun -n 2", out);
}

TEST(MeshCli, RanksStartedWithDifferentArgumentsAreRefused) {
  VIDAX_REQUIRE_FIXTURE(weights, "dit_t2v_tiny.weights.safetensors");
  TempDir dir;
  const std::string in = write_dit_inputs(dir, 1, 4, 4, false);
  const std::string out = dir.file("out.safetensors");
  const std::string a =
      "run dit --weights " + weights + " --in " + in + " --out " + out + " --mesh ulysses=2";
  // MPMD: rank 0 and rank 1 get different --precision.
  const std::string cmd = std::string(VIDAX_MPIEXEC) +
                          " --allow-run-as-root --oversubscribe --bind-to none -x "
                          "OMP_NUM_THREADS=1 -n 1 " VIDAX_BINARY " " +
                          a + " : -n 1 " VIDAX_BINARY " " + a + " --precision bf16 2>&1";
  const Result r = vidax::testing::run_shell(cmd);
  expect_job_error(r, "the command-line arguments differ between rank 0 and rank(s) 1", out);
}

TEST(MeshCli, AnErrorOnOneRankEndsEveryRank) {
  VIDAX_REQUIRE_FIXTURE(weights, "dit_t2v_tiny.weights.safetensors");
  TempDir dir;
  // Same arguments, same file size and time, different content: rank 1 alone cannot read its
  // input (each rank runs in its own folder), after the ranks have already exchanged data.
  for (const char* sub : {"a", "b"}) std::filesystem::create_directories(dir.file(sub));
  const std::string good = write_dit_inputs(dir, 1, 4, 4, false);
  std::filesystem::copy_file(good, dir.file("a/in.safetensors"));
  std::filesystem::copy_file(good, dir.file("b/in.safetensors"));
  {
    std::fstream f(dir.file("b/in.safetensors"), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(0);
    f.write("\xff\xff\xff\xff\xff\xff\xff\x7f", 8);  // an impossible header length
  }
  vidax::testing::run_shell("touch -r " + dir.file("a/in.safetensors") + " " +
                            dir.file("b/in.safetensors"));
  const std::string out = dir.file("out.safetensors");
  const std::string a =
      "run dit --weights " + weights + " --in in.safetensors --out " + out + " --mesh ulysses=2";
  const std::string cmd = std::string(VIDAX_MPIEXEC) +
                          " --allow-run-as-root --oversubscribe --bind-to none -x "
                          "OMP_NUM_THREADS=1 -n 1 -wdir " +
                          dir.file("a") + " " VIDAX_BINARY " " + a + " : -n 1 -wdir " +
                          dir.file("b") + " " VIDAX_BINARY " " + a + " 2>&1";
  const auto t0 = std::chrono::steady_clock::now();
  const Result r = vidax::testing::run_shell("timeout 60 " + cmd);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 30.0);
  expect_job_error(r, "rank 1:", out);
  EXPECT_NE(r.code, 124) << "timed out: a rank waited forever";
}

// A denoise long enough to be interrupted (it is always killed or stopped long before its end):
// 4 heads, 8 x 16 x 16 latent (512 tokens), 5,000 steps.
struct LongRun {
  std::string model, in, out, args;
};
LongRun long_denoise(const TempDir& dir) {
  LongRun l;
  l.model = write_random_dit(dir, 4, 2, 5);
  Tensor noise =
      Tensor::from_floats(vidax::testing::random_floats(16 * 8 * 16 * 16, 3), Shape{16, 8, 16, 16});
  Tensor ctx = Tensor::from_floats(vidax::testing::random_floats(5 * 48, 4), Shape{5, 48});
  l.in = dir.file("long_in.safetensors");
  write_safetensors(l.in, {{"noise", noise}, {"context", ctx}, {"context_null", ctx}}, {});
  l.out = dir.file("long_out.safetensors");
  l.args = "run denoise --steps 5000 --weights " + l.model + " --in " + l.in + " --out " + l.out +
           " --mesh ulysses=2 --no-step-latents";
  return l;
}

// The pid of the world rank 1 process started by the job (children of mpirun run `vidax`).
std::string rank1_pid(const std::string& marker) {
  for (int i = 0; i < 100; ++i) {
    const Result r =
        vidax::testing::run_shell("for p in $(pgrep -f '" + marker +
                                  "'); do if tr '\\0' '\\n' < /proc/$p/environ 2>/dev/null"
                                  " | grep -qx OMPI_COMM_WORLD_RANK=1; then echo $p; fi; done");
    std::string pid = r.out.substr(0, r.out.find('\n'));
    if (!pid.empty()) return pid;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return "";
}

// Starts `args` (whose output is `out`) on two ranks, stops or kills rank 1 once it is well
// into its work, and checks that the whole job ends soon, with an error, and leaves neither the
// output nor a temporary next to it.
void interrupt_rank1(const TempDir& dir, const std::string& args, const std::string& out,
                     const std::string& signal, const std::string& needle) {
  const std::string cmd = "timeout 90 " + mpirun(2, args) + " > " + dir.file("log.txt") +
                          " 2>&1; echo $? > " + dir.file("rc.txt");
  std::thread job([&] { vidax::testing::run_shell(cmd); });
  const std::string pid = rank1_pid(out);
  if (pid.empty()) {
    job.join();
    std::ifstream log_file(dir.file("log.txt"));
    FAIL() << "rank 1 was not found running: "
           << std::string((std::istreambuf_iterator<char>(log_file)), {});
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // well into the steps
  const auto t0 = std::chrono::steady_clock::now();
  vidax::testing::run_shell("kill -" + signal + " " + pid);
  job.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::ifstream rc_file(dir.file("rc.txt"));
  int rc = -1;
  rc_file >> rc;
  std::ifstream log_file(dir.file("log.txt"));
  const std::string log((std::istreambuf_iterator<char>(log_file)), {});
  EXPECT_NE(rc, 0) << log;
  EXPECT_NE(rc, 124) << "the job outlived the timeout\n" << log;
  EXPECT_LT(seconds, 30.0) << log;
  EXPECT_FALSE(std::filesystem::exists(out));
  const std::string base = std::filesystem::path(out).filename().string();
  for (const auto& e : std::filesystem::directory_iterator(dir.file("")))
    EXPECT_NE(e.path().filename().string().rfind(base, 0), 0u) << "left behind: " << e.path();
  if (!needle.empty()) {
    EXPECT_NE(log.find(needle), std::string::npos) << log;
  }
  vidax::testing::run_shell("kill -9 " + pid + " 2>/dev/null");
}

TEST(MeshCli, AKilledRankEndsTheJobWithoutOutput) {
  TempDir dir;
  const LongRun l = long_denoise(dir);
  interrupt_rank1(dir, l.args, l.out, "9", "");
}

TEST(MeshCli, AStoppedRankIsCaughtByTheCollectiveTimeout) {
  TempDir dir;
  const LongRun l = long_denoise(dir);
  interrupt_rank1(dir, l.args + " --dist-timeout 3", l.out, "STOP", "did not complete within 3 s");
}

TEST(MeshCli, AKilledRankDuringGenerateLeavesNoVideo) {
  TempDir dir;
  const std::string model = write_model_folder(dir);
  // 1,280 tokens, 1,000 steps: long enough to be interrupted while the MP4's temporary exists.
  const std::string out = dir.file("gen.mp4");
  interrupt_rank1(dir,
                  "generate --model " + model +
                      " --prompt 'a red square' --size 256x256 --frames 17 --steps 1000 "
                      "--no-hash --mesh cfg=2 -o " +
                      out,
                  out, "9", "");
}

}  // namespace
}  // namespace vidax
