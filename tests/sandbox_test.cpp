// The execute_code kernel sandbox and the hardened fallback
// (docs/security.md): what a script can see, write, reach and signal.
#define BOOST_TEST_MODULE sandbox
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <sstream>
#include <thread>

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/credential_vault.hpp"
#include "base/json.hpp"
#include "base/pids_cgroup.hpp"
#include "runtime/runtime.hpp"
#include "base/sandbox.hpp"
#include "tests/support/kernel_options.hpp"
#include "tests/support/pid_namespace.hpp"
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mibyan;
using namespace std::chrono_literals;

namespace {

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

bool exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

struct sandbox_fixture {
  test::temp_dir home;
  test::temp_dir work;
  test::temp_dir outside;
  std::unique_ptr<runtime> rt;

  void start(const std::string& sandbox,
             const std::function<void(options&)>& adjust = {}) {
    options opts;
    opts.home = home.path();
    opts.code_execution.prestart_kernels = 0;
    opts.code_execution.sandbox = sandbox;
    // Nobody approves here: without the sandbox the whole-script guard
    // would refuse every script (docs/approvals.md), which is not what
    // these cases test.
    opts.approvals.unattended_mode = "approve";
    if (adjust)
      adjust(opts);
    std::string err;
    auto made = create_runtime(opts);
    BOOST_REQUIRE_MESSAGE(made, made.error);
    rt = std::move(*made);
  }

  json::value exec(const std::string& code, bool reset = false,
                   const std::string& session = "s1") {
    return test::run_cell(*rt, work.path(), code, session, reset);
  }

  std::string out(const std::string& code) {
    return exec(code).get_string("output");
  }
};

bool sandbox_works() {
  return probe_sandbox().available;
}

// A TCP listener on 127.0.0.1; returns the port (0 on failure).
struct listener {
  int fd = -1;
  int port = 0;
  listener() {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&a), len) == 0
        && ::listen(fd, 8) == 0
        && ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
      port = ntohs(a.sin_port);
  }
  ~listener() {
    if (fd >= 0)
      ::close(fd);
  }
};

const std::string connect_code(int port) {
  return "import socket\n"
         "try:\n"
         "    socket.create_connection(('127.0.0.1', "
         + std::to_string(port) + "), timeout=3).close()\n"
         "    print('connected')\n"
         "except OSError as e:\n"
         "    print('refused', type(e).__name__)\n";
}

// Starts a double-forked, setsid daemon that ignores SIGTERM and prints
// "<pid> <pid namespace>".
const char* daemon_code =
  "import os, signal, time\n"
  "r, w = os.pipe()\n"
  "if os.fork() == 0:\n"
  "    os.setsid()\n"
  "    if os.fork() == 0:\n"
  "        signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
  "        os.write(w, str(os.getpid()).encode())\n"
  "        os.close(w)\n"
  "        fd = os.open(os.devnull, os.O_RDWR)\n"
  "        for i in (0, 1, 2):\n"
  "            os.dup2(fd, i)\n"
  "        while True:\n"
  "            time.sleep(1)\n"
  "    os._exit(0)\n"
  "os.close(w)\n"
  "pid = int(os.read(r, 32))\n"
  "os.wait()\n"
  "print(pid, os.readlink('/proc/self/ns/pid'))\n";

void write_config(const test::temp_dir& home, const std::string& yaml) {
  home.write("config.yaml", yaml);
}

} // namespace

