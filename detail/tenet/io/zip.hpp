#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// The ZIP archives of numpy.savez (.npz): the central directory is read (ZIP64 records and extra
// fields included, as Python's zipfile writes them with force_zip64), each member's local header
// is skipped to find its bytes. Only stored members (method 0) are read: a deflated member
// (numpy.savez_compressed) is a value_error that says so, as are encrypted members, multi-disk
// archives and every offset or size that points outside the file. The writer makes stored
// archives that numpy.load and Python's zipfile read (CRC-32 checked; up to 4 GiB, no ZIP64).
// Layout (PKWARE's APPNOTE.TXT): [local header, data]... central directory, [ZIP64 end record,
// ZIP64 locator], end of central directory record (with a comment of up to 65535 bytes).
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include <tenet/error.hpp>
#include <tenet/io/npy.hpp>  // fail, file_reader, load_le, store_le, crc32

namespace tenet::detail::io {

struct zip_member {
  std::string name;
  std::uint16_t method = 0;
  std::uint16_t flags = 0;
  std::uint32_t crc = 0;
  std::uint64_t compressed_size = 0, size = 0;
  std::uint64_t header_offset = 0;  // of the local header
  std::uint64_t data_offset = 0;    // of the member's bytes (after the local header)
};

inline constexpr std::uint32_t zip_local_sig = 0x04034b50, zip_central_sig = 0x02014b50, zip_end_sig = 0x06054b50,
                               zip64_end_sig = 0x06064b50, zip64_locator_sig = 0x07064b50;

/// "deflate (numpy.savez_compressed)", "method 12 (bzip2)", ...
inline std::string zip_method_name(std::uint16_t m) {
  switch (m) {
    case 0: return "stored";
    case 8: return "deflate";
    case 9: return "deflate64";
    case 12: return "bzip2";
    case 14: return "lzma";
    case 93: return "zstandard";
  }
  return "method " + std::to_string(m);
}

/// The members of the ZIP archive f, in central-directory order, with data_offset found from each
/// local header and every range checked against the file.
inline std::vector<zip_member> read_zip_directory(file_reader& f, const std::string& where) {
  const std::uint64_t size = f.size();
  if (size < 22) fail(where, "the file is " + std::to_string(size) + " bytes long, too short for a ZIP archive (.npz)");
  // the end record: its signature within the last 22 + 65535 bytes, with a comment that ends the file
  const std::uint64_t tail_len = size < 22 + 0xFFFF ? size : 22 + 0xFFFF;
  const std::string tail = f.read_string(size - tail_len, static_cast<std::size_t>(tail_len));
  std::uint64_t eocd = UINT64_MAX;  // in tail
  for (std::size_t p = tail.size() - 22 + 1; p-- > 0;) {
    if (load_le(tail, p, 4) == zip_end_sig && load_le(tail, p + 20, 2) == tail.size() - p - 22) {
      eocd = p;
      break;
    }
  }
  if (eocd == UINT64_MAX)
    fail(where, "not a ZIP archive (no end of central directory record; .npz files are ZIP archives)");
  const std::uint64_t eocd_at = size - tail_len + eocd;  // in the file
  std::uint64_t disk = load_le(tail, eocd + 4, 2), cd_disk = load_le(tail, eocd + 6, 2);
  std::uint64_t entries_disk = load_le(tail, eocd + 8, 2), entries = load_le(tail, eocd + 10, 2);
  std::uint64_t cd_size = load_le(tail, eocd + 12, 4), cd_offset = load_le(tail, eocd + 16, 4);
  std::uint64_t cd_end_limit = eocd_at;  // the central directory ends before the end records
  if (entries == 0xFFFF || entries_disk == 0xFFFF || cd_size == 0xFFFFFFFF || cd_offset == 0xFFFFFFFF) {
    // ZIP64: the locator is the 20 bytes before the end record
    if (eocd_at < 20) fail(where, "the ZIP64 end of central directory locator is missing");
    const std::string loc = f.read_string(eocd_at - 20, 20);
    if (load_le(loc, 0, 4) != zip64_locator_sig) fail(where, "the ZIP64 end of central directory locator is missing");
    const std::uint64_t rec = load_le(loc, 8, 8);
    if (rec > eocd_at - 20 || eocd_at - 20 - rec < 56)
      fail(where, "the ZIP64 end of central directory record at offset " + std::to_string(rec) + " lies outside the file");
    const std::string r = f.read_string(rec, 56);
    if (load_le(r, 0, 4) != zip64_end_sig) fail(where, "the ZIP64 end of central directory record is missing");
    disk = load_le(r, 16, 4), cd_disk = load_le(r, 20, 4);
    entries_disk = load_le(r, 24, 8), entries = load_le(r, 32, 8);
    cd_size = load_le(r, 40, 8), cd_offset = load_le(r, 48, 8);
    cd_end_limit = rec;
  }
  if (disk != 0 || cd_disk != 0 || entries_disk != entries)
    fail(where, "the archive spans several disks, which tenet does not read");
  if (cd_offset > cd_end_limit || cd_size > cd_end_limit - cd_offset)
    fail(where, "the central directory (offset " + std::to_string(cd_offset) + ", " + std::to_string(cd_size) +
                    " bytes) lies outside the file; the archive is truncated or corrupt");
  if (entries > cd_size / 46)  // 46 bytes: the fixed part of an entry
    fail(where, "the end record counts " + std::to_string(entries) + " members, more than a central directory of " +
                    std::to_string(cd_size) + " bytes can hold");
  const std::string cd = f.read_string(cd_offset, static_cast<std::size_t>(cd_size));
  std::vector<zip_member> out;
  std::unordered_set<std::string> names;
  std::size_t p = 0;
  for (std::uint64_t k = 0; k < entries; ++k) {
    if (cd.size() - p < 46 || load_le(cd, p, 4) != zip_central_sig)
      fail(where, "central directory entry " + std::to_string(k) + " is malformed");
    zip_member m;
    m.flags = static_cast<std::uint16_t>(load_le(cd, p + 8, 2));
    m.method = static_cast<std::uint16_t>(load_le(cd, p + 10, 2));
    m.crc = static_cast<std::uint32_t>(load_le(cd, p + 16, 4));
    m.compressed_size = load_le(cd, p + 20, 4);
    m.size = load_le(cd, p + 24, 4);
    const std::size_t nlen = load_le(cd, p + 28, 2), elen = load_le(cd, p + 30, 2), clen = load_le(cd, p + 32, 2);
    std::uint64_t mdisk = load_le(cd, p + 34, 2);
    m.header_offset = load_le(cd, p + 42, 4);
    if (cd.size() - p - 46 < nlen + elen + clen) fail(where, "central directory entry " + std::to_string(k) + " is truncated");
    m.name = cd.substr(p + 46, nlen);
    // the ZIP64 extra field (id 1) holds, in order, the 32-bit fields that read 0xFFFFFFFF (0xFFFF)
    for (std::size_t e = p + 46 + nlen, end = e + elen; end - e >= 4;) {
      const std::uint64_t id = load_le(cd, e, 2), len = load_le(cd, e + 2, 2);
      if (len > end - e - 4) fail(where, "member '" + m.name + "': an extra field runs past its entry");
      if (id == 1) {
        std::size_t q = e + 4;
        auto take = [&](std::uint64_t& v, int bytes) {
          if (q + static_cast<std::size_t>(bytes) > e + 4 + len) fail(where, "member '" + m.name + "': the ZIP64 extra field is too short");
          v = load_le(cd, q, bytes);
          q += static_cast<std::size_t>(bytes);
        };
        if (m.size == 0xFFFFFFFF) take(m.size, 8);
        if (m.compressed_size == 0xFFFFFFFF) take(m.compressed_size, 8);
        if (m.header_offset == 0xFFFFFFFF) take(m.header_offset, 8);
        if (mdisk == 0xFFFF) take(mdisk, 4);
      }
      e += 4 + len;
    }
    p += 46 + nlen + elen + clen;
    const std::string what = "member '" + m.name + "'";
    if (mdisk != 0) fail(where, what + " is on another disk of a multi-disk archive");
    if (m.flags & 1) fail(where, what + " is encrypted, which tenet does not read");
    if (!names.insert(m.name).second) fail(where, "the archive holds two members named '" + m.name + "'");
    // the local header: 30 bytes, then its own name and extra field, then the data
    if (m.header_offset > cd_offset || cd_offset - m.header_offset < 30)
      fail(where, what + ": its local header (offset " + std::to_string(m.header_offset) + ") lies outside the file");
    const std::string local = f.read_string(m.header_offset, 30);
    if (load_le(local, 0, 4) != zip_local_sig) fail(where, what + ": no local header at offset " + std::to_string(m.header_offset));
    m.data_offset = m.header_offset + 30 + load_le(local, 26, 2) + load_le(local, 28, 2);
    if (m.data_offset > cd_offset || m.compressed_size > cd_offset - m.data_offset)
      fail(where, what + ": its " + std::to_string(m.compressed_size) + " bytes at offset " + std::to_string(m.data_offset) +
                      " run past the members' part of the file; the archive is truncated or corrupt");
    out.push_back(std::move(m));
  }
  return out;
}

/// The bytes of a stored (uncompressed) ZIP archive of the named members, as Python's zipfile
/// writes one (DOS time 1980-01-01 00:00, made by Unix, mode 0600); value_error past 4 GiB.
struct zip_writer {
  struct entry {
    std::string name;
    std::uint32_t crc;
    std::uint64_t size, offset;
  };
  std::vector<entry> entries;
  std::uint64_t written = 0;
  std::string where;

