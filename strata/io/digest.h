#pragma once

// Digests of bytes: the kernel cache's keys (jit/) and the check of a pinned file (strata-train's corpus).

#include <string>
#include <string_view>

namespace strata::io {

/// The SHA-256 of `bytes` in lowercase hex (OpenSSL's libcrypto).
std::string sha256_hex(std::string_view bytes);

}  // namespace strata::io
