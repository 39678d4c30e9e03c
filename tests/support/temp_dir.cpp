#include "tests/support/temp_dir.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace fs = std::filesystem;

namespace mibyan::test {

temp_dir::temp_dir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string{base && *base ? base : "/tmp"}
                     + "/mibyan-test-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr)
    throw std::runtime_error("mkdtemp failed for " + tmpl);
  path_ = tmpl;
}

temp_dir::~temp_dir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

std::string temp_dir::operator/(const std::string& rel) const {
  return path_ + "/" + rel;
}

std::string temp_dir::write(const std::string& rel,
                            const std::string& content) const {
  auto full = *this / rel;
  fs::create_directories(fs::path(full).parent_path());
  std::ofstream out(full, std::ios::binary | std::ios::trunc);
  out << content;
  return full;
}

std::string temp_dir::read(const std::string& rel) const {
  return slurp(*this / rel);
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

} // namespace mibyan::test
