// File: actors/provider.hpp
//
// One provider connection: a wire format, a base URL and a credential,
// shared by every conversation that talks to that model endpoint.
//
// Protocol:
//   (complete_atom, chat_request) -> chat_response
//       Runs one model call over the runtime's HTTP client. Streamed
//       fragments go to `chat_request::sink` as
//       (delta_atom, request_id, kind, text) while the call runs. The
//       answer is a `chat_response`; a provider failure that survived the
//       retries and the fallback is a response with `error` set (the
//       provider's message, `http_status`, `retryable`). `provider` names
//       the connection that produced the answer, `attempts` counts every
//       HTTP attempt made.
//       Fails (caf::error, category "mibyan") only for:
//         ec::config_invalid  - the connection cannot be used (no API key,
//                               bad base URL); nothing was sent;
//         ec::invalid_request - the request is malformed (no model, tools
//                               not a JSON array, id already in flight);
//         ec::interrupted     - cancelled with cancel_atom;
//         ec::unavailable     - the actor shut down during the call.
//   (cancel_atom, std::string request_id)
//       Stops that call's transfer at once (or its pending retry) and
//       answers it with ec::interrupted. Unknown ids are ignored.
//
// Concurrency: calls overlap. Each call is an entry in the actor's map of
// calls in flight and owns at most one HTTP transfer at a time; the curl
// thread reports headers, body chunks and completion with anon_send, and
// the actor decodes the body incrementally (response_decoder). Retries
// wait with delayed_send; a stream that stays silent for the idle timeout
// is aborted and retried like a transport error. Once the main provider's
// attempts are spent (or it answers 401/402/403/404), the fallback
// provider, if configured, gets the call with a fresh attempt count.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "caf/fwd.hpp"
#include "caf/replies_to.hpp"
#include "caf/typed_actor.hpp"

#include "base/clock.hpp"
#include "config/options.hpp"
#include "messages/type_ids.hpp"
#include "providers/provider_profile.hpp"
#include "providers/retry_policy.hpp"

namespace mibyan {

class http_client;

using provider_actor = caf::typed_actor<
  caf::replies_to<complete_atom, chat_request>::with<chat_response>,
  caf::reacts_to<cancel_atom, std::string>>;

/// Everything a connection actor needs; plain data.
struct provider_settings {
  /// The main provider. When it failed to resolve, every call fails with
  /// ec::config_invalid and its message, before any request.
  result<provider_endpoint> main;
  /// Tried in order once the main provider gave up. Entries that failed to
  /// resolve are skipped (their error is mentioned in the final message).
  std::vector<result<provider_endpoint>> fallbacks;
  /// Attempts and backoff (the scale is for tests).
  retry_policy::settings retry;
  /// Random source for the jitter ({} = seeded generator).
  retry_policy::random_source random;
  /// Limit for one HTTP attempt, streams included.
  std::chrono::milliseconds request_timeout{std::chrono::seconds{1800}};
  /// A stream silent this long is aborted and retried.
  std::chrono::milliseconds stream_idle_timeout{std::chrono::seconds{180}};
  /// DNS + TCP + TLS setup limit.
  std::chrono::milliseconds connect_timeout{std::chrono::seconds{30}};
  std::string user_agent = "Mibyan/0.1";
  /// Largest response body of one attempt (provider.max_response_bytes);
  /// the transfer stops at the cap and the call fails, not retried.
  uint64_t max_response_bytes = uint64_t{32} << 20;
  /// The clock of stream silence (base/clock.hpp); the timers that check it
  /// and the retry back-off are CAF's. Never null.
  clock_ptr clock = real_clock();
};

/// Builds the settings from the configuration: main provider from
/// `model.*` (with `api_key` as the explicit key), fallback from
/// `model.fallback_*`, attempts from `agent.api_max_retries`, timeouts
/// from `provider.*`. `opts` passes validate_options
/// (config/option_bounds.hpp): its values are used as they are.
provider_settings make_provider_settings(const options& opts,
                                         const std::string& api_key = {});

/// Spawns a connection actor. `http` must outlive no one: the actor keeps
/// it alive. The caller owns the actor and ends it with an exit message;
/// calls still running then fail with ec::unavailable.
provider_actor spawn_provider(caf::actor_system& sys,
                              std::shared_ptr<http_client> http,
                              provider_settings settings);

} // namespace mibyan
