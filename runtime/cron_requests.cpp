// Verbs handed between processes that share a store (docs/cron.md, "In a
// cluster"): `mibyan cron pause ID` while `mibyan serve` runs the scheduler
// of the same $MIBYAN_HOME. The requester writes
// `<store>/cron.requests/<id>.req` (a temporary file renamed into place),
// then signals the change (runtime/cron_changes.hpp); the scheduler's
// watcher wakes it, it applies each request with the engine (as its own
// verbs) and writes `<id>.reply` the same way; the requester waits for the
// reply at most cron_service::answer_timeout. The directory is private
// (0700) like the store. Replies nobody collected are removed after a
// minute.
#include "runtime/cron_internal.hpp"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/crypto.hpp"
#include "base/log.hpp"

namespace fs = std::filesystem;

namespace mibyan {

namespace {

constexpr size_t max_request_bytes = 1024 * 1024;

std::string requests_dir(const std::string& store_dir) {
  return store_dir + "/cron.requests";
}

// Writes `text` to `path` atomically (temporary file, fsync-free rename:
// the reader only needs to never see half a file).
status write_atomic(const std::string& path, const std::string& text) {
  auto tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                  0600);
  if (fd < 0)
    return status::failure(status_code::unavailable,
                           "cannot write " + tmp + ": "
                             + std::strerror(errno));
  size_t done = 0;
  while (done < text.size()) {
    auto n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      auto err = std::string{std::strerror(errno)};
      ::close(fd);
      ::unlink(tmp.c_str());
      return status::failure(status_code::unavailable,
                             "cannot write " + tmp + ": " + err);
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    auto err = std::string{std::strerror(errno)};
    ::unlink(tmp.c_str());
    return status::failure(status_code::unavailable,
                           "cannot write " + path + ": " + err);
  }
  return {};
}

std::optional<std::string> read_small(const fs::path& p) {
  std::error_code ec;
  auto size = fs::file_size(p, ec);
  if (ec || size > max_request_bytes)
    return std::nullopt;
  std::ifstream in{p, std::ios::binary};
  if (!in)
    return std::nullopt;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

} // namespace

result<cron_request_outcome>
send_cron_request(const std::string& store_dir, const std::string& op,
                  const json::value& args,
                  std::chrono::steady_clock::time_point deadline,
                  const std::function<bool()>& holder_gone,
                  const std::function<std::string()>& who) {
  using R = result<cron_request_outcome>;
  auto dir = requests_dir(store_dir);
  std::error_code ec;
  fs::create_directories(dir, ec);
  ::chmod(dir.c_str(), 0700);
  auto id = random_hex(8);
  auto req = dir + "/" + id + ".req";
  auto reply = dir + "/" + id + ".reply";
  json::value body = args;
  body["op"] = op;
  if (auto s = write_atomic(req, body.dump()); !s)
    return R{s};
  if (auto s = cron_signal_change(store_dir); !s) {
    ::unlink(req.c_str());
    return R{s};
  }
  // The requester is a command waiting for one answer: it looks for the
  // reply every 10 ms, and every 100 ms whether the scheduler is still
  // there, until the deadline.
  auto next_check = std::chrono::steady_clock::now()
                    + std::chrono::milliseconds(100);
  while (std::chrono::steady_clock::now() < deadline) {
    if (auto text = read_small(reply)) {
      ::unlink(reply.c_str());
      auto parsed = json::parse(*text);
      if (!parsed || !parsed.v->is_object())
        return R::failure(status_code::data_corrupt,
                          "the scheduler's reply is not a JSON object");
      cron_request_outcome out;
      out.reply = std::move(*parsed.v);
      return out;
    }
    auto now = std::chrono::steady_clock::now();
    if (holder_gone && now >= next_check) {
      next_check = now + std::chrono::milliseconds(100);
      // Only an untaken request is withdrawn: a taken one is answered by
      // whoever took it (or by nobody, if it died: then the deadline).
      std::error_code e2;
      if (fs::exists(req, e2) && holder_gone() && ::unlink(req.c_str()) == 0) {
        cron_request_outcome out;
        out.withdrawn = true;
        return out;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // Not taken: withdraw it, so it is not applied after we gave up.
  bool withdrawn = ::unlink(req.c_str()) == 0;
  auto name = who ? who() : std::string{};
  return R::failure(status_code::unavailable,
                    "the scheduler of this store"
                      + (name.empty() ? std::string{} : " (" + name + ")")
                      + " did not answer within "
                      + std::to_string(cron_service::answer_timeout.count())
                      + " s"
                      + (withdrawn ? "; nothing was changed"
                                   : "; the change may still be applied"));
}

void serve_cron_requests(cron_sched_state& st) {
  if (!st.engine)
    return;
  auto dir = requests_dir(st.host->store_dir);
  std::error_code ec;
  std::vector<fs::path> reqs;
  auto now = fs::file_time_type::clock::now();
  for (auto it = fs::directory_iterator(dir, ec);
       !ec && it != fs::directory_iterator(); it.increment(ec)) {
    auto p = it->path();
    auto ext = p.extension().string();
    if (ext == ".req") {
      reqs.push_back(p);
    } else if (ext == ".reply" || ext == ".tmp") {
      std::error_code e2;
      auto t = fs::last_write_time(p, e2);
      if (!e2 && now - t > std::chrono::minutes(1))
        fs::remove(p, e2);
    }
  }
  std::sort(reqs.begin(), reqs.end());
  for (auto& p : reqs) {
    auto text = read_small(p);
    // Taken: a request is applied at most once.
    std::error_code e2;
    if (!fs::remove(p, e2) || !text)
      continue;
    auto reply = p;
    reply.replace_extension(".reply");
    auto answer = [path = reply.string()](json::value a) {
      if (auto s = write_atomic(path, a.dump()); !s)
        MIBYAN_LOG(warning, "cron", s.error);
    };
    auto parsed = json::parse(*text);
    if (!parsed || !parsed.v->is_object()) {
      json::value a;
      a["ok"] = false;
      a["code"] = "invalid_argument";
      a["error"] = "the request is not a JSON object";
      answer(std::move(a));
    } else {
      apply_cron_verb(st, parsed.v->get_string("op", ""), *parsed.v, answer);
    }
  }
}

} // namespace mibyan
