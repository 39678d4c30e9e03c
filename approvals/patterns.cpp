#include "approvals/patterns.hpp"

#include <algorithm>
#include <bitset>
#include <regex>

#include "approvals/structure.hpp"
#include "base/strings.hpp"

namespace mibyan::approvals {

namespace {

// The command-position prefix: start of input or a command separator,
// then any number of transparent wrappers.
#define CMD                                                                  \
  R"re((?:^|[;&|\n`(]|\$\()\s*(?:(?:sudo(?:\s+-\S+)*|env(?:\s+[a-z_][a-z0-9_]*=\S*)*|exec|nohup|setsid|time|command)\s+)*)re"

// Arguments of one simple command (never crosses a separator).
#define ARGS R"re((?:[^\s;&|<>()]+\s+)*)re"

// The root or a directory the system needs (optionally /*), as one
// argument.
#define SYSTEM_PATH                                                          \
  R"re(['"]?/+(?:(?:home|root|etc|usr|var|bin|sbin|boot|lib(?:32|64)?|dev|proc|sys)/*)?\*?)re"

// Block devices.
#define BLOCKDEV R"re(/dev/(?:sd[a-z]|hd[a-z]|vd[a-z]|xvd[a-z]|nvme\d|mmcblk\d))re"

// The end of a path argument.
#define PATH_END R"re(['"]?(?:[\s;&|)`]|$))re"

// Where a match can begin, so that the regex is tried only there (an
// unanchored std::regex_search tries every position and costs tens of
// microseconds per pattern): `at_keyword` - at an occurrence of one of
// `anchors` (default: the keywords); `at_command` - at the start or at a
// command separator (the CMD prefix); `anywhere` - a plain search.
enum class anchor { anywhere, at_keyword, at_command };

struct pattern_spec {
  const char* description;
  const char* regex;
  std::vector<const char*> keywords; // lowercase literals; one must occur
  anchor where = anchor::anywhere;
  bool cased = false;                // match case-sensitively
  std::vector<const char*> anchors = {};
};

constexpr auto K = anchor::at_keyword;
constexpr auto C = anchor::at_command;
constexpr auto A = anchor::anywhere;

const std::vector<pattern_spec>& hardline_specs() {
  static const std::vector<pattern_spec> specs = {
    {"root filesystem delete",
     CMD R"re(rm\s+)re" ARGS R"re(['"]?/+(?:\.{1,2}/?|\*)?)re" PATH_END,
     {"rm"}, C},
    {"system directory delete",
     CMD R"re(rm\s+)re" ARGS
       R"re(['"]?/(?:home|root|etc|usr|var|bin|sbin|boot|lib(?:32|64)?|opt|srv|mnt|media|dev|proc|sys)/?\*?)re" PATH_END,
     {"rm"}, C},
    {"home directory delete",
     CMD R"re(rm\s+)re" ARGS
       R"re(['"]?(?:~|\$home|\$\{home\})(?:/+(?:\.{1,2}/?|\.?\*)?)?)re" PATH_END,
     {"rm"}, C},
    {"filesystem format", R"re(\bmkfs(?:\.[a-z0-9]+)?\b)re", {"mkfs"}, K},
    {"dd onto a block device", R"re(\bdd\b[^\n]*\bof=)re" BLOCKDEV, {"dd"}, K},
    {"redirect to block device", R"re(>\s*)re" BLOCKDEV, {"/dev/"}, K, false,
     {">"}},
    {"fork bomb",
     R"re(([a-z_:][\w:]*)\s*\(\)\s*\{\s*\1\s*\|\s*\1\s*&\s*\}\s*;\s*\1)re",
     {"()"}, A},
    {"kill every process",
     R"re(\bkill\s+(?:-\S+\s+)*-1\s*(?:[;&|)\n]|$))re", {"kill"}, K},
    {"shutdown / reboot", CMD R"re((?:shutdown|reboot|halt|poweroff)\b)re",
     {"shutdown", "reboot", "halt", "poweroff"}, C},
    {"shutdown / reboot", CMD R"re((?:init|telinit)\s+[06]\b)re", {"init"}, C},
    {"shutdown / reboot",
     R"re(\bsystemctl\s+(?:-\S+\s+)*(?:poweroff|reboot|halt|kexec)\b)re",
     {"systemctl"}, K},
    // -R before or after the path; case-sensitive (chmod -r removes read).
    {"recursive chown/chmod of a system path",
     CMD R"re((?:chown|chmod|chgrp)\s+)re" ARGS
       R"re((?:-[a-zA-Z]*R[a-zA-Z]*|--recursive)\s+)re" ARGS SYSTEM_PATH PATH_END,
     {"chown", "chmod", "chgrp"}, C, true},
    {"recursive chown/chmod of a system path",
     CMD R"re((?:chown|chmod|chgrp)\s+)re" ARGS SYSTEM_PATH
       R"re(['"]?\s+)re" ARGS R"re((?:-[a-zA-Z]*R[a-zA-Z]*|--recursive)(?:[\s;&|)`]|$))re",
     {"chown", "chmod", "chgrp"}, C, true},
    {"kernel sysrq trigger",
     R"re((?:>>?\|?|&>>?|\btee\b[^\n;&|]*?\s|\bof=|\b(?:cp|mv|install|ln|dd)\b[^\n;&|]*?\s)\s*['"]?/proc/+sysrq-trigger\b)re",
     {"sysrq-trigger"}, A},
  };
  return specs;
}

#define SENSITIVE_DIRS R"re((?:/etc/|~/\.ssh/|~/\.mibyan/|\.env\b|\.bashrc|\.zshrc|\.profile))re"

const std::vector<pattern_spec>& dangerous_specs() {
  static const std::vector<pattern_spec> specs = {
    // -- deletion
    {"recursive rm",
     CMD R"re(rm\s+)re" ARGS R"re((?:-[a-z]*r[a-z]*|--recursive)\b)re",
     {"rm"}, C},
    {"rm fed by xargs", R"re(\bxargs\b[^\n;&|]*\brm\b)re", {"xargs"}, K},
    {"find -exec rm",
     R"re(\bfind\b[^\n;&|]*\s-(?:exec|execdir|ok|okdir)\s+(?:\S*/)?rm\b)re",
     {"find"}, K},
    {"find -delete", R"re(\bfind\b[^\n;&|]*\s-delete\b)re", {"find"}, K},
    {"git clean -f", R"re(\bgit\s+(?:[^\s;&|]+\s+)*?clean\s+(?:\S+\s+)*-[a-z]*f)re",
     {"clean"}, K, false, {"git"}},
    {"Windows delete", R"re(\bcmd(?:\.exe)?\s+/c\s+(?:del|erase|rd|rmdir)\b)re",
     {"cmd"}, K},
    {"PowerShell delete", R"re(\bremove-item\b)re", {"remove-item"}, K},
    {"PowerShell encoded command",
     R"re(\b(?:powershell|pwsh)(?:\.exe)?\b[^\n]*\s-(?:e|enc|encodedcommand)\s)re",
     {"powershell", "pwsh"}, K},
    {"secure file wipe", R"re(\bshred\b)re", {"shred"}, K},
    {"deletes its inputs",
     R"re(\btar\b[^\n;&|]*\s--remove-files\b|\brsync\b[^\n;&|]*\s--remove-(?:source|sent)-files\b|\b7z[a-z]*\b[^\n;&|]*\s-sdel\b)re",
     {"--remove-", "-sdel"}, A},
    {"deletes its inputs",
     R"re(\bzip\s+(?:[^\s;&|]+\s+)*(?:-[a-z]*m[a-z]*|--move)(?:\s|$))re",
     {"zip"}, K},
    {"remove all cron jobs", R"re(\bcrontab\s+(?:-\S+\s+)*-r\b)re",
     {"crontab"}, K},
    // -- permissions
    {"world-writable",
     R"re(\bchmod\s+(?:-\S+\s+)*(?:[0-7]?[0-7]?777|0?666|[ugoa]*[oa][+=][rwxXst]*w[rwxXst]*)(?:[\s,;&|]|$))re",
     {"chmod"}, K},
    {"recursive chown to root",
     R"re(\bchown\s+(?:\S+\s+)*(?:-r|--recursive)\b[^\n]*\broot\b)re",
     {"chown"}, K},
    // -- disk
    {"disk copy with dd", R"re(\bdd\s+[^\n]*\bif=)re", {"dd"}, K},
    // -- SQL
    {"SQL DROP", R"re(\bdrop\s+(?:table|database|schema)\b)re", {"drop"}, K},
    {"DELETE without WHERE",
     R"re(\bdelete\s+from\s+[^\s;]+(?![^\n;]*\bwhere\b))re", {"delete"}, K},
    {"SQL TRUNCATE", R"re(\btruncate\s+(?:table\s+)?\w)re", {"truncate"}, K},
    // -- services and processes
    {"stop or disable a system service",
     R"re(\bsystemctl\s+(?:-\S+\s+)*(?:stop|restart|disable|mask)\b)re",
     {"systemctl"}, K},
    {"kill all processes", R"re(\bkill\s+-(?:9|kill|s\s+kill)\s+-1\b)re",
     {"kill"}, K},
    {"force-kill processes by name", R"re(\bpkill\s+-9\b)re", {"pkill"}, K},
    {"force-kill processes by name",
     R"re(\bkillall\s+(?:-9|-kill|-s\s+kill|-r)\b)re", {"killall"}, K},
    {"self-termination", R"re(\b(?:pkill|killall)\b[^\n]*\bmibyan\b)re",
     {"mibyan"}, K, false, {"pkill", "killall"}},
    {"kill by lookup", R"re(\bkill\b[^\n]*(?:\$\(|`)\s*(?:pgrep|pidof)\b)re",
     {"pgrep", "pidof"}, K, false, {"kill"}},
    {"stop the product's service",
     R"re(\blaunchctl\s+(?:stop|kickstart|bootout|unload|kill|disable|remove)\b[^\n]*\bmibyan\b)re",
     {"launchctl"}, K},
    {"product lifecycle",
     R"re(\bmibyan\s+(?:-\S+\s+)*(?:gateway\s+(?:stop|restart)|update)\b)re",
     {"mibyan"}, K},
    {"stop containers",
     R"re(\bdocker(?:-compose|\s+compose)?\s+(?:restart|stop|kill|down)\b)re",
     {"docker"}, K},
    {"gateway started outside its service manager",
     R"re(\bmibyan\s+(?:-\S+\s+)*gateway\b[^\n]*(?:&\s*(?:$|[^&\s])|\bdisown\b))re",
     {"gateway"}, K, false, {"mibyan"}},
    {"gateway started outside its service manager",
     R"re(\b(?:nohup|setsid)\s+(?:\S+\s+)*mibyan\s+(?:-\S+\s+)*gateway\b)re",
     {"gateway"}, K, false, {"nohup", "setsid"}},
    // -- arbitrary code execution
    {"sh -c", CMD R"re((?:ba|da|k|z)?sh\s+(?:-\S+\s+)*-[a-z]*c\b)re",
     {"sh"}, C},
    {"interpreter -c/-e",
     CMD R"re((?:python[0-9.]*|perl|ruby|node)\s+(?:-\S+\s+)*-[a-z]*[ce]\b)re",
     {"python", "perl", "ruby", "node"}, C},
    {"pipe to shell",
     R"re(\b(?:curl|wget)\b[^\n]*\|\s*(?:sudo\s+)?(?:(?:ba|da|k|z)?sh|python[0-9.]*|perl|ruby|node)\b)re",
     {"curl", "wget"}, K},
    {"process substitution",
     R"re(\b(?:ba|z)?sh\s+<\(\s*(?:curl|wget)\b)re", {"curl", "wget"}, K,
     false, {"bash", "zsh", "sh"}},
    {"eval of a download",
     R"re((?:\beval|\bsource|(?:^|[\s;&|])\.)\s+["']?\$\(\s*(?:curl|wget)\b)re",
     {"curl", "wget"}, K, false, {"eval", "source", "."}},
    {"decoded payload to shell",
     R"re(\b(?:base(?:64|32|16)\s+(?:-d|--decode)|xxd\s+-r|openssl\s+(?:base64|enc)\b[^|\n]*-d)[^\n]*\|\s*(?:ba|z)?sh\b)re",
     {"base64", "base32", "base16", "xxd", "openssl"}, K},
    {"heredoc into interpreter",
     R"re(\b(?:python[0-9.]*|perl|ruby|node|(?:ba|z)?sh)\s+(?:-\S+\s+)*<<)re",
     {"<<"}, K, false, {"python", "perl", "ruby", "node", "bash", "zsh", "sh"}},
    {"make executable then run",
     R"re(\bchmod\s+\+x\s+\S+\s*(?:;|&&)\s*\./)re", {"chmod"}, K},
    // -- sensitive file writes
    {"write to a system or credential file",
     R"re((?:>>?|\btee\b(?:\s+-a)?)\s*["']?(?:/etc/|/private/(?:etc|var|tmp|home)/|/dev/sd|~/\.ssh/|~/\.mibyan/(?:\.env|config\.yaml)|~/\.(?:bashrc|zshrc|profile|bash_profile|zprofile|netrc|pgpass|npmrc|pypirc)\b))re",
     {">", "tee"}, K},
    {"write to project secrets or config",
     R"re((?:>>?|\btee\b(?:\s+-a)?)\s*["']?(?:\./)?(?:\.env[\w.-]*|config\.yaml)\b)re",
     {">", "tee"}, K},
    {"copy or move onto a sensitive path",
     R"re(\b(?:cp|mv|install)\b[^\n;&|]*\s["']?(?:/etc/|~/\.ssh/|~/\.mibyan/|\S*\.env\b)\S*["']?\s*(?:$|[;&|]))re",
     {"cp", "mv", "install"}, K},
    {"in-place edit of a sensitive file",
     R"re(\bsed\s+(?:\S+\s+)*(?:-i\S*|--in-place)\b[^\n]*)re" SENSITIVE_DIRS,
     {"sed"}, K},
    {"in-place edit of a sensitive file",
     R"re(\b(?:perl|ruby)\s+(?:\S+\s+)*-[a-z]*i[^\n]*(?:/etc/|~/\.ssh/|~/\.mibyan/|\.env\b))re",
     {"perl", "ruby"}, K},
    // -- git history
    {"git reset --hard",
     R"re(\bgit\s+(?:[^\s;&|]+\s+)*?reset\s+(?:\S+\s+)*--h(?:ard)?\b)re",
     {"reset"}, K, false, {"git"}},
    {"git force push",
     R"re(\bgit\s+(?:[^\s;&|]+\s+)*?push\b[^\n;&|]*\s(?:--force\S*|-[a-z]*f)\b)re",
     {"push"}, K, false, {"git"}},
    {"git branch force delete",
     R"re(\bgit\s+(?:[^\s;&|]+\s+)*?branch\s+(?:\S+\s+)*(?:-D\b|-d\s+(?:\S+\s+)*--force\b|--force\s+(?:\S+\s+)*-d\b))re",
     {"branch"}, K, true, {"git"}},
    // -- sudo privilege flags
    {"sudo with shell/stdin/askpass flags",
     R"re(\bsudo\s+(?:-\S+\s+)*-[a-z]*[sa][a-z]*\b)re", {"sudo"}, K},
    {"sudo with shell/stdin/askpass flags",
     R"re(\bsudo\b[^\n]*\s--(?:stdin|askpass|shell)\b)re", {"sudo"}, K},
  };
  return specs;
}

