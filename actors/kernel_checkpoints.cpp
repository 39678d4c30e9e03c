#include "actors/kernel_checkpoints.hpp"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "base/crypto.hpp"
#include "base/private_file.hpp"

namespace mibyan {

namespace {

constexpr const char* magic = "MCKE1 ";
constexpr size_t mac_hex_len = 64;

// HMAC-SHA256 over "mibyan-kernel-checkpoint-v1\n<session>\n<count>\n"
// followed by the payload, without copying the payload.
std::string mac_of(const std::string& key, const std::string& session,
                   int64_t count, const std::string& payload) {
  std::string head = "mibyan-kernel-checkpoint-v1\n" + session + "\n"
                     + std::to_string(count) + "\n";
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  bool ok = false;
  if (auto* mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr)) {
    if (auto* ctx = EVP_MAC_CTX_new(mac)) {
      char digest[] = "SHA256";
      OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string("digest", digest, 0),
        OSSL_PARAM_construct_end()};
      size_t len = 0;
      ok = EVP_MAC_init(ctx,
                        reinterpret_cast<const unsigned char*>(key.data()),
                        key.size(), params) == 1
           && EVP_MAC_update(ctx,
                             reinterpret_cast<const unsigned char*>(
                               head.data()),
                             head.size()) == 1
           && EVP_MAC_update(ctx,
                             reinterpret_cast<const unsigned char*>(
                               payload.data()),
                             payload.size()) == 1
           && EVP_MAC_final(ctx, out, &len, sizeof out) == 1;
      n = static_cast<unsigned int>(len);
      EVP_MAC_CTX_free(ctx);
    }
    EVP_MAC_free(mac);
  }
  if (!ok)
    return {};
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (unsigned int i = 0; i < n; ++i) {
    s.push_back(hex[out[i] >> 4]);
    s.push_back(hex[out[i] & 15]);
  }
  return s;
}

std::string from_hex(const std::string& h) {
  std::string out;
  auto val = [](char c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
  };
  if (h.size() % 2)
    return {};
  for (size_t i = 0; i < h.size(); i += 2) {
    int a = val(h[i]), b = val(h[i + 1]);
    if (a < 0 || b < 0)
      return {};
    out.push_back(static_cast<char>(a * 16 + b));
  }
  return out;
}

} // namespace

bool checkpoints_wanted(const std::string& setting, bool in_cluster) {
  if (setting == "on")
    return true;
  if (setting == "off")
    return false;
  return in_cluster;
}

kernel_checkpoints::kernel_checkpoints(bool enabled, int64_t max_bytes)
    : max_bytes_(max_bytes), enabled_(enabled) {}

kernel_checkpoints::~kernel_checkpoints() {
  store_jobs_.shutdown();
}

bool kernel_checkpoints::submit_store_job(std::function<void()> job) {
  return store_jobs_.submit(std::move(job));
}

void kernel_checkpoints::stop_store_jobs() {
  store_jobs_.shutdown();
}

bool kernel_checkpoints::enabled() const {
  std::lock_guard<std::mutex> lock(mtx_);
  return enabled_;
}

void kernel_checkpoints::set_enabled(bool on) {
  std::lock_guard<std::mutex> lock(mtx_);
  enabled_ = on;
}

void kernel_checkpoints::set_key(std::string key) {
  std::lock_guard<std::mutex> lock(mtx_);
  key_ = std::move(key);
}

bool kernel_checkpoints::has_key() const {
  std::lock_guard<std::mutex> lock(mtx_);
  return !key_.empty();
}

result<std::string>
kernel_checkpoints::load_or_create_key(const std::string& home) {
  auto path = home + "/checkpoint.key";
  {
    std::ifstream in(path, std::ios::binary);
    if (in) {
      std::stringstream ss;
      ss << in.rdbuf();
      auto text = ss.str();
      while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
        text.pop_back();
      auto key = from_hex(text);
      if (key.size() >= 32)
        return key;
      return result<std::string>::failure(
        status_code::data_corrupt,
        path + " does not hold a checkpoint key (64 hex digits); remove it "
               "to make a new one (existing checkpoints are then refused)");
    }
  }
  if (auto st = make_private_dirs(home); !st.ok())
    return result<std::string>::failure(status_code::permission_denied,
                                        st.error);
  auto hex = random_hex(32);
  // Not replaced when another process made one meanwhile.
  if (auto written = write_private_file(path, hex + "\n", true);
      !written.ok()) {
    std::ifstream again(path, std::ios::binary);
    if (!again)
      return result<std::string>::failure(status_code::permission_denied,
                                          "cannot write " + path + ": "
                                            + written.error);
    std::stringstream ss;
    ss << again.rdbuf();
    auto key = from_hex(ss.str().substr(0, 64));
    if (key.size() < 32)
      return result<std::string>::failure(status_code::data_corrupt,
                                          path + " is damaged");
    return key;
  }
  return from_hex(hex);
}

