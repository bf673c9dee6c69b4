// Progress display: exact output on a memory stream with an injected clock (no sleeping):
// TTY redraws, moving average and ETA arithmetic, throttled plain lines, messages, disabled mode.
#include "pipeline/progress.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace vidax {
namespace {

// A FILE* writing into memory, readable at any time.
class MemoryOut {
 public:
  MemoryOut() : file_(open_memstream(&buffer_, &size_)) {}
  ~MemoryOut() {
    std::fclose(file_);
    std::free(buffer_);
  }
  FILE* file() const { return file_; }
  std::string text() {
    std::fflush(file_);
    return std::string(buffer_, size_);
  }
  // What was written since the last call.
  std::string take() {
    const std::string all = text();
    const std::string fresh = all.substr(consumed_);
    consumed_ = all.size();
    return fresh;
  }

 private:
  char* buffer_ = nullptr;
  size_t size_ = 0;
  FILE* file_;
  size_t consumed_ = 0;
};

struct FakeClock {
  double now = 100.0;
  ProgressOptions options(bool tty, double interval = 5.0) {
    ProgressOptions o;
    o.tty = tty;
    o.clock = [this] { return now; };
    o.plain_interval_s = interval;
    return o;
  }
};

TEST(Progress, FormatsDurations) {
  EXPECT_EQ(Progress::format_duration(0), "0.0s");
  EXPECT_EQ(Progress::format_duration(4.26), "4.3s");
  EXPECT_EQ(Progress::format_duration(59.94), "59.9s");
  EXPECT_EQ(Progress::format_duration(59.96), "1:00");
  EXPECT_EQ(Progress::format_duration(125.4), "2:05");
  EXPECT_EQ(Progress::format_duration(3723), "1:02:03");
  EXPECT_EQ(Progress::format_duration(-3), "0.0s");
  EXPECT_EQ(Progress::format_duration(std::nan("")), "0.0s");
}

TEST(Progress, TtyRedrawsOneLineWithRateEtaAndElapsed) {
  MemoryOut out;
  FakeClock clock;
  Progress progress(out.file(), true, clock.options(true));
  progress.begin_phase("denoise", 4);
  EXPECT_EQ(out.take(), "\rdenoise  0/4  elapsed 0.0s");
  clock.now += 2;
  progress.tick(1, 2.0);
  EXPECT_EQ(out.take(), "\rdenoise  1/4  2.00 s/step  ETA 6.0s  elapsed 2.0s");
  clock.now += 4;
  progress.tick(2, 4.0);  // mean of 2 and 4 = 3 s/step, 2 steps left
  EXPECT_EQ(out.take(), "\rdenoise  2/4  3.00 s/step  ETA 6.0s  elapsed 6.0s");
  clock.now += 3;
  progress.tick(4, 3.0);  // jumped to the end: no ETA
  // Shorter than the previous line: blanks cover the old tail.
  const std::string line = "denoise  4/4  3.00 s/step  elapsed 9.0s";
  const std::string previous = "denoise  2/4  3.00 s/step  ETA 6.0s  elapsed 6.0s";
  EXPECT_EQ(out.take(), "\r" + line + std::string(previous.size() - line.size(), ' '));
  clock.now += 1;
  progress.end_phase();
  // Final rate: elapsed / units (10 s / 4).
  const std::string final_line = "denoise  4/4  2.50 s/step  done in 10.0s";
  ASSERT_GT(final_line.size(), line.size());  // longer: nothing to blank
  EXPECT_EQ(out.take(), "\r" + final_line + "\n");
  progress.end_phase();  // no phase: nothing
  EXPECT_EQ(out.take(), "");
}

TEST(Progress, MovingAverageUsesTheLastFiveUnits) {
  MemoryOut out;
  FakeClock clock;
  Progress progress(out.file(), true, clock.options(true));
  progress.begin_phase("denoise", 50);
  const double units[] = {30, 10, 10, 10, 10, 10, 20};  // slow first step falls out of the window
  for (int i = 0; i < 7; ++i) progress.tick(i + 1, units[i]);
  EXPECT_DOUBLE_EQ(progress.seconds_per_unit(), 12.0);  // (10+10+10+10+20)/5
  EXPECT_DOUBLE_EQ(progress.eta_seconds(), 12.0 * 43);
  EXPECT_NE(out.take().find("denoise  7/50  12.0 s/step  ETA 8:36  elapsed 0.0s"),
            std::string::npos);
  progress.tick(50, 1.0);
  EXPECT_DOUBLE_EQ(progress.eta_seconds(), 0.0);
}

TEST(Progress, PlainModePrintsAtMostEveryIntervalAndAtTheEnd) {
  MemoryOut out;
  FakeClock clock;
  Progress progress(out.file(), true, clock.options(false, 5.0));
  progress.begin_phase("decode", 10, "chunk");
  EXPECT_EQ(out.take(), "decode  0/10  elapsed 0.0s\n");
  std::string printed;
  for (int i = 1; i <= 10; ++i) {
    clock.now += 2;
    progress.tick(i, 2.0);
    printed += out.take();
  }
  // Lines at 6 s (i = 3) and 12 s (i = 6) and 18 s (i = 9); the last unit only via end_phase.
  EXPECT_EQ(printed,
            "decode  3/10  2.00 s/chunk  ETA 14.0s  elapsed 6.0s\n"
            "decode  6/10  2.00 s/chunk  ETA 8.0s  elapsed 12.0s\n"
            "decode  9/10  2.00 s/chunk  ETA 2.0s  elapsed 18.0s\n");
  EXPECT_EQ(printed.find('\r'), std::string::npos);
  progress.end_phase();
  EXPECT_EQ(out.take(), "decode  10/10  2.00 s/chunk  done in 20.0s\n");
}

TEST(Progress, MessagesClearAndRedrawTheTtyLine) {
  MemoryOut out;
  FakeClock clock;
  Progress progress(out.file(), true, clock.options(true));
  progress.message("loading");  // no phase: just the line
  EXPECT_EQ(out.take(), "loading\n");
  progress.begin_phase("encode text", 1);
  out.take();
  const std::string line = "encode text  0/1  elapsed 0.0s";
  progress.message("prompt has 12 tokens");
  // Built with += (GCC 12 warns a false -Wrestrict on "literal" + std::string&&).
  std::string want = "\r";
  want += std::string(line.size(), ' ');
  want += "\rprompt has 12 tokens\n\r";
  want += line;
  EXPECT_EQ(out.take(), want);
}

TEST(Progress, NextPhaseEndsThePreviousOne) {
  MemoryOut out;
  FakeClock clock;
  Progress progress(out.file(), true, clock.options(false));
  progress.begin_phase("encode text", 1);
  clock.now += 1.5;
  progress.tick(1, 1.5);
  progress.begin_phase("denoise", 2);
  EXPECT_EQ(out.take(),
            "encode text  0/1  elapsed 0.0s\n"
            "encode text  1/1  1.50 s/step  done in 1.5s\n"
            "denoise  0/2  elapsed 0.0s\n");
}

TEST(Progress, DisabledPrintsOnlyMessages) {
  MemoryOut out;
  FakeClock clock;
  {
    Progress progress(out.file(), false, clock.options(true));
    progress.begin_phase("denoise", 3);
    progress.tick(1, 1.0);
    progress.message("saved out.mp4");
    progress.end_phase();
  }
  EXPECT_EQ(out.text(), "saved out.mp4\n");
}

TEST(Progress, DestroyedMidPhaseEndsTheLineWithoutClaimingDone) {
  MemoryOut out;
  FakeClock clock;
  {
    Progress progress(out.file(), true, clock.options(true));
    progress.begin_phase("denoise", 3);
    progress.tick(1, 1.0);
  }
  const std::string text = out.text();
  EXPECT_EQ(text.back(), '\n');
  EXPECT_EQ(text.find("done"), std::string::npos);
}

TEST(Progress, DefaultConstructorDetectsNoTerminalOnAMemoryStream) {
  MemoryOut out;
  Progress progress(out.file(), true);
  progress.begin_phase("denoise", 2);
  EXPECT_EQ(out.text(), "denoise  0/2  elapsed 0.0s\n");  // plain line, no '\r'
  EXPECT_TRUE(Progress::should_enable(true));
}

}  // namespace
}  // namespace vidax
