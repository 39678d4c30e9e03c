#include "tests/support/pg_server.hpp"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/support/missing_peer.hpp"
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"

namespace fs = std::filesystem;

namespace mibyan::test {

namespace {

// The last `n` bytes of a file, on one line.
std::string log_tail(const std::string& path, size_t n = 600) {
  auto s = slurp(path);
  if (s.size() > n)
    s = s.substr(s.size() - n);
  for (auto& c : s)
    if (c == '\n')
      c = ' ';
  return s;
}

// A port nobody listens on now (the postmaster may still lose a race for
// it; launch() retries on another one).
int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0
      && ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

bool executable(const std::string& p) {
  return ::access(p.c_str(), X_OK) == 0;
}

} // namespace

std::unique_ptr<pg_server> pg_server::start(std::string& why,
                                            pg_server_options opts) {
  std::unique_ptr<pg_server> s{new pg_server};
  s->opts_ = opts;
  const char* bin = std::getenv("MIBYAN_PG_BIN");
  s->bin_ = bin && *bin ? bin : "/usr/lib/postgresql/15/bin";
  for (const char* tool : {"initdb", "postgres", "psql"})
    if (!executable(s->bin_ + "/" + tool)) {
      why = "PostgreSQL 15 is not installed (" + s->bin_ + "/" + tool
            + " missing; scripts/install-test-deps.sh installs the "
              "postgresql package, MIBYAN_PG_BIN names another directory)";
      return nullptr;
    }
  // PostgreSQL refuses to run as root: switch to an unprivileged user.
  if (::geteuid() == 0) {
    const char* want = std::getenv("MIBYAN_TEST_PG_USER");
    const passwd* pw = nullptr;
    if (want && *want)
      pw = ::getpwnam(want);
    else if ((pw = ::getpwnam("mibyan-pg")) == nullptr)
      pw = ::getpwnam("nobody");
    if (pw == nullptr) {
      why = "running as root and no unprivileged user to run PostgreSQL "
            "as (create 'mibyan-pg' with scripts/install-test-deps.sh)";
      return nullptr;
    }
    s->switch_user_ = true;
    s->uid_ = pw->pw_uid;
    s->gid_ = pw->pw_gid;
  }
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string{base && *base ? base : "/tmp"}
                     + "/mibyan-pg-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    why = "cannot create a temporary directory " + tmpl + ": "
          + std::strerror(errno);
    return nullptr;
  }
  s->dir_ = tmpl;
  s->data_ = s->dir_ + "/data";
  s->log_ = s->dir_ + "/server.log";
  std::string pwfile = s->dir_ + "/pwfile";
  {
    std::ofstream out(pwfile);
    out << password() << "\n";
  }
  if (s->switch_user_
      && (::chown(s->dir_.c_str(), s->uid_, s->gid_) != 0
          || ::chown(pwfile.c_str(), s->uid_, s->gid_) != 0)) {
    why = "cannot hand " + s->dir_ + " to the PostgreSQL user: "
          + std::strerror(errno);
    return nullptr;
  }
  std::vector<std::string> argv;
  if (s->switch_user_)
    argv = {"setpriv", "--reuid=" + std::to_string(s->uid_),
            "--regid=" + std::to_string(s->gid_), "--clear-groups", "--"};
  for (const char* a :
       {"initdb", "-D", "", "-U", "mibyan", "--pwfile", "", "-E", "UTF8",
        "--locale=C", "--auth-local=trust", "--auth-host=scram-sha-256",
        "--no-sync", "--no-instructions"})
    argv.emplace_back(a);
  size_t first = s->switch_user_ ? 5 : 0;
  argv[first] = s->bin_ + "/initdb";
  argv[first + 2] = s->data_;
  argv[first + 6] = pwfile;
  process_options po;
  po.cwd = s->dir_;
  po.timeout_seconds = 120;
  auto r = run_process(argv, po);
  if (r.exit_code != 0) {
    auto tail = r.err.size() > 400 ? r.err.substr(r.err.size() - 400)
                                   : r.err;
    for (auto& c : tail)
      if (c == '\n')
        c = ' ';
    why = "initdb failed (exit " + std::to_string(r.exit_code) + "): " + tail;
    return nullptr;  // the destructor removes the directory
  }
  if (opts.tls) {
    auto crt = s->dir_ + "/server.crt";
    auto key = s->dir_ + "/server.key";
    process_options oo;
    oo.timeout_seconds = 60;
    auto c = run_process({"openssl", "req", "-new", "-x509", "-days", "2",
                          "-nodes", "-newkey", "rsa:2048", "-subj",
                          "/CN=127.0.0.1", "-addext",
                          "subjectAltName=IP:127.0.0.1", "-keyout", key,
                          "-out", crt},
                         oo);
    if (c.exit_code != 0 || ::chmod(key.c_str(), 0600) != 0
        || (s->switch_user_
            && (::chown(key.c_str(), s->uid_, s->gid_) != 0
                || ::chown(crt.c_str(), s->uid_, s->gid_) != 0))) {
      why = "cannot make a TLS certificate with openssl: " + c.err;
      return nullptr;
    }
  }
  for (int attempt = 0; attempt < 5; ++attempt) {
    s->port_ = free_port();
    if (s->port_ == 0) {
      why = "no free port on 127.0.0.1";
      return nullptr;
    }
    if (s->launch(why))
      return s;
    if (log_tail(s->log_).find("could not bind") == std::string::npos
        && log_tail(s->log_).find("already in use") == std::string::npos)
      return nullptr;
  }
  return nullptr;
}

