#pragma once
#define TENET_PUBLIC_HEADER_INCLUDED 1
// Safetensors checkpoints (the format of Hugging Face and of `safetensors.torch.save_file`):
//   8 bytes: N, the header length (unsigned little-endian)
//   N bytes: a JSON object {"__metadata__": {str: str} (optional),
//                           name: {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...}
//            padded with spaces to a multiple of 8
//   then the tensors' raw little-endian bytes, back to back, offsets relative to the end of the header.
// tenet writes files byte for byte as the Python package does (tensors ordered by dtype, widest first
// as safetensors' dtype order, then by name; compact JSON) and reads any valid file. Dtypes: F64 F32
// F16 BF16 I64 I32 I16 I8 U8 BOOL. A file that is truncated, has a bad header length, bad JSON,
// an unknown dtype, a shape that does not match its byte range, or byte ranges that overlap, leave
// gaps or run past the end gives value_error (with the reason), never a crash: held by
// tests/test_safetensors.cpp and the libFuzzer target tests/fuzz/fuzz_safetensors.cpp (docs/security.md).
//
//   tenet::safetensors::save_model(model, "model.safetensors");      // model.state_dict(), torch's names
//   tenet::safetensors::load_model(model, "model.safetensors");      // strict keys, dtypes and sizes
//   tenet::safetensors::save_file(opt.state_dict(), "opt.safetensors");
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <tenet/dtype.hpp>
#include <tenet/error.hpp>
#include <tenet/nn/module.hpp>
#include <tenet/tensor_dict.hpp>

#include <tenet/io/json.hpp>

namespace tenet::safetensors {

static_assert(std::endian::native == std::endian::little,
              "tenet: safetensors I/O assumes a little-endian host (the file format is little-endian)");

using metadata = std::map<std::string, std::string>;

/// The dtype name in a safetensors header ("F32", ...).
inline const char* dtype_code(dtype d) {
  switch (d) {
    case dtype::bool_: return "BOOL";
    case dtype::uint8: return "U8";
    case dtype::int8: return "I8";
    case dtype::int16: return "I16";
    case dtype::int32: return "I32";
    case dtype::int64: return "I64";
    case dtype::float16: return "F16";
    case dtype::bfloat16: return "BF16";
    case dtype::float32: return "F32";
    case dtype::float64: return "F64";
  }
  return "?";
}

namespace detail {
/// The rank of a dtype in safetensors' Dtype enum (BOOL < U8 < I8 < I16 < F16 < BF16 < I32 < F32 <
/// F64 < I64): the writer orders tensors by it, highest first.
inline int dtype_rank(dtype d) {
  switch (d) {
    case dtype::bool_: return 0;
    case dtype::uint8: return 1;
    case dtype::int8: return 2;
    case dtype::int16: return 3;
    case dtype::float16: return 4;
    case dtype::bfloat16: return 5;
    case dtype::int32: return 6;
    case dtype::float32: return 7;
    case dtype::float64: return 8;
    case dtype::int64: return 9;
  }
  return -1;
}
inline bool dtype_from_code(std::string_view s, dtype& out) {
  for (dtype d : all_dtypes)
    if (s == dtype_code(d)) {
      out = d;
      return true;
    }
  return false;
}
[[noreturn]] inline void fail(const std::string& where, const std::string& why) {
  throw value_error("tenet: safetensors: " + where + ": " + why);
}
/// Largest header the reader accepts (the Python package's limit).
inline constexpr std::uint64_t max_header = 100'000'000;
}  // namespace detail

/// The bytes of a safetensors file holding `tensors` (and `meta` as "__metadata__" when not empty).
inline std::string serialize(const tensor_dict& tensors, const metadata& meta = {}) {
  std::vector<const tensor_dict::item*> order;
  for (const auto& it : tensors) {
    if (!it.second.defined()) detail::fail("serialize", "the tensor \"" + it.first + "\" is undefined");
    if (it.first == "__metadata__") detail::fail("serialize", "\"__metadata__\" cannot name a tensor");
    if (!tenet::detail::json::valid_utf8(it.first))  // readers (tenet's, Python's) refuse such a header
      detail::fail("serialize", "the tensor name " + tenet::detail::json::quote(it.first) + " is not valid UTF-8");
    order.push_back(&it);
  }
  std::stable_sort(order.begin(), order.end(), [](const auto* a, const auto* b) {
    const int ra = detail::dtype_rank(a->second.scalar_type()), rb = detail::dtype_rank(b->second.scalar_type());
    return ra != rb ? ra > rb : a->first < b->first;
  });
  std::string header = "{";
  if (!meta.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [k, v] : meta) {
      if (!tenet::detail::json::valid_utf8(k) || !tenet::detail::json::valid_utf8(v))
        detail::fail("serialize", "the metadata entry " + tenet::detail::json::quote(k) + " is not valid UTF-8");
      header += (first ? "" : ",") + tenet::detail::json::quote(k) + ":" + tenet::detail::json::quote(v);
      first = false;
    }
    header += "}";
  }
  std::uint64_t offset = 0;
  for (const auto* it : order) {
    const auto& t = it->second;
    if (header.size() > 1) header += ",";
    header += tenet::detail::json::quote(it->first) + ":{\"dtype\":\"" + dtype_code(t.scalar_type()) + "\",\"shape\":[";
    for (std::size_t i = 0; i < t.sizes().size(); ++i) header += (i ? "," : "") + std::to_string(t.sizes()[i]);
    const std::uint64_t end = offset + t.nbytes();
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(end) + "]}";
    offset = end;
  }
  header += "}";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string out;
  out.reserve(8 + header.size() + offset);
  const std::uint64_t n = header.size();
  for (int b = 0; b < 8; ++b) out += static_cast<char>((n >> (8 * b)) & 0xFF);
  out += header;
  for (const auto* it : order) {
    const any_tensor& t = it->second;
    if (!t.nbytes()) continue;
    if (t.device().is_cpu()) {
      out.append(static_cast<const char*>(t.raw_data()), t.nbytes());
    } else {  // a device's tensor (a CUDA model's state_dict): its bytes come over to the host
      const std::size_t at = out.size();
      out.resize(at + t.nbytes());
      t.copy_to_host(out.data() + at);
    }
  }
  return out;
}

