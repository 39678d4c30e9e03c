// The composition root's dashboard glue (cli/dashboard_api.hpp).
#include "cli/dashboard_api.hpp"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "base/json.hpp"
#include "base/log.hpp"
#include "cluster/client.hpp"
#include "serve/routes.hpp"

namespace mibyan::cli {

namespace {

// Runs jobs one at a time on a thread of its own (the cluster client has
// one caller at a time); the queue ends with the object.
class serial_worker {
public:
  serial_worker() : thread_([this] { run(); }) {}
  ~serial_worker() {
    {
      std::lock_guard<std::mutex> g{mtx_};
      stop_ = true;
    }
    cv_.notify_all();
    // The last job may hold the last reference to its owner.
    if (thread_.get_id() == std::this_thread::get_id())
      thread_.detach();
    else
      thread_.join();
  }
  void post(std::function<void()> job) {
    {
      std::lock_guard<std::mutex> g{mtx_};
      jobs_.push_back(std::move(job));
    }
    cv_.notify_one();
  }

private:
  void run() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> g{mtx_};
        cv_.wait(g, [this] { return stop_ || !jobs_.empty(); });
        if (jobs_.empty())
          return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();
    }
  }

  std::mutex mtx_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stop_ = false;
  std::thread thread_;
};

// The query map back as a query string.
std::string query_string(const std::map<std::string, std::string>& q) {
  std::string out;
  auto enc = [](const std::string& s) {
    static const char* hex = "0123456789ABCDEF";
    std::string r;
    for (unsigned char c : s) {
      if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
        r += static_cast<char>(c);
      } else {
        r += '%';
        r += hex[c >> 4];
        r += hex[c & 15];
      }
    }
    return r;
  };
  for (auto& [k, v] : q)
    out += (out.empty() ? "" : "&") + enc(k) + "=" + enc(v);
  return out;
}

} // namespace

void answer_dashboard_api(runtime& rt, const serve::ui_ops_hooks& hooks,
                          const serve::ops_request& req, serve::ops_done done) {
  if (serve::is_ui_ops_path(req.path))
    return serve::answer_ui_ops(rt, hooks, req, std::move(done));
  if (serve::is_ui_store_path(req.path))
    return serve::answer_ui_store(rt, req, std::move(done));
  done(serve::ops_error(404, "no such endpoint: " + req.path, "not_found"));
}

void dashboard_hooks::set(serve::ui_ops_hooks h) {
  std::lock_guard<std::mutex> g{mtx_};
  hooks_ = std::move(h);
}

serve::ui_ops_hooks dashboard_hooks::get() const {
  std::lock_guard<std::mutex> g{mtx_};
  return hooks_;
}

dashboard_handler
gateway_dashboard_handler(std::shared_ptr<const dashboard_hooks> slot) {
  return [slot](runtime& rt, const dashboard_request& r,
                std::function<void(dashboard_answer)> done) {
    auto hooks = std::make_shared<serve::ui_ops_hooks>(slot->get());
    serve::ops_request req;
    req.method = r.method;
    serve::split_target(r.path + (r.query.empty() ? "" : "?" + r.query),
                        req.path, req.query);
    req.body = r.body;
    answer_dashboard_api(rt, *hooks, req, [done, hooks](serve::ops_response x) {
      done(dashboard_answer{x.status, std::move(x.content_type),
                            std::move(x.body)});
    });
  };
}

serve::ui_ops_hooks cluster_hooks(cluster_process& node) {
  serve::ui_ops_hooks h;
  h.node_id = node.node_id();
  auto* n = &node;
  h.cluster = [n](std::function<void(std::string)> done) {
    n->cluster_view(std::move(done));
  };
  return h;
}

status connect_dashboard(const std::string& address, const options& opts,
                         http_server_settings& st) {
  auto connected = cluster_client::connect(address, opts);
  if (!connected)
    return status::failure(connected.code, "cannot connect to " + address
                                             + ": " + connected.error);
  std::shared_ptr<cluster_client> client = std::move(*connected);
  auto worker = std::make_shared<serial_worker>();
  st.ui_forward = [client, worker, address](serve::ops_request req,
                                            serve::ops_done done) {
    worker->post([client, address, req = std::move(req), done] {
      dashboard_request r{req.method, req.path, query_string(req.query),
                          req.body};
      auto a = client->dashboard(r);
      if (!a)
        return done(serve::ops_error(502, "the gateway " + address
                                           + " did not answer: " + a.error,
                                    "gateway_unavailable"));
      serve::ops_response x;
      x.status = a->status;
      x.content_type = std::move(a->content_type);
      x.body = std::move(a->body);
      done(std::move(x));
    });
  };
  return {};
}

} // namespace mibyan::cli