  /// The local header of a member of `size` bytes with checksum `crc`, to be followed by its bytes.
  std::string local_header(const std::string& name, std::uint32_t crc, std::uint64_t size) {
    if (size >= 0xFFFFFFFF || written + 30 + name.size() + size >= 0xFFFFFFFF || entries.size() >= 0xFFFF)
      fail(where, "the archive would exceed 4 GiB or 65535 members (ZIP64), which tenet's writer does not produce");
    entries.push_back({name, crc, size, written});
    std::string h;
    store_le(h, zip_local_sig, 4);
    store_le(h, 20, 2);       // version needed: 2.0
    store_le(h, 0, 2);        // flags
    store_le(h, 0, 2);        // method: stored
    store_le(h, 0, 2);        // time 00:00
    store_le(h, 0x21, 2);     // date 1980-01-01
    store_le(h, crc, 4);
    store_le(h, size, 4);
    store_le(h, size, 4);
    store_le(h, name.size(), 2);
    store_le(h, 0, 2);        // extra field length
    h += name;
    written += h.size() + size;
    return h;
  }
  /// The central directory and end record, after the last member's bytes.
  std::string finish() {
    std::string cd;
    for (const entry& e : entries) {
      store_le(cd, zip_central_sig, 4);
      store_le(cd, 0x0314, 2);  // made by: Unix, 2.0
      store_le(cd, 20, 2);
      store_le(cd, 0, 2);
      store_le(cd, 0, 2);
      store_le(cd, 0, 2);
      store_le(cd, 0x21, 2);
      store_le(cd, e.crc, 4);
      store_le(cd, e.size, 4);
      store_le(cd, e.size, 4);
      store_le(cd, e.name.size(), 2);
      store_le(cd, 0, 2);  // extra
      store_le(cd, 0, 2);  // comment
      store_le(cd, 0, 2);  // disk
      store_le(cd, 0, 2);  // internal attributes
      store_le(cd, 0600u << 16, 4);  // external attributes: Unix mode 0600
      store_le(cd, e.offset, 4);
      cd += e.name;
    }
    if (written + cd.size() >= 0xFFFFFFFF)
      fail(where, "the archive would exceed 4 GiB (ZIP64), which tenet's writer does not produce");
    std::string end;
    store_le(end, zip_end_sig, 4);
    store_le(end, 0, 2);
    store_le(end, 0, 2);
    store_le(end, entries.size(), 2);
    store_le(end, entries.size(), 2);
    store_le(end, cd.size(), 4);
    store_le(end, written, 4);
    store_le(end, 0, 2);  // comment length
    return cd + end;
  }
};

}  // namespace tenet::detail::io
