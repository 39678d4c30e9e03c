// File: base/crypto.hpp
//
// The few cryptographic primitives Mibyan uses (the cluster handshake,
// docs/cluster.md; the dashboard cookie, serve/ui_auth.hpp), on
// OpenSSL's libcrypto: HMAC-SHA256, SHA-256 and random nonces. CAF-free.
// Thread safety: every function is reentrant.
#pragma once

#include <string>

namespace mibyan {

/// Lower-case hex HMAC-SHA256 of `data` under `key`.
std::string hmac_sha256_hex(const std::string& key, const std::string& data);

/// Lower-case hex SHA-256 of `data`.
std::string sha256_hex(const std::string& data);

/// `bytes` random bytes from the OS CSPRNG as lower-case hex.
std::string random_hex(size_t bytes);

/// Compares two strings in time independent of where they differ.
bool proof_equal(const std::string& a, const std::string& b);

} // namespace mibyan
