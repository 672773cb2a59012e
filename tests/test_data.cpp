// The data kit (include/tenet/data.hpp): from_blob, NumPy .npy / .npz files against files NumPy
// wrote (tests/reference/gen_data.py), the readers' errors on malformed files, CSV, and
// TensorDataset / DataLoader (coverage of each epoch, seeds, prefetch, early exit, exceptions).
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <numeric>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <unistd.h>  // getpid

#include <tenet/data.hpp>
#include <tenet/tenet.hpp>

using namespace tenet;

namespace {
namespace fs = std::filesystem;
using i64 = std::int64_t;

std::string fixture(const std::string& name) { return std::string(TENET_REFERENCE_DIR) + "/" + name; }
std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  REQUIRE(f);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}
void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(f);
}
bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

/// A fresh folder under the system's temp folder, removed with everything in it at the end.
struct temp_dir {
  fs::path path;
  temp_dir() {
    static int count = 0;
    path = fs::temp_directory_path() / ("tenet_test_data_" + std::to_string(getpid()) + "_" + std::to_string(count++));
    fs::create_directories(path);
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
  /// Writes bytes to a file of the folder and returns its path.
  std::string write(const std::string& name, const std::string& bytes) const {
    write_bytes(file(name), bytes);
    return file(name);
  }
};

/// The message of the E that f throws ("<no error>" when none; another exception type fails the test).
template <class E, class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "<no error>";
}

/// .npy bytes with this header dict text (padded to 64 bytes as numpy pads it) and these data bytes.
std::string npy_file(const std::string& dict, const std::string& data, int major = 1) {
  const std::size_t len_bytes = major == 1 ? 2 : 4;
  std::string header = dict;
  const std::size_t pad = 64 - (8 + len_bytes + header.size() + 1) % 64;
  header.append(pad, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  for (std::size_t b = 0; b < len_bytes; ++b) out += static_cast<char>((header.size() >> (8 * b)) & 0xFF);
  return out + header + data;
}

/// Element k of gen_data.py's (2, 3) arrays.
template <class T>
T value(int k) {
  if constexpr (std::is_same_v<T, bool>) return k % 3 == 0;
  else if constexpr (std::is_same_v<T, std::uint8_t>) return static_cast<T>((k * 53) % 256);
  else if constexpr (std::is_same_v<T, std::int8_t>) return static_cast<T>((k * 53) % 256 - 128);
  else if constexpr (std::is_same_v<T, std::int16_t>) return static_cast<T>(258 * k - 3000);
  else if constexpr (std::is_same_v<T, std::int32_t>) return 100003 * k - 70000;
  else if constexpr (std::is_same_v<T, std::int64_t>) {
    i64 p = 1;
    for (int i = 0; i < k; ++i) p *= 3;
    return p * 1000003 - (i64{1} << 40);
  } else if constexpr (std::is_same_v<T, float16>) return float16((k - 2.5) * 0.25);
  else if constexpr (std::is_same_v<T, float>) return static_cast<float>((k - 2.5) / 3.0);
  else return (k - 2.5) / 7.0;
}
template <class T>
double as_double(T v) {
  if constexpr (std::is_same_v<T, float16>) return static_cast<double>(static_cast<float>(v));
  else return static_cast<double>(v);
}
template <class T, class S>
void check_values(const Tensor<T, S>& t) {
  REQUIRE(t.sizes() == sizes_t<2>{2, 3});
  for (int k = 0; k < 6; ++k) CHECK(as_double(t(k / 3, k % 3)) == as_double(value<T>(k)));
}

Tensor<float, shape<dyn, 3>> features(i64 n) {  // row i: 10 i, 10 i + 1, 10 i + 2
  Tensor<float, shape<dyn, 3>> x({n, 3});
  for (i64 i = 0; i < n; ++i)
    for (i64 j = 0; j < 3; ++j) x(i, j) = static_cast<float>(10 * i + j);
  return x;
}
Tensor<i64, shape<dyn>> labels(i64 n) {
  Tensor<i64, shape<dyn>> y({n});
  for (i64 i = 0; i < n; ++i) y(i) = i;
  return y;
}
std::vector<i64> values_of(const Tensor<i64, shape<dyn>>& t) { return {t.data(), t.data() + t.numel()}; }
}  // namespace

// ---------------------------------------------------------------------------------------------
// from_blob

