// libFuzzer target for tenet's JSON reader (detail/tenet/io/json.hpp), the parser of safetensors
// headers. Built and run by tests/fuzz/run.sh (the CTest test `fuzz`); see docs/security.md.
// Checked for every input:
//   - parsing returns a value or throws tenet::value_error, nothing else (no crash, no other
//     exception, no sanitizer report: the build uses ASan and UBSan);
//   - a parsed value holds only well-formed UTF-8 strings, no object with a key twice and no
//     nesting deeper than 64, and writing it back out and parsing that gives the same value;
//   - differential, when nlohmann-json is installed (Debian: nlohmann-json3-dev): the reader
//     accepts exactly what nlohmann::ordered_json accepts, with the same values, except where
//     tenet is stricter on purpose (duplicate keys, nesting deeper than 64, a byte-order mark, a NUL
//     byte after the value).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#define TENET_PUBLIC_HEADER_INCLUDED 1  // the reader alone, without the tensor library
#include <tenet/io/json.hpp>

#if __has_include(<nlohmann/json.hpp>)
#include <nlohmann/json.hpp>
#define TENET_FUZZ_NLOHMANN 1
#endif

namespace json = tenet::detail::json;

namespace {

[[noreturn]] void fail(const char* what, std::string_view input) {
  std::fprintf(stderr, "fuzz_json: %s (input of %zu bytes)\n", what, input.size());
  std::abort();
}

/// A canonical text of v (doubles with 17 digits, so that they read back exactly).
void write(const json::value& v, std::string& out) {
  switch (v.kind) {
    case json::value::null: out += "null"; return;
    case json::value::boolean: out += v.b ? "true" : "false"; return;
    case json::value::integer: out += std::to_string(v.i); return;
    case json::value::number: {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.17e", v.d);
      out += buf;
      return;
    }
    case json::value::string: out += json::quote(v.s); return;
    case json::value::array:
      out += '[';
      for (std::size_t i = 0; i < v.items.size(); ++i) {
        if (i) out += ',';
        write(v.items[i], out);
      }
      out += ']';
      return;
    case json::value::object:
      out += '{';
      for (std::size_t i = 0; i < v.members.size(); ++i) {
        if (i) out += ',';
        out += json::quote(v.members[i].first);
        out += ':';
        write(v.members[i].second, out);
      }
      out += '}';
      return;
  }
}

void check_invariants(const json::value& v, int depth, std::string_view input) {
  if (depth > 65) fail("nesting deeper than 64 was accepted", input);
  if (v.kind == json::value::string && !json::valid_utf8(v.s)) fail("a string is not valid UTF-8", input);
  for (const auto& x : v.items) check_invariants(x, depth + 1, input);
  for (std::size_t i = 0; i < v.members.size(); ++i) {
    if (!json::valid_utf8(v.members[i].first)) fail("a key is not valid UTF-8", input);
    for (std::size_t j = 0; j < i; ++j)
      if (v.members[j].first == v.members[i].first) fail("a duplicate key was accepted", input);
    check_invariants(v.members[i].second, depth + 1, input);
  }
  if (v.kind == json::value::object && !v.items.empty()) fail("an object holds array items", input);
}

#ifdef TENET_FUZZ_NLOHMANN
bool same(const json::value& a, const nlohmann::ordered_json& b) {
  using nlohmann::ordered_json;
  switch (a.kind) {
    case json::value::null: return b.is_null();
    case json::value::boolean: return b.is_boolean() && b.get<bool>() == a.b;
    case json::value::integer:
      if (b.is_number_integer() && !b.is_number_unsigned()) return b.get<std::int64_t>() == a.i;
      if (b.is_number_unsigned()) return a.i >= 0 && b.get<std::uint64_t>() == static_cast<std::uint64_t>(a.i);
      return false;
    case json::value::number:  // a float, or an integer beyond int64 (kept as a double)
      if (b.is_number_float()) return b.get<double>() == a.d;
      if (b.is_number_unsigned()) return static_cast<double>(b.get<std::uint64_t>()) == a.d;
      return false;
    case json::value::string: return b.is_string() && b.get_ref<const std::string&>() == a.s;
    case json::value::array: {
      if (!b.is_array() || b.size() != a.items.size()) return false;
      for (std::size_t i = 0; i < a.items.size(); ++i)
        if (!same(a.items[i], b[i])) return false;
      return true;
    }
    case json::value::object: {
      if (!b.is_object() || b.size() != a.members.size()) return false;
      std::size_t i = 0;
      for (auto it = b.begin(); it != b.end(); ++it, ++i)
        if (it.key() != a.members[i].first || !same(a.members[i].second, it.value())) return false;
      return true;
    }
  }
  return false;
}
#endif

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  json::value v;
  bool ok = true;
  std::string why;
  try {
    v = json::parse(input);
  } catch (const tenet::value_error& e) {
    ok = false;
    why = e.what();
  }
  if (ok) {
    check_invariants(v, 0, input);
    std::string text;
    write(v, text);
    json::value again;
    try {
      again = json::parse(text);
    } catch (const tenet::value_error&) {
      fail("the written text of a parsed value does not parse", input);
    }
    std::string text2;
    write(again, text2);
    if (text2 != text) fail("writing and parsing again changed the value", input);
  }
#ifdef TENET_FUZZ_NLOHMANN
  const auto theirs = nlohmann::ordered_json::parse(input.begin(), input.end(), nullptr, /*allow_exceptions=*/false);
  // nlohmann skips a byte-order mark and stops at a NUL byte after the value; RFC 8259 allows neither
  const bool lax = input.substr(0, 3) == "\xEF\xBB\xBF" || input.find('\0') != std::string_view::npos;
  if (ok && theirs.is_discarded()) fail("tenet accepts what nlohmann-json refuses", input);
  if (ok && !same(v, theirs)) fail("tenet and nlohmann-json read different values", input);
  if (!ok && !theirs.is_discarded() && !lax && why.find("duplicate key") == std::string::npos &&
      why.find("nesting deeper than 64") == std::string::npos)
    fail(("tenet refuses what nlohmann-json accepts: " + why).c_str(), input);
#endif
  return 0;
}
