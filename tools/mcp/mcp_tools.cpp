#include "tools/mcp/mcp_tools.hpp"

#include "tools/mcp/mcp_oauth_client.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "base/log.hpp"
#include "config/options.hpp"

namespace mibyan {

namespace fs = std::filesystem;

namespace {

using clock = std::chrono::steady_clock;

enum class mcp_kind { tool, list_resources, read_resource, list_prompts,
                      get_prompt };

// One registry tool backed by an MCP server.
class mcp_tool final : public tool {
public:
  mcp_tool(std::shared_ptr<mcp_session> session, mcp_kind kind,
           std::string name, std::string raw, std::string description,
           json::value schema)
    : session_(std::move(session)), kind_(kind), name_(std::move(name)),
      raw_(std::move(raw)), description_(std::move(description)),
      schema_(std::move(schema)),
      toolset_(mcp_toolset_name(session_->config().name)) {}

  const char* name() const override { return name_.c_str(); }
  const char* toolset() const override { return toolset_.c_str(); }
  std::string description() const override { return description_; }
  json::value schema() const override { return schema_; }
  const std::string& server() const { return session_->config().name; }
  /// Whether `other` shows the model the same tool.
  bool same_as(const mcp_tool& other) const {
    return kind_ == other.kind_ && name_ == other.name_ && raw_ == other.raw_
           && description_ == other.description_
           && schema_.dump() == other.schema_.dump()
           && session_ == other.session_;
  }

  std::chrono::milliseconds deadline(const json::value&,
                                     const options&) const override {
    // The session enforces the per-call timeout itself (and sends
    // notifications/cancelled); the invocation's deadline is a backstop.
    return std::chrono::seconds{session_->config().timeout + 10};
  }

  bool parallel_safe() const override {
    return session_->config().supports_parallel_tool_calls;
  }

  json::value run(const json::value& args,
                  const tool_context& ctx) const override {
    auto deadline = ctx.deadline == clock::time_point{}
                      ? clock::now() + std::chrono::seconds{
                          session_->config().timeout}
                      : ctx.deadline;
    mcp_caller caller{ctx.session_id, ctx.cwd};
    switch (kind_) {
      case mcp_kind::tool:
        return session_->call_tool(raw_, args, ctx.cancelled, deadline,
                                   ctx.home + "/cache/mcp-media", &caller);
      case mcp_kind::list_resources: {
        json::value p = json::value::make_object();
        if (auto c = args.find("cursor"); c != nullptr && c->is_string())
          p["cursor"] = *c;
        return session_->call_method("resources/list", std::move(p),
                                     ctx.cancelled, deadline, &caller);
      }
      case mcp_kind::read_resource: {
        json::value p;
        p["uri"] = args.get_string("uri", "");
        return session_->call_method("resources/read", std::move(p),
                                     ctx.cancelled, deadline, &caller);
      }
      case mcp_kind::list_prompts: {
        json::value p = json::value::make_object();
        if (auto c = args.find("cursor"); c != nullptr && c->is_string())
          p["cursor"] = *c;
        return session_->call_method("prompts/list", std::move(p),
                                     ctx.cancelled, deadline, &caller);
      }
      case mcp_kind::get_prompt: {
        json::value p;
        p["name"] = args.get_string("name", "");
        if (auto a = args.find("arguments"); a != nullptr && a->is_object())
          p["arguments"] = *a;
        return session_->call_method("prompts/get", std::move(p),
                                     ctx.cancelled, deadline, &caller);
      }
    }
    return error_result("unknown MCP tool kind");
  }

private:
  std::shared_ptr<mcp_session> session_;
  mcp_kind kind_;
  std::string name_;
  std::string raw_;
  std::string description_;
  json::value schema_;
  std::string toolset_;
};

json::value object_schema(std::vector<std::pair<const char*, const char*>>
                            string_props,
                          std::vector<const char*> required) {
  json::value s;
  s["type"] = "object";
  json::value props = json::value::make_object();
  for (auto& [name, desc] : string_props)
    props[name] = schema_property("string", desc);
  s["properties"] = std::move(props);
  if (!required.empty()) {
    json::value r = json::value::make_array();
    for (auto x : required)
      r.push_back(x);
    s["required"] = std::move(r);
  }
  return s;
}

std::string fingerprint(const mcp_server_options& s) {
  std::string f = s.transport + "\x1f" + s.command + "\x1f" + s.url;
  for (auto& a : s.args)
    f += "\x1f" + a;
  return f;
}

} // namespace

std::string mcp_manager::cache_path(const std::string& home,
                                    const std::string& server) {
  return home + "/cache/mcp/" + mcp_sanitize(server) + ".json";
}

bool mcp_write_schema_cache(const std::string& path, const mcp_session& s) {
  json::value doc;
  doc["fingerprint"] = fingerprint(s.config());
  json::value tools = json::value::make_array();
  for (auto& t : s.tools()) {
    json::value x;
    x["name"] = t.name;
    x["description"] = t.description;
    x["inputSchema"] = t.input_schema;
    x["readOnly"] = t.read_only;
    tools.push_back(std::move(x));
  }
  doc["tools"] = std::move(tools);
  doc["resources"] = s.has_resources();
  doc["prompts"] = s.has_prompts();
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  auto tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << doc.dump();
    if (!out)
      return false;
  }
  fs::rename(tmp, path, ec);
  return !ec;
}