TEST_CASE("data: from_blob views the caller's memory without copying") {
  float buf[6] = {0, 1, 2, 3, 4, 5};
  auto t = from_blob<float, shape<2, 3>>(buf, {2, 3});
  CHECK(t.data() == buf);
  CHECK(t.is_contiguous());
  CHECK(t(1, 2) == 5.0f);
  t(0, 1) = 7.0f;  // writes reach the buffer
  CHECK(buf[1] == 7.0f);
  buf[4] = -1.0f;  // and the buffer's changes show in the tensor
  CHECK(t(1, 1) == -1.0f);
  Tensor<float, shape<2, 3>> y = t * 2.0f + 1.0f;  // an expression reads it as any tensor
  CHECK(y(0, 1) == 15.0f);
  CHECK(!y.shares_storage(t));

  // strides (elements): the column-major reading of the same memory
  auto c = from_blob<float, shape<dyn, 2>>(buf, {3, 2}, {1, 3});
  CHECK(!c.is_contiguous());
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j) CHECK(c(i, j) == buf[i + 3 * j]);
  Tensor<float, shape<dyn, 2>> cc = c.contiguous();
  CHECK(cc.is_contiguous());
  CHECK(cc(2, 1) == buf[5]);

  // a 0-d tensor, and an empty one over a null pointer
  double d = 4.5;
  CHECK(from_blob<double, shape<>>(&d, {}).item() == 4.5);
  auto e = from_blob<float, shape<dyn, 3>>(static_cast<float*>(nullptr), {0, 3});
  CHECK(e.numel() == 0);
}

TEST_CASE("data: from_blob's deleter runs once, when the last view goes") {
  int calls = 0;
  float* mem = new float[4]{1, 2, 3, 4};
  {
    auto t = from_blob<float, shape<dyn>>(mem, {4}, [&calls](float* p) {
      ++calls;
      delete[] p;
    });
    auto view = t.slice<0>(1, 3);  // shares the storage
    t = Tensor<float, shape<dyn>>();
    CHECK(calls == 0);
    CHECK(view(1) == 3.0f);
  }
  CHECK(calls == 1);
  // with strides too
  calls = 0;
  { auto t = from_blob<std::int32_t, shape<2, 2>>(new std::int32_t[4]{}, {2, 2}, {1, 2}, [&](std::int32_t* p) { ++calls, delete[] p; }); }
  CHECK(calls == 1);
}

TEST_CASE("data: from_blob checks sizes, strides and the pointer") {
  float buf[6] = {};
  auto msg = error_of<shape_error>([&] { (void)from_blob<float, shape<2, 3>>(buf, {3, 2}); });
  CHECK(has(msg, "from_blob"));
  CHECK(has(msg, "shape<3, 2>"));
  CHECK(has(msg, "shape<2, 3>"));
  CHECK(has(error_of<shape_error>([&] { (void)from_blob<float, shape<dyn>>(buf, {-1}); }), "negative"));
  int calls = 0;
  msg = error_of<value_error>([&] {
    (void)from_blob<float, shape<dyn, 3>>(static_cast<float*>(nullptr), {2, 3}, [&](float*) { ++calls; });
  });
  CHECK(has(msg, "null pointer"));
  CHECK(has(msg, "6 elements"));
  CHECK(calls == 0);  // refused: the memory stays the caller's
  CHECK(has(error_of<value_error>([&] { (void)from_blob<float, shape<2, 3>>(buf, {2, 3}, {3, -1}); }), "negative stride"));
  CHECK(has(error_of<shape_error>([&] {
              (void)from_blob<float, shape<dyn, dyn>>(buf, {i64{1} << 40, 2}, {i64{1} << 40, 1});
            }),
            "2^63"));
}

// ---------------------------------------------------------------------------------------------
// .npy

TEMPLATE_TEST_CASE("data: load_npy reads numpy.save's file of every shared dtype", "", bool, std::uint8_t, std::int8_t,
                   std::int16_t, std::int32_t, std::int64_t, float16, float, double) {
  using T = TestType;
  const std::string file = fixture(std::string("data_") + name(dtype_of<T>) + ".npy");
  check_values(data::load_npy<T, shape<dyn, 3>>(file));
  check_values(data::load_npy<T, shape<2, 3>>(file));
  const any_tensor a = data::load_npy_any(file);
  CHECK(a.scalar_type() == dtype_of<T>);
  CHECK(a.sizes() == std::vector<i64>{2, 3});
  check_values(a.as<T, dyn_shape<2>>());
  // tenet writes the bytes numpy wrote, from a tensor and from an any_tensor
  temp_dir dir;
  data::save_npy(dir.file("t.npy"), data::load_npy<T, shape<2, 3>>(file));
  CHECK(read_bytes(dir.file("t.npy")) == read_bytes(file));
  data::save_npy(dir.file("a.npy"), a);
  CHECK(read_bytes(dir.file("a.npy")) == read_bytes(file));
}