struct compiled {
  std::string description;
  std::regex re;
  std::vector<size_t> keyword_ids;
  anchor where;
  std::vector<std::string> anchors;
  bool cased;
};

constexpr size_t max_keywords = 128;

struct table {
  std::vector<std::string> keywords;
  std::vector<compiled> hardline;
  std::vector<compiled> dangerous;
  std::regex sudo_stdin;
  size_t sudo_keyword = 0;
  /// Keyword ids by their first character.
  std::vector<size_t> by_first[256];

  size_t keyword_id(const std::string& k) {
    auto it = std::find(keywords.begin(), keywords.end(), k);
    if (it != keywords.end())
      return static_cast<size_t>(it - keywords.begin());
    keywords.push_back(k);
    return keywords.size() - 1;
  }

  std::vector<compiled> compile(const std::vector<pattern_spec>& specs) {
    std::vector<compiled> out;
    for (auto& s : specs) {
      compiled c;
      c.description = s.description;
      auto flags = std::regex::ECMAScript | std::regex::optimize;
      c.re = std::regex{s.regex, flags};
      for (auto k : s.keywords)
        c.keyword_ids.push_back(keyword_id(k));
      c.cased = s.cased;
      c.where = s.where;
      for (auto a : s.anchors.empty() ? s.keywords : s.anchors)
        c.anchors.push_back(a);
      out.push_back(std::move(c));
    }
    return out;
  }

