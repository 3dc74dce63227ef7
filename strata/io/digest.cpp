#include "strata/io/digest.h"

#include <fmt/format.h>
#include <openssl/evp.h>

#include "strata/core/error.h"

namespace strata::io {

std::string sha256_hex(std::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  STRATA_CHECK(EVP_Digest(bytes.data(), bytes.size(), digest, &size, EVP_sha256(), nullptr) == 1, Error,
               "SHA-256 of {} bytes failed in OpenSSL", bytes.size());
  std::string hex;
  for (unsigned int i = 0; i < size; ++i) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

}  // namespace strata::io