TEST_CASE("data: load_npy reads Fortran order, big-endian values, 0-d and empty arrays, versions 2.0 and 3.0") {
  auto f = data::load_npy<std::int32_t, shape<2, 3, 4>>(fixture("data_fortran.npy"));
  CHECK(f.is_contiguous());
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int l = 0; l < 4; ++l) CHECK(f(i, j, l) == 100 * i + 10 * j + l);
  auto fb = data::load_npy<double, shape<dyn, dyn>>(fixture("data_fortran_big.npy"));
  REQUIRE(fb.sizes() == sizes_t<2>{3, 2});
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j) CHECK(fb(i, j) == i - j / 4.0);
  const any_tensor fa = data::load_npy_any(fixture("data_fortran.npy"));  // the same through any_tensor
  CHECK(fa.as<std::int32_t, shape<2, 3, 4>>()(1, 2, 3) == 123);

  auto s = data::load_npy<double, shape<>>(fixture("data_scalar.npy"));
  CHECK(s.item() == 2.5);
  CHECK(data::load_npy_any(fixture("data_scalar.npy")).sizes().empty());
  auto e = data::load_npy<float, shape<dyn, 3>>(fixture("data_empty.npy"));
  CHECK(e.sizes() == sizes_t<2>{0, 3});
  CHECK(data::load_npy_any(fixture("data_empty.npy")).numel() == 0);

  auto v2 = data::load_npy<std::int16_t, shape<dyn>>(fixture("data_v2.npy"));
  CHECK(values_of(Tensor<i64, shape<dyn>>(v2.to<i64>())) == std::vector<i64>{1, -2, 300});
  auto v3 = data::load_npy<float, shape<2>>(fixture("data_v3.npy"));
  CHECK(v3(0) == 0.5f);
  CHECK(v3(1) == -1.5f);

  // re-saved: C order, version 1.0, the bytes numpy writes for the same array
  temp_dir dir;
  data::save_npy(dir.file("s.npy"), s);
  CHECK(read_bytes(dir.file("s.npy")) == read_bytes(fixture("data_scalar.npy")));
  data::save_npy(dir.file("e.npy"), e);
  CHECK(read_bytes(dir.file("e.npy")) == read_bytes(fixture("data_empty.npy")));
  data::save_npy(dir.file("f.npy"), f);
  auto back = data::load_npy<std::int32_t, shape<2, 3, 4>>(dir.file("f.npy"));
  CHECK(back(1, 2, 3) == 123);
  data::save_npy(dir.file("x.npy"), f.permute<2, 0, 1>() + 1);  // an expression: its value
  CHECK(data::load_npy<std::int32_t, shape<4, 2, 3>>(dir.file("x.npy"))(3, 1, 2) == 124);
}

TEST_CASE("data: load_npy's dtype and shape errors name the file, what it holds and what was asked") {
  const std::string file = fixture("data_float32.npy");
  auto msg = error_of<dtype_error>([&] { (void)data::load_npy<double, shape<dyn, 3>>(file); });
  CHECK(has(msg, file));
  CHECK(has(msg, "float32 ('<f4') of shape (2, 3)"));
  CHECK(has(msg, "requested float64 shape<dyn, 3>"));
  msg = error_of<shape_error>([&] { (void)data::load_npy<float, shape<dyn, 4>>(file); });
  CHECK(has(msg, file));
  CHECK(has(msg, "(2, 3)"));
  CHECK(has(msg, "shape<dyn, 4>"));
  CHECK(has(msg, "dim 1: 3 vs 4"));
  msg = error_of<shape_error>([&] { (void)data::load_npy<float, shape<dyn>>(file); });
  CHECK(has(msg, "rank 2"));
  CHECK(has(msg, "rank 1"));
  // bfloat16 has no numpy dtype; the file is not created
  temp_dir dir;
  msg = error_of<dtype_error>([&] { data::save_npy(dir.file("b.npy"), zeros<bfloat16, shape<2>>()); });
  CHECK(has(msg, "bfloat16"));
  CHECK(!fs::exists(dir.file("b.npy")));
  CHECK(has(error_of<value_error>([&] { (void)data::load_npy_any(dir.file("missing.npy")); }), "cannot open"));
}

