#include "base/clock.hpp"

namespace mibyan {

namespace {

class system_clocks final : public runtime_clock {
public:
  steady_time steady_now() const override {
    return std::chrono::steady_clock::now();
  }
  int64_t wall_ms() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
  }
};

} // namespace

std::function<int64_t()>
runtime_clock::wall_fn(std::shared_ptr<const runtime_clock> clock) {
  return [clock = std::move(clock)] { return clock->wall_ms(); };
}

clock_ptr real_clock() {
  static const clock_ptr instance = std::make_shared<system_clocks>();
  return instance;
}

manual_clock::manual_clock(int64_t wall_start_ms)
  : steady_ns_(std::chrono::duration_cast<std::chrono::nanoseconds>(
                 std::chrono::hours(1))
                 .count()),
    wall_ns_(wall_start_ms * 1'000'000) {
}

runtime_clock::steady_time manual_clock::steady_now() const {
  return steady_time{std::chrono::duration_cast<steady_time::duration>(
    std::chrono::nanoseconds{steady_ns_.load()})};
}

int64_t manual_clock::wall_ms() const {
  return wall_ns_.load() / 1'000'000;
}

void manual_clock::advance(std::chrono::nanoseconds d) {
  if (d.count() <= 0)
    return;
  steady_ns_.fetch_add(d.count());
  wall_ns_.fetch_add(d.count());
}

void manual_clock::set_wall_ms(int64_t ms) {
  wall_ns_.store(ms * 1'000'000);
}

} // namespace mibyan
