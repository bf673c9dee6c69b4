// Temporary registry: registration bookkeeping, what the cleanup removes (and what it leaves),
// and the installed handler in a real process killed by SIGTERM.
#include "io/temp_paths.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "io/atomic_file.h"
#include "io/safetensors_test_util.h"
#include "io/video_test_util.h"
#include "support/test_support.h"

namespace vidax {
namespace {

namespace fs = std::filesystem;
using testing::list_dir;
using testing::TempDir;

void touch(const std::string& path) { std::ofstream(path) << "x"; }

TEST(TempPaths, GuardsRegisterMoveAndRelease) {
  ASSERT_EQ(registered_temp_path_count(), 0u);
  {
    TempPathGuard a = TempPathGuard::file("/nonexistent/a");
    EXPECT_TRUE(a.active());
    EXPECT_EQ(registered_temp_path_count(), 1u);
    TempPathGuard b = std::move(a);
    EXPECT_FALSE(a.active());  // NOLINT(bugprone-use-after-move): checking the moved-from state
    EXPECT_EQ(registered_temp_path_count(), 1u);
    TempPathGuard c = TempPathGuard::numbered_folder("/nonexistent/f", "frame_", ".png", 5);
    EXPECT_EQ(registered_temp_path_count(), 2u);
    c.release();
    c.release();
    EXPECT_EQ(registered_temp_path_count(), 1u);
  }
  EXPECT_EQ(registered_temp_path_count(), 0u);
}

// The atomic writer behind safetensors/.pth output registers its temporary until it commits,
// so an interrupted checkpoint write leaves no stray ".tmp.<pid>" file.
TEST(TempPaths, AtomicFileRegistersItsTemporaryUntilCommit) {
  TempDir dir;
  ASSERT_EQ(registered_temp_path_count(), 0u);
  {
    AtomicFile f(dir.file("out.bin"));
    EXPECT_EQ(registered_temp_path_count(), 1u);
    f.write_all("abc", 3);
    f.commit();
    EXPECT_EQ(registered_temp_path_count(), 0u);
  }
  {
    AtomicFile f(dir.file("never.bin"));
    EXPECT_EQ(registered_temp_path_count(), 1u);
    remove_registered_temp_paths();  // what the signal handler does
    EXPECT_EQ(list_dir(dir.path()), std::vector<std::string>{"out.bin"});
  }
  EXPECT_EQ(registered_temp_path_count(), 0u);
}

TEST(TempPaths, CleanupRemovesRegisteredFilesAndNumberedFoldersOnly) {
  TempDir dir;
  touch(dir.file("a.tmp"));
  touch(dir.file("keep"));
  fs::create_directory(dir.file("f.tmp"));
  for (const char* name : {"frame_00000.png", "frame_00001.png", "frame_00002.png"})
    touch(dir.file(std::string("f.tmp/") + name));
  fs::create_directory(dir.file("big.tmp"));
  touch(dir.file("big.tmp/x1234.bin"));  // index wider than the padding
  {
    TempPathGuard a = TempPathGuard::file(dir.file("a.tmp"));
    TempPathGuard f = TempPathGuard::numbered_folder(dir.file("f.tmp"), "frame_", ".png", 5);
    f.set_file_count(3);
    TempPathGuard big = TempPathGuard::numbered_folder(dir.file("big.tmp"), "x", ".bin", 2);
    big.set_file_count(1235);
    TempPathGuard gone = TempPathGuard::file(dir.file("never-created"));  // ENOENT is fine
    remove_registered_temp_paths();
  }
  EXPECT_EQ(list_dir(dir.path()), std::vector<std::string>{"keep"});
}

TEST(TempPaths, FolderWithFilesBeyondTheCountIsNotRemoved) {
  // The handler only unlinks the names it was told about; rmdir then fails on the rest, which
  // leaves a foreign file alone rather than deleting it.
  TempDir dir;
  fs::create_directory(dir.file("f.tmp"));
  touch(dir.file("f.tmp/frame_00000.png"));
  touch(dir.file("f.tmp/frame_00001.png"));
  {
    TempPathGuard f = TempPathGuard::numbered_folder(dir.file("f.tmp"), "frame_", ".png", 5);
    f.set_file_count(1);
    remove_registered_temp_paths();
  }
  EXPECT_EQ(list_dir(dir.file("f.tmp")), std::vector<std::string>{"frame_00001.png"});
}

TEST(TempPaths, TemporaryNamesAndLimits) {
  const std::string pid = std::to_string(::getpid());
  EXPECT_EQ(temp_path_for("out/clip.mp4"), "out/clip.mp4.tmp." + pid);
  EXPECT_EQ(temp_path_for("out/frames//"), "out/frames.tmp." + pid);
  const std::string long_path(5000, 'a');
  EXPECT_TRUE(testing::throws_input_error([&] { TempPathGuard::file(long_path); }, {"5000"}));
  EXPECT_EQ(registered_temp_path_count(), 0u);
}

TEST(TempPaths, RegistryFullIsAnInputError) {
  std::vector<TempPathGuard> guards;
  EXPECT_TRUE(testing::throws_input_error(
      [&] {
        for (int i = 0; i < 1000; ++i)
          guards.push_back(TempPathGuard::file("/x/" + std::to_string(i)));
      },
      {"at once"}));
  EXPECT_GE(guards.size(), 8u);
  guards.clear();
  EXPECT_EQ(registered_temp_path_count(), 0u);
}

TEST(TempPaths, SigtermHandlerRemovesTemporariesAndDiesOfTheSignal) {
  TempDir dir, side;
  const pid_t pid = testing::spawn_child("registry", dir.path(), side.file("log"));
  ASSERT_GT(pid, 0);
  const int status = testing::wait_child(pid, 60);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM)
      << "status " << status << "\n"
      << testing::read_bytes(side.file("log"));
  EXPECT_EQ(list_dir(dir.path()), std::vector<std::string>{"keep"});
}

}  // namespace
}  // namespace vidax