TEST_CASE("data: malformed .npy files are clear errors, never a crash or a huge allocation") {
  temp_dir dir;
  const std::string good = read_bytes(fixture("data_float32.npy"));
  auto value_msg = [&](const std::string& bytes) {
    const std::string p = dir.write("bad.npy", bytes);
    return error_of<value_error>([&] { (void)data::load_npy_any(p); });
  };
  auto dtype_msg = [&](const std::string& bytes) {
    const std::string p = dir.write("bad.npy", bytes);
    return error_of<dtype_error>([&] { (void)data::load_npy_any(p); });
  };
  const std::string f4 = "{'descr': '<f4', 'fortran_order': False, 'shape': ";
  // truncated, at every length: values, header, preamble
  CHECK(has(value_msg(good.substr(0, good.size() - 1)), "truncated"));
  CHECK(has(value_msg(good.substr(0, good.size() - 1)), "24 bytes, but only 23 bytes follow the header"));
  CHECK(has(value_msg(good.substr(0, 60)), "runs past the end of the file"));
  CHECK(has(value_msg(good.substr(0, 5)), "shorter than the 10-byte .npy preamble"));
  for (std::size_t n = 0; n < good.size(); ++n) CHECK(value_msg(good.substr(0, n)) != "<no error>");
  CHECK(has(value_msg(good + "xx"), "extra bytes"));
  CHECK(has(value_msg("PK\x03\x04" + good.substr(4)), "not a .npy file"));
  std::string v4 = good;
  v4[6] = 4;
  CHECK(has(value_msg(v4), "version 4.0"));
  // a header length past the end of the file (and a huge one)
  std::string longer = good;
  longer[8] = '\xFF', longer[9] = '\xFF';
  CHECK(has(value_msg(longer), "header length 65535 runs past the end"));
  CHECK(has(value_msg(npy_file(f4 + "(2,), }", std::string(8, '\0'), 2).substr(0, 12) + std::string(100, ' ')), "runs past"));
  // shapes: overflowing products, sizes the file does not hold, negative sizes
  CHECK(has(value_msg(npy_file(f4 + "(4294967296, 4294967296, 16), }", "")), "too large"));
  CHECK(has(value_msg(npy_file(f4 + "(9223372036854775807, 2), }", "")), "too large"));
  CHECK(has(value_msg(npy_file(f4 + "(99999999999999999999,), }", "")), "int64 range"));
  CHECK(has(value_msg(npy_file(f4 + "(1099511627776,), }", "abcd")), "4398046511104 bytes, but only 4 bytes"));
  CHECK(has(value_msg(npy_file(f4 + "(-1, 3), }", "")), "negative size -1"));
  CHECK(has(value_msg(npy_file(f4 + "(2, 3.0), }", std::string(24, '\0'))), "not a decimal integer"));
  CHECK(has(value_msg(npy_file(f4 + "3, }", std::string(12, '\0'))), "'shape' is not a tuple"));
  CHECK(has(value_msg(npy_file(f4 + "(3), }", std::string(12, '\0'))), "'shape' is not a tuple"));
  // headers that are not a dict literal, or not the right dict
  for (const std::string& h : std::vector<std::string>{"[1, 2]", "hello", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), ",
                              "{'descr': '<f4' 'shape': (2, 3)}", "{'descr': __import__('os'), 'shape': ()}",
                              "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)} x", "{'descr: '<f4'}", "",
                              std::string(40, '(') + std::string(40, ')')})
    CHECK(has(value_msg(npy_file(h, std::string(24, '\0'))), "not a Python dict literal"));
  CHECK(has(value_msg(npy_file("{'descr': '<f4', 'shape': (2, 3), }", std::string(24, '\0'))), "lacks the key 'fortran_order'"));
  CHECK(has(value_msg(npy_file(f4 + "(2, 3), 'x': 1, }", std::string(24, '\0'))), "unexpected key 'x'"));
  CHECK(has(value_msg(npy_file(f4 + "(2, 3), 'shape': (2, 3), }", std::string(24, '\0'))), "twice"));
  CHECK(has(value_msg(npy_file("{'descr': '<f4', 'fortran_order': 0, 'shape': (2,), }", std::string(8, '\0'))),
            "'fortran_order' is not True or False"));
  // a Python 2 header (long suffix) and double quotes are fine
  CHECK(data::load_npy_any(dir.write("ok.npy", npy_file("{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (2L,)}",
                                                        std::string(8, '\0'))))
            .numel() == 2);
  // dtypes tenet does not have
  CHECK(has(dtype_msg(npy_file("{'descr': '<u4', 'fortran_order': False, 'shape': (1,), }", "abcd")), "'<u4' is not supported"));
  CHECK(has(dtype_msg(npy_file("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", "abcdefgh")), "complex"));
  CHECK(has(dtype_msg(npy_file("{'descr': '|O', 'fortran_order': False, 'shape': (1,), }", "abcdefgh")), "object"));
  CHECK(has(dtype_msg(npy_file("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", "abcd")),
            "structured"));
  // a bool byte that is neither 0 nor 1
  CHECK(has(value_msg(npy_file("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", std::string("\1\2\0", 3))),
            "the byte 2"));
}

// ---------------------------------------------------------------------------------------------
// .npz

