// The file checkpoint store, part: one project's records
// (projects/<key>.json: its checkpoints, oldest first, and the next
// number), read and written under the store's lock, and the listings.
#include "storage/file_checkpoint_store.hpp"

#include <algorithm>
#include <cerrno>

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include "base/json.hpp"
#include "storage/file_checkpoint_git.hpp"

namespace mibyan {

using namespace file_checkpoint_detail;

namespace {

constexpr int meta_version = 1;

json::value strings(const std::vector<std::string>& xs) {
  json::value a = json::value::make_array();
  for (auto& x : xs)
    a.push_back(x);
  return a;
}

std::vector<std::string> strings_of(const json::value* v) {
  std::vector<std::string> out;
  if (v != nullptr && v->is_array())
    for (auto& x : v->as_array())
      if (x.is_string())
        out.push_back(x.as_string());
  return out;
}

json::value to_json(const file_checkpoint& c) {
  json::value o;
  o["number"] = c.number;
  o["tree"] = c.tree;
  o["commit"] = c.commit;
  o["time_ms"] = c.time_ms;
  o["session_id"] = c.session_id;
  o["turn"] = c.turn;
  o["tool"] = c.tool;
  o["reason"] = c.reason;
  o["agent_files"] = strings(c.agent_files);
  o["skipped"] = strings(c.skipped);
  o["files"] = c.files;
  o["rolled_back"] = c.rolled_back;
  return o;
}

file_checkpoint from_json(const json::value& o, const std::string& project) {
  file_checkpoint c;
  c.project = project;
  c.number = o.get_int("number", 0);
  c.tree = o.get_string("tree");
  c.commit = o.get_string("commit");
  c.time_ms = o.get_int("time_ms", 0);
  c.session_id = o.get_string("session_id");
  c.turn = o.get_int("turn", 0);
  c.tool = o.get_string("tool");
  c.reason = o.get_string("reason");
  c.agent_files = strings_of(o.find("agent_files"));
  c.skipped = strings_of(o.find("skipped"));
  c.files = o.get_int("files", 0);
  c.rolled_back = o.get_bool("rolled_back", false);
  return c;
}

std::string read_text(const std::string& path, int& err) {
  err = 0;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    err = errno;
    return {};
  }
  std::string out;
  char buf[65536];
  while (true) {
    auto n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      err = errno;
      break;
    }
    if (n == 0)
      break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > (size_t{64} << 20)) {
      err = EFBIG;
      break;
    }
  }
  ::close(fd);
  return out;
}

} // namespace

std::string file_checkpoint_store::key_of(const std::string& project) const {
  return hex(blob_id(project)).substr(0, 20);
}

result<file_checkpoint_store::meta>
file_checkpoint_store::read_meta(const std::string& project) const {
  using R = result<meta>;
  meta m;
  m.project = project;
  m.key = key_of(project);
  auto path = dir_ + "/projects/" + m.key + ".json";
  int err = 0;
  auto text = read_text(path, err);
  if (err == ENOENT)
    return m;
  if (err != 0)
    return R::failure(code_of_errno(err), "cannot read " + path + ": "
                                            + errno_text(err));
  auto parsed = json::parse(text);
  if (!parsed || !parsed.v->is_object())
    return R::failure(status_code::data_corrupt,
                      "the checkpoint records " + path + " are damaged ("
                        + (parsed ? std::string{"not an object"} : parsed.error)
                        + "); move the file away to start the project's "
                          "checkpoints afresh");
  auto& o = *parsed.v;
  if (o.get_int("version", 0) > meta_version)
    return R::failure(status_code::data_corrupt,
                      path + " was written by a newer Mibyan");
  if (o.get_string("project") != project)
    return R::failure(status_code::data_corrupt,
                      path + " belongs to another project ("
                        + o.get_string("project") + ")");
  m.next = std::max<int64_t>(o.get_int("next", 1), 1);
  if (auto* cs = o.find("checkpoints"); cs && cs->is_array())
    for (auto& c : cs->as_array())
      if (c.is_object())
        m.checkpoints.push_back(from_json(c, project));
  return m;
}