BOOST_AUTO_TEST_CASE(argv_orders_mounts_parents_first) {
  test::temp_dir root;
  root.write("cwd/sub/.keep", "");
  root.write("home/.env", "K=v\n");
  root.write("home/inner/.keep", "");
  sandbox_policy p;
  p.workdir = root.path() + "/cwd";
  // The home inside the writable dir stays hidden; a writable dir inside
  // the home stays visible.
  p.writable = {root.path() + "/cwd", root.path() + "/home/inner"};
  p.hidden_dirs = {root.path() + "/cwd/sub", root.path() + "/home"};
  p.hidden_files = {root.path() + "/home/.env", "/nonexistent/file"};
  auto a = sandbox_argv("/usr/bin/bwrap", p, {"python3", "-u", "r.py"});
  auto at = [&](const std::string& flag, const std::string& path) {
    for (size_t i = 0; i + 1 < a.size(); ++i)
      if (a[i] == flag && a[i + 1] == path)
        return static_cast<long>(i);
    return -1L;
  };
  auto cwd = at("--bind", root.path() + "/cwd");
  auto sub = at("--tmpfs", root.path() + "/cwd/sub");
  auto home = at("--tmpfs", root.path() + "/home");
  auto inner = at("--bind", root.path() + "/home/inner");
  BOOST_TEST(cwd >= 0);
  BOOST_TEST(sub > cwd);
  // Under /tmp (a fresh tmpfs) and outside every writable dir, the home
  // needs no cover; the writable dir inside it is still bound.
  BOOST_TEST(home == -1);
  BOOST_TEST(inner >= 0);
  BOOST_TEST(at("--ro-bind", "/dev/null") == -1);
  BOOST_TEST(at("--cap-drop", "ALL") >= 0);
  BOOST_TEST(at("--ro-bind-try", "/proc/sys") >= 0);
  BOOST_TEST(at("--chdir", root.path() + "/cwd") >= 0);
  auto has = [](const std::vector<std::string>& v, const char* x) {
    return std::find(v.begin(), v.end(), x) != v.end();
  };
  BOOST_TEST(!has(a, "--unshare-net"));
  BOOST_TEST(!has(a, "/nonexistent/file"));
  BOOST_TEST(a[a.size() - 4] == "--");
  BOOST_TEST(a.back() == "r.py");
  p.view = sandbox_view::strict;
  auto s = sandbox_argv("/usr/bin/bwrap", p, {"true"});
  BOOST_TEST(has(s, "--unshare-net"));
  BOOST_TEST(has(s, "--remount-ro"));
}