TEST_CASE("data: load_npz reads numpy.savez archives; tenet's save_npz round-trips") {
  const tensor_dict d = data::load_npz(fixture("data_arrays.npz"));
  CHECK(d.keys() == std::vector<std::string>{"int16", "int32", "int64", "float16", "float32", "float64", "scalar",
                                             "empty", "flags"});
  check_values(d.at("int16").as<std::int16_t, dyn_shape<2>>());  // big-endian in the archive
  check_values(d.at("int32").as<std::int32_t, dyn_shape<2>>());
  check_values(d.at("int64").as<i64, dyn_shape<2>>());
  check_values(d.at("float16").as<float16, dyn_shape<2>>());
  check_values(d.at("float32").as<float, dyn_shape<2>>());
  check_values(d.at("float64").as<double, dyn_shape<2>>());
  CHECK(d.at("scalar").as<i64, shape<>>().item() == 7);
  CHECK(d.at("empty").sizes() == std::vector<i64>{0, 2});
  auto flags = d.at("flags").as<bool, shape<3>>();
  CHECK((flags(0) && !flags(1) && flags(2)));

  temp_dir dir;
  tensor_dict out;
  out.insert("x", any_tensor(features(4)));
  out.insert("y", any_tensor(labels(4)));
  out.insert("m", any_tensor(Tensor<bool, shape<2>>(flags.slice<0>(0, 2))));
  out.insert("s", any_tensor(Tensor<double, shape<>>(full<double, shape<>>(1.25))));
  data::save_npz(dir.file("out.npz"), out);
  const tensor_dict back = data::load_npz(dir.file("out.npz"));
  CHECK(back.keys() == std::vector<std::string>{"x", "y", "m", "s"});
  CHECK(back.at("x").as<float, shape<4, 3>>()(3, 2) == 32.0f);
  CHECK(values_of(back.at("y").as<i64, shape<dyn>>()) == std::vector<i64>{0, 1, 2, 3});
  CHECK((back.at("m").as<bool, shape<2>>()(0) && !back.at("m").as<bool, shape<2>>()(1)));
  CHECK(back.at("s").as<double, shape<>>().item() == 1.25);
  // an archive of every member gen_data.py wrote re-saves to an archive numpy reads alike
  data::save_npz(dir.file("again.npz"), d);
  const tensor_dict d2 = data::load_npz(dir.file("again.npz"));
  CHECK(d2.keys() == d.keys());
  for (const auto& [k, t] : d)
    if (t.nbytes()) CHECK(std::memcmp(d2.at(k).raw_data(), t.raw_data(), t.nbytes()) == 0);
}

TEST_CASE("data: compressed and malformed .npz archives are clear errors") {
  auto msg = error_of<value_error>([] { (void)data::load_npz(fixture("data_compressed.npz")); });
  CHECK(has(msg, "member 'x.npy' is compressed (deflate, as numpy.savez_compressed writes)"));
  CHECK(has(msg, "numpy.savez"));

  temp_dir dir;
  const std::string good = read_bytes(fixture("data_arrays.npz"));
  auto npz_msg = [&](const std::string& bytes) {
    const std::string p = dir.write("bad.npz", bytes);
    return error_of<value_error>([&] { (void)data::load_npz(p); });
  };
  CHECK(has(npz_msg(good.substr(0, good.size() / 2)), "not a ZIP archive"));
  CHECK(has(npz_msg(good.substr(0, 10)), "too short"));
  for (std::size_t n = 0; n < good.size(); n += 7) CHECK(npz_msg(good.substr(0, n)) != "<no error>");
  // a byte of a member's values changed: its CRC-32 no longer matches
  std::string flipped = good;
  const std::size_t at = flipped.find("\x93NUMPY") + 130;
  flipped[at] = static_cast<char>(flipped[at] ^ 0x40);
  CHECK(has(npz_msg(flipped), "CRC-32"));
  // the central directory's offset moved past the end
  std::string moved = good;
  const std::size_t eocd = moved.rfind("PK\x05\x06");
  moved[eocd + 19] = '\x7F';
  CHECK(has(npz_msg(moved), "outside the file"));
  // every single corrupted byte gives an error or a valid archive, never a crash
  for (std::size_t i = 0; i < good.size(); i += 3) {
    std::string c = good;
    c[i] = static_cast<char>(c[i] ^ 0xFF);
    const std::string p = dir.write("c.npz", c);
    try {
      (void)data::load_npz(p);
    } catch (const tenet::error&) {
    }
  }
  CHECK(has(npz_msg(read_bytes(fixture("data_float32.npy"))), "not a ZIP archive"));
}

// ---------------------------------------------------------------------------------------------
// CSV