bool mcp_read_schema_cache(const std::string& path,
                           const mcp_server_options& s,
                           std::vector<mcp_tool_info>* tools, bool* resources,
                           bool* prompts) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return false;
  std::ostringstream text;
  text << in.rdbuf();
  auto doc = json::parse(text.str());
  if (!doc || !doc.v->is_object()
      || doc.v->get_string("fingerprint", "") != fingerprint(s))
    return false;
  auto arr = doc.v->find("tools");
  if (arr == nullptr || !arr->is_array())
    return false;
  tools->clear();
  for (auto& x : arr->as_array()) {
    if (!x.is_object() || x.get_string("name", "").empty())
      continue;
    mcp_tool_info t;
    t.name = x.get_string("name", "");
    t.description = x.get_string("description", "");
    if (auto sc = x.find("inputSchema"))
      t.input_schema = *sc;
    t.read_only = x.get_bool("readOnly", false);
    tools->push_back(std::move(t));
  }
  *resources = doc.v->get_bool("resources", false);
  *prompts = doc.v->get_bool("prompts", false);
  return true;
}

mcp_manager::mcp_manager(const options& cfg, http_client* http)
  : cfg_(cfg), http_(http), link_(std::make_shared<link>()) {
  link_->self = this;
  for (auto& s : cfg.mcp_servers)
    if (s.enabled)
      sessions_.push_back(std::make_shared<mcp_session>(s, cfg, http));
}

mcp_manager::~mcp_manager() {
  shutdown();
}

void mcp_manager::start() {
  std::vector<std::thread> threads;
  std::vector<double> ms(sessions_.size(), -1);
  for (size_t i = 0; i < sessions_.size(); ++i) {
    auto& s = sessions_[i];
    const auto& c = s->config();
    if (c.lazy) {
      std::vector<mcp_tool_info> tools;
      bool res = false, pr = false;
      if (mcp_read_schema_cache(cache_path(cfg_.home, c.name), c, &tools,
                                &res, &pr)) {
        s->seed_catalog(std::move(tools), res, pr);
        continue; // connects on its first call
      }
    }
    threads.emplace_back([this, s, i, &ms] {
      auto t0 = clock::now();
      auto st = s->connect();
      // A server that was refused or died at once gets two more attempts
      // (after 0.5 s and 1 s) while its connect_timeout lasts; a missing
      // command or a timeout does not.
      auto end = t0 + std::chrono::seconds{s->config().connect_timeout};
      for (int retry = 0; retry < 2 && st.code == status_code::unavailable;
           ++retry) {
        auto pause = std::chrono::milliseconds{500 << retry};
        if (clock::now() + pause >= end)
          break;
        std::this_thread::sleep_for(pause);
        st = s->connect();
      }
      ms[i] = std::chrono::duration<double, std::milli>(clock::now() - t0)
                .count();
      if (!st) {
        MIBYAN_LOG(warning, "mcp", "server '" << s->config().name
                                              << "' failed to start: "
                                              << st.error);
        return;
      }
      MIBYAN_LOG(info, "mcp", "server '" << s->config().name << "': "
                                         << s->tools().size() << " tools");
      if (!mcp_write_schema_cache(cache_path(cfg_.home, s->config().name),
                                  *s))
        MIBYAN_LOG(warning, "mcp", "cannot write the schema cache of '"
                                     << s->config().name << "'");
    });
  }
  for (auto& t : threads)
    t.join();
  for (size_t i = 0; i < sessions_.size(); ++i)
    if (ms[i] >= 0)
      connect_ms_[sessions_[i]->config().name] = ms[i];
}

