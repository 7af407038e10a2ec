#include "tools/mxdiff/progress_bar.h"

#include <unistd.h>

#include <string>

#include "fmt/core.h"

namespace mxdiff::cli {

ProgressBar::ProgressBar(std::FILE* stream, bool force)
    : stream_(stream), active_(force || ::isatty(::fileno(stream)) == 1), start_(std::chrono::steady_clock::now()) {}

ProgressBar::~ProgressBar() {
  if (drawn_) {
    fmt::print(stream_, "\r\033[K");
    std::fflush(stream_);
  }
}

void ProgressBar::Update(uint64_t done_bytes, uint64_t total_bytes) {
  if (!active_) return;
  constexpr int kWidth = 30;
  const double fraction = total_bytes == 0 ? 1.0 : double(done_bytes) / double(total_bytes);
  const int filled = int(fraction * kWidth);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double rate = seconds > 0 ? double(done_bytes) / seconds : 0;
  const bool giga = total_bytes >= 1'000'000'000;
  const double unit = giga ? 1e-9 : 1e-6;
  fmt::print(stream_, "\r\033[Kaudit [{}{}] {:3.0f}% {:.2f}/{:.2f} {} of scales, {:.2f} GB/s", std::string(filled, '#'),
             std::string(kWidth - filled, '.'), 100 * fraction, double(done_bytes) * unit, double(total_bytes) * unit,
             giga ? "GB" : "MB", rate * 1e-9);
  std::fflush(stream_);
  drawn_ = true;
}

}  // namespace mxdiff::cli
