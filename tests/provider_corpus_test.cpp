#define BOOST_TEST_MODULE provider_corpus
#include "tests/support/paths.hpp"
#include <boost/test/unit_test.hpp>

// Every recorded response body of the provider transcript corpus is decoded
// whole, re-split at random byte offsets and fed one byte at a time, and
// compared with the `expected` block of INDEX.json.
//
// The corpus is test data kept outside the repository (docs/testing.md):
// `$MIBYAN_SHARED_DIR/data/provider-transcripts/corpus/`, by default
// `../shared` beside the checkout. Without it this suite exits with
// ctest's skip code and says why, unless MIBYAN_REQUIRE_TEST_DATA=1 (set by
// .ci/run), where a missing corpus is a failure.

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "providers/tool_call_id.hpp"
#include "providers/wire_format.hpp"
#include "base/json.hpp"

using namespace mibyan;

namespace {

std::string corpus_dir() {
  return test::shared_data_dir() + "/data/provider-transcripts/corpus/";
}

std::string read_file(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct entry {
  std::string file;
  wire_format format = wire_format::openai;
  bool stream = false;
  int status = 0;
  std::string content_type;
  std::string sha256;
  json::value expected;
  json::value extra;
};

/// Runs before any test case: skips (exit 77) or fails the whole suite when
/// the corpus is absent.
struct corpus_presence {
  corpus_presence() {
    std::ifstream probe{corpus_dir() + "INDEX.json"};
    if (probe)
      return;
    const char* req = std::getenv("MIBYAN_REQUIRE_TEST_DATA");
    bool required = req != nullptr && std::string{req} == "1";
    std::fprintf(stderr,
                 "%s: provider corpus not found at %sINDEX.json; set "
                 "MIBYAN_SHARED_DIR to the directory that holds "
                 "data/provider-transcripts (docs/testing.md)\n",
                 required ? "FAILED" : "SKIPPED", corpus_dir().c_str());
    std::fflush(stderr);
    std::_Exit(required ? 1 : 77);
  }
};
BOOST_TEST_GLOBAL_FIXTURE(corpus_presence);

std::vector<entry> load_index() {
  std::vector<entry> out;
  auto parsed = json::parse(read_file(corpus_dir() + "INDEX.json"));
  BOOST_REQUIRE_MESSAGE(parsed, "INDEX.json: " << parsed.error);
  for (const auto& e : parsed.v->as_array()) {
    entry x;
    x.file = e.get_string("file");
    x.format = e.get_string("api") == "anthropic-messages"
                 ? wire_format::anthropic
                 : wire_format::openai;
    x.stream = e.get_bool("stream", false);
    x.status = static_cast<int>(e.get_int("http_status", 0));
    x.content_type = e.get_string("content_type");
    x.sha256 = e.get_string("sha256");
    x.expected = *e.find("expected");
    if (auto ex = e.find("expected_extra"))
      x.extra = *ex;
    out.push_back(std::move(x));
  }
  return out;
}

struct decoded {
  chat_response resp;
  std::string streamed_text;
  std::string streamed_reasoning;
};

/// Feeds `bytes` cut at the sorted offsets `cuts`.
decoded decode(const entry& e, const std::string& bytes,
               const std::vector<size_t>& cuts) {
  decoded d;
  response_decoder dec{e.format, e.status, e.content_type};
  dec.on_text([&](std::string_view s) { d.streamed_text.append(s); });
  dec.on_reasoning([&](std::string_view s) {
    d.streamed_reasoning.append(s);
  });
  size_t pos = 0;
  for (auto cut : cuts) {
    dec.feed(std::string_view{bytes}.substr(pos, cut - pos));
    pos = cut;
  }
  dec.feed(std::string_view{bytes}.substr(pos));
  d.resp = dec.finish();
  return d;
}

std::string str_or_empty(const json::value* v) {
  return v != nullptr && v->is_string() ? v->as_string() : std::string{};
}

std::string expected_finish(const entry& e) {
  auto raw = str_or_empty(e.expected.find("finish_reason"));
  if (e.format == wire_format::anthropic)
    return raw.empty() ? raw : anthropic::map_stop_reason(raw);
  auto errors = e.extra.find("errors");
  bool error_body = errors != nullptr && errors->size() > 0;
  if (raw.empty() && !e.stream && !error_body)
    return "stop"; // docs/providers.md, "Non-streamed response": null -> stop
  return raw;
}

bool args_match(const entry& e, const std::string& want,
                const std::string& got) {
  if (want == got || (want.empty() && got == "{}"))
    return true;
  if (e.format == wire_format::anthropic && !e.stream) {
    // Re-serialised input objects: compare semantically.
    auto x = json::parse(want);
    auto y = json::parse(got);
    return x && y && *x.v == *y.v;
  }
  return false;
}

/// Returns "" when `d` matches the expectation of `e`, else what differs.
std::string mismatch(const entry& e, const decoded& d) {
  std::ostringstream why;
  const auto& r = d.resp;
  auto errors = e.extra.find("errors");
  bool want_error = errors != nullptr && errors->size() > 0;
  if (want_error && r.error.empty())
    why << "expected an error, got success; ";
  if (!want_error && !r.error.empty())
    why << "unexpected error: " << r.error << "; ";
  const auto& calls = *e.expected.find("tool_calls");
  auto want_text = str_or_empty(e.expected.find("text"));
  auto want_finish = expected_finish(e);
  // docs/providers.md, "Non-streamed response": a refusal without text becomes the content.
  auto refusal = str_or_empty(e.extra.find("refusal"));
  if (!refusal.empty() && want_text.empty() && calls.size() == 0) {
    want_text = refusal;
    want_finish = "content_filter";
  }
  // The finish reason is the provider's, even when an argument string does
  // not parse (docs/agent_loop.md, "Tool-call arguments").
  if (r.content != want_text)
    why << "text: got " << json::quote(r.content.substr(0, 200))
        << " want " << json::quote(want_text.substr(0, 200)) << "; ";
  auto want_reasoning = str_or_empty(e.expected.find("reasoning"));
  if (r.reasoning != want_reasoning)
    why << "reasoning: got " << json::quote(r.reasoning.substr(0, 200))
        << " want " << json::quote(want_reasoning.substr(0, 200)) << "; ";
  if (r.finish_reason != want_finish)
    why << "finish_reason: got '" << r.finish_reason << "' want '"
        << want_finish << "'; ";
  if (r.tool_calls.size() != calls.size()) {
    why << "tool calls: got " << r.tool_calls.size() << " want "
        << calls.size() << "; ";
  } else {
    for (size_t i = 0; i < calls.size(); ++i) {
      const auto& want = calls.as_array()[i];
      const auto& got = r.tool_calls[i];
      auto want_id = str_or_empty(want.find("id"));
      if (!want_id.empty() ? got.id != want_id
                           : got.id.rfind("call_", 0) != 0
                               || got.id.size() != 17)
        why << "call " << i << " id: got " << got.id << " want "
            << (want_id.empty() ? "a generated call_ id" : want_id) << "; ";
      if (got.name != str_or_empty(want.find("name")))
        why << "call " << i << " name: got " << got.name << "; ";
      auto want_args = str_or_empty(want.find("arguments_json_string"));
      if (!args_match(e, want_args, got.arguments))
        why << "call " << i << " arguments: got " << got.arguments
            << " want " << want_args << "; ";
    }
  }
  if (auto u = e.expected.find("usage"); u && u->is_object()) {
    bool anth = e.format == wire_format::anthropic;
    auto in = u->get_int(anth ? "input_tokens" : "prompt_tokens", 0);
    auto out = u->get_int(anth ? "output_tokens" : "completion_tokens", 0);
    if (r.usage.input_tokens != in || r.usage.output_tokens != out)
      why << "usage: got " << r.usage.input_tokens << "/"
          << r.usage.output_tokens << " want " << in << "/" << out << "; ";
  }
  // What the text callback streamed is what the content starts with.
  if (r.content.compare(0, d.streamed_text.size(), d.streamed_text) != 0)
    why << "streamed text is not a prefix of the content; ";
  if (e.stream && r.error.empty() && d.streamed_reasoning != r.reasoning)
    why << "streamed reasoning differs from the reasoning; ";
  return why.str();
}

bool same(const chat_response& x, const chat_response& y) {
  if (x.content != y.content || x.reasoning != y.reasoning
      || x.finish_reason != y.finish_reason || x.error != y.error
      || x.retryable != y.retryable || x.model != y.model
      || x.usage.input_tokens != y.usage.input_tokens
      || x.usage.output_tokens != y.usage.output_tokens
      || x.tool_calls.size() != y.tool_calls.size())
    return false;
  for (size_t i = 0; i < x.tool_calls.size(); ++i)
    if (x.tool_calls[i].id != y.tool_calls[i].id
        || x.tool_calls[i].name != y.tool_calls[i].name
        || x.tool_calls[i].arguments != y.tool_calls[i].arguments)
      return false;
  return true;
}

} // namespace

BOOST_AUTO_TEST_CASE(every_recording_matches_index_whole_and_resplit) {
  auto index = load_index();
  BOOST_TEST(index.size() == 64u);
  std::mt19937_64 rng{20240601};
  constexpr int random_splits = 20;
  size_t passed = 0;
  for (const auto& e : index) {
    auto bytes = read_file(corpus_dir() + e.file);
    BOOST_REQUIRE_MESSAGE(!bytes.empty(), "cannot read " << e.file);
    BOOST_TEST(sha256_hex(bytes) == e.sha256, e.file << ": sha256");
    bool ok = true;
    auto whole = decode(e, bytes, {});
    if (auto why = mismatch(e, whole); !why.empty()) {
      BOOST_ERROR(e.file << " (whole): " << why);
      ok = false;
    }
    // Random re-splits, from a few cuts to hundreds of tiny pieces.
    for (int pass = 0; pass < random_splits && bytes.size() > 1; ++pass) {
      std::uniform_int_distribution<size_t> count_dist{
        1, std::min<size_t>(bytes.size() - 1, pass < 10 ? 8 : 400)};
      std::uniform_int_distribution<size_t> cut_dist{1, bytes.size() - 1};
      std::vector<size_t> cuts;
      auto n = count_dist(rng);
      for (size_t i = 0; i < n; ++i)
        cuts.push_back(cut_dist(rng));
      std::sort(cuts.begin(), cuts.end());
      cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
      auto split = decode(e, bytes, cuts);
      if (!same(split.resp, whole.resp)) {
        BOOST_ERROR(e.file << " (split pass " << pass << ", " << cuts.size()
                           << " cuts): differs from the whole-body result: "
                           << mismatch(e, split));
        ok = false;
      }
    }
    // One byte at a time: every CRLF, UTF-8 sequence and token is split.
    std::vector<size_t> every;
    for (size_t i = 1; i < bytes.size(); ++i)
      every.push_back(i);
    auto bytewise = decode(e, bytes, every);
    if (!same(bytewise.resp, whole.resp) || !mismatch(e, bytewise).empty()) {
      BOOST_ERROR(e.file << " (1-byte chunks): " << mismatch(e, bytewise));
      ok = false;
    }
    if (whole.resp.error.empty() == false)
      BOOST_TEST_MESSAGE(e.file << ": error -> " << whole.resp.error
                                << (whole.resp.retryable ? " (retryable)"
                                                         : ""));
    if (ok)
      ++passed;
  }
  BOOST_TEST_MESSAGE("corpus: " << passed << "/" << index.size()
                                << " recordings match INDEX.json");
  BOOST_TEST(passed == index.size());
}

BOOST_AUTO_TEST_CASE(error_recordings_never_yield_an_empty_success) {
  for (const auto& e : load_index()) {
    auto errors = e.extra.find("errors");
    if (errors == nullptr || errors->size() == 0)
      continue;
    auto r = parse_body(e.format, e.status, e.content_type,
                        read_file(corpus_dir() + e.file));
    BOOST_TEST(!r.error.empty(), e.file);
    BOOST_TEST(r.http_status == e.status, e.file);
    // The provider's own words are in the message.
    const auto& first = errors->as_array().front();
    auto err = first.find("error");
    std::string msg;
    if (err != nullptr && err->is_object())
      msg = err->get_string("message");
    if (!msg.empty())
      BOOST_TEST(r.error.find(msg.substr(0, 40)) != std::string::npos,
                 e.file << ": " << r.error);
  }
}

BOOST_AUTO_TEST_CASE(http_error_statuses_set_retryable) {
  for (const auto& e : load_index()) {
    if (e.status < 400)
      continue;
    auto r = parse_body(e.format, e.status, e.content_type,
                        read_file(corpus_dir() + e.file));
    BOOST_TEST(!r.error.empty());
    BOOST_TEST(r.error.rfind("HTTP " + std::to_string(e.status), 0) == 0,
               r.error);
    BOOST_TEST(!r.retryable, e.file); // 400, 401, 404: no retry
  }
}

BOOST_AUTO_TEST_CASE(streams_are_decoded_incrementally_not_buffered) {
  // The 2 MB llama.cpp runaway: text must reach the callback while bytes
  // are still arriving.
  auto index = load_index();
  auto it = std::find_if(index.begin(), index.end(), [](const entry& e) {
    return e.file.rfind("041-", 0) == 0;
  });
  BOOST_REQUIRE(it != index.end());
  auto bytes = read_file(corpus_dir() + it->file);
  response_decoder dec{it->format, it->status, it->content_type};
  size_t streamed = 0;
  dec.on_text([&](std::string_view s) { streamed += s.size(); });
  dec.feed(std::string_view{bytes}.substr(0, bytes.size() / 2));
  BOOST_TEST(dec.streaming());
  BOOST_TEST(streamed > 0u);
  dec.feed(std::string_view{bytes}.substr(bytes.size() / 2));
  auto r = dec.finish();
  BOOST_TEST(!r.error.empty());
  BOOST_TEST(r.error.find("Context size has been exceeded")
             != std::string::npos);
  BOOST_TEST(r.retryable); // code 500
}
