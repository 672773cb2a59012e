#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// Numeric CSV: lines split into fields, fields parsed as one element type.
// - Lines end with "\n" or "\r\n"; a UTF-8 byte order mark at the start is skipped; lines that
//   are empty or hold only spaces and tabs are skipped (their numbers still count).
// - A field may be quoted with '"' ("" inside stands for one quote), so that a header name can
//   hold the delimiter; a quoted field cannot span lines. Spaces and tabs around a field are
//   trimmed (unless the delimiter is one of them).
// - parse_field: integers as std::from_chars reads them (a leading '+' allowed; a value outside
//   the type's range or with a fraction is refused), bool as 0 / 1 / true / false (any case),
//   floating values as from_chars reads them (nan, inf, infinity, exponents; float16 and bfloat16
//   are read as double, then rounded to the 16-bit type). An empty field does not parse.
#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <vector>

#include <tenet/error.hpp>
#include <tenet/runtime/half.hpp>

namespace tenet::detail::io {

/// Splits `text` into lines (without their "\n" / "\r\n"); calls f(line, line_number) for each
/// line, numbers from 1, until f returns false. A BOM at the start is dropped.
template <class F>
void for_each_line(std::string_view text, F&& f) {
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  std::size_t line_no = 0, p = 0;
  while (p < text.size()) {
    std::size_t e = text.find('\n', p);
    const std::size_t next = e == std::string_view::npos ? text.size() : e + 1;
    if (e == std::string_view::npos) e = text.size();
    std::string_view line = text.substr(p, e - p);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (!f(line, ++line_no)) return;
    p = next;
  }
}

inline bool is_blank_line(std::string_view line) {
  return line.find_first_not_of(" \t") == std::string_view::npos;
}

/// The fields of one line into `out` (resized; its strings' buffers are reused). value_error
/// (without the line number: the caller adds it) for a quote that is not closed, or text between
/// a closing quote and the delimiter.
inline void split_fields(std::string_view line, char delim, std::vector<std::string>& out) {
  const bool trim = delim != ' ' && delim != '\t';
  auto is_space = [&](char c) { return trim && (c == ' ' || c == '\t'); };
  std::size_t n = 0, p = 0;
  while (true) {
    if (out.size() <= n) out.emplace_back();
    std::string& field = out[n++];
    field.clear();
    while (p < line.size() && is_space(line[p])) ++p;
    if (p < line.size() && line[p] == '"') {
      ++p;
      while (true) {
        if (p >= line.size())
          throw value_error("a quoted field is not closed (quoted fields cannot span lines)");
        if (line[p] == '"') {
          if (p + 1 < line.size() && line[p + 1] == '"') {
            field += '"';
            p += 2;
            continue;
          }
          ++p;
          break;
        }
        field += line[p++];
      }
      while (p < line.size() && is_space(line[p])) ++p;
      if (p < line.size() && line[p] != delim)
        throw value_error("text after the closing quote of field " + std::to_string(n - 1));
    } else {
      const std::size_t e = line.find(delim, p);
      std::string_view v = line.substr(p, e == std::string_view::npos ? std::string_view::npos : e - p);
      while (!v.empty() && is_space(v.back())) v.remove_suffix(1);
      field.assign(v);
      p = e == std::string_view::npos ? line.size() : e;
    }
    if (p >= line.size()) break;
    ++p;  // the delimiter
    if (p == line.size()) {  // a trailing delimiter: one more, empty, field
      if (out.size() <= n) out.emplace_back();
      out[n++].clear();
      break;
    }
  }
  out.resize(n);
}

/// Parses the whole of s as a T; false when it is not one (or is out of T's range).
template <class T>
bool parse_field(std::string_view s, T& out) {
  if (s.empty()) return false;
  if constexpr (std::is_same_v<T, bool>) {
    auto eq = [&](std::string_view w) {
      if (s.size() != w.size()) return false;
      for (std::size_t i = 0; i < s.size(); ++i)
        if ((s[i] | 0x20) != w[i]) return false;
      return true;
    };
    if (s == "1" || eq("true")) return out = true, true;
    if (s == "0" || eq("false")) return out = false, true;
    return false;
  } else {
    if (s[0] == '+') {
      s.remove_prefix(1);
      if (s.empty() || s[0] == '-' || s[0] == '+') return false;
    }
    const char* b = s.data();
    const char* e = s.data() + s.size();
    if constexpr (std::is_integral_v<T>) {
      const auto r = std::from_chars(b, e, out);
      return r.ec == std::errc{} && r.ptr == e;
    } else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      const auto r = std::from_chars(b, e, out);
      return r.ec == std::errc{} && r.ptr == e;
    } else {  // float16, bfloat16: through double (its conversion rounds once, to nearest even)
      double f = 0;
      const auto r = std::from_chars(b, e, f);
      if (r.ec != std::errc{} || r.ptr != e) return false;
      out = T(f);
      return true;
    }
  }
}

}  // namespace tenet::detail::io
