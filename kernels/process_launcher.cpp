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
    std::string error;
    auto proc = spawn_kernel(opts, &error);
    if (proc.pid < 0)
      return result<kernel_process>::failure(
        status_code::internal,
        error.empty() ? "the kernel did not start" : error);
    return proc;
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
