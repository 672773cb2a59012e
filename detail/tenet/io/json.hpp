#pragma once
#include <tenet/detail_check.hpp>
// A small JSON reader and writer, enough for safetensors headers: objects (keys kept in file
// order), arrays, strings (with every escape of RFC 8259, \uXXXX and surrogate pairs to UTF-8),
// numbers (integers kept exact up to 2^63, others as double; beyond the double range refused),
// true, false, null. Every malformed
// input throws tenet::value_error with the byte offset; nesting deeper than 64 is refused, so are
// duplicate keys in one object (found through a hash set: linear time for a million keys) and
// bytes that are not well-formed UTF-8 (RFC 8259 section 8.1; no overlong forms, no surrogates).
// Fuzzed by tests/fuzz/fuzz_json.cpp (docs/security.md).
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include <tenet/error.hpp>

namespace tenet::detail::json {

struct member;  // a key and its value

struct value {
  enum kind_t { null, boolean, integer, number, string, array, object } kind = null;
  bool b = false;
  std::int64_t i = 0;  // integer
  double d = 0;        // number (and integer, converted)
  std::string s;
  std::vector<value> items;                            // array
  std::vector<member> members;  // object, in file order

  const value* get(std::string_view key) const;
};
// not std::pair: clang 14 with libstdc++ 12 cannot instantiate pair<string, value> inside value's
// definition (it asks whether value is default-constructible while value is incomplete)
struct member {
  std::string first;
  value second;
};
inline const value* value::get(std::string_view key) const {
  for (const member& m : members)  // (not a structured binding: nvcc takes &v for a local's address)
    if (m.first == key) return &m.second;
  return nullptr;
}

/// The length of the well-formed UTF-8 sequence at p (n bytes available) whose first byte is >= 0x80,
/// or 0 when it is not one (RFC 3629's table: no overlong forms, no surrogates, nothing past U+10FFFF).
inline std::size_t utf8_sequence(const unsigned char* p, std::size_t n) {
  const unsigned char c = p[0];
  std::size_t len = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the range of the second byte
  if (c >= 0xC2 && c <= 0xDF) len = 2;
  else if (c == 0xE0) len = 3, lo = 0xA0;
  else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) len = 3;
  else if (c == 0xED) len = 3, hi = 0x9F;
  else if (c == 0xF0) len = 4, lo = 0x90;
  else if (c >= 0xF1 && c <= 0xF3) len = 4;
  else if (c == 0xF4) len = 4, hi = 0x8F;
  else return 0;
  if (n < len || p[1] < lo || p[1] > hi) return 0;
  for (std::size_t k = 2; k < len; ++k)
    if (p[k] < 0x80 || p[k] > 0xBF) return 0;
  return len;
}
/// Whether s is well-formed UTF-8.
inline bool valid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  for (std::size_t i = 0; i < s.size();) {
    if (p[i] < 0x80) {
      ++i;
      continue;
    }
    const std::size_t len = utf8_sequence(p + i, s.size() - i);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

inline std::string quote(std::string_view s);

class parser {
 public:
  explicit parser(std::string_view text) : t_(text) {}
  value parse() {
    skip_ws();
    value v = parse_value(0);
    skip_ws();
    if (pos_ != t_.size()) fail("unexpected characters after the JSON value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw value_error("tenet: invalid JSON at byte " + std::to_string(pos_) + ": " + what);
  }
  void skip_ws() {
    while (pos_ < t_.size() && (t_[pos_] == ' ' || t_[pos_] == '\t' || t_[pos_] == '\n' || t_[pos_] == '\r')) ++pos_;
  }
  char peek() const { return pos_ < t_.size() ? t_[pos_] : '\0'; }
  void expect(char c) {
    if (pos_ >= t_.size() || t_[pos_] != c) fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  void literal(std::string_view word) {
    if (t_.substr(pos_, word.size()) != word) fail("unknown literal");
    pos_ += word.size();
  }
  // The keys of one object, as places in its member list (which may reallocate while it grows).
  struct key_hash {
    const std::vector<member>* m;
    std::size_t operator()(std::size_t i) const { return std::hash<std::string_view>{}((*m)[i].first); }
  };
  struct key_eq {
    const std::vector<member>* m;
    bool operator()(std::size_t a, std::size_t b) const { return (*m)[a].first == (*m)[b].first; }
  };
  value parse_value(int depth) {
    if (depth > 64) fail("nesting deeper than 64");
    if (pos_ >= t_.size()) fail("unexpected end of input");
    value v;
    switch (t_[pos_]) {
      case '{': {
        ++pos_;
        v.kind = value::object;
        skip_ws();
        if (peek() == '}') {
          ++pos_;
          return v;
        }
        // duplicates: a linear scan for small objects, a hash set of the keys from 16 on
        std::unordered_set<std::size_t, key_hash, key_eq> seen(0, key_hash{&v.members}, key_eq{&v.members});
        for (;;) {
          skip_ws();
          if (peek() != '"') fail("expected a string key");
          const std::size_t key_at = pos_;
          v.members.push_back(member{parse_string(), value{}});
          const std::size_t idx = v.members.size() - 1;
          bool dup = false;
          if (idx < 16) {
            for (std::size_t j = 0; j < idx && !dup; ++j) dup = v.members[j].first == v.members[idx].first;
          } else {
            if (seen.empty())
              for (std::size_t j = 0; j < idx; ++j) seen.insert(j);
            dup = !seen.insert(idx).second;
          }
          if (dup) {
            pos_ = key_at;
            fail("duplicate key " + quote(v.members[idx].first));
          }
          skip_ws();
          expect(':');
          skip_ws();
          v.members[idx].second = parse_value(depth + 1);
          skip_ws();
          if (peek() == ',') {
            ++pos_;
            continue;
          }
          expect('}');
          return v;
        }
      }
      case '[': {
        ++pos_;
        v.kind = value::array;
        skip_ws();
        if (peek() == ']') {
          ++pos_;
          return v;
        }
        for (;;) {
          skip_ws();
          v.items.push_back(parse_value(depth + 1));
          skip_ws();
          if (peek() == ',') {
            ++pos_;
            continue;
          }
          expect(']');
          return v;
        }
      }
      case '"':
        v.kind = value::string;
        v.s = parse_string();
        return v;
      case 't': literal("true"); v.kind = value::boolean; v.b = true; return v;
      case 'f': literal("false"); v.kind = value::boolean; return v;
      case 'n': literal("null"); return v;
      default: return parse_number();
    }
  }
  static void put_utf8(std::string& out, std::uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  std::uint32_t hex4() {
    if (pos_ + 4 > t_.size()) fail("truncated \\u escape");
    std::uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = t_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= static_cast<std::uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f') v |= static_cast<std::uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') v |= static_cast<std::uint32_t>(c - 'A' + 10);
      else fail("bad hex digit in \\u escape");
    }
    return v;
  }
  std::string parse_string() {
    expect('"');
    std::string out;
    for (;;) {
      if (pos_ >= t_.size()) fail("unterminated string");
      const char c = t_[pos_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
      if (static_cast<unsigned char>(c) >= 0x80) {  // a multi-byte UTF-8 sequence, copied whole
        const std::size_t len =
            utf8_sequence(reinterpret_cast<const unsigned char*>(t_.data()) + pos_ - 1, t_.size() - (pos_ - 1));
        if (len == 0) {
          --pos_;
          fail("a string holds bytes that are not valid UTF-8");
        }
        out.append(t_.data() + pos_ - 1, len);
        pos_ += len - 1;
        continue;
      }
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= t_.size()) fail("unterminated escape");
      switch (t_[pos_++]) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          std::uint32_t cp = hex4();
          if (cp >= 0xD800 && cp < 0xDC00) {
            if (pos_ + 2 > t_.size() || t_[pos_] != '\\' || t_[pos_ + 1] != 'u') fail("lone high surrogate");
            pos_ += 2;
            const std::uint32_t lo = hex4();
            if (lo < 0xDC00 || lo >= 0xE000) fail("bad low surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp < 0xE000) {
            fail("lone low surrogate");
          }
          put_utf8(out, cp);
          break;
        }
        default: fail("unknown escape");
      }
    }
  }
  value parse_number() {
    const std::size_t start = pos_;
    if (peek() == '-') ++pos_;
    if (!(peek() >= '0' && peek() <= '9')) fail("expected a value");
    if (peek() == '0') ++pos_;
    else
      while (peek() >= '0' && peek() <= '9') ++pos_;
    bool is_int = true;
    if (peek() == '.') {
      is_int = false;
      ++pos_;
      if (!(peek() >= '0' && peek() <= '9')) fail("expected digits after '.'");
      while (peek() >= '0' && peek() <= '9') ++pos_;
    }
    if (peek() == 'e' || peek() == 'E') {
      is_int = false;
      ++pos_;
      if (peek() == '+' || peek() == '-') ++pos_;
      if (!(peek() >= '0' && peek() <= '9')) fail("expected digits in the exponent");
      while (peek() >= '0' && peek() <= '9') ++pos_;
    }
    const std::string text(t_.substr(start, pos_ - start));
    value v;
    v.d = std::strtod(text.c_str(), nullptr);
    if (std::isinf(v.d)) {  // as serde_json (the Python package's reader) and nlohmann-json
      pos_ = start;
      fail("number out of range");
    }
    if (is_int) {
      errno = 0;
      const long long x = std::strtoll(text.c_str(), nullptr, 10);
      if (errno == ERANGE) {
        v.kind = value::number;  // beyond int64: kept as a double
      } else {
        v.kind = value::integer;
        v.i = x;
      }
    } else {
      v.kind = value::number;
    }
    return v;
  }
  std::string_view t_;
  std::size_t pos_ = 0;
};

inline value parse(std::string_view text) { return parser(text).parse(); }

/// `s` as a JSON string literal (quotes included), escaping as serde_json does.
inline std::string quote(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          static const char* hex = "0123456789abcdef";
          out += "\\u00";
          out += hex[(c >> 4) & 0xF];
          out += hex[c & 0xF];
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

}  // namespace tenet::detail::json
