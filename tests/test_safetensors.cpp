// Safetensors checkpoints against files written by Python's `safetensors` package
// (tests/reference/gen_safetensors.py): loading them into tenet models, writing byte-identical
// files, and clear errors for corrupt, truncated or mismatched files.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <unistd.h>

#include <tenet/tenet.hpp>

#include "reference.hpp"

using namespace tenet;
using namespace tenet_test;

namespace {
using mlp = nn::Sequential<nn::Linear<4, 8>, nn::BatchNorm1d<8>, nn::ReLU, nn::Linear<8, 3>>;

std::string fixture_path(const std::string& name) { return std::string(TENET_REFERENCE_DIR) + "/" + name; }
std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  REQUIRE(f);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}
std::string header_of(const std::string& bytes) {
  std::uint64_t n = 0;
  for (int b = 0; b < 8; ++b) n |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes[b])) << (8 * b);
  return bytes.substr(8, n);
}
/// A file of these header bytes (padded to 8) and data bytes.
std::string file_of(std::string header, const std::string& data) {
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string out;
  for (int b = 0; b < 8; ++b) out += static_cast<char>((header.size() >> (8 * b)) & 0xFF);
  return out + header + data;
}
/// The message of the value_error that deserializing `bytes` throws ("" when none).
std::string error_of(const std::string& bytes) {
  try {
    (void)safetensors::deserialize(bytes);
  } catch (const value_error& e) {
    return e.what();
  }
  return "";
}
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
}  // namespace

TEST_CASE("safetensors: a file written by PyTorch loads into the tenet model and gives torch's outputs") {
  mlp model;
  model.eval();
  safetensors::load_model(model, fixture_path("safetensors_mlp.safetensors"));
  CHECK(model.get<1>().num_batches_tracked.item() == 3);
  const auto& c = get_case("safetensors.txt", "mlp");
  auto x = make<float, dyn_shape<2>>(c.at("x"));
  Tensor<float, dyn_shape<2>> y = model(x);
  check_close(y, c.at("y"), 1e-5, 1e-6);
}

TEST_CASE("safetensors: tenet writes the bytes PyTorch's safetensors writes") {
  // the model file: state_dict order differs from the file order (sorted by dtype, then name)
  mlp model;
  safetensors::load_model(model, fixture_path("safetensors_mlp.safetensors"));
  const std::string want = read_bytes(fixture_path("safetensors_mlp.safetensors"));
  const std::string got = safetensors::serialize(model.state_dict(), {{"format", "pt"}});
  CHECK(header_of(got) == header_of(want));
  CHECK(got == want);
  // every dtype
  safetensors::metadata meta;
  const std::string dt_want = read_bytes(fixture_path("safetensors_dtypes.safetensors"));
  tensor_dict d = safetensors::deserialize(dt_want, &meta);
  CHECK(meta.empty());
  CHECK(safetensors::serialize(d) == dt_want);
  // and through a file; gen_safetensors.py --check <this file> loads it in PyTorch
  // (in the temporary directory, removed afterwards: a test leaves nothing in the source tree)
  const std::string out = (std::filesystem::temp_directory_path() /
                           ("tenet_mlp_" + std::to_string(::getpid()) + ".safetensors")).string();
  safetensors::save_model(model, out);
  CHECK(read_bytes(out) == want);
  mlp again;
  safetensors::load_model(again, out);
  std::filesystem::remove(out);
  CHECK(again.get<3>().weight(2, 7) == model.get<3>().weight(2, 7));
}

TEST_CASE("safetensors: every dtype's values") {
  const auto& c = get_case("safetensors.txt", "dtypes");
  tensor_dict d = safetensors::load_file(fixture_path("safetensors_dtypes.safetensors"));
  CHECK(d.size() == 12);
  for (const auto& [k, v] : c) {
    const std::string n = k.substr(2);
    INFO(n);
    const any_tensor& t = d.at(n);
    CHECK(t.sizes() == v.sizes);
    CHECK(std::string(name(t.scalar_type())) == v.dtype);
    any_tensor::visit_dtype(t.scalar_type(), [&]<class T>() {
      const T* p = t.numel() ? t.flat<T>().data() : nullptr;
      for (std::int64_t i = 0; i < t.numel(); ++i)
        CHECK(static_cast<double>(static_cast<compute_t<T>>(p[i])) == v.values[static_cast<std::size_t>(i)]);
    });
  }
  CHECK(d.at("f64").as<double, shape<2, 3>>()(1, 2) == -2.0 / 3);
  CHECK_THROWS_AS((d.at("f64").as<float, shape<2, 3>>()), dtype_error);
  CHECK_THROWS_AS((d.at("f64").as<double, shape<3, 2>>()), shape_error);
}

