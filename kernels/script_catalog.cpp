#include "kernels/script_catalog.hpp"

#include <algorithm>

namespace mibyan {

namespace {

std::shared_ptr<script_catalog::snapshot>
make_snapshot(std::vector<script_tool_spec> specs, uint64_t generation) {
  auto s = std::make_shared<script_catalog::snapshot>();
  s->generation = generation;
  for (auto& spec : specs)
    s->names.push_back(spec.name);
  std::sort(s->names.begin(), s->names.end());
  s->names.erase(std::unique(s->names.begin(), s->names.end()),
                 s->names.end());
  s->stub = generate_stub(s->names, specs);
  s->specs = std::move(specs);
  return s;
}

} // namespace

script_catalog::script_catalog(std::vector<script_tool_spec> specs)
  : cur_(make_snapshot(std::move(specs), 1)) {}

std::shared_ptr<const script_catalog::snapshot>
script_catalog::current() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return cur_;
}

bool script_catalog::update(std::vector<script_tool_spec> specs) {
  // Rendered outside the lock; published only when it differs.
  auto fresh = make_snapshot(std::move(specs), 0);
  std::lock_guard<std::mutex> guard{mtx_};
  if (fresh->stub == cur_->stub && fresh->names == cur_->names)
    return false;
  fresh->generation = cur_->generation + 1;
  cur_ = std::move(fresh);
  return true;
}

} // namespace mibyan
