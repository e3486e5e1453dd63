#include "sim/calibration/gzip.hpp"

#include <fmt/format.h>
#include <zlib.h>

#include <limits>

#include "common/error.hpp"

namespace loom::calibration {

bool is_gzip(std::string_view data) {
  return data.size() >= 2 && static_cast<unsigned char>(data[0]) == 0x1f &&
         static_cast<unsigned char>(data[1]) == 0x8b;
}

std::string gunzip(std::string_view data, const std::string& file, std::int64_t max_bytes) {
  if (data.size() > std::numeric_limits<uInt>::max()) {
    throw CalibrationError(fmt::format(
        "{}: compressed file over 4 GiB; decompress it (gunzip) and import the .json", file));
  }
  z_stream z{};
  // 16 + MAX_WBITS: expect a gzip header and trailer (zlib.h, inflateInit2).
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) {
    throw CalibrationError(fmt::format("{}: cannot start zlib to decompress it", file));
  }
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  std::string out;
  char buffer[1 << 16];
  int status = Z_OK;
  while (true) {
    z.next_out = reinterpret_cast<Bytef*>(buffer);
    z.avail_out = sizeof buffer;
    status = inflate(&z, Z_NO_FLUSH);
    out.append(buffer, sizeof buffer - z.avail_out);
    if (out.size() > static_cast<size_t>(max_bytes)) {
      inflateEnd(&z);
      throw CalibrationError(fmt::format(
          "{}: decompresses to more than loom's limit of {} bytes (MAX_MEASUREMENT_FILE_BYTES in "
          "common/limits.hpp, docs/limits.md); profile fewer steps, or check the file",
          file, max_bytes));
    }
    if (status == Z_STREAM_END) {
      // Concatenated members (`cat a.gz b.gz`) decompress to the concatenation.
      if (z.avail_in == 0 || !is_gzip({reinterpret_cast<const char*>(z.next_in), z.avail_in}))
        break;
      inflateReset(&z);
      continue;
    }
    if (status != Z_OK) break;  // Z_BUF_ERROR: the input ended inside a member
  }
  const size_t offset = data.size() - z.avail_in;
  const std::string detail = z.msg ? z.msg : "unexpected end of data";
  inflateEnd(&z);
  if (status != Z_STREAM_END) {
    throw CalibrationError(fmt::format(
        "{}: corrupt or truncated gzip data at compressed byte {} ({}); check the copy, or "
        "import the uncompressed .json",
        file, offset, status == Z_BUF_ERROR ? "unexpected end of data" : detail));
  }
  return out;
}

}  // namespace loom::calibration