TEST_CASE("safetensors: model mismatches give tenet errors naming the key") {
  mlp model;
  const float before = model.get<0>().weight(0, 0);
  tensor_dict sd = model.state_dict();
  // missing and unexpected keys
  tensor_dict fewer, more;
  for (const auto& [k, v] : sd)
    if (k != "1.running_var") fewer.insert(k, v);
  for (const auto& [k, v] : sd) more.insert(k, v);
  more.insert("4.weight", sd.at("3.weight"));
  safetensors::save_file(fewer, "tenet_fewer.safetensors");
  safetensors::save_file(more, "tenet_more.safetensors");
  try {
    safetensors::load_model(model, "tenet_fewer.safetensors");
    FAIL("no error");
  } catch (const value_error& e) {
    CHECK(contains(e.what(), "missing key(s): \"1.running_var\""));
  }
  try {
    safetensors::load_model(model, "tenet_more.safetensors");
    FAIL("no error");
  } catch (const value_error& e) {
    CHECK(contains(e.what(), "unexpected key(s): \"4.weight\""));
  }
  CHECK_NOTHROW(safetensors::load_model(model, "tenet_more.safetensors", false));
  // wrong shape, wrong dtype
  nn::Sequential<nn::Linear<4, 9>, nn::BatchNorm1d<9>, nn::ReLU, nn::Linear<9, 3>> wider;
  CHECK_THROWS_AS(safetensors::load_model(wider, fixture_path("safetensors_mlp.safetensors")), shape_error);
  nn::Sequential<nn::Linear<4, 8, true, double>, nn::BatchNorm1d<8>, nn::ReLU, nn::Linear<8, 3>> f64;
  CHECK_THROWS_AS(safetensors::load_model(f64, fixture_path("safetensors_mlp.safetensors")), dtype_error);
  CHECK(model.get<0>().weight(0, 0) == before);
  CHECK_THROWS_AS(safetensors::load_file("does/not/exist.safetensors"), value_error);
  std::remove("tenet_fewer.safetensors");
  std::remove("tenet_more.safetensors");
}