  table() {
    hardline = compile(hardline_specs());
    dangerous = compile(dangerous_specs());
    sudo_stdin = std::regex{
      R"re(\bsudo\s+(?:-\S+\s+)*-[a-zA-Z]*S[a-zA-Z]*\b|\bsudo\b[^\n]*\s--stdin\b)re",
      std::regex::ECMAScript | std::regex::optimize};
    sudo_keyword = keyword_id("sudo");
    for (size_t i = 0; i < keywords.size() && i < max_keywords; ++i)
      by_first[static_cast<unsigned char>(keywords[i][0])].push_back(i);
  }
};

const table& patterns() {
  static const table t;
  return t;
}

using keyword_bits = std::bitset<max_keywords>;

// One pass over `lower`: at each position only the keywords starting with
// that character are compared.
keyword_bits present_keywords(const table& t, const std::string& lower) {
  keyword_bits bits;
  const size_t n = lower.size();
  for (size_t i = 0; i < n; ++i) {
    for (auto id : t.by_first[static_cast<unsigned char>(lower[i])]) {
      const auto& k = t.keywords[id];
      if (k.size() <= n - i && lower.compare(i, k.size(), k) == 0)
        bits.set(id);
    }
  }
  return bits;
}

bool wanted(const compiled& c, const keyword_bits& bits) {
  for (auto id : c.keyword_ids)
    if (id < max_keywords && bits.test(id))
      return true;
  return false;
}

