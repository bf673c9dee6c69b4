// Progress display: status line formatting, moving average, TTY redraw vs throttled plain lines.
#include "pipeline/progress.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <numeric>
#include <utility>

#include "core/error.h"

namespace vidax {
namespace {

std::string format_rate(double seconds) {
  char text[32];
  std::snprintf(text, sizeof(text), seconds < 10 ? "%.2f" : "%.1f", seconds);
  return text;
}

}  // namespace

Progress::Progress(FILE* out, bool enabled)
    : Progress(out, enabled,
               ProgressOptions{out != nullptr && ::isatty(::fileno(out)) == 1, {}, 5.0}) {}

Progress::Progress(FILE* out, bool enabled, ProgressOptions options)
    : out_(out), enabled_(enabled && out != nullptr), options_(std::move(options)) {
  if (!options_.clock) {
    options_.clock = [] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
          .count();
    };
  }
}

Progress::~Progress() {
  // Interrupted mid-phase (an exception unwinding): end the line without claiming "done".
  if (enabled_ && in_phase_ && drawn_width_ > 0) {
    std::fputc('\n', out_);
    std::fflush(out_);
  }
}

bool Progress::should_enable(bool forced) { return forced || ::isatty(STDERR_FILENO) == 1; }

double Progress::now() const { return options_.clock(); }

void Progress::begin_phase(std::string name, int total, std::string unit) {
  if (in_phase_) end_phase();
  VIDAX_CHECK(total >= 0, "progress phase '", name, "' with ", total, " units");
  name_ = std::move(name);
  unit_ = std::move(unit);
  total_ = total;
  done_ = 0;
  window_.clear();
  in_phase_ = true;
  phase_start_ = now();
  last_plain_print_ = phase_start_;
  notify(ProgressEvent::Kind::kBegin);
  if (!enabled_) return;
  if (options_.tty) {
    draw(status_line(false));
  } else {
    std::fprintf(out_, "%s\n", status_line(false).c_str());
    std::fflush(out_);
  }
}

void Progress::tick(int done, double seconds_for_this_unit) {
  VIDAX_CHECK(in_phase_, "Progress::tick outside a phase");
  done_ = done;
  window_.push_back(seconds_for_this_unit);
  while (window_.size() > static_cast<size_t>(kWindow)) window_.pop_front();
  notify(ProgressEvent::Kind::kTick, {}, seconds_for_this_unit);
  if (!enabled_) return;
  if (options_.tty) {
    draw(status_line(false));
    return;
  }
  const double t = now();
  if (t - last_plain_print_ >= options_.plain_interval_s && done_ < total_) {
    std::fprintf(out_, "%s\n", status_line(false).c_str());
    std::fflush(out_);
    last_plain_print_ = t;
  }
}

void Progress::end_phase() {
  if (!in_phase_) return;
  if (enabled_) {
    const std::string line = status_line(true);
    if (options_.tty) {
      draw(line);
      std::fputc('\n', out_);
      drawn_width_ = 0;
    } else {
      std::fprintf(out_, "%s\n", line.c_str());
    }
    std::fflush(out_);
  }
  in_phase_ = false;
  notify(ProgressEvent::Kind::kEnd);
}

void Progress::message(const std::string& text) {
  notify(ProgressEvent::Kind::kMessage, text);
  if (out_ == nullptr) return;
  const bool redraw = enabled_ && options_.tty && in_phase_ && drawn_width_ > 0;
  if (redraw) clear_line();
  std::fprintf(out_, "%s\n", text.c_str());
  if (redraw) draw(status_line(false));
  std::fflush(out_);
}

void Progress::notify(ProgressEvent::Kind kind, const std::string& text, double unit_seconds) {
  if (!listener_) return;
  ProgressEvent e;
  e.kind = kind;
  e.phase = name_;
  e.unit = unit_;
  e.text = text;
  e.done = done_;
  e.total = total_;
  e.seconds_per_unit = seconds_per_unit();
  e.eta_seconds = eta_seconds();
  e.elapsed_seconds = now() - phase_start_;
  e.unit_seconds = unit_seconds;
  listener_(e);
}

double Progress::seconds_per_unit() const {
  if (window_.empty()) return 0;
  return std::accumulate(window_.begin(), window_.end(), 0.0) / static_cast<double>(window_.size());
}

double Progress::eta_seconds() const {
  return seconds_per_unit() * static_cast<double>(std::max(total_ - done_, 0));
}

std::string Progress::format_duration(double seconds) {
  if (!(seconds > 0)) seconds = 0;  // also NaN
  char text[48];
  const double tenths = std::round(seconds * 10) / 10;
  if (tenths < 60) {
    std::snprintf(text, sizeof(text), "%.1fs", tenths);
    return text;
  }
  const long long whole = std::llround(seconds);
  const long long h = whole / 3600, m = whole / 60 % 60, s = whole % 60;
  if (h > 0)
    std::snprintf(text, sizeof(text), "%lld:%02lld:%02lld", h, m, s);
  else
    std::snprintf(text, sizeof(text), "%lld:%02lld", m, s);
  return text;
}

std::string Progress::status_line(bool final) const {
  const double elapsed = now() - phase_start_;
  std::string line = str_cat(name_, "  ", done_, "/", total_);
  if (final) {
    if (done_ > 0) line += str_cat("  ", format_rate(elapsed / done_), " s/", unit_);
    return line + "  done in " + format_duration(elapsed);
  }
  if (!window_.empty()) {
    line += str_cat("  ", format_rate(seconds_per_unit()), " s/", unit_);
    if (done_ < total_) line += "  ETA " + format_duration(eta_seconds());
  }
  return line + "  elapsed " + format_duration(elapsed);
}

void Progress::draw(const std::string& line) {
  // '\r' back to column 0, the new text, then blanks over what is left of a longer old line.
  std::fputc('\r', out_);
  std::fputs(line.c_str(), out_);
  for (size_t i = line.size(); i < drawn_width_; ++i) std::fputc(' ', out_);
  drawn_width_ = line.size();
  std::fflush(out_);
}

void Progress::clear_line() {
  std::fputc('\r', out_);
  for (size_t i = 0; i < drawn_width_; ++i) std::fputc(' ', out_);
  std::fputc('\r', out_);
  drawn_width_ = 0;
}

}  // namespace vidax
