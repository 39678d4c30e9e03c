#include "kernels/frame_parser.hpp"

#include <algorithm>

namespace mibyan {

namespace {

// Bytes reserved up front for a body; larger bodies grow as they arrive, so
// a forged length does not allocate the whole limit at once.
constexpr size_t max_reserve = 1u << 20;

} // namespace

frame_parser::frame_parser(std::string sentinel, uint64_t max_body)
  : marker_("\n" + sentinel + " "), max_body_(max_body) {}

void frame_parser::feed(std::string_view data, const callbacks& cb) {
  if (failed_ || data.empty())
    return;
  if (state_ == state::raw && !pending_.empty()) {
    // Join the held-back bytes (shorter than the marker) with the new data
    // once; the scan below then never revisits them.
    std::string joined;
    joined.reserve(pending_.size() + data.size());
    joined.append(pending_);
    joined.append(data.data(), data.size());
    work_ += joined.size();
    pending_.clear();
    run(joined, cb);
    return;
  }
  run(data, cb);
}

void frame_parser::run(std::string_view data, const callbacks& cb) {
  while (!data.empty() && !failed_) {
    switch (state_) {
      case state::raw: {
        auto pos = data.find(marker_);
        if (pos != std::string_view::npos) {
          work_ += pos + marker_.size();
          if (pos > 0)
            cb.on_raw(data.substr(0, pos));
          data.remove_prefix(pos + marker_.size());
          state_ = state::length;
          break;
        }
        work_ += data.size();
        // Hold back the longest suffix that could begin a marker.
        size_t keep = 0;
        for (size_t n = std::min(data.size(), marker_.size() - 1); n > 0;
             --n) {
          if (data.compare(data.size() - n, n, marker_, 0, n) == 0) {
            keep = n;
            break;
          }
        }
        if (data.size() > keep)
          cb.on_raw(data.substr(0, data.size() - keep));
        pending_.assign(data.data() + data.size() - keep, keep);
        data = {};
        break;
      }
      case state::length: {
        while (!data.empty()) {
          char c = data.front();
          data.remove_prefix(1);
          ++work_;
          if (c == '\n') {
            if (pending_.empty() || pending_.size() > 12) {
              // Not a length: it was user output that looked like a marker.
              cb.on_raw(marker_ + pending_ + "\n");
              pending_.clear();
              state_ = state::raw;
              break;
            }
            body_len_ = std::stoull(pending_);
            pending_.clear();
            if (body_len_ > max_body_) {
              if (!cb.on_oversized) {
                failed_ = true;
                cb.on_error("reply frame of " + std::to_string(body_len_)
                            + " bytes exceeds the limit");
                return;
              }
              skip_left_ = body_len_;
              state_ = state::skip;
              break;
            }
            body_.clear();
            body_.reserve(static_cast<size_t>(
              std::min<uint64_t>(body_len_, max_reserve)));
            state_ = state::body;
            if (body_len_ == 0) {
              state_ = state::raw;
              cb.on_frame(std::string{});
            }
            break;
          }
          if (c < '0' || c > '9' || pending_.size() > 12) {
            cb.on_raw(marker_ + pending_ + std::string(1, c));
            pending_.clear();
            state_ = state::raw;
            break;
          }
          pending_ += c;
        }
        break;
      }
      case state::body: {
        auto want = static_cast<size_t>(body_len_ - body_.size());
        auto take = std::min(want, data.size());
        body_.append(data.data(), take);
        work_ += take;
        data.remove_prefix(take);
        if (body_.size() == body_len_) {
          state_ = state::raw;
          std::string body = std::move(body_);
          body_ = std::string{};
          cb.on_frame(std::move(body));
        }
        break;
      }
      case state::skip: {
        auto take = static_cast<size_t>(
          std::min<uint64_t>(skip_left_, data.size()));
        skip_left_ -= take;
        data.remove_prefix(take);
        if (skip_left_ == 0) {
          state_ = state::raw;
          cb.on_oversized(body_len_);
        }
        break;
      }
    }
  }
}

void frame_parser::finish(const callbacks& cb) {
  if (failed_)
    return;
  if (state_ == state::raw && !pending_.empty())
    cb.on_raw(pending_);
  else if (state_ == state::length)
    cb.on_raw(marker_ + pending_);
  pending_.clear();
  state_ = state::raw;
}

} // namespace mibyan