std::string kernel_checkpoints::cluster_key(const std::string& shared_key) {
  return from_hex(
    hmac_sha256_hex(shared_key, "mibyan-kernel-checkpoint-key-v1"));
}

void kernel_checkpoints::set_store(std::shared_ptr<checkpoint_store> store) {
  std::lock_guard<std::mutex> lock(mtx_);
  store_ = std::move(store);
}

std::shared_ptr<checkpoint_store> kernel_checkpoints::store() const {
  std::lock_guard<std::mutex> lock(mtx_);
  return store_;
}

void kernel_checkpoints::set_remote(put_fn put, get_fn get, drop_fn drop) {
  std::lock_guard<std::mutex> lock(mtx_);
  put_ = std::move(put);
  get_ = std::move(get);
  drop_ = std::move(drop);
}

std::string kernel_checkpoints::seal(const std::string& session,
                                     int64_t execution_count,
                                     const std::string& payload) const {
  std::string key;
  {
    std::lock_guard<std::mutex> lock(mtx_);
    key = key_;
  }
  auto mac = mac_of(key, session, execution_count, payload);
  std::string out;
  out.reserve(payload.size() + 96);
  out += magic;
  out += mac;
  out += ' ';
  out += std::to_string(execution_count);
  out += '\n';
  out += payload;
  return out;
}

result<std::pair<int64_t, std::string>>
kernel_checkpoints::open(const std::string& session,
                         const std::string& envelope) const {
  using R = result<std::pair<int64_t, std::string>>;
  std::string key;
  {
    std::lock_guard<std::mutex> lock(mtx_);
    key = key_;
  }
  if (key.empty())
    return R::failure(status_code::config_invalid,
                      "no checkpoint key is configured");
  auto m = std::string{magic};
  if (envelope.compare(0, m.size(), m) != 0)
    return R::failure(status_code::data_corrupt,
                      "not a sealed checkpoint (bad envelope)");
  auto nl = envelope.find('\n', m.size());
  if (nl == std::string::npos || nl > m.size() + mac_hex_len + 24
      || envelope[m.size() + mac_hex_len] != ' ')
    return R::failure(status_code::data_corrupt,
                      "not a sealed checkpoint (bad envelope header)");
  auto mac = envelope.substr(m.size(), mac_hex_len);
  auto count_text = envelope.substr(m.size() + mac_hex_len + 1,
                                    nl - m.size() - mac_hex_len - 1);
  int64_t count = 0;
  try {
    size_t used = 0;
    count = std::stoll(count_text, &used);
    if (used != count_text.size() || count < 0)
      throw std::invalid_argument("count");
  } catch (...) {
    return R::failure(status_code::data_corrupt,
                      "not a sealed checkpoint (bad execution count)");
  }
  auto payload = envelope.substr(nl + 1);
  auto want = mac_of(key, session, count, payload);
  if (want.empty() || !proof_equal(want, mac))
    return R::failure(status_code::permission_denied,
                      "the checkpoint failed its HMAC check (tampered, "
                      "truncated, from another installation or another "
                      "session)");
  return std::make_pair(count, std::move(payload));
}

status kernel_checkpoints::save(const std::string& session, uint64_t seq,
                                int64_t execution_count,
                                const std::string& payload) {
  auto envelope = seal(session, execution_count, payload);
  put_fn put;
  std::shared_ptr<checkpoint_store> store;
  {
    std::lock_guard<std::mutex> lock(mtx_);
    if (key_.empty())
      return status::failure(status_code::config_invalid,
                             "no checkpoint key is configured");
    put = put_;
    store = store_;
  }
  status st;
  if (put)
    st = put(session, seq, std::move(envelope));
  else if (!store)
    st = status::failure(status_code::unavailable,
                         "no checkpoint store (the session store is not "
                         "open)");
  else
    st = store->put(session, seq, envelope);
  if (st)
    note_covered(session, execution_count);
  return st;
}

status kernel_checkpoints::store_sealed(const std::string& session,
                                        uint64_t seq,
                                        const std::string& envelope) {
  auto opened = open(session, envelope);
  if (!opened)
    return opened.get_status();
  std::shared_ptr<checkpoint_store> store;
  {
    std::lock_guard<std::mutex> lock(mtx_);
    store = store_;
  }
  if (!store)
    return status::failure(status_code::unavailable,
                           "no checkpoint store on this node");
  auto st = store->put(session, seq, envelope);
  if (st)
    note_covered(session, opened->first);
  return st;
}

