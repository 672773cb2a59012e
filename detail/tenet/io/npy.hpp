#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// NumPy's .npy format (numpy.lib.format, "NPY format" in NumPy's reference), read and written
// without NumPy:
//   6 bytes  "\x93NUMPY"
//   2 bytes  the version: 1.0, 2.0 or 3.0 (major, minor)
//   2 bytes (1.0) or 4 bytes (2.0, 3.0): H, the header length, unsigned little-endian
//   H bytes  a Python dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
//            padded with spaces and ended by '\n' (latin-1 in 1.0 and 2.0, UTF-8 in 3.0)
//   then the values, in C order (or Fortran order when fortran_order is True), in the byte order
//   of descr: '<' little, '>' big, '|' not applicable (one-byte types), '=' the host's.
// The reader parses the literal itself (strings, integers with Python 2's L suffix, True, False,
// None, tuples, lists, dicts; nothing is evaluated) and checks every length against the bytes
// that exist before it allocates: a truncated file, a header that runs past the end, a shape whose
// product overflows, a negative size or a header that is not a dict literal is a value_error
// naming the file; a descr tenet has no dtype for is a dtype_error.
#include <array>
#include <bit>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <tenet/dtype.hpp>
#include <tenet/error.hpp>

namespace tenet::detail::io {

static_assert(std::endian::native == std::endian::little,
              "tenet: .npy / .npz I/O assumes a little-endian host");

[[noreturn]] inline void fail(const std::string& where, const std::string& why) {
  throw value_error("tenet: " + where + ": " + why);
}

// ---------------------------------------------------------------------------------------------
// CRC-32 (ISO-HDLC, the ZIP checksum: reflected polynomial 0xEDB88320)

inline const std::uint32_t* crc32_table() {
  static const auto table = [] {
    std::array<std::uint32_t, 256> t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  return table.data();
}
/// The running CRC-32 `crc` (0 to start) continued over n bytes at p.
inline std::uint32_t crc32(std::uint32_t crc, const void* p, std::size_t n) {
  const auto* t = crc32_table();
  const auto* b = static_cast<const unsigned char*>(p);
  crc = ~crc;
  for (std::size_t i = 0; i < n; ++i) crc = t[(crc ^ b[i]) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

// ---------------------------------------------------------------------------------------------
// Random-access reads of one file

/// A file opened for reading, with its size. Every read is exact: a short read is a value_error
/// naming the file (the file changed or is not a regular file).
class file_reader {
 public:
  file_reader(const std::string& path, const std::string& what) : path_(path), what_(what) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) fail(what_ + ": " + path_, "is a directory, not a file");
    f_.open(path, std::ios::binary);
    if (!f_) fail(what_ + ": " + path_, "cannot open the file for reading");
    f_.seekg(0, std::ios::end);
    const auto end = f_.tellg();
    if (end < 0) fail(what_ + ": " + path_, "cannot find the size of the file");
    size_ = static_cast<std::uint64_t>(end);
  }
  std::uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  /// Reads n bytes at `offset` into dst (n > 0 only where offset + n <= size()).
  void read(std::uint64_t offset, void* dst, std::size_t n) {
    if (n == 0) return;
    f_.clear();
    f_.seekg(static_cast<std::streamoff>(offset));
    f_.read(static_cast<char*>(dst), static_cast<std::streamsize>(n));
    if (!f_ || static_cast<std::size_t>(f_.gcount()) != n)
      fail(what_ + ": " + path_, "reading " + std::to_string(n) + " bytes at offset " + std::to_string(offset) +
                                     " failed (the file is " + std::to_string(size_) + " bytes)");
  }
  std::string read_string(std::uint64_t offset, std::size_t n) {
    std::string s(n, '\0');
    read(offset, s.data(), n);
    return s;
  }

 private:
  std::string path_, what_;
  std::ifstream f_;
  std::uint64_t size_ = 0;
};

inline std::uint64_t load_le(const unsigned char* p, int bytes) {
  std::uint64_t v = 0;
  for (int b = 0; b < bytes; ++b) v |= static_cast<std::uint64_t>(p[b]) << (8 * b);
  return v;
}
inline std::uint64_t load_le(std::string_view s, std::size_t at, int bytes) {
  return load_le(reinterpret_cast<const unsigned char*>(s.data()) + at, bytes);
}
inline void store_le(std::string& out, std::uint64_t v, int bytes) {
  for (int b = 0; b < bytes; ++b) out += static_cast<char>((v >> (8 * b)) & 0xFF);
}

// ---------------------------------------------------------------------------------------------
// Python literals (the .npy header)

struct py_literal {
  enum kind_t { none, boolean, integer, string, tuple, list, dict } kind = none;
  bool b = false;
  std::int64_t i = 0;
  std::string s;
  std::vector<py_literal> items;  // tuple, list; dict: key, value, key, value, ...
};

/// A parser of the Python literals a .npy header holds (ast.literal_eval's subset without numbers
/// other than integers); value_error naming the byte offset on anything else.
class py_literal_parser {
 public:
  explicit py_literal_parser(std::string_view text) : t_(text) {}
  /// The one literal that makes up the whole text (surrounding whitespace allowed).
  py_literal parse_all() {
    py_literal v = value(0);
    skip_space();
    if (p_ != t_.size()) error("unexpected text after the literal");
    return v;
  }

 private:
  static constexpr int max_depth = 16;
  [[noreturn]] void error(const std::string& why) const {
    throw value_error(why + " at byte " + std::to_string(p_));
  }
  void skip_space() {
    while (p_ < t_.size() && (t_[p_] == ' ' || t_[p_] == '\t' || t_[p_] == '\n' || t_[p_] == '\r' ||
                              t_[p_] == '\f' || t_[p_] == '\v'))
      ++p_;
  }
  bool eat(char c) {
    skip_space();
    if (p_ < t_.size() && t_[p_] == c) {
      ++p_;
      return true;
    }
    return false;
  }
  bool word(std::string_view w) {
    if (t_.substr(p_, w.size()) != w) return false;
    const std::size_t e = p_ + w.size();
    if (e < t_.size() && (std::isalnum(static_cast<unsigned char>(t_[e])) || t_[e] == '_')) return false;
    p_ = e;
    return true;
  }
  py_literal value(int depth) {
    if (depth > max_depth) error("nesting deeper than " + std::to_string(max_depth));
    skip_space();
    if (p_ >= t_.size()) error("the text ends where a value was expected");
    const char c = t_[p_];
    py_literal v;
    if (c == '\'' || c == '"') {
      v.kind = py_literal::string;
      v.s = string_body();
    } else if (c == '-' || c == '+' || (c >= '0' && c <= '9')) {
      v.kind = py_literal::integer;
      v.i = integer();
    } else if (word("True")) {
      v.kind = py_literal::boolean, v.b = true;
    } else if (word("False")) {
      v.kind = py_literal::boolean, v.b = false;
    } else if (word("None")) {
      v.kind = py_literal::none;
    } else if (c == '(' || c == '[') {
      ++p_;
      const char close = c == '(' ? ')' : ']';
      v.kind = c == '(' ? py_literal::tuple : py_literal::list;
      bool comma = false;  // (x) is x, (x,) a tuple
      while (!eat(close)) {
        if (!v.items.empty() && !comma) error(std::string("expected ',' or '") + close + "'");
        v.items.push_back(value(depth + 1));
        comma = eat(',');
      }
      if (v.kind == py_literal::tuple && v.items.size() == 1 && !comma) return std::move(v.items[0]);
    } else if (c == '{') {
      ++p_;
      v.kind = py_literal::dict;
      bool comma = true;
      while (!eat('}')) {
        if (!comma) error("expected ',' or '}'");
        v.items.push_back(value(depth + 1));
        if (!eat(':')) error("expected ':' after a dict key");
        v.items.push_back(value(depth + 1));
        comma = eat(',');
      }
    } else {
      error(std::string("unexpected character '") + (c >= 0x20 && c < 0x7F ? std::string(1, c) : "\\x" + hex(c)) + "'");
    }
    return v;
  }
  static std::string hex(char c) {
    const char* d = "0123456789abcdef";
    const auto u = static_cast<unsigned char>(c);
    return {d[u >> 4], d[u & 15]};
  }
  std::string string_body() {
    const char q = t_[p_++];
    std::string s;
    while (true) {
      if (p_ >= t_.size() || t_[p_] == '\n') error("unterminated string");
      const char c = t_[p_++];
      if (c == q) break;
      if (c == '\\') {
        if (p_ >= t_.size()) error("unterminated string");
        const char e = t_[p_++];
        switch (e) {
          case 'n': s += '\n'; break;
          case 't': s += '\t'; break;
          case '\\': case '\'': case '"': s += e; break;
          default: error(std::string("unsupported escape '\\") + e + "' in a string");
        }
      } else {
        s += c;
      }
    }
    return s;
  }
  std::int64_t integer() {
    bool neg = false;
    if (t_[p_] == '-' || t_[p_] == '+') neg = t_[p_++] == '-';
    skip_space();
    if (p_ >= t_.size() || t_[p_] < '0' || t_[p_] > '9') error("expected digits");
    std::uint64_t v = 0;
    const std::uint64_t limit = neg ? std::uint64_t{1} << 63 : (std::uint64_t{1} << 63) - 1;
    while (p_ < t_.size() && t_[p_] >= '0' && t_[p_] <= '9') {
      const auto d = static_cast<std::uint64_t>(t_[p_++] - '0');
      if (v > (limit - d) / 10) error("an integer outside the int64 range");
      v = v * 10 + d;
    }
    if (p_ < t_.size() && (t_[p_] == 'L' || t_[p_] == 'l')) ++p_;  // Python 2's long suffix
    if (p_ < t_.size() && (t_[p_] == '.' || t_[p_] == 'e' || t_[p_] == 'E' || t_[p_] == 'j' || t_[p_] == 'x'))
      error("a number that is not a decimal integer");
    if (neg) return v == (std::uint64_t{1} << 63) ? INT64_MIN : -static_cast<std::int64_t>(v);
    return static_cast<std::int64_t>(v);
  }

  std::string_view t_;
  std::size_t p_ = 0;
};

// ---------------------------------------------------------------------------------------------
// The .npy header

inline constexpr char npy_magic[] = "\x93NUMPY";
inline constexpr std::size_t npy_magic_len = 6;
/// The largest header the reader accepts (NumPy's np.load refuses 10000 characters and more unless
/// told otherwise; a header of the supported dtypes is under 200 bytes at rank 64).
inline constexpr std::uint64_t npy_max_header = 1u << 20;
inline constexpr std::size_t npy_max_rank = 64;  // NumPy's limit (NPY_MAXDIMS)

struct npy_header {
  int major = 1, minor = 0;
  std::string descr;  // as the file spells it
  dtype type = dtype::float32;
  bool swap = false;  // the values are big-endian (multi-byte types)
  bool fortran_order = false;
  std::vector<std::int64_t> shape;
  std::uint64_t numel = 0;
  std::uint64_t nbytes = 0;       // numel * itemsize
  std::uint64_t data_offset = 0;  // from the start of the .npy bytes
};

/// "(2, 3)", "(3,)", "()": the shape as Python writes the tuple.
inline std::string npy_shape_text(const std::vector<std::int64_t>& s) {
  std::string t = "(";
  for (std::size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + (s.size() == 1 ? ",)" : ")");
}

/// The descr tenet writes for d ('<f4', '|b1', ...); dtype_error for bfloat16, which NumPy lacks.
inline std::string npy_descr(dtype d, const std::string& where) {
  switch (d) {
    case dtype::bool_: return "|b1";
    case dtype::uint8: return "|u1";
    case dtype::int8: return "|i1";
    case dtype::int16: return "<i2";
    case dtype::int32: return "<i4";
    case dtype::int64: return "<i8";
    case dtype::float16: return "<f2";
    case dtype::float32: return "<f4";
    case dtype::float64: return "<f8";
    case dtype::bfloat16: break;
  }
  throw dtype_error("tenet: " + where + ": bfloat16 has no NumPy dtype (.npy cannot hold it); convert the tensor "
                    "with .to<float>() first, or use safetensors");
}

/// The dtype and byte order of a descr string; dtype_error for one tenet has no dtype for.
inline void npy_parse_descr(const std::string& descr, npy_header& h, const std::string& where) {
  std::string_view d = descr;
  char order = '=';
  if (!d.empty() && (d[0] == '<' || d[0] == '>' || d[0] == '|' || d[0] == '=')) order = d[0], d.remove_prefix(1);
  struct known {
    std::string_view code;
    dtype type;
  };
  static constexpr known table[] = {{"b1", dtype::bool_},  {"?", dtype::bool_},    {"u1", dtype::uint8},
                                    {"i1", dtype::int8},   {"i2", dtype::int16},   {"i4", dtype::int32},
                                    {"i8", dtype::int64},  {"f2", dtype::float16}, {"f4", dtype::float32},
                                    {"f8", dtype::float64}};
  for (const auto& k : table)
    if (d == k.code) {
      h.type = k.type;
      h.swap = order == '>' && itemsize(k.type) > 1;
      return;
    }
  std::string why;
  if (d.size() > 1 && d[0] == 'u') why = " (tenet has no unsigned integer dtype wider than 8 bits; numpy: a.astype('<i8'))";
  else if (!d.empty() && d[0] == 'c') why = " (complex values are not supported)";
  else if (d == "O") why = " (object arrays are pickled Python objects, which tenet does not read)";
  else if (d == "V2") why = " (raw 2-byte values: bfloat16 saved through ml_dtypes? save them as float32)";
  throw dtype_error("tenet: " + where + ": the array's dtype '" + descr + "' is not supported" + why +
                    "; tenet reads b1, u1, i1, i2, i4, i8, f2, f4, f8 in either byte order");
}

/// Parses the header of the .npy bytes that start at `begin` of f and span `size` bytes (a file,
/// or a member of an .npz archive), checking that the values fit exactly in what follows. When
/// `crc` is given it is continued over the bytes read.
inline npy_header read_npy_header(file_reader& f, std::uint64_t begin, std::uint64_t size, const std::string& where,
                                  std::uint32_t* crc = nullptr) {
  npy_header h;
  if (size < 10)
    fail(where, "the file is " + std::to_string(size) + " bytes long, shorter than the 10-byte .npy preamble "
                                                         "(magic string, version, header length)");
  const std::size_t pre_probe = size >= 12 ? 12 : 10;
  const std::string pre = f.read_string(begin, pre_probe);
  if (pre.compare(0, npy_magic_len, npy_magic, npy_magic_len) != 0)
    fail(where, "not a .npy file (it does not start with the magic string \\x93NUMPY)");
  h.major = static_cast<unsigned char>(pre[6]);
  h.minor = static_cast<unsigned char>(pre[7]);
  if (h.major < 1 || h.major > 3 || h.minor != 0)
    fail(where, "unsupported .npy format version " + std::to_string(h.major) + "." + std::to_string(h.minor) +
                    " (tenet reads 1.0, 2.0 and 3.0)");
  const std::size_t len_bytes = h.major == 1 ? 2 : 4;
  if (8 + len_bytes > size)
    fail(where, "the file is " + std::to_string(size) + " bytes long and ends inside the header length");
  const std::uint64_t hlen = load_le(pre, 8, static_cast<int>(len_bytes));
  const std::uint64_t prefix = 8 + len_bytes;
  if (hlen > size - prefix)
    fail(where, "the header length " + std::to_string(hlen) + " runs past the end of the file (" +
                    std::to_string(size - prefix) + " bytes follow it); the file is truncated or corrupt");
  if (hlen > npy_max_header)
    fail(where, "the header length " + std::to_string(hlen) + " is larger than the limit " + std::to_string(npy_max_header));
  std::string text = f.read_string(begin + prefix, static_cast<std::size_t>(hlen));
  if (crc) {
    *crc = crc32(*crc, pre.data(), prefix);
    *crc = crc32(*crc, text.data(), text.size());
  }
  h.data_offset = prefix + hlen;

  py_literal root;
  try {
    root = py_literal_parser(text).parse_all();
  } catch (const value_error& e) {
    fail(where, std::string("the header is not a Python dict literal (") + e.what() + ")");
  }
  if (root.kind != py_literal::dict) fail(where, "the header is not a Python dict literal (it holds another value)");
  const py_literal *descr = nullptr, *fortran = nullptr, *shape = nullptr;
  for (std::size_t k = 0; k < root.items.size(); k += 2) {
    const py_literal& key = root.items[k];
    if (key.kind != py_literal::string) fail(where, "the header dict has a key that is not a string");
    const py_literal** slot = key.s == "descr" ? &descr : key.s == "fortran_order" ? &fortran : key.s == "shape" ? &shape : nullptr;
    if (!slot) fail(where, "the header has the unexpected key '" + key.s + "' (a .npy header holds descr, fortran_order and shape)");
    if (*slot) fail(where, "the header has the key '" + key.s + "' twice");
    *slot = &root.items[k + 1];
  }
  if (!descr || !fortran || !shape)
    fail(where, std::string("the header lacks the key '") + (!descr ? "descr" : !fortran ? "fortran_order" : "shape") + "'");
  if (descr->kind == py_literal::list)
    throw dtype_error("tenet: " + where + ": the array has a structured dtype (descr is a list of fields), which tenet "
                      "does not read");
  if (descr->kind != py_literal::string) fail(where, "'descr' is not a string");
  h.descr = descr->s;
  if (fortran->kind != py_literal::boolean) fail(where, "'fortran_order' is not True or False");
  h.fortran_order = fortran->b;
  if (shape->kind != py_literal::tuple) fail(where, "'shape' is not a tuple of integers");
  if (shape->items.size() > npy_max_rank)
    fail(where, "'shape' has " + std::to_string(shape->items.size()) + " dimensions, more than " + std::to_string(npy_max_rank));
  for (const auto& x : shape->items) {
    if (x.kind != py_literal::integer) fail(where, "'shape' holds a value that is not an integer");
    h.shape.push_back(x.i);
  }
  for (auto s : h.shape)
    if (s < 0) fail(where, "'shape' " + npy_shape_text(h.shape) + " holds the negative size " + std::to_string(s));
  npy_parse_descr(h.descr, h, where);
  // element count and bytes, checked against overflow (a product that wraps must not pass) and
  // against the bytes that follow the header
  std::uint64_t n = 1;
  bool overflow = false;
  for (auto s : h.shape) overflow = overflow || __builtin_mul_overflow(n, static_cast<std::uint64_t>(s), &n);
  const std::uint64_t item = itemsize(h.type);
  overflow = overflow || n > static_cast<std::uint64_t>(INT64_MAX) || __builtin_mul_overflow(n, item, &h.nbytes) ||
             h.nbytes > static_cast<std::uint64_t>(INT64_MAX);
  if (overflow)
    fail(where, "'shape' " + npy_shape_text(h.shape) + " of '" + h.descr + "' is too large (its element count or byte "
                "count overflows int64)");
  h.numel = n;
  const std::uint64_t follow = size - h.data_offset;
  if (h.nbytes > follow)
    fail(where, "the header describes '" + h.descr + "' of shape " + npy_shape_text(h.shape) + ", " +
                    std::to_string(h.nbytes) + " bytes, but only " + std::to_string(follow) +
                    " bytes follow the header; the file is truncated or corrupt");
  if (h.nbytes < follow)
    fail(where, "the header describes '" + h.descr + "' of shape " + npy_shape_text(h.shape) + ", " +
                    std::to_string(h.nbytes) + " bytes, but " + std::to_string(follow) +
                    " bytes follow the header (extra bytes at the end)");
  return h;
}

/// Reverses the byte order of each `item`-byte element of p[0, n * item).
inline void byteswap_elements(unsigned char* p, std::uint64_t n, std::size_t item) {
  for (std::uint64_t k = 0; k < n; ++k, p += item)
    for (std::size_t a = 0, b = item - 1; a < b; ++a, --b) std::swap(p[a], p[b]);
}

/// dst (C order) = the values of src stored in Fortran order (first index fastest), `item` bytes each.
inline void fortran_to_c_order(const unsigned char* src, unsigned char* dst, const std::vector<std::int64_t>& shape,
                               std::size_t item, std::uint64_t numel) {
  const std::size_t r = shape.size();
  if (numel == 0) return;
  if (r <= 1) {
    std::memcpy(dst, src, numel * item);
    return;
  }
  std::vector<std::uint64_t> fstride(r), idx(r, 0);
  std::uint64_t s = 1;
  for (std::size_t k = 0; k < r; ++k) fstride[k] = s, s *= static_cast<std::uint64_t>(shape[k]);
  std::uint64_t off = 0;  // in elements, into src
  for (std::uint64_t n = 0; n < numel; ++n) {
    std::memcpy(dst + n * item, src + off * item, item);
    for (std::size_t k = r; k-- > 0;) {  // odometer over C order, last index fastest
      off += fstride[k];
      if (++idx[k] < static_cast<std::uint64_t>(shape[k])) break;
      off -= fstride[k] * static_cast<std::uint64_t>(shape[k]);
      idx[k] = 0;
    }
  }
}

/// Reads the values of a parsed header into dst (h.nbytes bytes, C order, host byte order);
/// value_error when a bool element is neither 0 nor 1. `crc` as in read_npy_header.
inline void read_npy_values(file_reader& f, std::uint64_t begin, const npy_header& h, void* dst,
                            const std::string& where, std::uint32_t* crc = nullptr) {
  if (h.nbytes == 0) return;
  const std::size_t item = itemsize(h.type);
  auto* out = static_cast<unsigned char*>(dst);
  if (h.fortran_order && h.shape.size() > 1) {
    std::unique_ptr<unsigned char[]> tmp(new unsigned char[h.nbytes]);
    f.read(begin + h.data_offset, tmp.get(), h.nbytes);
    if (crc) *crc = crc32(*crc, tmp.get(), h.nbytes);
    fortran_to_c_order(tmp.get(), out, h.shape, item, h.numel);
  } else {
    f.read(begin + h.data_offset, out, h.nbytes);
    if (crc) *crc = crc32(*crc, out, h.nbytes);
  }
  if (h.swap) byteswap_elements(out, h.numel, item);
  if (h.type == dtype::bool_)
    for (std::uint64_t k = 0; k < h.nbytes; ++k)
      if (out[k] > 1)
        fail(where, "the bool array holds the byte " + std::to_string(out[k]) + " at element " + std::to_string(k) +
                        " (a bool is 0 or 1)");
}

/// The .npy preamble and header tenet writes for a C-order array of descr and shape, byte for
/// byte as numpy.save writes it (keys sorted, 21 - len(repr(shape[0])) spaces of room for the
/// first extent to grow, padded so that the values start at a multiple of 64; version 1.0, or 2.0
/// when the header does not fit a 2-byte length).
inline std::string npy_header_bytes(const std::string& descr, const std::vector<std::int64_t>& shape) {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + npy_shape_text(shape) + ", }";
  if (!shape.empty()) {
    const std::size_t digits = std::to_string(shape[0]).size();
    if (digits < 21) dict.append(21 - digits, ' ');
  }
  const std::size_t hlen = dict.size() + 1;  // with the final '\n'
  auto pad_for = [&](std::size_t len_bytes) { return 64 - (npy_magic_len + 2 + len_bytes + hlen) % 64; };
  auto wrap = [&](int major, std::size_t len_bytes) {
    const std::size_t pad = pad_for(len_bytes);
    std::string out(npy_magic, npy_magic_len);
    out += static_cast<char>(major);
    out += '\0';
    store_le(out, hlen + pad, static_cast<int>(len_bytes));
    out += dict;
    out.append(pad, ' ');
    out += '\n';
    return out;
  };
  if (hlen + pad_for(2) <= 0xFFFF) return wrap(1, 2);
  return wrap(2, 4);
}

}  // namespace tenet::detail::io