TEST_CASE("data: read_csv reads numbers, header, column selection and quoted names") {
  const std::string file = fixture("data_table.csv");
  CHECK(data::read_csv_header(file) == std::vector<std::string>{"id", "x, value", "y"});
  auto t = data::read_csv<double>(file, {.header = true});
  REQUIRE(t.sizes() == sizes_t<2>{3, 3});
  const double want[3][3] = {{1, 0.5, -2}, {2, 1000, 3.25}, {3, -0.125, 4}};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) CHECK(t(i, j) == want[i][j]);
  auto sel = data::read_csv<float>(file, {.header = true, .columns = {2, 0}});
  REQUIRE(sel.sizes() == sizes_t<2>{3, 2});
  CHECK(sel(1, 0) == 3.25f);
  CHECK(sel(2, 1) == 3.0f);
  auto ids = data::read_csv<std::int32_t>(file, {.header = true, .columns = {-3}});
  CHECK(ids.sizes() == sizes_t<2>{3, 1});
  CHECK(ids(2, 0) == 3);
  auto h = data::read_csv<float16>(file, {.header = true, .columns = {1}});
  CHECK(static_cast<float>(h(2, 0)) == -0.125f);

  auto msg = error_of<value_error>([&] { (void)data::read_csv<i64>(file, {.header = true}); });
  CHECK(has(msg, file));
  CHECK(has(msg, "line 2, column 1: \"0.5\" is not a value of int64"));
  msg = error_of<value_error>([&] { (void)data::read_csv<double>(file); });  // the header is not numbers
  CHECK(has(msg, "line 1, column 0: \"id\""));
  CHECK(has(error_of<index_error>([&] { (void)data::read_csv<double>(file, {.header = true, .columns = {3}}); }),
            "column index 3 is out of range"));
}

TEST_CASE("data: read_csv's delimiters, line ends, dtypes and errors") {
  temp_dir dir;
  // semicolons, CRLF, a BOM, no final newline, blank lines
  auto t = data::read_csv<std::int16_t>(dir.write("a.csv", "\xEF\xBB\xBF" "a;b\r\n1;-2\r\n\r\n  \r\n+3;4"),
                                        {.delimiter = ';', .header = true});
  REQUIRE(t.sizes() == sizes_t<2>{2, 2});
  CHECK((t(0, 1) == -2 && t(1, 0) == 3 && t(1, 1) == 4));
  CHECK(data::read_csv_header(dir.file("a.csv"), {.delimiter = ';'}) == std::vector<std::string>{"a", "b"});
  auto tabs = data::read_csv<double>(dir.write("t.tsv", "1\t2.5\n3\tnan\n"), {.delimiter = '\t'});
  CHECK(tabs(0, 1) == 2.5);
  CHECK(std::isnan(tabs(1, 1)));
  auto b = data::read_csv<bool>(dir.write("b.csv", "1,0,true\nFALSE,True,0\n"));
  CHECK((b(0, 0) && !b(0, 1) && b(0, 2) && !b(1, 0) && b(1, 1) && !b(1, 2)));
  auto u = data::read_csv<std::uint8_t>(dir.write("u.csv", "255,0\n"));
  CHECK(u(0, 0) == 255);
  // empty file, header only, blank lines only
  CHECK(data::read_csv<float>(dir.write("e.csv", "")).sizes() == sizes_t<2>{0, 0});
  CHECK(data::read_csv<float>(dir.write("e2.csv", "\n\n")).sizes() == sizes_t<2>{0, 0});
  CHECK(data::read_csv<float>(dir.write("h.csv", "a,b,c\n"), {.header = true}).sizes() == sizes_t<2>{0, 3});
  CHECK(data::read_csv_header(dir.file("e.csv")).empty());
  // ragged rows, bad fields, out-of-range values, quotes
  auto msg = error_of<value_error>([&] { (void)data::read_csv<float>(dir.write("r.csv", "1,2,3\n4,5,6\n7,8\n")); });
  CHECK(has(msg, "line 3 has 2 fields, line 1 has 3"));
  msg = error_of<value_error>([&] { (void)data::read_csv<float>(dir.write("f.csv", "1,2\n3,x1\n")); });
  CHECK(has(msg, "line 2, column 1: \"x1\" is not a value of float32"));
  msg = error_of<value_error>([&] { (void)data::read_csv<float>(dir.write("m.csv", "1,,3\n")); });
  CHECK(has(msg, "line 1, column 1: \"\" is not a value (the field is empty)"));
  CHECK(has(error_of<value_error>([&] { (void)data::read_csv<std::int8_t>(dir.write("o.csv", "1,300\n")); }),
            "\"300\" is not a value of int8"));
  CHECK(has(error_of<value_error>([&] { (void)data::read_csv<std::uint8_t>(dir.write("n.csv", "-1\n")); }), "uint8"));
  CHECK(has(error_of<value_error>([&] { (void)data::read_csv<float>(dir.write("q.csv", "\"1,2\n")); }),
            "line 1: a quoted field is not closed"));
  auto q = data::read_csv<float>(dir.write("q2.csv", "\"1.5\",2\n"));
  CHECK(q(0, 0) == 1.5f);
  CHECK(has(error_of<value_error>([&] { (void)data::read_csv<float>(dir.file("none.csv")); }), "cannot open"));
}

// ---------------------------------------------------------------------------------------------
// TensorDataset, DataLoader