result<kernel_checkpoints::remote_fetch>
kernel_checkpoints::fetch_sealed(const std::string& session) {
  std::shared_ptr<checkpoint_store> store;
  {
    std::lock_guard<std::mutex> lock(mtx_);
    store = store_;
  }
  if (!store)
    return result<remote_fetch>::failure(status_code::unavailable,
                                         "no checkpoint store on this node");
  auto got = store->latest(session);
  if (!got)
    return got.get_status();
  remote_fetch out;
  if (auto& opt = *got; opt) {
    auto& c = *opt;
    out.found = true;
    out.seq = c.seq;
    out.envelope = std::move(c.bytes);
    // The count is in the clear ("MCKE1 <mac> <count>\n"); the fetcher
    // verifies it with the rest.
    int64_t count = 0;
    auto m = std::string{magic}.size() + mac_hex_len + 1;
    for (size_t i = m; i < out.envelope.size() && i < m + 20
                       && out.envelope[i] >= '0' && out.envelope[i] <= '9';
         ++i)
      count = count * 10 + (out.envelope[i] - '0');
    auto known = known_or_recorded_count(session);
    auto covered = std::max(count, covered_count(session));
    out.known_count = count + (known > covered ? known - covered : 0);
  }
  return out;
}

checkpoint_restore
kernel_checkpoints::open_into(const std::string& session, uint64_t seq,
                              const std::string& envelope,
                              int64_t known) const {
  checkpoint_restore r;
  r.found = true;
  r.seq = seq;
  auto opened = open(session, envelope);
  if (!opened) {
    r.refused = opened.error;
    return r;
  }
  r.execution_count = opened->first;
  r.payload = std::move(opened->second);
  r.age_cells = known > r.execution_count ? known - r.execution_count : 0;
  return r;
}

checkpoint_restore kernel_checkpoints::fetch(const std::string& session) {
  get_fn get;
  {
    std::lock_guard<std::mutex> lock(mtx_);
    get = get_;
  }
  result<remote_fetch> got =
    get ? get(session) : fetch_sealed(session);
  checkpoint_restore r;
  if (!got) {
    r.found = true;
    r.refused = "the checkpoint could not be read: " + got.error;
    return r;
  }
  if (!got->found)
    return r;
  return open_into(session, got->seq, got->envelope, got->known_count);
}

status kernel_checkpoints::drop(const std::string& session) {
  drop_fn drop;
  std::shared_ptr<checkpoint_store> store;
  {
    std::lock_guard<std::mutex> lock(mtx_);
    drop = drop_;
    store = store_;
    counts_.erase(session);
    covered_.erase(session);
  }
  if (drop)
    return drop(session);
  if (!store)
    return {};
  return store->remove(session);
}

void kernel_checkpoints::set_history_count(history_count_fn fn) {
  std::lock_guard<std::mutex> lock(mtx_);
  history_count_ = std::move(fn);
}

int64_t
kernel_checkpoints::known_or_recorded_count(const std::string& session) const {
  auto known = known_count(session);
  if (known >= 0)
    return known;
  history_count_fn history;
  {
    std::lock_guard<std::mutex> lock(mtx_);
    history = history_count_;
  }
  return history ? history(session) : -1;
}

void kernel_checkpoints::note_count(const std::string& session,
                                    int64_t count) {
  std::lock_guard<std::mutex> lock(mtx_);
  auto [it, fresh] = counts_.emplace(session, count);
  if (!fresh && count > it->second)
    it->second = count;
}

int64_t kernel_checkpoints::known_count(const std::string& session) const {
  std::lock_guard<std::mutex> lock(mtx_);
  auto it = counts_.find(session);
  return it == counts_.end() ? -1 : it->second;
}

void kernel_checkpoints::note_covered(const std::string& session,
                                      int64_t count) {
  std::lock_guard<std::mutex> lock(mtx_);
  auto [it, fresh] = covered_.emplace(session, count);
  if (!fresh && count > it->second)
    it->second = count;
}

int64_t kernel_checkpoints::covered_count(const std::string& session) const {
  std::lock_guard<std::mutex> lock(mtx_);
  auto it = covered_.find(session);
  return it == covered_.end() ? -1 : it->second;
}

uint64_t kernel_checkpoints::next_seq() {
  auto now = static_cast<uint64_t>(
    std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::system_clock::now().time_since_epoch())
      .count());
  std::lock_guard<std::mutex> lock(mtx_);
  last_seq_ = std::max(last_seq_ + 1, now);
  return last_seq_;
}

} // namespace mibyan