// The registry tools of `s` into `out` (names into `names`). A name that
// collides with a built-in tool, with another server's tool in `reg` or
// with one already in `out`, or that is too long, is left out with a
// warning.
void mcp_manager::collect(const std::shared_ptr<mcp_session>& s,
                          const tool_registry& reg,
                          std::vector<std::unique_ptr<tool>>& out,
                          std::vector<std::string>& names,
                          std::vector<std::string>& warnings) const {
  auto warn = [&](std::string w) {
    MIBYAN_LOG(warning, "mcp", w);
    warnings.push_back(std::move(w));
  };
  const auto& c = s->config();
  auto add = [&](mcp_kind kind, const std::string& raw,
                 std::string description, json::value schema) {
    const auto& server = c.name;
    auto name = mcp_tool_name(server, raw);
    if (name.size() > mcp_max_tool_name) {
      warn("MCP tool '" + raw + "' of server '" + server + "' skipped: '"
           + name + "' is longer than 64 characters");
      return;
    }
    if (std::find(names.begin(), names.end(), name) != names.end()) {
      warn("MCP tool '" + name + "' of server '" + server
           + "' rejected: the name collides with a tool of server '"
           + server + "' after sanitising");
      return;
    }
    if (auto existing = reg.find(name)) {
      auto other = dynamic_cast<const mcp_tool*>(existing);
      if (other == nullptr) {
        warn("MCP tool '" + raw + "' of server '" + server + "' skipped: '"
             + name + "' is a built-in tool");
        return;
      }
      if (other->server() != server) {
        warn("MCP tool '" + name + "' of server '" + server
             + "' rejected: the name collides with a tool of server '"
             + other->server() + "' after sanitising");
        return;
      }
      // This server's own tool: replaced (a re-registration).
    }
    out.push_back(std::make_unique<mcp_tool>(s, kind, name, raw,
                                             std::move(description),
                                             std::move(schema)));
    names.push_back(name);
  };
  for (auto& t : s->tools()) {
    if (!mcp_tool_admitted(c, t.name))
      continue;
    auto desc = t.description.empty()
                  ? "MCP tool " + t.name + " from " + c.name
                  : t.description;
    add(mcp_kind::tool, t.name, std::move(desc),
        mcp_normalize_schema(t.input_schema.is_null() ? nullptr
                                                      : &t.input_schema));
  }
  if (c.resources && s->has_resources()) {
    add(mcp_kind::list_resources, "list_resources",
        "List the resources of MCP server " + c.name
          + " (pass `cursor` for the next page).",
        object_schema({{"cursor", "Pagination cursor from a previous "
                                  "call"}},
                      {}));
    add(mcp_kind::read_resource, "read_resource",
        "Read one resource of MCP server " + c.name + " by its URI.",
        object_schema({{"uri", "The resource URI"}}, {"uri"}));
  }
  if (c.prompts && s->has_prompts()) {
    add(mcp_kind::list_prompts, "list_prompts",
        "List the prompts of MCP server " + c.name + ".",
        object_schema({{"cursor", "Pagination cursor from a previous "
                                  "call"}},
                      {}));
    auto schema = object_schema({{"name", "The prompt name"}}, {"name"});
    schema["properties"]["arguments"]
      = schema_property("object", "The prompt's arguments (strings)");
    add(mcp_kind::get_prompt, "get_prompt",
        "Get one prompt of MCP server " + c.name + " with arguments.",
        std::move(schema));
  }
}

std::vector<std::string> mcp_manager::register_tools(tool_registry& reg) {
  std::vector<std::string> warnings;
  std::lock_guard<std::mutex> guard{link_->mtx};
  registered_.clear();
  for (auto& s : sessions_) {
    std::vector<std::unique_ptr<tool>> fresh;
    auto& names = registered_[s->config().name]; // listed even without tools
    collect(s, reg, fresh, names, warnings);
    for (auto& t : fresh)
      reg.add(std::move(t));
  }
  reg_ = &reg;
  // A server's tools/list_changed (or a reconnection with other tools)
  // re-registers its tools (docs/mcp.md, "Tool list changes").
  for (auto& s : sessions_) {
    std::weak_ptr<link> weak = link_;
    std::weak_ptr<mcp_session> ws = s;
    s->set_tools_changed_handler([weak, ws] {
      auto l = weak.lock();
      auto session = ws.lock();
      if (!l || !session)
        return;
      std::lock_guard<std::mutex> g{l->mtx};
      if (l->self != nullptr)
        l->self->reregister(session);
    });
  }
  // Script stubs from the same schemas (execute_code, mcp_in_scripts).
  script_specs_ = mcp_script_specs(reg);
  return warnings;
}

std::vector<script_tool_spec> mcp_script_specs(const tool_registry& reg) {
  std::vector<script_tool_spec> out;
  for (auto* t : reg.all()) {
    auto m = dynamic_cast<const mcp_tool*>(t);
    if (m == nullptr)
      continue;
    std::string n = m->name();
    auto prefix = "mcp__" + mcp_sanitize(m->server()) + "__";
    if (n.rfind(prefix, 0) != 0)
      continue;
    script_tool_spec spec;
    if (auto made = make_script_tool_spec(n, m->description(), m->schema()))
      spec = std::move(*made);
    else {
      // Keyword-only use (**args) still works: no signature.
      spec.name = n;
      spec.doc = "MCP tool " + n;
    }
    spec.mcp_server = mcp_sanitize(m->server());
    spec.mcp_tool = n.substr(prefix.size());
    out.push_back(std::move(spec));
  }
  return out;
}

