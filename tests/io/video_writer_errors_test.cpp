// VideoWriter input checks and atomicity: bad paths/specs/frames are InputErrors naming the path;
// a writer that is destroyed early, or fails mid-way (destination removed, file-size limit),
// leaves neither the target nor a temporary; Ctrl-C (SIGINT) during a write leaves nothing.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "io/safetensors_test_util.h"
#include "io/temp_paths.h"
#include "io/video_test_util.h"
#include "io/video_writer.h"
#include "support/test_support.h"

namespace vidax {
namespace {

namespace fs = std::filesystem;
using testing::list_dir;
using testing::smooth_frames;
using testing::TempDir;
using testing::throws_input_error;

VideoSpec spec_of(int64_t w, int64_t h, int crf = -1) {
  VideoSpec spec;
  spec.width = w;
  spec.height = h;
  spec.crf = crf;
  return spec;
}

const char* const kTargets[] = {"clip.mp4", "clip.webm", "frames/"};

TEST(VideoWriterErrors, UnsupportedPathsNameTheAcceptedForms) {
  TempDir dir;
  for (const std::string name : {"clip.avi", "clip.gif", "still.png"}) {
    EXPECT_TRUE(throws_input_error([&] { VideoWriter::open(dir.file(name), spec_of(64, 48)); },
                                   {dir.file(name), ".mp4", ".webm", "PNG"}));
  }
  EXPECT_TRUE(throws_input_error([] { VideoWriter::open("", spec_of(64, 48)); }, {"empty"}));
  EXPECT_EQ(video_format_for_path("a/b.MP4"), VideoFormat::kMp4);
  EXPECT_EQ(video_format_for_path("a.v2/out"), VideoFormat::kPngFolder);
  EXPECT_EQ(video_format_for_path("out.webm/"), VideoFormat::kPngFolder);
  EXPECT_TRUE(list_dir(dir.path()).empty());
}

TEST(VideoWriterErrors, BadSpecs) {
  TempDir dir;
  const std::string mp4 = dir.file("clip.mp4"), webm = dir.file("clip.webm");
  EXPECT_TRUE(
      throws_input_error([&] { VideoWriter::open(mp4, spec_of(65, 48)); }, {mp4, "65x48", "even"}));
  EXPECT_TRUE(
      throws_input_error([&] { VideoWriter::open(webm, spec_of(64, 47)); }, {webm, "even"}));
  EXPECT_TRUE(throws_input_error([&] { VideoWriter::open(mp4, spec_of(0, 48)); }, {"0x48"}));
  EXPECT_TRUE(throws_input_error([&] { VideoWriter::open(mp4, spec_of(64, 48, 52)); },
                                 {"crf", "[0, 51]", "52"}));
  EXPECT_TRUE(throws_input_error([&] { VideoWriter::open(webm, spec_of(64, 48, 64)); },
                                 {"crf", "[0, 63]"}));
  VideoSpec spec = spec_of(64, 48);
  spec.fps = 0;
  EXPECT_TRUE(throws_input_error([&] { VideoWriter::open(mp4, spec); }, {"fps"}));
  spec.fps = std::nan("");
  EXPECT_TRUE(throws_input_error([&] { VideoWriter::open(mp4, spec); }, {"fps"}));
  EXPECT_TRUE(list_dir(dir.path()).empty());
}

TEST(VideoWriterErrors, WrongFramesAreRejectedAndTheWriterStaysUsable) {
  TempDir dir;
  for (const std::string name : kTargets) {
    auto writer = VideoWriter::open(dir.file(name), spec_of(64, 48));
    EXPECT_TRUE(throws_input_error([&] { writer->write(smooth_frames(1, 48, 32)); },
                                   {"[3, n, 48, 64]", "[3, 1, 48, 32]"}));
    EXPECT_TRUE(throws_input_error([&] { writer->write(Tensor::zeros({3, 48, 64})); }, {"48"}));
    EXPECT_TRUE(throws_input_error(
        [&] {
          writer->write(Tensor::zeros({3, 1, 48, 64}, DType::kI32));
        },
        {"I32"}));
    writer->write(smooth_frames(2, 48, 64).to(DType::kBF16));  // widened to f32
    writer->write(smooth_frames(0, 48, 64));                   // nothing to do
    EXPECT_EQ(writer->frames_written(), 2);
    writer->finish();
    EXPECT_TRUE(fs::exists(dir.file(name))) << name;
  }
}

TEST(VideoWriterErrors, FinishWithoutFramesLeavesNothing) {
  TempDir dir;
  for (const std::string name : kTargets) {
    auto writer = VideoWriter::open(dir.file(name), spec_of(64, 48));
    EXPECT_TRUE(throws_input_error([&] { writer->finish(); }, {"no frames"}));
    writer.reset();
    EXPECT_TRUE(list_dir(dir.path()).empty()) << name;
  }
  EXPECT_EQ(registered_temp_path_count(), 0u);
}

TEST(VideoWriterErrors, DestroyedWithoutFinishLeavesNothing) {
  TempDir dir;
  for (const std::string name : kTargets) {
    auto writer = VideoWriter::open(dir.file(name), spec_of(64, 48));
    writer->write(smooth_frames(5, 48, 64));
    // The temporary exists and is registered while writing...
    EXPECT_EQ(
        list_dir(dir.path()),
        std::vector<std::string>{fs::path(temp_path_for(dir.file(name))).filename().string()});
    EXPECT_EQ(registered_temp_path_count(), 1u);
    writer.reset();
    // ...and is gone, with nothing at the target, once the writer is dropped.
    EXPECT_TRUE(list_dir(dir.path()).empty()) << name;
    EXPECT_EQ(registered_temp_path_count(), 0u);
  }
}

TEST(VideoWriterErrors, PngFolderTargetMustBeEmptyOrAbsent) {
  TempDir dir;
  fs::create_directory(dir.file("full"));
  std::ofstream(dir.file("full/keep.txt")) << "x";
  EXPECT_TRUE(throws_input_error([&] { VideoWriter::open(dir.file("full/"), spec_of(8, 8)); },
                                 {dir.file("full"), "not empty"}));
  std::ofstream(dir.file("plain")) << "x";
  EXPECT_TRUE(throws_input_error([&] { VideoWriter::open(dir.file("plain/"), spec_of(8, 8)); },
                                 {"not a folder"}));
  EXPECT_EQ(list_dir(dir.path()), (std::vector<std::string>{"full", "plain"}));
  EXPECT_EQ(list_dir(dir.file("full")), std::vector<std::string>{"keep.txt"});
}

TEST(VideoWriterErrors, UnwritableLocationIsAnInputErrorNamingThePath) {
  // Running as root makes permission bits moot, so the parent is a regular file (ENOTDIR).
  TempDir dir;
  std::ofstream(dir.file("file")) << "x";
  for (const std::string name : kTargets) {
    const std::string path = dir.file("file/" + name);
    EXPECT_TRUE(throws_input_error([&] { VideoWriter::open(path, spec_of(64, 48)); }, {path}));
  }
  EXPECT_EQ(list_dir(dir.path()), std::vector<std::string>{"file"});
  EXPECT_EQ(registered_temp_path_count(), 0u);
}

TEST(VideoWriterErrors, DestinationRemovedMidwayFailsCleanly) {
  TempDir dir;
  for (const std::string name : kTargets) {
    const std::string sub = dir.file("sub");
    fs::create_directory(sub);
    auto writer = VideoWriter::open(sub + "/" + name, spec_of(64, 48));
    writer->write(smooth_frames(5, 48, 64));
    fs::remove_all(sub);
    EXPECT_TRUE(throws_input_error(
        [&] {
          writer->write(smooth_frames(4, 48, 64));
          writer->finish();
        },
        {sub + "/" + name}));
    writer.reset();
    EXPECT_FALSE(fs::exists(sub)) << name;
    EXPECT_TRUE(list_dir(dir.path()).empty()) << name;
  }
  EXPECT_EQ(registered_temp_path_count(), 0u);
}

// ---- child processes -------------------------------------------------------------------------

std::string child_arg() {
  const char* arg = std::getenv("VIDAX_VIDEO_CHILD_ARG");
  return arg ? arg : "";
}

// Only meaningful inside a child started by spawn_child: the tests below run it.
TEST(VideoWriterChild, DISABLED_Helper) {
  const char* mode_env = std::getenv("VIDAX_VIDEO_CHILD");
  if (mode_env == nullptr) GTEST_SKIP() << "helper for the child-process tests";
  const std::string mode = mode_env;
  if (mode.rfind("signal ", 0) == 0) {
    // "signal <target>", arg = marker file: write until killed, marker after the first frame.
    install_temp_cleanup_handlers();
    auto writer = VideoWriter::open(mode.substr(7), spec_of(64, 48));
    for (int i = 0; i < 100000; ++i) {
      writer->write(smooth_frames(1, 48, 64, i));
      if (i == 0) std::ofstream(child_arg()) << "started";
    }
    ADD_FAILURE() << "was not killed";
  } else if (mode.rfind("fsize ", 0) == 0) {
    // "fsize <target>": files may not grow past 16 KiB; the writer must fail and clean up.
    const std::string target = mode.substr(6);
    ::signal(SIGXFSZ, SIG_IGN);  // write() then fails with EFBIG instead of killing us
    rlimit limit{16384, 16384};
    ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limit), 0);
    bool failed = false;
    try {
      auto writer = VideoWriter::open(target, spec_of(128, 96));
      for (int i = 0; i < 200; ++i) writer->write(testing::noise_frames(1, 96, 128, i));
      writer->finish();
    } catch (const InputError& e) {
      failed = true;
      EXPECT_NE(std::string(e.what()).find(target), std::string::npos) << e.what();
    }
    EXPECT_TRUE(failed) << "a 16 KiB file-size limit did not stop 200 noise frames";
    EXPECT_TRUE(list_dir(fs::path(target).parent_path()).empty());
  } else if (mode == "registry") {
    // arg = folder: registers a file and a numbered folder, leaves "keep" alone, then SIGTERM.
    const std::string dir = child_arg();
    for (const char* name : {"a.tmp", "keep"}) std::ofstream(dir + "/" + name) << "x";
    fs::create_directory(dir + "/f.tmp");
    std::ofstream(dir + "/f.tmp/frame_00000.png") << "x";
    TempPathGuard a = TempPathGuard::file(dir + "/a.tmp");
    TempPathGuard f = TempPathGuard::numbered_folder(dir + "/f.tmp", "frame_", ".png", 5);
    f.set_file_count(1);
    install_temp_cleanup_handlers();
    ::raise(SIGTERM);
    ADD_FAILURE() << "survived SIGTERM";
  } else {
    FAIL() << "unknown child mode " << mode;
  }
}