// Issue 31 item 5: a working directory at the home (or "/") leaves the
// home read-only with its visible entries writable; a hidden entry stays
// hidden and "/" is never bound read-write.
BOOST_AUTO_TEST_CASE(argv_keeps_a_working_home_read_only) {
  std::string root = "/var/tmp/mibyan-argv-test-XXXXXX";
  BOOST_REQUIRE(::mkdtemp(root.data()) != nullptr);
  auto home = root + "/home";
  for (auto* d : {"/home/project", "/home/state", "/home/.config"})
    std::filesystem::create_directories(root + d);
  for (auto* f : {"/home/.bashrc", "/home/notes.txt"})
    ::close(::open((root + f).c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
  BOOST_REQUIRE(::symlink("/etc", (home + "/etc-link").c_str()) == 0);
  sandbox_policy p;
  p.user_home = home;
  p.hidden_dirs = {home + "/state"};
  p.readonly_paths = {home + "/.bashrc"};
  auto pos = [](const std::vector<std::string>& a, const std::string& flag,
                const std::string& path) {
    for (size_t i = 0; i + 1 < a.size(); ++i)
      if (a[i] == flag && a[i + 1] == path)
        return static_cast<long>(i);
    return -1L;
  };
  for (auto wd : {home, std::string{"/"}}) {
    p.workdir = wd;
    p.writable = {wd};
    auto a = sandbox_argv("/usr/bin/bwrap", p, {"true"});
    BOOST_TEST(pos(a, "--bind", "/") == -1L, wd);
    BOOST_TEST(pos(a, "--bind", home) == -1L, wd);
    auto ro = pos(a, "--ro-bind", home);
    BOOST_TEST(ro >= 0, wd);
    BOOST_TEST(pos(a, "--bind", home + "/project") > ro, wd);
    BOOST_TEST(pos(a, "--bind", home + "/notes.txt") > ro, wd);
    BOOST_TEST(pos(a, "--bind", home + "/.config") == -1L, wd);
    BOOST_TEST(pos(a, "--bind", home + "/state") == -1L, wd);
    BOOST_TEST(pos(a, "--bind", "/etc") == -1L, wd);
    BOOST_TEST(pos(a, "--tmpfs", home + "/state") > ro, wd);
    BOOST_TEST(pos(a, "--ro-bind", home + "/.bashrc") > ro, wd);
  }
  // Below the home: the working directory is bound as usual.
  p.workdir = home + "/project";
  p.writable = {p.workdir};
  auto a = sandbox_argv("/usr/bin/bwrap", p, {"true"});
  BOOST_TEST(pos(a, "--bind", home + "/project") >= 0);
  BOOST_TEST(pos(a, "--ro-bind", home) == -1L);
  std::error_code ec;
  std::filesystem::remove_all(root, ec);
}

BOOST_AUTO_TEST_CASE(sealed_credentials_leave_the_environment) {
  ::setenv("DEEPSEEK_API_KEY", "sk-sealed-0123456789", 1);
  ::setenv("UNRELATED_SETTING", "stays", 1);
  seal_credentials();
  BOOST_TEST(std::getenv("DEEPSEEK_API_KEY") == nullptr);
  BOOST_TEST(credential_value("DEEPSEEK_API_KEY") == "sk-sealed-0123456789");
  BOOST_TEST(std::string{std::getenv("UNRELATED_SETTING")} == "stays");
  // A value set later wins over the sealed one.
  ::setenv("DEEPSEEK_API_KEY", "sk-newer-0123456789", 1);
  BOOST_TEST(credential_value("DEEPSEEK_API_KEY") == "sk-newer-0123456789");
  ::unsetenv("DEEPSEEK_API_KEY");
  ::unsetenv("UNRELATED_SETTING");
}

BOOST_FIXTURE_TEST_SUITE(sandbox, sandbox_fixture)

BOOST_AUTO_TEST_CASE(bwrap_works_here) {
  // CI runs where user namespaces are allowed; the rest of this suite
  // assumes the sandbox is really there.
  BOOST_TEST(sandbox_works(), probe_sandbox().reason);
}

BOOST_AUTO_TEST_CASE(script_has_no_capabilities) {
  // Run as root, bwrap keeps all capabilities unless dropped; with
  // CAP_SYS_ADMIN a script could unmount the tmpfs hiding MIBYAN_HOME.
  BOOST_REQUIRE(sandbox_works());
  start("auto");
  auto r = out("for line in open('/proc/self/status'):\n"
               "    if line.startswith(('CapEff', 'CapPrm')):\n"
               "        print(line.split()[1])\n");
  BOOST_TEST(r == "0000000000000000\n0000000000000000\n");
  auto t = out("from mibyan_tools import terminal\n"
               "print(terminal('grep CapEff /proc/self/status')['output'])");
  BOOST_TEST(contains(t, "0000000000000000"), t);
  // uid 0 needs no capability to write a sysctl (kernel.core_pattern is
  // global): /proc/sys must be read-only. Checked without writing.
  BOOST_TEST(out("import os\n"
                 "print(bool(os.statvfs('/proc/sys').f_flag & os.ST_RDONLY))\n")
             == "True\n");
}

BOOST_AUTO_TEST_CASE(host_descriptors_do_not_reach_the_kernel) {
  // An inherited directory fd would let a script leave the mount view.
  auto marker = outside.write("leak-marker.txt", "x");
  int fd = ::open(marker.c_str(), O_RDONLY); // deliberately not CLOEXEC
  BOOST_REQUIRE(fd >= 0);
  for (auto mode : {"auto", "off"}) {
    BOOST_TEST_CONTEXT("sandbox: " << mode) {
      start(mode);
      auto r = out("import os\n"
                   "links = []\n"
                   "for n in os.listdir('/proc/self/fd'):\n"
                   "    try:\n"
                   "        links.append(os.readlink('/proc/self/fd/' + n))\n"
                   "    except OSError:\n"
                   "        pass\n"
                   "print(any('leak-marker' in l for l in links))\n");
      BOOST_TEST(r == "False\n");
      rt.reset();
    }
  }
  ::close(fd);
}

BOOST_AUTO_TEST_CASE(cell_cannot_see_host_processes) {
  BOOST_REQUIRE(sandbox_works());
  start("auto");
  auto text = out("import os\n"
                  "pids = [p for p in os.listdir('/proc') if p.isdigit()]\n"
                  "print(len(pids), os.getppid())\n");
  std::istringstream in(text);
  int count = -1, ppid = -1;
  in >> count >> ppid;
  BOOST_TEST(count >= 1);
  BOOST_TEST(count <= 4, "the script sees " << count << " processes");
  BOOST_TEST(ppid == 1); // the namespace's init, not the host
  // The same holds for terminal calls the script makes.
  auto t = out("from mibyan_tools import terminal\n"
               "print(terminal(\"ls /proc | grep -c '^[0-9]'\")['output'])");
  BOOST_TEST(std::atoi(t.c_str()) >= 1);
  BOOST_TEST(std::atoi(t.c_str()) <= 8, "terminal sees " << t);
}

BOOST_AUTO_TEST_CASE(project_mode_writes_only_the_working_directory) {
  BOOST_REQUIRE(sandbox_works());
  start("auto");
  auto target = outside.path() + "/escaped.txt";
  auto r = out("import os\n"
               "open('inside.txt', 'w').write('ok')\n"
               "try:\n"
               "    open(" + json::quote(target) + ", 'w').write('x')\n"
               "    print('wrote outside')\n"
               "except OSError as e:\n"
               "    print('refused', e.errno)\n"
               "open('/tmp/private-scratch.txt', 'w').write('t')\n"
               "print(os.path.exists('/tmp/private-scratch.txt'))\n");
  BOOST_TEST(contains(r, "refused"), r);
  BOOST_TEST(contains(r, "True"), r);
  BOOST_TEST(!exists(target));
  BOOST_TEST(test::slurp(work / "inside.txt") == "ok");
  // /tmp inside is private.
  BOOST_TEST(!exists("/tmp/private-scratch.txt"));
  // The script's terminal calls get the same view.
  auto t = exec("from mibyan_tools import terminal\n"
                "print(terminal('touch " + target + "')['exit_code'])");
  BOOST_TEST(t.get_string("output") != "0\n");
  BOOST_TEST(!exists(target));
}

BOOST_AUTO_TEST_CASE(strict_mode_has_no_network_and_writes_only_staging) {
  BOOST_REQUIRE(sandbox_works());
  listener l;
  BOOST_REQUIRE(l.port > 0);
  // Project mode shares the network: the listener is reachable.
  start("auto");
  BOOST_TEST(out(connect_code(l.port)) == "connected\n");
  rt.reset();
  start("auto", [](options& o) { o.code_execution.mode = "strict"; });
  BOOST_TEST(contains(out(connect_code(l.port)), "refused"));
  // The script's terminal calls have no network either.
  auto t = out("from mibyan_tools import terminal\n"
               "print(terminal('(exec 3<>/dev/tcp/127.0.0.1/"
               + std::to_string(l.port) + ") 2>/dev/null && echo connected"
               " || echo refused')['output'])");
  BOOST_TEST(contains(t, "refused"), t);
  auto target = work.path() + "/strict.txt";
  auto r = out("import os, tempfile\n"
               "open('staged.txt', 'w').write('s')\n"
               "print(os.getcwd().split('/')[-1].startswith('mibyan_kernel_'))\n"
               "for path in (" + json::quote(target) + ", '/tmp/x.txt'):\n"
               "    try:\n"
               "        open(path, 'w').write('x')\n"
               "        print('wrote', path)\n"
               "    except OSError as e:\n"
               "        print('refused')\n"
               "with tempfile.NamedTemporaryFile() as f:\n"
               "    print('tempfile ok')\n");
  BOOST_TEST(r == "True\nrefused\nrefused\ntempfile ok\n");
  BOOST_TEST(!exists(target));
}

BOOST_AUTO_TEST_CASE(mibyan_home_is_hidden) {
  BOOST_REQUIRE(sandbox_works());
  home.write(".env", "OPENAI_API_KEY=sk-dotenv-secret-0123456789\n");
  start("auto");
  auto r = out("import os\n"
               "home = " + json::quote(home.path()) + "\n"
               "print(os.listdir(home) if os.path.isdir(home) else [])\n"
               "try:\n"
               "    print(open(home + '/.env').read())\n"
               "except OSError as e:\n"
               "    print('hidden', type(e).__name__)\n");
  BOOST_TEST(r == "[]\nhidden FileNotFoundError\n");
}

BOOST_AUTO_TEST_CASE(setsid_daemon_dies_with_the_kernel) {
  for (auto mode : {"auto", "off"}) {
    BOOST_TEST_CONTEXT("sandbox: " << mode) {
      start(mode);
      std::istringstream in(out(daemon_code));
      int pid = 0;
      std::string ns;
      in >> pid >> ns;
      BOOST_REQUIRE(pid > 0);
      // Alive while the kernel lives.
      BOOST_TEST(!test::wait_gone(ns, pid, 300ms));
      // Resetting ends the kernel and everything it started.
      BOOST_TEST(exec("print(1)", true).get_string("output") == "1\n");
      BOOST_TEST(test::wait_gone(ns, pid, 10s), "daemon " << pid
                                                 << " survived");
      rt.reset();
    }
  }
}

BOOST_AUTO_TEST_CASE(memory_limit_stops_a_huge_allocation) {
  start("auto", [](options& o) { o.code_execution.max_memory_mb = 512; });
  exec("x = 42");
  auto r = exec("b = bytearray(4 << 30)");
  BOOST_TEST(r.get_string("status") == "error");
  BOOST_TEST(contains(r.get_string("output"), "MemoryError"));
  BOOST_TEST(contains(r.get_string("hint"), "max_memory_mb"));
  // The kernel and its state survive.
  auto next = exec("print(x)");
  BOOST_TEST(next.get_string("output") == "42\n");
  BOOST_TEST(next["kernel"].get_bool("reused", false));
}

BOOST_AUTO_TEST_CASE(process_limit_stops_a_fork_loop) {
  // Linux never applies RLIMIT_NPROC to uid 0; root is bounded by a pids
  // cgroup where one can be made (docs/security.md).
  if (::getuid() == 0 && !pids_cgroup_available()) {
    BOOST_TEST_MESSAGE("skipped: root without a writable pids cgroup");
    return;
  }
  start("auto", [](options& o) { o.code_execution.max_processes = 16; });
  auto r = exec("import os, time, signal\n"
                "pids, err = [], None\n"
                "try:\n"
                "    for i in range(300):\n"
                "        pid = os.fork()\n"
                "        if pid == 0:\n"
                "            time.sleep(30)\n"
                "            os._exit(0)\n"
                "        pids.append(pid)\n"
                "except OSError as e:\n"
                "    err = type(e).__name__\n"
                "for p in pids:\n"
                "    os.kill(p, signal.SIGKILL)\n"
                "    os.waitpid(p, 0)\n"
                "print(len(pids) < 300, err)\n"
                "for line in open('/proc/self/cgroup'):\n"
                "    if 'mibyan-kernel-' in line:\n"
                "        print(line.rsplit('/', 1)[1].strip())\n");
  std::istringstream in(r.get_string("output"));
  std::string hit, err, cgroup;
  in >> hit >> err >> cgroup;
  BOOST_TEST(hit + " " + err == "True BlockingIOError");
  BOOST_TEST(out("print('alive')") == "alive\n");
  // The kernel's cgroup (if one was made) goes with the kernel.
  rt.reset();
  if (!cgroup.empty()) {
    BOOST_TEST(!exists("/sys/fs/cgroup/pids/" + cgroup));
    BOOST_TEST(!exists("/sys/fs/cgroup/" + cgroup));
  }
}

BOOST_AUTO_TEST_CASE(signals_to_the_parent_cannot_reach_the_host) {
  BOOST_REQUIRE(sandbox_works());
  start("auto");
  auto r = exec("import os, signal\n"
                "for s in (signal.SIGSTOP, signal.SIGTERM, signal.SIGHUP,\n"
                "          signal.SIGQUIT, signal.SIGUSR1, signal.SIGPIPE):\n"
                "    try:\n"
                "        os.kill(os.getppid(), s)\n"
                "    except OSError:\n"
                "        pass\n"
                "print('sent')\n");
  BOOST_TEST(r.get_string("output") == "sent\n");
  // Still running, and the kernel still answers.
  BOOST_TEST(out("print('alive')") == "alive\n");
}

BOOST_AUTO_TEST_CASE(fallback_host_ignores_sighup_sigpipe_sigusr1) {
  start("off");
  auto r = exec("import os, signal, time\n"
                "for s in (signal.SIGHUP, signal.SIGPIPE, signal.SIGUSR1):\n"
                "    os.kill(os.getppid(), s)\n"
                "time.sleep(0.2)\n"
                "print('sent')\n");
  BOOST_TEST(r.get_string("output") == "sent\n");
  BOOST_TEST(out("print('alive')") == "alive\n");
}

BOOST_AUTO_TEST_CASE(forged_reply_frame_does_not_leak_into_the_next_cell) {
  // The sentinel and the cell id live in the runner's memory, which the
  // cell shares; a cell can always forge its own reply. What must not
  // happen is that its real reply is then filed under the next cell.
  start("auto");
  auto first = exec(
    "import gc, json, os, time\n"
    "k = next(o for o in gc.get_objects()\n"
    "         if hasattr(o, 'sentinel') and hasattr(o, 'frame_fd'))\n"
    "body = json.dumps({'id': k.current[0], 'status': 'ok',\n"
    "                   'stdout': 'FORGED\\n', 'stderr': '',\n"
    "                   'stdout_total': 7, 'stderr_total': 0,\n"
    "                   'traceback': '', 'execution_count': 1,\n"
    "                   'exit_code': 0}).encode()\n"
    "os.write(k.frame_fd, b'\\n' + k.sentinel + b' '\n"
    "         + str(len(body)).encode() + b'\\n' + body)\n"
    "time.sleep(1.5)\n"
    "print('first cell private output')\n");
  BOOST_TEST(contains(first.get_string("output"), "FORGED"));
  auto second = exec("print('second')");
  BOOST_TEST(!contains(second.get_string("output"),
                       "first cell private output"),
             second.dump());
  // Whatever happened to that kernel, the session goes on.
  BOOST_TEST(out("print('third')") == "third\n");
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

std::string secret_probe_code() {
  return "import os\n"
         "S = 'sk-planted-host-secret'\n"
         "def has(path):\n"
         "    try:\n"
         "        return S in open(path, 'rb').read().decode('latin-1')\n"
         "    except OSError:\n"
         "        return 'unreadable'\n"
         "print(has('/proc/1/environ'),\n"
         "      has('/proc/%d/environ' % os.getppid()),\n"
         "      S in str(os.environ))\n";
}

} // namespace

BOOST_AUTO_TEST_CASE(host_secrets_are_not_in_any_environ_a_script_can_read) {
  // The secret is in the CLI's initial environment, as a user's exported
  // OPENAI_API_KEY would be.
  for (auto mode : {"auto", "off"}) {
    BOOST_TEST_CONTEXT("sandbox: " << mode) {
      test::temp_dir home, work;
      write_config(home, std::string{"approvals:\n  single_query_mode: approve\n"}
                           + "code_execution:\n  sandbox: " + mode
                           + "\n  prestart_kernels: 0\n");
      test::process_options po;
      po.env["MIBYAN_HOME"] = home.path();
      po.env["OPENAI_API_KEY"] = "sk-planted-host-secret-0123456789";
      po.cwd = work.path();
      json::value args;
      args["code"] = secret_probe_code();
      auto r = test::run_mibyan({"tool", "execute_code", args.dump()}, po);
      BOOST_TEST(r.exit_code == 0, r.err);
      auto res = json::parse(r.out);
      BOOST_REQUIRE_MESSAGE(res, r.out);
      auto text = res.v->get_string("output");
      BOOST_TEST(!contains(text, "True"), text);
      BOOST_TEST(contains(text, "False"), text);
    }
  }
}

BOOST_AUTO_TEST_CASE(fallback_sigterm_removes_staging_dirs) {
  test::temp_dir home, work, tmp;
  write_config(home,
               "approvals:\n  single_query_mode: approve\n"
               "code_execution:\n  sandbox: off\n  prestart_kernels: 0\n");
  test::process_options po;
  po.env["MIBYAN_HOME"] = home.path();
  po.env["TMPDIR"] = tmp.path();
  po.cwd = work.path();
  po.timeout_seconds = 60;
  json::value args;
  args["code"] = "import os, signal, time\n"
                 "os.kill(os.getppid(), signal.SIGTERM)\n"
                 "time.sleep(30)\n";
  auto r = test::run_mibyan({"tool", "execute_code", args.dump()}, po);
  BOOST_TEST(r.exit_code == -SIGTERM);
  // The staging dir of the kernel is gone.
  std::vector<std::string> left;
  for (int i = 0; i < 100; ++i) {
    left.clear();
    if (DIR* d = ::opendir(tmp.path().c_str())) {
      while (auto* e = ::readdir(d))
        if (std::string{e->d_name}.rfind("mibyan_kernel_", 0) == 0)
          left.push_back(e->d_name);
      ::closedir(d);
    }
    if (left.empty())
      break;
    std::this_thread::sleep_for(20ms);
  }
  BOOST_TEST(left.empty(), "leaked " << (left.empty() ? "" : left[0]));
}

BOOST_AUTO_TEST_CASE(required_sandbox_is_a_clear_error_without_bwrap) {
  test::temp_dir home, work;
  test::process_options po;
  po.env["MIBYAN_HOME"] = home.path();
  po.env["PATH"] = work.path(); // no bwrap there
  po.cwd = work.path();
  write_config(home, "code_execution:\n  sandbox: required\n");
  auto r = test::run_mibyan({"tool", "read_file", R"({"path":"none.txt"})"},
                            po);
  BOOST_TEST(r.exit_code != 0);
  BOOST_TEST(contains(r.err, "code_execution.sandbox is 'required'"), r.err);
  BOOST_TEST(contains(r.err, "bubblewrap"), r.err);
  // `auto` says so once and goes on.
  write_config(home, "code_execution:\n  sandbox: auto\n"
                            "  prestart_kernels: 0\n");
  auto a = test::run_mibyan({"tool", "read_file", R"({"path":"none.txt"})"},
                            po);
  size_t n = 0;
  for (size_t at = a.err.find("WITHOUT a sandbox"); at != std::string::npos;
       at = a.err.find("WITHOUT a sandbox", at + 1))
    ++n;
  BOOST_TEST(n == 1u, a.err);
}

BOOST_AUTO_TEST_CASE(api_key_on_the_command_line_warns) {
  test::temp_dir home;
  test::process_options po;
  po.env["MIBYAN_HOME"] = home.path();
  auto r = test::run_mibyan({"run", "--api-key", "sk-on-the-command-line",
                             "--no-such-flag", "hi"},
                            po);
  BOOST_TEST(contains(r.err, "visible to every local user"), r.err);
  BOOST_TEST(!contains(r.err, "sk-on-the-command-line"));
}