// Bounded input for one std::regex_search call (see the header).
constexpr size_t window = 4096;
constexpr size_t overlap = 512;

bool search_bounded(const std::regex& re, const std::string& s) {
  if (s.size() <= window)
    return std::regex_search(s, re);
  size_t pos = 0;
  while (pos < s.size()) {
    auto nl = s.find('\n', pos);
    size_t end = nl == std::string::npos ? s.size() : nl;
    for (size_t b = pos; b < end; b += window - overlap) {
      auto e = std::min(end, b + window);
      if (std::regex_search(s.begin() + static_cast<long>(b),
                            s.begin() + static_cast<long>(e), re))
        return true;
      if (e == end)
        break;
    }
    pos = end + 1;
  }
  return false;
}

// Tries `re` only at `pos` (the match must begin there), on at most one
// window of input.
bool search_at(const std::regex& re, const std::string& s, size_t pos) {
  auto end = std::min(s.size(), pos + window);
  auto flags = std::regex_constants::match_continuous;
  if (pos > 0)
    flags |= std::regex_constants::match_prev_avail;
  return std::regex_search(s.begin() + static_cast<long>(pos),
                           s.begin() + static_cast<long>(end), re, flags);
}

bool run_pattern(const compiled& c, const std::string& s) {
  switch (c.where) {
  case anchor::anywhere:
    return search_bounded(c.re, s);
  case anchor::at_command:
    if (search_at(c.re, s, 0))
      return true;
    for (size_t i = 0; i < s.size(); ++i) {
      char ch = s[i];
      if ((ch == ';' || ch == '&' || ch == '|' || ch == '\n' || ch == '`'
           || ch == '(' || (ch == '$' && i + 1 < s.size() && s[i + 1] == '('))
          && search_at(c.re, s, i))
        return true;
    }
    return false;
  case anchor::at_keyword:
    for (auto& a : c.anchors)
      for (auto pos = s.find(a); pos != std::string::npos;
           pos = s.find(a, pos + 1))
        if (search_at(c.re, s, pos))
          return true;
    return false;
  }
  return false;
}