TEST(VideoWriterErrors, InterruptedBySigintLeavesNothing) {
  for (const std::string name : {"clip.mp4", "frames/"}) {
    TempDir dir, side;
    const std::string marker = side.file("started"), log = side.file("log");
    const pid_t pid = testing::spawn_child("signal " + dir.file(name), marker, log);
    ASSERT_GT(pid, 0);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!fs::exists(marker) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    ASSERT_TRUE(fs::exists(marker)) << "child never started writing";
    // Mid-write: the temporary exists (and for PNG holds frames).
    const auto before = list_dir(dir.path());
    ASSERT_EQ(before.size(), 1u);
    EXPECT_NE(before[0].find(".tmp." + std::to_string(pid)), std::string::npos) << before[0];
    ::kill(pid, SIGINT);
    const int status = testing::wait_child(pid, 60);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGINT)
        << name << ": status " << status << "\n"
        << testing::read_bytes(log);
    EXPECT_TRUE(list_dir(dir.path()).empty()) << name;
  }
}

TEST(VideoWriterErrors, FileSizeLimitMidwayLeavesNothing) {
  for (const std::string name : kTargets) {
    TempDir dir, side;
    const std::string log = side.file("log");
    const pid_t pid = testing::spawn_child("fsize " + dir.file(name), "", log);
    ASSERT_GT(pid, 0);
    const int status = testing::wait_child(pid, 120);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << name << ": status " << status << "\n"
        << testing::read_bytes(log);
    EXPECT_TRUE(list_dir(dir.path()).empty()) << name;
  }
}

}  // namespace
}  // namespace vidax
