// File: tools/mcp/mcp_oauth_store.hpp
//
// The OAuth state of one HTTP MCP server on disk (docs/mcp.md,
// "Authorization"): `$MIBYAN_HOME/mcp-tokens/<server>.json`, mode 0600 in a
// 0700 directory, replaced atomically (a private temporary file renamed
// over the old one), so a reader never sees half a file and a concurrent
// `mibyan mcp login` and a running node never mix two records.
//
// The record holds the tokens, the client (pre-registered or dynamically
// registered, with its secret when the server issued one), the endpoints
// found by discovery (so a refresh needs no discovery), and the pending
// step-up scope. Nothing here logs; tokens never leave this file and the
// Authorization header.
//
// Thread safety: the functions are reentrant; one record is written by
// whole-file replacement, so the last writer wins.
#pragma once

#include <cstdint>
#include <string>

#include "base/json.hpp"
#include "base/status.hpp"

namespace mibyan {

struct mcp_oauth_record {
  std::string server_url;       // the MCP server URL the record belongs to
  std::string resource;         // the RFC 8707 resource value used
  std::string issuer;
  std::string authorization_endpoint;
  std::string token_endpoint;
  std::string registration_endpoint;
  std::string client_id;
  std::string client_secret;    // a dynamically registered client's secret
  bool client_registered = false; // client_id came from RFC 7591
  /// How a client with a secret authenticates at the token endpoint:
  /// "client_secret_basic" (default) or "client_secret_post".
  std::string token_auth_method;
  std::string redirect_uri;     // the one the client was registered with
  std::string access_token;
  std::string refresh_token;
  std::string token_type;
  int64_t expires_at = 0;       // unix seconds; 0 = unknown
  int64_t obtained_at = 0;      // unix seconds the access token came
  std::string scope;            // granted (or requested when not echoed)
  std::string step_up_scope;    // scope a 403 insufficient_scope asked for
  std::string login_reason;     // why a new login is needed ("" = none)

  /// Takes a token endpoint answer: the access token, a rotated refresh
  /// token (else the old one stays), expires_at from expires_in and `now`,
  /// the granted scope (else `requested_scope`); clears login_reason and a
  /// step-up scope the grant covers.
  void apply_tokens(const json::value& token_response,
                    const std::string& requested_scope, int64_t now);

  /// Whether a background refresh is due at `now`: the token expires
  /// within min(60 s, half its lifetime) and there is a refresh token.
  bool refresh_due(int64_t now) const;

  json::value to_json() const;
  static mcp_oauth_record from_json(const json::value& v);
};

/// `$MIBYAN_HOME/mcp-tokens/<sanitised server>.json`.
std::string mcp_token_path(const std::string& home, const std::string& server);

/// Loads the record; `not_found` when there is none, `data_corrupt` when the
/// file is not a JSON object.
result<mcp_oauth_record> load_mcp_token(const std::string& path);

/// Writes the record atomically with mode 0600 (directory 0700).
status save_mcp_token(const std::string& path, const mcp_oauth_record& r);

/// Removes the record; true when one was there.
bool remove_mcp_token(const std::string& path);

} // namespace mibyan