TEST_CASE("data: TensorDataset holds tensors of one first extent and returns rows") {
  data::TensorDataset ds(features(5), labels(5));
  CHECK(ds.size() == 5);
  auto [x, y] = ds.get(3);
  static_assert(std::is_same_v<decltype(x), Tensor<float, shape<3>>>);
  static_assert(std::is_same_v<decltype(y), Tensor<i64, shape<>>>);
  CHECK(x(2) == 32.0f);
  CHECK(y.item() == 3);
  CHECK(std::get<1>(ds.get(-1)).item() == 4);
  CHECK_THROWS_AS(ds.get(5), index_error);
  using fixed = data::TensorDataset<Tensor<float, shape<6, 2>>, Tensor<std::int32_t, shape<6>>>;
  static_assert(std::is_same_v<fixed::batch_type, std::tuple<Tensor<float, shape<dyn, 2>>, Tensor<std::int32_t, shape<dyn>>>>);
  auto msg = error_of<shape_error>([] { data::TensorDataset bad(features(5), labels(4)); });
  CHECK(has(msg, "tensor 1 has sizes shape<4>, tensor 0 has shape<5, 3>"));
}

TEST_CASE("data: DataLoader batches: sizes, drop_last, order without shuffle") {
  data::TensorDataset ds(features(10), labels(10));
  data::DataLoader loader(ds, {.batch_size = 3});
  static_assert(std::is_same_v<decltype(loader)::batch_type, std::tuple<Tensor<float, shape<dyn, 3>>, Tensor<i64, shape<dyn>>>>);
  static_assert(std::input_iterator<decltype(loader)::iterator>);
  static_assert(std::sentinel_for<std::default_sentinel_t, decltype(loader)::iterator>);
  CHECK(loader.len() == 4);
  std::vector<i64> seen, sizes;
  for (auto& [x, y] : loader) {
    sizes.push_back(y.size(0));
    for (i64 r = 0; r < y.size(0); ++r) {
      seen.push_back(y(r));
      CHECK(x(r, 2) == static_cast<float>(10 * y(r) + 2));
    }
  }
  CHECK(sizes == std::vector<i64>{3, 3, 3, 1});
  CHECK(seen == std::vector<i64>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});

  data::DataLoader dropping(ds, {.batch_size = 3, .drop_last = true});
  CHECK(dropping.len() == 3);
  i64 batches = 0;
  for (const auto& b : dropping) {
    CHECK(std::get<0>(b).size(0) == 3);
    ++batches;
  }
  CHECK(batches == 3);
  data::DataLoader whole(ds, {.batch_size = 20});
  CHECK(whole.len() == 1);
  data::DataLoader none(ds, {.batch_size = 20, .drop_last = true});
  CHECK(none.len() == 0);
  for (auto& b : none) FAIL("no batch expected" << std::get<1>(b).size(0));
  CHECK_THROWS_AS(data::DataLoader(ds, {.batch_size = 0}), value_error);
  data::TensorDataset empty(features(0), labels(0));
  data::DataLoader empty_loader(empty, {.batch_size = 2, .shuffle = true});
  CHECK(empty_loader.len() == 0);
  for (auto& b : empty_loader) FAIL("no batch expected" << std::get<1>(b).size(0));
}

namespace {
/// The labels of one epoch, batch by batch, checking that each x row is its label's row.
template <class Loader>
std::vector<i64> epoch_order(Loader& loader) {
  std::vector<i64> order;
  for (auto& [x, y] : loader)
    for (i64 r = 0; r < y.size(0); ++r) {
      order.push_back(y(r));
      CHECK(x(r, 1) == static_cast<float>(10 * y(r) + 1));
    }
  return order;
}
}  // namespace

TEST_CASE("data: DataLoader shuffles each epoch reproducibly from its seed, apart from the default generator") {
  data::TensorDataset ds(features(37), labels(37));
  data::DataLoader a(ds, {.batch_size = 5, .shuffle = true, .seed = 123});
  manual_seed(1);
  const auto state = detail::default_generator().state();
  const auto e0 = epoch_order(a);
  const auto e1 = epoch_order(a);
  CHECK(a.epoch() == 2);
  CHECK(detail::default_generator().state().offset == state.offset);  // the loader drew nothing from it
  for (const auto& e : {e0, e1}) {  // every index exactly once per epoch
    REQUIRE(e.size() == 37);
    CHECK(std::set<i64>(e.begin(), e.end()).size() == 37);
    CHECK(*std::min_element(e.begin(), e.end()) == 0);
    CHECK(*std::max_element(e.begin(), e.end()) == 36);
  }
  CHECK(e0 != e1);  // another order each epoch
  std::vector<i64> sorted(37);
  std::iota(sorted.begin(), sorted.end(), 0);
  CHECK(e0 != sorted);

  // the same seed: the same orders, whatever the default generator did meanwhile
  manual_seed(99);
  (void)randn<float, shape<8>>();
  data::DataLoader b(ds, {.batch_size = 5, .shuffle = true, .seed = 123});
  CHECK(epoch_order(b) == e0);
  CHECK(epoch_order(b) == e1);
  b.set_epoch(0);  // replay
  CHECK(epoch_order(b) == e0);
  // epoch e's order is randperm's right after manual_seed(seed + e)
  manual_seed(124);
  CHECK(values_of(randperm(37)) == e1);
  // another seed, another order
  data::DataLoader c(ds, {.batch_size = 5, .shuffle = true, .seed = 7});
  CHECK(epoch_order(c) != e0);
}

