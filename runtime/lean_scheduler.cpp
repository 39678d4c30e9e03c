#include "runtime/lean_scheduler.hpp"

#include "caf/actor_system.hpp"
#include "caf/actor_system_config.hpp"
#include "caf/policy/work_sharing.hpp"
#include "caf/scheduler/coordinator.hpp"

#include "runtime/lean_clock.hpp"

namespace mibyan {

namespace {

class lean_coordinator final
  : public caf::scheduler::coordinator<caf::policy::work_sharing> {
public:
  using super = caf::scheduler::coordinator<caf::policy::work_sharing>;

  explicit lean_coordinator(caf::actor_system& sys) : super(sys) {}

  lean_actor_clock& clock() noexcept override { return lean_clock_; }

protected:
  void start() override {
    lean_clock_.start(&system());
    super::start();
  }

  // The workers and utility actors end first (their last timers and
  // delayed messages may still be set), then the timer thread.
  void stop() override {
    super::stop();
    lean_clock_.stop();
  }

private:
  lean_actor_clock lean_clock_;
};

} // namespace

void load_lean_scheduler(caf::actor_system_config& cfg) {
  cfg.module_factories.push_back(
    [](caf::actor_system& sys) -> caf::actor_system::module* {
      return new lean_coordinator(sys);
    });
}

lean_actor_clock* lean_clock_of(caf::actor_system& sys) {
  return dynamic_cast<lean_actor_clock*>(&sys.clock());
}

} // namespace mibyan
