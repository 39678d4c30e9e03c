// File: base/redact.hpp
//
// Secret redaction for text that is about to reach a model or disk (tool
// results, execute_code output, spill files, approval prompts). The rules
// are described for users in docs/security.md; in short, one left-to-right
// pass replaces:
//
//   * the values of the process's secret variables (names the env scrubber
//     treats as secret, see is_secret_variable_name) of at least
//     `min_secret_value_length` bytes, wherever they occur
//       -> "[REDACTED:NAME]"
//   * provider and service key shapes (sk-..., sk-ant-..., gsk_..., xai-...,
//     AIza..., ghp_/gho_/github_pat_..., glpat-..., xox?-..., AKIA/ASIA...,
//     hf_..., npm_..., Stripe sk_live_...)      -> "<prefix>[REDACTED]"
//   * JWTs (eyJ...\.xxx\.xxx) and `Bearer <token>`   -> "[REDACTED]"
//   * PEM private-key bodies (BEGIN/END lines kept)  -> "[REDACTED PRIVATE KEY]"
//   * values of secret-named pairs: `NAME=value`, `NAME: value`,
//     `"name": "value"` (last name word token/secret/password/apikey/...)
//                                                     -> "[REDACTED]"
//   * passwords in URL userinfo (scheme://user:pw@host)  -> user:[REDACTED]@
//   * PEM private keys also inside bytes reprs and JSON strings, cut off
//     or with only the END line left (base/redact_blocks.hpp)
//   * .netrc `password` values (base/redact_blocks.hpp)     -> "[REDACTED]"
//   * base64 holding a literal secret (any alignment)  -> "[REDACTED:NAME]"
//     and base64 blobs that decode to a private key or to text with a
//     secret (base/redact_base64.hpp)                    -> "[REDACTED]"
//
// Matching runs on a normalised copy of the text (base/redact_normalize.hpp:
// invisible format and control characters removed, so UTF-16 text that is
// mostly ASCII too; compatibility forms such as full-width letters folded
// as NFKC does) and the matches are replaced in the original; text of
// printable ASCII only skips the normalisation.
//
// Hex digests, UUIDs and base64 in ordinary text are never touched: every
// shape needs a literal prefix or a secret-named key in front of it, and a
// base64 blob is replaced only when what it decodes to holds a secret.
//
// Thread safety: a redactor is immutable after construction; `redact` may
// be called concurrently from any thread. No I/O, no CAF, no exceptions
// besides std::bad_alloc.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mibyan {

/// Values shorter than this are never redacted by value (too likely to
/// occur by chance and mangle unrelated text).
constexpr size_t min_secret_value_length = 8;

/// Returns whether an environment variable called `name` holds a secret:
/// its upper-cased name contains KEY, TOKEN, SECRET, PASSWORD, PASSWD,
/// CREDENTIAL, AUTH, DSN, WEBHOOK, CREDS, BEARER or APIKEY (the env
/// scrubber's secret block), except names of sockets, paths and files
/// (…_SOCK, …_PATH, …_FILE, …_DIR), whose values are not secrets.
bool is_secret_variable_name(std::string_view name);

class redactor {
public:
  /// A literal secret: every occurrence of `value` becomes
  /// "[REDACTED:<name>]".
  struct secret {
    std::string name;
    std::string value;
  };

  /// A redactor that only knows the shapes (no literal values).
  redactor();

  /// A redactor for `secrets` plus the shapes. Values shorter than
  /// min_secret_value_length are ignored; duplicates are merged.
  explicit redactor(std::vector<secret> secrets);

  ~redactor();
  redactor(redactor&&) noexcept;
  redactor& operator=(redactor&&) noexcept;

  /// Collects the secret variables (is_secret_variable_name) of `env`
  /// ("NAME=value" strings) and of `extra` (e.g. the `.env` file's
  /// variables), plus `literals` (name, value) taken as they are (e.g. the
  /// secret values of config.yaml), into a redactor.
  static redactor from_environment(
    const std::vector<std::string>& env,
    const std::map<std::string, std::string>& extra = {},
    const std::vector<std::pair<std::string, std::string>>& literals = {});

  /// Redacts `text` in place; returns whether anything changed. Text
  /// without a match is not copied.
  bool redact(std::string& text) const;

  /// Writes the redacted form of `text` to `out` and returns true when
  /// something was redacted; returns false (and leaves `out` unspecified)
  /// when `text` has nothing to redact.
  bool redact_to(std::string_view text, std::string& out) const;

  /// Returns a redacted copy of `text`.
  std::string redacted(std::string_view text) const;

  /// Number of literal secret values known.
  size_t secret_count() const;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// The process-wide redactor built from the current environment on first
/// use (shapes plus secret variables). Used where no runtime-specific
/// redactor is at hand (tools/registry dispatch without a context redactor,
/// unit tests).
const redactor& process_redactor();

} // namespace mibyan