TEST_CASE("safetensors: corrupt and truncated files give clear errors, never a crash") {
  const std::string good = read_bytes(fixture_path("safetensors_dtypes.safetensors"));
  CHECK(error_of(good).empty());
  // every truncation
  for (std::size_t n = 0; n < good.size(); ++n) {
    INFO("truncated to " << n << " bytes");
    CHECK(!error_of(good.substr(0, n)).empty());
  }
  CHECK(contains(error_of("abc"), "shorter than the 8-byte header length"));
  // a header length past the end, or absurd
  std::string bad = good;
  bad[0] = static_cast<char>(0xFF);
  bad[1] = static_cast<char>(0xFF);
  CHECK(contains(error_of(bad), "runs past the end of the file"));
  bad = good;
  bad[6] = 1;
  CHECK(contains(error_of(bad), "too large"));
  const std::string data(8, '\0');
  const std::string f32 = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  CHECK(error_of(file_of("{" + f32 + "}", data)).empty());
  // bad JSON
  CHECK(contains(error_of(file_of("{" + f32, data)), "not valid JSON"));
  CHECK(contains(error_of(file_of("{" + f32 + ",}", data)), "not valid JSON"));
  CHECK(contains(error_of(file_of("{\"a\":{\"dtype\":\"F32\",\"sha", data)), "not valid JSON"));
  CHECK(contains(error_of(file_of(std::string(200, '['), data)), "not valid JSON"));  // nesting
  CHECK(contains(error_of(file_of("[1, 2]", data)), "not a JSON object"));
  CHECK(contains(error_of(file_of("{" + f32 + "," + f32 + "}", data)), "duplicate key"));
  // fields
  CHECK(contains(error_of(file_of(R"({"a":{"dtype":"F8_E4M3","shape":[8],"data_offsets":[0,8]}})", data)),
                 "unsupported dtype \"F8_E4M3\""));
  CHECK(contains(error_of(file_of(R"({"a":{"dtype":"F32","shape":[2]}})", data)), "lacks"));
  CHECK(contains(error_of(file_of(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", data)),
                 "non-negative integer"));
  CHECK(contains(error_of(file_of(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", data)),
                 "end before they begin"));
  CHECK(contains(error_of(file_of(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,16]}})", data)),
                 "run past the 8 data bytes"));
  CHECK(contains(error_of(file_of(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", data)),
                 "needs 12 bytes"));
  CHECK(contains(error_of(file_of(R"({"a":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,8]}})", data)),
                 "too large"));
  CHECK(contains(error_of(file_of(R"({"__metadata__":{"k":1}})", "")), "not a string"));
  // byte ranges: a gap, an overlap, extra bytes
  CHECK(contains(error_of(file_of(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", data)), "gap"));
  CHECK(contains(error_of(file_of(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", data)),
                 "overlap"));
  CHECK(contains(error_of(file_of("{" + f32 + "}", data + "xx")), "extra bytes"));
  CHECK(contains(error_of(file_of(R"({"a":{"dtype":"BOOL","shape":[8],"data_offsets":[0,8]}})", std::string(8, '\x02'))),
                 "BOOL"));
  // random byte flips in the header never crash
  for (std::size_t i = 8; i < 8 + header_of(good).size(); i += 3) {
    std::string flipped = good;
    flipped[i] = static_cast<char>(flipped[i] ^ 0x5A);
    try {
      (void)safetensors::deserialize(flipped);
    } catch (const value_error&) {
    }
  }
}

// Issue 27 item 1: elements x item size that wraps to the byte count of the data range.
TEST_CASE("safetensors: a shape whose byte count wraps is refused, not allocated") {
  // 2^62 F32 elements are 2^64 bytes, 0 in 64 bits: the data range [0, 0] matched, the constructor
  // allocated 0 bytes and filled 2^62 floats
  const std::string wraps = R"({"t":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,0]}})";
  CHECK(contains(error_of(file_of(wraps, "")), "tensor \"t\": F32 of shape shape<4611686018427387904> is too large"));
  CHECK(contains(error_of(file_of(R"({"t":{"dtype":"I64","shape":[2305843009213693952],"data_offsets":[0,0]}})", "")),
                 "too large"));
  CHECK(contains(error_of(file_of(R"({"t":{"dtype":"F16","shape":[4611686018427387904],"data_offsets":[0,0]}})", "")),
                 "too large"));  // exactly 2^63 bytes
  CHECK(contains(error_of(file_of(R"({"t":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", "")),
                 "too large"));  // 2^64 elements
  // a 0 size does not excuse the others (their product is a stride), as torch
  CHECK(contains(error_of(file_of(R"({"t":{"dtype":"U8","shape":[0,4294967296,4294967296],"data_offsets":[0,0]}})", "")),
                 "too large"));
  // an empty tensor with large sizes that fit is fine
  const auto ok = safetensors::deserialize(file_of(R"({"t":{"dtype":"F64","shape":[0,1099511627776],"data_offsets":[0,0]}})", ""));
  CHECK(ok.at("t").numel() == 0);
  CHECK(ok.at("t").sizes() == std::vector<std::int64_t>{0, 1099511627776});
}

// Issue 27 item 3: names and metadata must be UTF-8 (RFC 8259; the Python package refuses others).
TEST_CASE("safetensors: names and metadata that are not valid UTF-8 are refused") {
  const std::string data(4, '\0');
  auto named = [&](const std::string& name) {
    return file_of("{\"" + name + "\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", data);
  };
  CHECK(error_of(named("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80")).empty());  // 2, 3 and 4 bytes
  CHECK(safetensors::deserialize(named("caf\xC3\xA9")).contains("caf\xC3\xA9"));
  for (const char* bad : {"\xFF", "a\x80", "\xC3", "\xC0\xAF", "\xE0\x80\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80",
                          "\xF0\x9F\x98", "\xC3\x28"}) {
    INFO("name bytes " << tenet::detail::json::quote(bad));
    CHECK(contains(error_of(named(bad)), "not valid UTF-8"));
  }
  CHECK(contains(error_of(file_of("{\"__metadata__\":{\"k\":\"\xC3\"}}", "")), "not valid UTF-8"));
  CHECK(contains(error_of(file_of("{\"__metadata__\":{\"\xFE\":\"v\"}}", "")), "not valid UTF-8"));
  // numbers beyond the double range are refused, as serde_json and nlohmann-json do (found by fuzzing)
  CHECK(contains(error_of(file_of(R"({"__metadata__":{"k":"v"},"x":1e400})", "")), "number out of range"));
  // escapes give UTF-8, lone surrogates are refused
  CHECK(safetensors::deserialize(named("\\u00e9\\ud83d\\ude00")).contains("\xC3\xA9\xF0\x9F\x98\x80"));
  CHECK(contains(error_of(named("\\udc00")), "surrogate"));
  // the writer refuses what the reader would
  tensor_dict d;
  d.insert("w\xFF", any_tensor::zeros(dtype::float32, {1}));
  CHECK_THROWS_AS(safetensors::serialize(d), value_error);
  CHECK_THROWS_AS(safetensors::serialize({}, {{"k", "\xC3"}}), value_error);
  tensor_dict u;
  u.insert("caf\xC3\xA9", any_tensor::zeros(dtype::float32, {1}));
  CHECK(safetensors::deserialize(safetensors::serialize(u, {{"\xE2\x82\xAC", "\xF0\x9F\x98\x80"}})).contains("caf\xC3\xA9"));
}

// Issue 27 item 3: duplicate names were found by linear scans (100 k tensors took 23.6 s, 300 k 458 s).
TEST_CASE("safetensors: a header of many tensors loads in linear time") {
  constexpr int n = 100'000;
  std::string header = "{";
  for (int i = 0; i < n; ++i)
    header += (i ? "," : "") + ("\"layer." + std::to_string(i) + ".weight\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}");
  header += "}";
  const std::string bytes = file_of(header, "");
  const auto t0 = std::chrono::steady_clock::now();
  const auto d = safetensors::deserialize(bytes);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(d.size() == static_cast<std::size_t>(n));
  CHECK(d.contains("layer.99999.weight"));
  CHECK(seconds < 10.0);  // linear: 0.6 s at -O1 on one core; the scans took 23.6 s
  // a duplicate far from its twin is still found (by the hash set, past the linear scan's 16 keys)
  const std::string dup = header.substr(0, header.size() - 1) + R"(,"layer.7.weight":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}})";
  CHECK(contains(error_of(file_of(dup, "")), "duplicate key \"layer.7.weight\""));
  tensor_dict big;
  for (int i = 0; i < 1000; ++i) big.insert("p" + std::to_string(i), any_tensor{});
  CHECK_THROWS_AS(big.insert("p999", any_tensor{}), value_error);
  big.set("p5", any_tensor::zeros(dtype::int8, {3}));
  CHECK(big.at("p5").numel() == 3);
  CHECK(big.keys()[5] == "p5");
}

TEST_CASE("safetensors: optimizer state round trip") {
  mlp model;
  optim::AdamW opt(model.parameters(), {.lr = 0.01});
  std::vector<any_tensor> grads;
  for (auto& p : model.parameters()) {
    any_tensor g = any_tensor::zeros(p.scalar_type(), p.sizes());
    g.flat<float>().fill_(0.5f);
    grads.push_back(g);
  }
  opt.step(grads);
  safetensors::save_file(opt.state_dict(), "tenet_opt.safetensors");
  optim::AdamW restored(model.parameters(), {.lr = 0.5});
  restored.load_state_dict(safetensors::load_file("tenet_opt.safetensors"));
  CHECK(restored.lr() == 0.01);
  const auto a = opt.state_dict(), b = restored.state_dict();
  CHECK(a.keys() == b.keys());
  for (const auto& [k, v] : a)
    CHECK(std::memcmp(v.raw_data(), b.at(k).raw_data(), v.nbytes()) == 0);
  std::remove("tenet_opt.safetensors");
}

TEST_CASE("any_tensor: device, to and copy_to_host (the paths a CUDA state_dict takes)") {
  using namespace tenet;
  Tensor<float, shape<2, 3>> a{{2, 3}};
  for (int i = 0; i < 6; ++i) a.data()[i] = 0.5f * static_cast<float>(i) - 1.0f;
  const any_tensor t(a);
  CHECK(t.device() == device(tenet::cpu));
  CHECK(any_tensor().device() == device(tenet::cpu));
  float host[6] = {};
  t.copy_to_host(host);
  for (int i = 0; i < 6; ++i) CHECK(host[i] == a.data()[i]);
  // to() where the values already are: the same storage
  CHECK(t.to(tenet::cpu).raw_data() == t.raw_data());
  CHECK_FALSE(any_tensor().to(tenet::cpu).defined());
  CHECK_THROWS_AS(any_tensor().copy_to_host(host), value_error);
  // a bool tensor's values are copied, on its own device
  Tensor<bool, shape<3>> b{{3}};
  b.data()[0] = true, b.data()[1] = false, b.data()[2] = true;
  const any_tensor tb(b);
  bool hb[3] = {};
  tb.copy_to_host(hb);
  CHECK((hb[0] && !hb[1] && hb[2]));
  CHECK(tb.as<bool, shape<3>>().data()[2]);
}
