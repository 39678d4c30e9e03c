#include "cli/session_chain.hpp"

#include <algorithm>
#include <set>

#include "storage/session_store.hpp"

namespace mibyan::cli {

session_chain read_session_chain(const session_store& store,
                                 const session_info& self) {
  session_chain c;
  c.lineage.push_back(self);
  std::set<std::string> seen{self.id};
  auto parent = self.parent_session_id;
  while (!parent.empty() && seen.insert(parent).second
         && c.lineage.size() < 1000) {
    auto info = store.get_session(parent);
    if (!info)
      break;
    c.lineage.push_back(*info);
    parent = info->parent_session_id;
  }
  std::reverse(c.lineage.begin(), c.lineage.end());
  size_t offset = 0;
  constexpr size_t page = 500;
  for (;;) {
    auto list = store.list_sessions(page, offset);
    if (!list || list->empty())
      break;
    for (auto& s : *list)
      if (s.parent_session_id == self.id)
        c.children.push_back(s);
    if (list->size() < page)
      break;
    offset += page;
  }
  std::sort(c.children.begin(), c.children.end(),
            [](const session_info& a, const session_info& b) {
              return a.started_at_ms < b.started_at_ms
                     || (a.started_at_ms == b.started_at_ms && a.id < b.id);
            });
  return c;
}

std::string render_session_chain(const session_chain& c) {
  std::string out;
  if (c.lineage.size() > 1) {
    out += "chain: ";
    for (size_t i = 0; i < c.lineage.size(); ++i) {
      if (i > 0)
        out += " -> ";
      out += c.lineage[i].id;
    }
    out += " (this)\n";
  }
  for (auto& ch : c.children) {
    bool continuation = ch.source != "delegate";
    out += continuation ? "continued in: " : "subagent: ";
    out += ch.id;
    if (!ch.title.empty() && !continuation)
      out += " (" + ch.title.substr(0, 60) + ")";
    out += "\n";
  }
  return out;
}

json::value session_chain_json(const session_chain& c) {
  json::value out;
  out["chain"] = json::value::make_array();
  for (auto& s : c.lineage)
    out["chain"].push_back(s.id);
  out["children"] = json::value::make_array();
  for (auto& s : c.children) {
    json::value e;
    e["id"] = s.id;
    e["source"] = s.source;
    e["end_reason"] = s.end_reason;
    e["title"] = s.title;
    out["children"].push_back(std::move(e));
  }
  return out;
}

} // namespace mibyan::cli