TEST_CASE("data: DataLoader with prefetch gives the batches it gives without") {
  Tensor<bool, shape<dyn>> odd({23});
  for (i64 i = 0; i < 23; ++i) odd(i) = i % 2 == 1;
  data::TensorDataset ds(features(23), labels(23), odd);
  data::DataLoader plain(ds, {.batch_size = 4, .shuffle = true, .seed = 5});
  data::DataLoader ahead(ds, {.batch_size = 4, .shuffle = true, .seed = 5, .prefetch = true});
  for (int epoch = 0; epoch < 3; ++epoch) {
    std::vector<std::tuple<Tensor<float, shape<dyn, 3>>, Tensor<i64, shape<dyn>>, Tensor<bool, shape<dyn>>>> p, q;
    for (auto& b : plain) p.push_back(b);
    for (auto& b : ahead) q.push_back(b);
    REQUIRE(p.size() == 6);
    REQUIRE(q.size() == 6);
    for (std::size_t k = 0; k < p.size(); ++k) {
      const auto& [px, py, pm] = p[k];
      const auto& [qx, qy, qm] = q[k];
      REQUIRE(py.sizes() == qy.sizes());
      CHECK(values_of(py) == values_of(qy));
      for (i64 r = 0; r < py.size(0); ++r) {
        CHECK(px(r, 0) == qx(r, 0));
        CHECK(qm(r) == (qy(r) % 2 == 1));
        CHECK(pm(r) == qm(r));
      }
    }
  }
}

TEST_CASE("data: DataLoader with prefetch stops its worker on an early break") {
  data::TensorDataset ds(features(50), labels(50));
  std::atomic<int> made{0};
  auto count = [&made](data::TensorDataset<Tensor<float, shape<dyn, 3>>, Tensor<i64, shape<dyn>>>::batch_type b) {
    ++made;
    return b;
  };
  data::DataLoader loader(ds, {.batch_size = 2, .shuffle = true, .prefetch = true}, count);
  CHECK(loader.len() == 25);
  for (int round = 0; round < 20; ++round) {
    made = 0;
    int seen = 0;
    for (auto& [x, y] : loader) {
      (void)x;
      (void)y;
      if (++seen == 2) break;
    }
    // the loop's end joined the worker: it made the two batches used and at most the next one
    const int after = made.load();
    CHECK(after >= 2);
    CHECK(after <= 3);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    CHECK(made.load() == after);
  }
  {  // an iterator that is dropped without running the loop
    auto it = loader.begin();
    CHECK(std::get<0>(*it).size(0) == 2);
  }
  data::DataLoader loop_after(ds, {.batch_size = 7, .prefetch = true});
  CHECK(epoch_order(loop_after).size() == 50);  // a full loop still works after all that
}

TEST_CASE("data: an exception of the transform is rethrown by the loop, with and without prefetch") {
  data::TensorDataset ds(features(12), labels(12));
  using batch = data::TensorDataset<Tensor<float, shape<dyn, 3>>, Tensor<i64, shape<dyn>>>::batch_type;
  for (bool prefetch : {false, true}) {
    int calls = 0;
    data::DataLoader loader(ds, {.batch_size = 3, .prefetch = prefetch}, [&calls](batch b) {
      if (++calls == 3) throw std::runtime_error("transform failed at batch 2");
      std::get<0>(b) = std::get<0>(b) * 2.0f;  // a transform that changes the batch
      return b;
    });
    std::vector<i64> got;
    try {
      for (auto& [x, y] : loader) {
        CHECK(x(0, 0) == static_cast<float>(20 * y(0)));
        got.push_back(y(0));
      }
      FAIL("expected the transform's exception");
    } catch (const std::runtime_error& e) {
      CHECK(std::string(e.what()) == "transform failed at batch 2");
    }
    CHECK(got == std::vector<i64>{0, 3});  // batches 0 and 1 came, 2 threw
    // an exception at the first batch comes from begin()
    calls = 2;
    CHECK_THROWS_WITH(loader.begin(), "transform failed at batch 2");
  }
}
