// Progress display for long runs (`vidax generate`): phases ("encode text", "denoise",
// "decode"), each with units of work (steps, chunks); after every unit it shows
//   denoise  12/50  3.21 s/step  ETA 2:02  elapsed 38.5s
// On a terminal the line is redrawn in place with '\r'; elsewhere (a log file, CI) a plain line
// is printed at most every `plain_interval_s` seconds, plus one when a phase ends, so logs stay
// short. Seconds per unit are the mean of the last kWindow units (the first denoising steps are
// often slower: warm-up, memory first touched), ETA = that mean * units left.
//
// Thread safety: none; drive one Progress from one thread.
#pragma once

#include <cstdio>
#include <deque>
#include <functional>
#include <string>
#include <utility>

namespace vidax {

// What a listener sees (Progress::set_listener): a phase began, a unit finished, a phase ended,
// or a message line. done/total/seconds_per_unit/eta_seconds describe the phase at that moment.
struct ProgressEvent {
  enum class Kind { kBegin, kTick, kEnd, kMessage } kind = Kind::kTick;
  std::string phase, unit, text;  // text: kMessage only
  int done = 0, total = 0;
  double seconds_per_unit = 0, eta_seconds = 0, elapsed_seconds = 0;
  double unit_seconds = 0;  // kTick: the unit that just finished
};

struct ProgressOptions {
  bool tty = false;               // redraw one line with '\r'
  std::function<double()> clock;  // monotonic seconds; empty: std::chrono::steady_clock
  double plain_interval_s = 5.0;  // non-TTY: at most one line per this many seconds
};

class Progress {
 public:
  static constexpr int kWindow = 5;  // units in the seconds-per-unit moving average

  // tty = isatty(fileno(out)), steady clock. With enabled = false nothing is printed except
  // message() lines.
  Progress(FILE* out, bool enabled);
  Progress(FILE* out, bool enabled, ProgressOptions options);
  ~Progress();  // ends an open phase (finishing a TTY line with a newline)

  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Called on every begin_phase, tick, end_phase and message, whether or not printing is
  // enabled, on the thread that drives this Progress (a server's job record, a Python callback).
  // It may throw (e.g. to cancel a run); the exception leaves the Progress call.
  void set_listener(std::function<void(const ProgressEvent&)> listener) {
    listener_ = std::move(listener);
  }

  // isatty(stderr) || forced: the default for the CLI's progress on stderr.
  static bool should_enable(bool forced);
  bool enabled() const { return enabled_; }

  // Starts a phase of `total` units named `unit` ("step", "chunk"); ends the previous one.
  void begin_phase(std::string name, int total, std::string unit = "step");
  // `done` units of the phase are complete; the last one took `seconds_for_this_unit`.
  void tick(int done, double seconds_for_this_unit);
  // Prints the phase's final line ("denoise  50/50  3.20 s/step  done in 2:40").
  void end_phase();
  // One line of text; on a TTY the progress line is cleared first and redrawn after it.
  void message(const std::string& text);

  // "42.0s", "2:05", "1:02:03": the format used for ETA and elapsed times.
  static std::string format_duration(double seconds);
  // Mean seconds per unit over the window; 0 before the first tick.
  double seconds_per_unit() const;
  // Seconds left: seconds_per_unit() * (total - done).
  double eta_seconds() const;

 private:
  std::string status_line(bool final) const;
  void draw(const std::string& line);
  void notify(ProgressEvent::Kind kind, const std::string& text = {}, double unit_seconds = 0);
  void clear_line();
  double now() const;

  FILE* out_;
  bool enabled_;
  ProgressOptions options_;
  bool in_phase_ = false;
  std::string name_;
  std::string unit_;
  int total_ = 0;
  int done_ = 0;
  double phase_start_ = 0;
  double last_plain_print_ = 0;
  bool printed_since_begin_ = false;
  std::deque<double> window_;
  size_t drawn_width_ = 0;  // TTY: characters of the line currently on screen (0: none)
  std::function<void(const ProgressEvent&)> listener_;
};

}  // namespace vidax
