#include "kernels/frame_parser.hpp"

#include <algorithm>

namespace mibyan {

frame_parser::frame_parser(std::string sentinel, uint64_t max_body)
  : marker_("\n" + sentinel + " "), max_body_(max_body) {}

void frame_parser::feed(std::string_view data, const callbacks& cb) {
  while (!data.empty() && !failed_) {
    switch (state_) {
      case state::raw: {
        pending_.append(data.data(), data.size());
        data = {};
        auto pos = pending_.find(marker_);
        if (pos != std::string::npos) {
          if (pos > 0)
            cb.on_raw(std::string_view{pending_}.substr(0, pos));
          auto rest = pending_.substr(pos + marker_.size());
          pending_.clear();
          state_ = state::length;
          // Re-feed the remainder in the new state.
          feed(rest, cb);
          return;
        }
        // Emit everything that cannot be the start of a marker.
        size_t keep = 0;
        for (size_t n = std::min(pending_.size(), marker_.size() - 1); n > 0;
             --n) {
          if (pending_.compare(pending_.size() - n, n, marker_, 0, n) == 0) {
            keep = n;
            break;
          }
        }
        if (pending_.size() > keep) {
          cb.on_raw(std::string_view{pending_}.substr(0, pending_.size() - keep));
          pending_.erase(0, pending_.size() - keep);
        }
        break;
      }
      case state::length: {
        while (!data.empty()) {
          char c = data.front();
          data.remove_prefix(1);
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
              failed_ = true;
              cb.on_error("reply frame of " + std::to_string(body_len_)
                          + " bytes exceeds the limit");
              return;
            }
            body_.clear();
            body_.reserve(static_cast<size_t>(body_len_));
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
        data.remove_prefix(take);
        if (body_.size() == body_len_) {
          state_ = state::raw;
          cb.on_frame(std::move(body_));
          body_.clear();
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
