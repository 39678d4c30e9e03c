// File: tests/support/ui_client.hpp
//
// For the dashboard suites (tests/ui_auth_test.cpp, tests/ui_api_test.cpp):
// a `mibyan serve` or `mibyan dashboard` child started with any arguments,
// and raw HTTP requests with a chosen Host header and source address.
// Include it after <boost/test/unit_test.hpp>.
#pragma once

#include "tests/support/serve_fixture.hpp"

namespace mibyan::test::ui {

using namespace mibyan::test::serving;

// Starts `mibyan <args>` with MIBYAN_HOME=`home` (MIBYAN_SERVER_KEY=`key`
// when not empty) and waits for a stdout line starting with `prefix`
// followed by the port. Fails the test when none comes in 60 s.
inline std::unique_ptr<serve_process>
start_node(const std::string& home, const std::vector<std::string>& args,
           const std::string& key, const std::string& prefix) {
  std::vector<std::string> argv{test::mibyan_binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  return start_child(std::move(argv), home, key, {}, home + "/node.err",
                     prefix);
}

// One request (Connection: close) from source address `from`, with
// `Host: <host>` ("" = 127.0.0.1:<port>; "-" = no Host header).
inline std::string request(uint16_t port, const std::string& method,
                           const std::string& path,
                           const std::string& body = {},
                           const std::string& headers = {},
                           const std::string& host = {},
                           const char* from = "127.0.0.1") {
  int fd = connect_from(port, from);
  std::string h = host.empty() ? "127.0.0.1:" + std::to_string(port) : host;
  std::string head = method + " " + path + " HTTP/1.1\r\n";
  if (h != "-")
    head += "Host: " + h + "\r\n";
  head += "Connection: close\r\n" + headers;
  if (!body.empty() || method == "POST")
    head += "Content-Type: application/json\r\nContent-Length: "
            + std::to_string(body.size()) + "\r\n";
  send_all(fd, head + "\r\n" + body);
  auto out = read_all(fd);
  ::close(fd);
  return out;
}

// The value of response header `name` (case-insensitive; "" when absent).
inline std::string header_of(const std::string& response,
                             const std::string& name) {
  auto end = response.find("\r\n\r\n");
  auto head = response.substr(0, end);
  auto lower = [](std::string s) {
    for (auto& c : s)
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  };
  auto lhead = lower(head);
  auto key = "\r\n" + lower(name) + ":";
  auto p = lhead.find(key);
  if (p == std::string::npos)
    return {};
  auto b = p + key.size();
  auto e = head.find("\r\n", b);
  auto v = head.substr(b, e - b);
  while (!v.empty() && v.front() == ' ')
    v.erase(0, 1);
  return v;
}

// The raw body of a response (after the head).
inline std::string raw_body(const std::string& response) {
  auto p = response.find("\r\n\r\n");
  return p == std::string::npos ? std::string{} : response.substr(p + 4);
}

} // namespace mibyan::test::ui