status file_checkpoint_store::write_meta(const meta& m) const {
  json::value o;
  o["version"] = meta_version;
  o["project"] = m.project;
  o["next"] = m.next;
  json::value cs = json::value::make_array();
  for (auto& c : m.checkpoints)
    cs.push_back(to_json(c));
  o["checkpoints"] = std::move(cs);
  auto path = dir_ + "/projects/" + m.key + ".json";
  auto tmp = path + ".tmp";
  auto text = o.pretty();
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0)
    return status::failure(code_of_errno(errno),
                           "cannot write " + tmp + ": " + errno_text(errno));
  if (int err = write_all(fd, text); err != 0) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return status::failure(code_of_errno(err),
                           "cannot write " + tmp + ": " + errno_text(err));
  }
  if (::fsync(fd) != 0) {
    int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    return status::failure(code_of_errno(err),
                           "cannot write " + tmp + ": " + errno_text(err));
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return status::failure(code_of_errno(err),
                           "cannot write " + path + ": " + errno_text(err));
  }
  return {};
}

status file_checkpoint_store::add_agent_files(
  const std::string& project, int64_t number,
  const std::vector<std::string>& files) {
  std::lock_guard<std::mutex> guard{mtx_};
  int fd = -1;
  if (auto ls = lock(fd); !ls)
    return ls;
  fd_closer close_lock{fd};
  auto m = read_meta(project);
  if (!m)
    return m.get_status();
  for (auto& c : m->checkpoints) {
    if (c.number != number)
      continue;
    bool changed = false;
    for (auto& f : files)
      if (std::find(c.agent_files.begin(), c.agent_files.end(), f)
          == c.agent_files.end()) {
        c.agent_files.push_back(f);
        changed = true;
      }
    return changed ? write_meta(*m) : status{};
  }
  return status::failure(status_code::not_found,
                         "no checkpoint " + std::to_string(number) + " in "
                           + project);
}

status file_checkpoint_store::mark_rolled_back(
  const std::string& project, const std::vector<int64_t>& numbers) {
  std::lock_guard<std::mutex> guard{mtx_};
  int fd = -1;
  if (auto ls = lock(fd); !ls)
    return ls;
  fd_closer close_lock{fd};
  auto m = read_meta(project);
  if (!m)
    return m.get_status();
  for (auto& c : m->checkpoints)
    if (std::find(numbers.begin(), numbers.end(), c.number) != numbers.end())
      c.rolled_back = true;
  return write_meta(*m);
}

result<std::vector<file_checkpoint>>
file_checkpoint_store::list(const std::string& project) const {
  std::lock_guard<std::mutex> guard{mtx_};
  auto m = read_meta(project);
  if (!m)
    return m.get_status();
  return std::move(m->checkpoints);
}

result<std::vector<file_checkpoint>> file_checkpoint_store::list_all() const {
  using R = result<std::vector<file_checkpoint>>;
  std::vector<std::string> projects;
  {
    auto pdir = dir_ + "/projects";
    DIR* d = ::opendir(pdir.c_str());
    if (d == nullptr)
      return R::failure(code_of_errno(errno),
                        "cannot read " + pdir + ": " + errno_text(errno));
    while (auto* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n.size() > 5 && n.compare(n.size() - 5, 5, ".json") == 0) {
        int err = 0;
        auto text = read_text(pdir + "/" + n, err);
        auto parsed = json::parse(text);
        if (parsed && parsed.v->is_object())
          projects.push_back(parsed.v->get_string("project"));
      }
    }
    ::closedir(d);
  }
  std::vector<file_checkpoint> out;
  for (auto& p : projects) {
    auto l = list(p);
    if (!l)
      return l;
    for (auto& c : *l)
      out.push_back(std::move(c));
  }
  return out;
}

} // namespace mibyan
