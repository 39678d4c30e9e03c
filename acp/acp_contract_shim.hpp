// TEMPORARY until the coordinator's contract commit lands (removed then).
#pragma once
#include <map>
#include <mutex>
#include <string>
#include "mibyan/approval.hpp"
#include "mibyan/clarify.hpp"
#include "mibyan/runtime.hpp"
namespace mibyan {
struct session_channels {
  approval_callback approval;
  approval_context context = approval_context::unattended;
  clarify_callback clarify;
};
struct shim_channels {
  std::mutex mtx;
  std::map<std::string, approval_callback> cbs;
  static shim_channels& get() { static shim_channels s; return s; }
  void install(runtime& rt) {
    rt.set_approval_callback([this](const approval_prompt& p) {
      approval_callback cb;
      {
        std::lock_guard<std::mutex> g{mtx};
        auto it = cbs.find(p.session_id);
        if (it != cbs.end()) cb = it->second;
      }
      return cb ? cb(p) : approval_choice::deny;
    });
  }
};
}
#define ACP_SET_CHANNELS(sid, ch) do { shim_channels::get().install(rt_); std::lock_guard<std::mutex> g_{shim_channels::get().mtx}; shim_channels::get().cbs[sid] = (ch).approval; } while (0)
#define ACP_CLEAR_CHANNELS(sid) do { std::lock_guard<std::mutex> g_{shim_channels::get().mtx}; shim_channels::get().cbs.erase(sid); } while (0)
#define ACP_SET_CWD(call, dir) (void)(dir)
