// libFuzzer target for tenet's safetensors reader (include/tenet/safetensors.hpp). Built and run by
// tests/fuzz/run.sh (the CTest test `fuzz`); see docs/security.md. Checked for every input:
//   - deserialize returns tensors or throws tenet::value_error, nothing else (no crash, no other
//     exception, no sanitizer report: the build uses ASan and UBSan);
//   - no tensor it returns holds more bytes than the input (the sizes are checked, issue 27);
//   - a file it accepts written back by serialize reads back to the same names, dtypes, sizes,
//     bytes and metadata (the writer accepts everything the reader accepts).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include <tenet/safetensors.hpp>

namespace {
[[noreturn]] void fail(const char* what, std::size_t size) {
  std::fprintf(stderr, "fuzz_safetensors: %s (input of %zu bytes)\n", what, size);
  std::abort();
}
bool same(const tenet::tensor_dict& a, const tenet::tensor_dict& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [name, t] : a) {
    const tenet::any_tensor* u = b.find(name);
    if (!u || u->scalar_type() != t.scalar_type() || u->sizes() != t.sizes() || u->nbytes() != t.nbytes()) return false;
    if (t.nbytes() && std::memcmp(t.raw_data(), u->raw_data(), t.nbytes()) != 0) return false;
  }
  return true;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  tenet::safetensors::metadata meta;
  tenet::tensor_dict d;
  try {
    d = tenet::safetensors::deserialize(bytes, &meta);
  } catch (const tenet::value_error&) {
    return 0;
  }
  std::size_t total = 0;
  for (const auto& [name, t] : d) {
    if (t.nbytes() > size) fail("a tensor holds more bytes than the file", size);
    total += t.nbytes();
  }
  if (total > size) fail("the tensors hold more bytes than the file", size);
  std::string again;
  try {
    again = tenet::safetensors::serialize(d, meta);
  } catch (const tenet::value_error&) {
    fail("serialize refuses what deserialize accepted", size);
  }
  tenet::safetensors::metadata meta2;
  tenet::tensor_dict d2;
  try {
    d2 = tenet::safetensors::deserialize(again, &meta2);
  } catch (const tenet::value_error&) {
    fail("deserialize refuses what serialize wrote", size);
  }
  if (!same(d, d2) || meta != meta2) fail("a file written back reads back differently", size);
  return 0;
}
