// Lookup of the embedded dashboard files (serve/ui_assets.hpp).
#include "serve/ui_assets.hpp"

#include <algorithm>

namespace mibyan::serve {

const ui_asset* find_ui_asset(std::string_view path) {
  if (path.empty())
    path = "index.html";
  size_t n = 0;
  const ui_asset* t = ui_asset_table(n);
  if (n == 0)
    return nullptr;
  auto end = t + n;
  auto i = std::lower_bound(t, end, path,
                            [](const ui_asset& a, std::string_view p) {
                              return a.path < p;
                            });
  return i != end && i->path == path ? i : nullptr;
}

bool etag_matches(std::string_view header, std::string_view etag) {
  size_t pos = 0;
  while (pos < header.size()) {
    auto end = header.find(',', pos);
    if (end == std::string_view::npos)
      end = header.size();
    auto item = header.substr(pos, end - pos);
    while (!item.empty() && item.front() == ' ')
      item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ')
      item.remove_suffix(1);
    if (item.substr(0, 2) == "W/")
      item.remove_prefix(2);
    if (item == "*" || item == etag)
      return true;
    pos = end + 1;
  }
  return false;
}

} // namespace mibyan::serve