bool pg_server::launch(std::string& why) {
  std::ofstream{log_, std::ios::trunc};
  if (switch_user_)
    (void) ::chown(log_.c_str(), uid_, gid_);
  std::vector<std::string> args = {
    bin_ + "/postgres", "-D", data_, "-p", std::to_string(port_), "-k", dir_,
    "-c", "listen_addresses=127.0.0.1", "-c", "max_connections=200",
    "-c", "shared_buffers=64MB"};
  if (opts_.tls)
    for (std::string c : {std::string{"ssl=on"},
                          "ssl_cert_file=" + dir_ + "/server.crt",
                          "ssl_key_file=" + dir_ + "/server.key"}) {
      args.emplace_back("-c");
      args.emplace_back(c);
    }
  if (!opts_.durable)
    for (const char* c : {"fsync=off", "synchronous_commit=off",
                          "full_page_writes=off"}) {
      args.emplace_back("-c");
      args.emplace_back(c);
    }
  std::vector<char*> cargv;
  for (auto& a : args)
    cargv.push_back(a.data());
  cargv.push_back(nullptr);
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    why = std::string{"fork failed: "} + std::strerror(errno);
    return false;
  }
  if (pid == 0) {
    int fd = ::open(log_.c_str(), O_WRONLY | O_APPEND);
    int null = ::open("/dev/null", O_RDONLY);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    if (null >= 0)
      ::dup2(null, 0);
    if (switch_user_
        && (::setgroups(0, nullptr) != 0 || ::setgid(gid_) != 0
            || ::setuid(uid_) != 0))
      ::_exit(126);
    // After the credential change (which clears it): the postmaster stops
    // at once when the test dies.
    ::prctl(PR_SET_PDEATHSIG, SIGQUIT);
    if (::getppid() != parent)
      ::_exit(125);
    if (::chdir(dir_.c_str()) != 0)
      ::_exit(124);
    ::execv(cargv[0], cargv.data());
    ::_exit(127);
  }
  pid_ = pid;
  // Ready when postmaster.pid's status line says so.
  const auto deadline = std::chrono::steady_clock::now()
                        + std::chrono::seconds{60};
  while (std::chrono::steady_clock::now() < deadline) {
    int st = 0;
    if (::waitpid(pid_, &st, WNOHANG) == pid_) {
      pid_ = -1;
      why = "the PostgreSQL server exited at start-up: " + log_tail(log_);
      return false;
    }
    auto pidfile = slurp(data_ + "/postmaster.pid");
    if (pidfile.find("\nready") != std::string::npos)
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds{20});
  }
  halt();
  why = "the PostgreSQL server was not ready within 60 s: " + log_tail(log_);
  return false;
}

void pg_server::halt() {
  if (pid_ <= 0)
    return;
  ::kill(pid_, SIGINT);  // fast shutdown
  const auto deadline = std::chrono::steady_clock::now()
                        + std::chrono::seconds{30};
  for (;;) {
    if (::waitpid(pid_, nullptr, WNOHANG) == pid_)
      break;
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds{10});
  }
  pid_ = -1;
}

pg_server::~pg_server() {
  halt();
  if (!dir_.empty()) {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
}

void pg_server::stop() { halt(); }

bool pg_server::restart(std::string& why) {
  if (pid_ > 0)
    return true;
  return launch(why);
}

std::string pg_server::url(const std::string& db) const {
  return "postgresql://mibyan@/" + db + "?host=" + dir_
         + "&port=" + std::to_string(port_);
}

std::string pg_server::tcp_url(const std::string& db) const {
  return "postgresql://mibyan@127.0.0.1:" + std::to_string(port_) + "/" + db;
}

std::string pg_server::psql(const std::string& db,
                            const std::string& sql) const {
  process_options po;
  po.timeout_seconds = 120;
  po.unset = {"PGPASSWORD", "PGSERVICE", "PGOPTIONS"};
  auto r = run_process({bin_ + "/psql", "-X", "-q", "-A", "-t", "-v",
                        "ON_ERROR_STOP=1", "-h", dir_, "-p",
                        std::to_string(port_), "-U", "mibyan", "-d", db,
                        "-c", sql},
                       po);
  if (r.exit_code != 0)
    throw std::runtime_error("psql on " + db + " failed (exit "
                             + std::to_string(r.exit_code) + "): " + r.err);
  return r.out;
}

std::string pg_server::fresh_database(const std::string& prefix) {
  auto name = prefix + std::to_string(++databases_) + "_"
              + std::to_string(::getpid());
  psql("postgres", "CREATE DATABASE " + name);
  return name;
}

int pg_server::drop_connections(const std::string& db) const {
  auto out = psql("postgres",
                  "SELECT count(pg_terminate_backend(pid)) FROM "
                  "pg_stat_activity WHERE datname = '"
                    + db + "' AND pid <> pg_backend_pid()");
  return std::atoi(out.c_str());
}

pg_server& shared_pg_server() {
  static std::unique_ptr<pg_server> server = [] {
    std::string why;
    auto s = pg_server::start(why);
    if (!s)
      exit_missing_peer("cannot start a throw-away PostgreSQL server: "
                        + why);
    return s;
  }();
  return *server;
}

} // namespace mibyan::test
