#include "kernels/process_launcher.hpp"

namespace mibyan {

namespace {

class real_launcher final : public process_launcher {
public:
  subprocess_result run(const subprocess_options& opts) const override {
    return run_subprocess(opts);
  }

  result<kernel_process>
  start_kernel(const kernel_spawn_options& opts) const override {
    return spawn_kernel(opts);
  }
};

} // namespace

launcher_ptr real_process_launcher() {
  static const launcher_ptr instance = std::make_shared<real_launcher>();
  return instance;
}

const process_launcher& launcher_or_real(const process_launcher* launcher) {
  return launcher ? *launcher : *real_process_launcher();
}

} // namespace mibyan