/// The tensors of a safetensors file's bytes, in file order (fresh storage; value_error when the
/// bytes are not a valid file). `meta`, when given, receives "__metadata__".
inline tensor_dict deserialize(std::string_view bytes, metadata* meta = nullptr, const std::string& where = "buffer") {
  using tenet::detail::json::value;
  if (bytes.size() < 8)
    detail::fail(where, "the file is " + std::to_string(bytes.size()) + " bytes long, shorter than the 8-byte header length");
  std::uint64_t n = 0;
  for (int b = 0; b < 8; ++b) n |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes[b])) << (8 * b);
  if (n > detail::max_header) detail::fail(where, "header length " + std::to_string(n) + " is too large (limit 100000000)");
  if (n > bytes.size() - 8)
    detail::fail(where, "header length " + std::to_string(n) + " runs past the end of the file (" +
                            std::to_string(bytes.size() - 8) + " bytes follow the length); the file is truncated or corrupt");
  value root;
  try {
    root = tenet::detail::json::parse(bytes.substr(8, n));
  } catch (const value_error& e) {
    detail::fail(where, std::string("the header is not valid JSON (") + e.what() + ")");
  }
  if (root.kind != value::object) detail::fail(where, "the header is not a JSON object");
  const std::string_view data = bytes.substr(8 + n);
  struct entry {
    std::string name;
    dtype type;
    std::vector<std::int64_t> sizes;
    std::uint64_t begin, end;
  };
  std::vector<entry> entries;
  for (const auto& [name, v] : root.members) {
    if (name == "__metadata__") {
      if (v.kind != value::object) detail::fail(where, "\"__metadata__\" must be an object of strings");
      for (const auto& [k, s] : v.members) {
        if (s.kind != value::string) detail::fail(where, "\"__metadata__\"[\"" + k + "\"] is not a string");
        if (meta) (*meta)[k] = s.s;
      }
      continue;
    }
    const std::string what = "tensor \"" + name + "\"";
    if (v.kind != value::object) detail::fail(where, what + " is not described by an object");
    const value* dt = v.get("dtype");
    const value* sh = v.get("shape");
    const value* off = v.get("data_offsets");
    if (!dt || !sh || !off) detail::fail(where, what + " lacks \"dtype\", \"shape\" or \"data_offsets\"");
    entry e{name, dtype::float32, {}, 0, 0};
    if (dt->kind != value::string || !detail::dtype_from_code(dt->s, e.type))
      detail::fail(where, what + " has an unsupported dtype " + (dt->kind == value::string ? "\"" + dt->s + "\"" : "(not a string)") +
                              " (tenet reads F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL)");
    if (sh->kind != value::array) detail::fail(where, what + ": \"shape\" is not an array");
    for (const auto& x : sh->items) {
      if (x.kind != value::integer || x.i < 0) detail::fail(where, what + ": \"shape\" holds a value that is not a non-negative integer");
      e.sizes.push_back(x.i);
    }
    // elements x item size, checked (a product that wraps to a small size must not pass, issue 27)
    std::uint64_t want = 0;
    try {
      want = tenet::detail::checked_nbytes(e.sizes.data(), e.sizes.size(), itemsize(e.type), "safetensors");
    } catch (const shape_error&) {
      detail::fail(where, what + ": " + dtype_code(e.type) + " of shape " + tenet::detail::sizes_text(e.sizes) +
                              " is too large (its element count overflows int64 or it needs more than 2^63 - 1 bytes)");
    }
    if (off->kind != value::array || off->items.size() != 2 || off->items[0].kind != value::integer ||
        off->items[1].kind != value::integer || off->items[0].i < 0 || off->items[1].i < 0)
      detail::fail(where, what + ": \"data_offsets\" must be two non-negative integers [begin, end]");
    e.begin = static_cast<std::uint64_t>(off->items[0].i);
    e.end = static_cast<std::uint64_t>(off->items[1].i);
    if (e.begin > e.end)
      detail::fail(where, what + ": data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "] end before they begin");
    if (e.end > data.size())
      detail::fail(where, what + ": data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                              "] run past the " + std::to_string(data.size()) + " data bytes; the file is truncated or corrupt");
    if (e.end - e.begin != want)
      detail::fail(where, what + ": " + dtype_code(e.type) + " of shape " + tenet::detail::sizes_text(e.sizes) + " needs " +
                              std::to_string(want) + " bytes, but data_offsets [" + std::to_string(e.begin) + ", " +
                              std::to_string(e.end) + "] hold " + std::to_string(e.end - e.begin));
    entries.push_back(std::move(e));
  }
  // the byte ranges must tile the data exactly (as the Python package checks)
  std::vector<const entry*> by_offset;
  for (const auto& e : entries) by_offset.push_back(&e);
  std::stable_sort(by_offset.begin(), by_offset.end(), [](const entry* a, const entry* b) { return a->begin < b->begin; });
  std::uint64_t expect = 0;
  for (const entry* e : by_offset) {
    if (e->begin != expect)
      detail::fail(where, "tensor \"" + e->name + "\" starts at byte " + std::to_string(e->begin) + ", expected " +
                              std::to_string(expect) + " (byte ranges overlap or leave a gap)");
    expect = e->end;
  }
  if (expect != data.size())
    detail::fail(where, "the tensors cover " + std::to_string(expect) + " of the " + std::to_string(data.size()) +
                            " data bytes (extra bytes at the end)");
  tensor_dict out;
  for (const auto& e : entries) {
    any_tensor t = any_tensor::zeros(e.type, e.sizes);
    if (t.nbytes()) std::memcpy(t.raw_data_mut(), data.data() + e.begin, t.nbytes());
    if (e.type == dtype::bool_) {  // a byte other than 0 or 1 is not a bool
      const auto* p = static_cast<const unsigned char*>(t.raw_data());
      for (std::size_t i = 0; i < t.nbytes(); ++i)
        if (p[i] > 1) detail::fail(where, "tensor \"" + e.name + "\" (BOOL) holds the byte " + std::to_string(p[i]));
    }
    out.insert(e.name, std::move(t));
  }
  return out;
}

/// Writes `tensors` to `path` (io error as value_error).
inline void save_file(const tensor_dict& tensors, const std::string& path, const metadata& meta = {}) {
  const std::string bytes = serialize(tensors, meta);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) detail::fail(path, "cannot open the file for writing");
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  f.close();
  if (!f) detail::fail(path, "writing failed");
}

/// Reads every tensor of the file at `path`.
inline tensor_dict load_file(const std::string& path, metadata* meta = nullptr) {
  std::ifstream f(path, std::ios::binary);
  if (!f) detail::fail(path, "cannot open the file for reading");
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return deserialize(bytes, meta, path);
}

/// Saves model.state_dict() (parameters and persistent buffers by torch's dotted names).
inline void save_model(const nn::Module& model, const std::string& path, const metadata& meta = {{"format", "pt"}}) {
  save_file(model.state_dict(), path, meta);
}
/// Loads a file into model.load_state_dict(..., strict): missing or unexpected keys, dtypes or
/// sizes that differ give value_error / dtype_error / shape_error naming the key.
inline void load_model(nn::Module& model, const std::string& path, bool strict = true) {
  model.load_state_dict(load_file(path), strict);
}

}  // namespace tenet::safetensors