// Runs `c` against the variants: the lowercase ones, or the case-preserved
// ones for a case-sensitive pattern. `bits[i]` are the keywords of
// lower[i]; a cased variant is checked through its own lowercase form.
bool matches(const compiled& c, const command_variants& v,
             const std::vector<keyword_bits>& bits,
             const std::vector<keyword_bits>& cased_bits) {
  if (c.cased) {
    for (size_t i = 0; i < v.cased.size(); ++i)
      if (wanted(c, cased_bits[i]) && run_pattern(c, v.cased[i]))
        return true;
    return false;
  }
  for (size_t i = 0; i < v.lower.size(); ++i)
    if (wanted(c, bits[i]) && run_pattern(c, v.lower[i]))
      return true;
  return false;
}

std::vector<keyword_bits> bits_of(const table& t,
                                  const std::vector<std::string>& xs,
                                  bool lower_first) {
  std::vector<keyword_bits> out;
  out.reserve(xs.size());
  for (auto& x : xs)
    out.push_back(present_keywords(t, lower_first ? strings::lower(x) : x));
  return out;
}

} // namespace

scan_result scan_command(const command_variants& v) {
  const auto& t = patterns();
  scan_result r;
  auto bits = bits_of(t, v.lower, false);
  // The keywords of the case-preserved variants are computed only when a
  // case-sensitive pattern's keyword occurs at all.
  keyword_bits any;
  for (auto& b : bits)
    any |= b;
  std::vector<keyword_bits> cased_bits;
  auto match = [&](const compiled& c) {
    if (!wanted(c, any))
      return false;
    if (c.cased && cased_bits.empty())
      cased_bits = bits_of(t, v.cased, true);
    return matches(c, v, bits, cased_bits);
  };
  for (auto& c : t.hardline) {
    if (match(c)) {
      r.hardline = c.description;
      break;
    }
  }
  if (!r.hardline.empty())
    return r;
  bool sudo = false;
  for (auto& b : bits)
    sudo = sudo || b.test(t.sudo_keyword);
  for (size_t i = 0; sudo && i < v.cased.size() && !r.sudo_stdin; ++i)
    r.sudo_stdin = search_bounded(t.sudo_stdin, v.cased[i]);
  for (auto& c : t.dangerous) {
    if (std::find(r.dangerous.begin(), r.dangerous.end(), c.description)
        != r.dangerous.end())
      continue;
    if (match(c))
      r.dangerous.push_back(c.description);
  }
  for (auto& k : v.structural)
    if (std::find(r.dangerous.begin(), r.dangerous.end(), k)
        == r.dangerous.end())
      r.dangerous.push_back(k);
  return r;
}

std::vector<std::string> dangerous_keys() {
  std::vector<std::string> out;
  for (auto& s : dangerous_specs())
    if (std::find(out.begin(), out.end(), s.description) == out.end())
      out.push_back(s.description);
  for (auto& k : structure_keys())
    if (std::find(out.begin(), out.end(), k) == out.end())
      out.push_back(k);
  return out;
}

size_t warm_up_patterns() {
  const auto& t = patterns();
  return t.hardline.size() + t.dangerous.size() + 1;
}

} // namespace mibyan::approvals