void mcp_manager::reregister(const std::shared_ptr<mcp_session>& s) {
  // link_->mtx is held.
  if (reg_ == nullptr)
    return;
  const auto& server = s->config().name;
  std::vector<std::unique_ptr<tool>> fresh;
  std::vector<std::string> names, warnings;
  collect(s, *reg_, fresh, names, warnings);
  // A tool that did not change stays the same object.
  std::vector<std::string> kept;
  fresh.erase(std::remove_if(fresh.begin(), fresh.end(),
                             [&](const std::unique_ptr<tool>& t) {
                               auto old = dynamic_cast<const mcp_tool*>(
                                 reg_->find(t->name()));
                               auto now = static_cast<const mcp_tool*>(
                                 t.get());
                               if (old == nullptr || !old->same_as(*now))
                                 return false;
                               kept.push_back(t->name());
                               return true;
                             }),
              fresh.end());
  auto added = fresh.size();
  reg_->replace(
    [&](const tool& t) {
      auto m = dynamic_cast<const mcp_tool*>(&t);
      return m != nullptr && m->server() == server
             && std::find(kept.begin(), kept.end(), t.name()) == kept.end();
    },
    std::move(fresh));
  auto& old = registered_[server];
  size_t removed = 0;
  for (auto& n : old)
    if (std::find(names.begin(), names.end(), n) == names.end())
      ++removed;
  old = names;
  script_specs_ = mcp_script_specs(*reg_);
  MIBYAN_LOG(info, "mcp", "server '" << server << "': tools re-registered ("
                                     << names.size() << " tools, " << added
                                     << " new or changed, " << removed
                                     << " removed)");
  if (!mcp_write_schema_cache(cache_path(cfg_.home, server), *s))
    MIBYAN_LOG(warning, "mcp", "cannot write the schema cache of '"
                                 << server << "'");
}

std::map<std::string, std::vector<std::string>>
mcp_manager::server_tools() const {
  std::lock_guard<std::mutex> guard{link_->mtx};
  return registered_;
}

std::vector<script_tool_spec> mcp_manager::script_specs() const {
  std::lock_guard<std::mutex> guard{link_->mtx};
  return script_specs_;
}

std::shared_ptr<mcp_session> mcp_manager::find(const std::string& server) const {
  for (auto& s : sessions_)
    if (s->config().name == server)
      return s;
  return nullptr;
}

std::vector<std::shared_ptr<mcp_session>> mcp_manager::sessions() const {
  return sessions_;
}

std::vector<mcp_server_report> mcp_manager::report() const {
  std::vector<mcp_server_report> out;
  for (auto& c : cfg_.mcp_servers) {
    mcp_server_report r;
    r.name = c.name;
    r.transport = c.transport;
    auto s = find(c.name);
    if (!s) {
      r.state = "disabled";
    } else {
      auto st = s->current_state();
      r.state = mcp_session::state_name(st);
      if (st == mcp_session::state::idle && c.lazy && !s->tools().empty())
        r.state = "lazy";
      r.error = s->last_error();
      // An HTTP server that wants an OAuth login it has not had
      // (docs/mcp.md, "Authorization").
      if (st != mcp_session::state::connected)
        if (auto o = mcp_oauth_find(cfg_.home, c.name)) {
          auto why = o->login_needed();
          if (!why.empty()) {
            r.state = "needs_login";
            r.error = why;
          }
        }
    }
    {
      std::lock_guard<std::mutex> guard{link_->mtx};
      if (auto i = registered_.find(c.name); i != registered_.end())
        r.tools = i->second;
    }
    if (auto i = connect_ms_.find(c.name); i != connect_ms_.end())
      r.connect_ms = i->second;
    out.push_back(std::move(r));
  }
  return out;
}

void mcp_manager::set_sampling_handler(mcp_sampling_fn fn) {
  for (auto& s : sessions_)
    s->set_sampling_handler(fn);
}

void mcp_manager::set_elicitation_handler(mcp_elicitation_fn fn) {
  for (auto& s : sessions_)
    s->set_elicitation_handler(fn);
}

void mcp_manager::set_roots_provider(mcp_roots_fn fn) {
  for (auto& s : sessions_)
    s->set_roots_provider(fn);
}

void mcp_manager::shutdown() {
  {
    // No re-registration from now on (a running one finishes first).
    std::lock_guard<std::mutex> guard{link_->mtx};
    link_->self = nullptr;
    reg_ = nullptr;
  }
  std::vector<std::thread> threads;
  for (auto& s : sessions_)
    threads.emplace_back([s] { s->close(); });
  for (auto& t : threads)
    t.join();
}

} // namespace mibyan
