#include "daemon/load_tracker.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace sluice::daemon {
namespace {

std::string Bytes(uint64_t b) {
  return b >= (uint64_t{1} << 30) ? absl::StrFormat("%.2f GiB", b / double(uint64_t{1} << 30))
                                  : absl::StrFormat("%.1f MiB", b / double(1 << 20));
}

}  // namespace

void LoadTracker::Begin(const std::string& model_id, const std::string& path, absl::Time now) {
  if (active_ && model_id == model_id_ && path == path_) return;
  active_ = true;
  model_id_ = model_id;
  path_ = path;
  phase_ = "validating";
  done_ = total_ = 0;
  began_ = phase_began_ = logged_ = now;
}

std::string LoadTracker::Update(std::string_view phase, uint64_t done, uint64_t total,
                                absl::Time now) {
  if (!active_) return "";
  const bool new_phase = phase != phase_;
  if (new_phase) {
    phase_ = std::string(phase);
    phase_began_ = now;
  }
  done_ = done;
  total_ = total;
  const bool last = total > 0 && done >= total;
  if (!new_phase && !last && now - logged_ < log_every) return "";
  logged_ = now;
  return Line(*Snapshot(now));
}

std::string LoadTracker::End(absl::Time now) {
  if (!active_) return "";
  active_ = false;
  return absl::StrCat("load of model '", model_id_, "' ended after ",
                      absl::FormatDuration(absl::Trunc(now - began_, absl::Milliseconds(1))));
}

std::optional<v1::LoadProgress> LoadTracker::Snapshot(absl::Time now) const {
  if (!active_) return std::nullopt;
  v1::LoadProgress p;
  p.set_model_id(model_id_);
  p.set_path(path_);
  p.set_phase(phase_);
  p.set_done_bytes(done_);
  p.set_total_bytes(total_);
  const double seconds = absl::ToDoubleSeconds(now - phase_began_);
  const double rate = seconds > 0 && done_ > 0 ? done_ / seconds : 0;
  p.set_bytes_per_second(rate);
  p.set_seconds_left(done_ >= total_ && total_ > 0 ? 0
                     : rate > 0                    ? (total_ - done_) / rate
                                                   : -1);
  p.set_elapsed_seconds(absl::ToDoubleSeconds(now - began_));
  return p;
}

std::string LoadTracker::Line(const v1::LoadProgress& p) const {
  std::string line = absl::StrCat("loading model '", p.model_id(), "': ", p.phase());
  if (p.total_bytes() > 0) {
    absl::StrAppend(&line, " ", Bytes(p.done_bytes()), " of ", Bytes(p.total_bytes()),
                    absl::StrFormat(" (%.0f%%)", 100.0 * p.done_bytes() / p.total_bytes()));
    if (p.bytes_per_second() > 0) {
      absl::StrAppend(&line, absl::StrFormat(", %.2f GB/s", p.bytes_per_second() / 1e9));
    }
    if (p.seconds_left() > 0) {
      absl::StrAppend(&line, absl::StrFormat(", %.0f s left", p.seconds_left()));
    }
  }
  absl::StrAppend(&line, absl::StrFormat("; %.1f s since the load began", p.elapsed_seconds()));
  return line;
}

}  // namespace sluice::daemon
