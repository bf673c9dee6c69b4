// End to end `generate --rollout` (docs/rollout.md): a tiny random causal model in
// Self-Forcing's folder layout (and its checkpoint given to a plain Wan folder with --dit) rolls
// out into a real video, chunk by chunk, with a global and a rolling cache; --seconds picks whole
// chunks; bad requests get one line and no output; Ctrl-C publishes the chunks finished so far
// as a playable video and exits 130.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>

#include "support/test_support.h"

namespace vidax {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using vidax::testing::TempDir;
using Result = vidax::testing::CommandResult;
using vidax::testing::run_shell;
inline Result vidax(const std::string& args) { return vidax::testing::run_vidax(args); }

std::string tokenizer() {
  return std::string(VIDAX_SOURCE_DIR) + "/tests/data/tokenizer/spiece.model";
}

// One model folder per layout for the test process: "self-forcing" (causal) or "official".
std::string model_dir(const std::string& layout) {
  static TempDir root;
  const std::string dir = root.file(layout);
  if (!fs::exists(dir)) {
    const Result r =
        vidax("random-model " + dir + " --layout " + layout + " --tokenizer " + tokenizer() +
              " --heads 2 --seed 5" + (layout == "self-forcing" ? " --causal" : ""));
    EXPECT_EQ(r.code, 0) << r.out;
  }
  return dir;
}

int64_t probe_frames(const std::string& path) {
  const Result r = run_shell(
      "ffprobe -v error -count_frames -show_entries stream=nb_read_frames "
      "-of csv=p=0 " +
      path);
  EXPECT_EQ(r.code, 0) << r.out;
  return std::stoll(r.out);
}

json sidecar(const std::string& video) {
  std::ifstream in(video + ".json");
  return json::parse(in, nullptr, false);
}

TEST(RolloutCli, SelfForcingFolderRollsOutChunkByChunk) {
  TempDir out;
  const std::string dir = model_dir("self-forcing");
  const Result info = vidax("inspect " + dir);
  ASSERT_EQ(info.code, 0) << info.out;
  EXPECT_NE(info.out.find("self-forcing layout"), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("causal"), std::string::npos) << info.out;
  const Result r = vidax("generate --model " + dir +
                         " --rollout --prompt 'a red ball' --size 64x64 --frames 21 --seed 4"
                         " --no-hash -o " +
                         out.file("a.mp4"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(probe_frames(out.file("a.mp4")), 21);
  const json s = sidecar(out.file("a.mp4"));
  EXPECT_EQ(s["rollout"]["chunks_written"], 2);
  EXPECT_EQ(s["rollout"]["interrupted"], false);
  EXPECT_EQ(s["plan"]["rollout"]["cache"], "global");
  EXPECT_EQ(s["plan"]["rollout"]["timesteps"],
            json::array({1000.0f, 937.5f, 833.33331298828125f, 625.0f}));
  EXPECT_EQ(s["plan"]["dit"]["layout"], "self-forcing");
  EXPECT_TRUE(s["negative_prompt"].is_null());

  // The same checkpoint given to a plain Wan folder with --dit: the same video.
  const Result d = vidax("generate --model " + model_dir("official") + " --dit " + dir +
                         "/checkpoints/self_forcing_dmd.pt --rollout --prompt 'a red ball' "
                         "--size 64x64 --frames 21 --seed 4 --no-hash -o " +
                         out.file("b.mp4"));
  ASSERT_EQ(d.code, 0) << d.out;
  // The official folder's umT5 and VAE have the same random weights (same seed), so the frames
  // match exactly: compare the decoded frames' checksums.
  const Result ha = run_shell("ffmpeg -v error -i " + out.file("a.mp4") + " -f md5 -");
  const Result hb = run_shell("ffmpeg -v error -i " + out.file("b.mp4") + " -f md5 -");
  EXPECT_EQ(ha.out, hb.out);
}

TEST(RolloutCli, SecondsPickWholeChunksAndTheCacheRolls) {
  TempDir out;
  const std::string dir = model_dir("self-forcing");
  // 2 s at 16 fps: 32 frames -> 3 chunks (4 x 3 x 3 - 3 = 33 frames); a window of 4 latent
  // frames with 1 sink frame rolls from the second chunk on.
  const Result r = vidax("generate --model " + dir +
                         " --rollout --prompt x --size 64x64 --seconds 2 --local-attn-size 4"
                         " --sink-size 1 --seed 1 --no-hash -o " +
                         out.file("r.mp4"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(probe_frames(out.file("r.mp4")), 33);
  const json s = sidecar(out.file("r.mp4"));
  EXPECT_EQ(s["plan"]["rollout"]["cache"], "rolling");
  EXPECT_EQ(s["plan"]["rollout"]["cache_frames"], 4);
  EXPECT_EQ(s["plan"]["rollout"]["sink_frames"], 1);
  EXPECT_EQ(s["rollout"]["chunks_written"], 3);
}

void expect_refused(const std::string& args, const std::string& needle) {
  TempDir out;
  const Result r =
      vidax("generate " + args + " --prompt x --size 64x64 --no-hash -o " + out.file("x.mp4"));
  EXPECT_EQ(r.code, 1) << args << "\n" << r.out;
  EXPECT_NE(r.out.find(needle), std::string::npos) << args << "\n" << r.out;
  EXPECT_TRUE(fs::is_empty(out.path())) << args;
}

TEST(RolloutCli, BadRequestsAreRefusedWithOneLine) {
  const std::string sf = "--model " + model_dir("self-forcing");
  const std::string plain = "--model " + model_dir("official");
  expect_refused(plain + " --rollout --frames 21", "bidirectional");
  expect_refused(sf + " --frames 21", "--rollout");  // a causal DiT sampled bidirectionally
  expect_refused(sf + " --rollout --frames 13", "do not divide");
  expect_refused(sf + " --rollout --frames 21 --local-attn-size 3 --sink-size 1", "cannot hold");
  expect_refused(sf + " --frames 21 --seconds 2", "--seconds");
  expect_refused(sf + " --frames 21 --force-causal", "--force-causal");
  expect_refused(sf + " --rollout --frames 21 --rollout-steps 1000,x", "--rollout-steps");
  expect_refused(sf + " --rollout --frames 21 --attention svg", "dense attention or pbsa");
  // A bidirectional DiT rolls out when asked explicitly (mechanics only).
  TempDir out;
  const Result r = vidax("generate " + plain +
                         " --rollout --force-causal --prompt x --size 64x64"
                         " --frames 9 --no-hash -o " +
                         out.file("f.mp4"));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(probe_frames(out.file("f.mp4")), 9);
}

TEST(RolloutCli, CtrlCPublishesTheFinishedChunks) {
  TempDir out;
  // 340 chunks of a tiny model: long enough to be interrupted well before its end.
  const std::string cmd =
      std::string(VIDAX_BINARY) + " generate --model " + model_dir("self-forcing") +
      " --rollout --progress --prompt x --size 64x64 --frames 4077 --no-hash -o " +
      out.file("long.mp4");
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", ("exec " + cmd + " >" + out.file("log.txt") + " 2>&1").c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  // Interrupt once the progress line reports frames written (the first chunk is out, so the
  // graceful handler is armed), however slow the machine is at the moment.
  const std::regex written("rollout  [1-9][0-9]*/");
  bool started = false;
  for (int i = 0; i < 2400 && !started; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::ifstream log_now(out.file("log.txt"));
    const std::string text((std::istreambuf_iterator<char>(log_now)), {});
    started = std::regex_search(text, written);
  }
  ASSERT_TRUE(started) << "the run never reported a written chunk";
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  std::ifstream log_file(out.file("log.txt"));
  const std::string log((std::istreambuf_iterator<char>(log_file)), {});
  ASSERT_TRUE(WIFEXITED(status)) << "status " << status << "\n" << log;
  EXPECT_EQ(WEXITSTATUS(status), 130) << log;
  EXPECT_NE(log.find("interrupted: wrote"), std::string::npos) << log;
  ASSERT_TRUE(fs::exists(out.file("long.mp4"))) << log;
  const int64_t frames = probe_frames(out.file("long.mp4"));
  EXPECT_GT(frames, 0);
  EXPECT_LT(frames, 4077);
  EXPECT_EQ((frames + 3) % 12, 0) << frames << " frames: not whole chunks";
  const json s = sidecar(out.file("long.mp4"));
  EXPECT_EQ(s["rollout"]["interrupted"], true);
  EXPECT_EQ(s["frames"], frames);
  EXPECT_EQ(s["rollout"]["chunks_written"], (frames + 3) / 12);
}

}  // namespace
}  // namespace vidax
