#pragma once
#define TENET_PUBLIC_HEADER_INCLUDED 1
// Getting data in: tenet::from_blob (a tensor over memory the caller owns), NumPy's .npy and .npz
// files, numeric CSV, and TensorDataset / DataLoader (torch.utils.data's). docs/data.md.
//
//   auto x = tenet::from_blob<float, shape<dyn, 3>>(buffer, {n, 3});        // no copy
//   auto w = tenet::data::load_npy<float, shape<dyn, 784>>("w.npy");          // dtype and sizes checked
//   tenet::tensor_dict d = tenet::data::load_npz("arrays.npz");              // numpy.savez archives
//   auto t = tenet::data::read_csv<double>("table.csv", {.header = true});   // Tensor<double, shape<dyn, dyn>>
//   tenet::data::TensorDataset ds(x, y);
//   tenet::data::DataLoader loader(ds, {.batch_size = 32, .shuffle = true, .seed = 1, .prefetch = true});
//   for (auto& [xb, yb] : loader) { ... }                                   // one epoch; the next loop, the next
//
// Files are read into CPU tensors (whatever the thread's default device); every malformed file is
// a value_error naming the file and what is wrong with it (never a crash, never an allocation the
// file's size does not back), a dtype tenet does not have is a dtype_error, and a typed load whose
// requested shape does not fit the file's is a shape_error naming both.
#include <algorithm>
#include <concepts>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <exception>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <tenet/autograd.hpp>  // detach (any_tensor), view members: data.hpp compiles on its own
#include <tenet/device.hpp>
#include <tenet/dtype.hpp>
#include <tenet/error.hpp>
#include <tenet/factories.hpp>
#include <tenet/indexing.hpp>
#include <tenet/shape.hpp>
#include <tenet/tensor.hpp>
#include <tenet/tensor_dict.hpp>

#include <tenet/io/csv.hpp>
#include <tenet/io/npy.hpp>
#include <tenet/io/zip.hpp>
#include <tenet/runtime/philox.hpp>

namespace tenet {

// ---------------------------------------------------------------------------------------------
// from_blob

namespace detail {
/// Runs the deleter of a from_blob tensor when the last view of its storage goes.
template <class T, class D>
struct blob_owner {
  T* p;
  D deleter;
  blob_owner(T* ptr, D d) : p(ptr), deleter(std::move(d)) {}
  ~blob_owner() { deleter(p); }
  blob_owner(const blob_owner&) = delete;
  blob_owner& operator=(const blob_owner&) = delete;
};

/// The bytes a from_blob view of these sizes and strides reaches (1 + sum (size - 1) * stride
/// elements), after every check: sizes against S, negative strides, overflow, a null pointer.
template <class T, class S>
std::size_t blob_bytes(const T* data, const sizes_t<S::rank>& sizes, const sizes_t<S::rank>& strides) {
  check_sizes_match<S>(sizes, "from_blob");  // shape_error naming the sizes and S
  const std::int64_t n = checked_numel(sizes, "from_blob");
  std::int64_t span = n == 0 ? 0 : 1;
  for (std::size_t i = 0; i < S::rank; ++i) {
    if (strides[i] < 0)
      throw value_error("tenet: from_blob: negative stride " + std::to_string(strides[i]) + " in strides " +
                        sizes_text(strides) + " (tenet views have non-negative strides)");
    std::int64_t reach = 0;
    if (n != 0 && (__builtin_mul_overflow(sizes[i] - 1, strides[i], &reach) || __builtin_add_overflow(span, reach, &span)))
      throw shape_error("tenet: from_blob: sizes " + sizes_text(sizes) + " with strides " + sizes_text(strides) +
                        " reach past 2^63 - 1 elements");
  }
  if (n != 0 && data == nullptr)
    throw value_error("tenet: from_blob: a null pointer for " + std::to_string(n) + " elements (sizes " +
                      sizes_text(sizes) + ")");
  std::int64_t bytes = 0;
  if (__builtin_mul_overflow(span, static_cast<std::int64_t>(sizeof(T)), &bytes))
    throw shape_error("tenet: from_blob: sizes " + sizes_text(sizes) + " with strides " + sizes_text(strides) +
                      " need more than 2^63 - 1 bytes");
  return static_cast<std::size_t>(bytes);
}
/// A tensor over `data` whose storage keeps `owner` alive (and never frees data itself).
template <class T, class S>
Tensor<T, S> blob_tensor(T* data, std::size_t bytes, const sizes_t<S::rank>& sizes, const sizes_t<S::rank>& strides,
                         std::shared_ptr<void> owner) {
  auto st = std::make_shared<storage>(static_cast<void*>(data), bytes, tenet::cpu, std::move(owner));
  return Tensor<T, S>::from_storage(std::move(st), sizes, strides, 0);
}
}  // namespace detail

/// A tensor viewing host memory at `data` that the caller owns (torch.from_blob): nothing is
/// copied, writes through the tensor change the caller's values, and the memory must outlive
/// every view of the tensor. `sizes` must fit S (shape_error naming both); a null `data` with a
/// nonzero element count is a value_error. Contiguous (row-major) unless strides are given.
template <class T, class S>
Tensor<T, S> from_blob(T* data, const sizes_t<S::rank>& sizes, const sizes_t<S::rank>& strides) {
  const std::size_t bytes = detail::blob_bytes<T, S>(data, sizes, strides);
  // the storage's owner is a token: the storage then frees nothing
  return detail::blob_tensor<T, S>(data, bytes, sizes, strides, std::make_shared<char>('\0'));
}
template <class T, class S>
Tensor<T, S> from_blob(T* data, const sizes_t<S::rank>& sizes) {
  return from_blob<T, S>(data, sizes, detail::contiguous_strides(sizes));
}
/// The same, handing the memory over: deleter(data) runs once, when the last tensor viewing it
/// goes (it must not throw). When from_blob throws, the deleter is not called.
template <class T, class S, class D>
  requires std::invocable<D&, T*>
Tensor<T, S> from_blob(T* data, const sizes_t<S::rank>& sizes, const sizes_t<S::rank>& strides, D deleter) {
  const std::size_t bytes = detail::blob_bytes<T, S>(data, sizes, strides);
  return detail::blob_tensor<T, S>(data, bytes, sizes, strides,
                                   std::make_shared<detail::blob_owner<T, D>>(data, std::move(deleter)));
}
template <class T, class S, class D>
  requires std::invocable<D&, T*>
Tensor<T, S> from_blob(T* data, const sizes_t<S::rank>& sizes, D deleter) {
  return from_blob<T, S>(data, sizes, detail::contiguous_strides(sizes), std::move(deleter));
}

namespace data {

namespace detail {
namespace io = tenet::detail::io;

/// The values of a parsed .npy header as an any_tensor on the CPU.
inline any_tensor npy_values(io::file_reader& f, std::uint64_t begin, const io::npy_header& h, const std::string& where,
                             std::uint32_t* crc = nullptr) {
  device_guard on_cpu(tenet::cpu);
  any_tensor t = any_tensor::zeros(h.type, h.shape);
  io::read_npy_values(f, begin, h, t.numel() ? t.raw_data_mut() : nullptr, where, crc);
  return t;
}

/// "float32 ('<f4') of shape (2, 3)": what a file holds.
inline std::string npy_what(const io::npy_header& h) {
  return std::string(name(h.type)) + " ('" + h.descr + "') of shape " + io::npy_shape_text(h.shape) +
         (h.fortran_order ? " in Fortran order" : "");
}

template <class T, class S>
sizes_t<S::rank> npy_request(const io::npy_header& h, const std::string& where) {
  const std::string want = std::string(name(dtype_of<T>)) + " " + S::text();
  if (h.type != dtype_of<T>)
    throw dtype_error("tenet: " + where + ": the file holds " + npy_what(h) + "; requested " + want +
                      " (load it as " + name(h.type) + " and convert with .to<T>(), or use load_npy_any)");
  if (h.shape.size() != S::rank)
    throw shape_error("tenet: " + where + ": the file holds " + npy_what(h) + " (rank " + std::to_string(h.shape.size()) +
                      "); requested " + want + " (rank " + std::to_string(S::rank) + ")");
  sizes_t<S::rank> s{};
  for (std::size_t i = 0; i < S::rank; ++i) {
    s[i] = h.shape[i];
    if (S::info[i].is_fixed() && S::info[i].value != s[i])
      throw shape_error("tenet: " + where + ": the file holds " + npy_what(h) + "; requested " + want + " (dim " +
                        std::to_string(i) + ": " + std::to_string(s[i]) + " vs " + std::to_string(S::info[i].value) + ")");
  }
  return s;
}

/// Writes the .npy bytes of t: header, then the values (host memory, C order, little-endian).
inline void npy_write(std::ostream& out, const any_tensor& t, const std::string& where) {
  const std::string header = io::npy_header_bytes(io::npy_descr(t.scalar_type(), where), t.sizes());
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  if (!t.nbytes()) return;
  if (t.device().is_cpu()) {
    out.write(static_cast<const char*>(t.raw_data()), static_cast<std::streamsize>(t.nbytes()));
  } else {
    std::string host(t.nbytes(), '\0');
    t.copy_to_host(host.data());
    out.write(host.data(), static_cast<std::streamsize>(host.size()));
  }
}
/// The size of t's .npy bytes, and their CRC-32 in *crc (a ZIP local header comes before them).
inline std::uint64_t npy_size(const any_tensor& t, std::uint32_t* crc, const std::string& where) {
  const std::string header = io::npy_header_bytes(io::npy_descr(t.scalar_type(), where), t.sizes());
  *crc = io::crc32(0, header.data(), header.size());
  if (t.nbytes()) {
    if (t.device().is_cpu()) {
      *crc = io::crc32(*crc, t.raw_data(), t.nbytes());
    } else {
      std::string host(t.nbytes(), '\0');
      t.copy_to_host(host.data());
      *crc = io::crc32(*crc, host.data(), host.size());
    }
  }
  return header.size() + t.nbytes();
}

inline std::ofstream open_for_writing(const std::string& path, const std::string& where) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) io::fail(where, "cannot open the file for writing");
  return f;
}
inline void finish_writing(std::ofstream& f, const std::string& where) {
  f.close();
  if (!f) io::fail(where, "writing failed");
}

template <class E>
any_tensor as_any(const E& e) {
  if constexpr (std::is_same_v<E, any_tensor>) return e;
  else if constexpr (TensorType<E>) return any_tensor(e);
  else return any_tensor(eval(e));
}
}  // namespace detail

// ---------------------------------------------------------------------------------------------
// NumPy files

/// The array of a .npy file as a Tensor<T, S> on the CPU: T must be the file's dtype (dtype_error
/// otherwise) and the file's shape must fit S (shape_error naming both). Versions 1.0, 2.0 and
/// 3.0, either byte order, C or Fortran order (returned contiguous in C order).
template <class T, class S>
Tensor<T, S> load_npy(const std::string& path) {
  const std::string where = "load_npy: " + path;
  detail::io::file_reader f(path, "load_npy");
  const auto h = detail::io::read_npy_header(f, 0, f.size(), where);
  const auto sizes = detail::npy_request<T, S>(h, where);
  Tensor<T, S> t(sizes, tenet::cpu);
  detail::io::read_npy_values(f, 0, h, h.nbytes ? static_cast<void*>(t.data()) : nullptr, where);
  return t;
}

/// The array of a .npy file with the dtype and shape the file gives.
inline any_tensor load_npy_any(const std::string& path) {
  const std::string where = "load_npy_any: " + path;
  detail::io::file_reader f(path, "load_npy_any");
  const auto h = detail::io::read_npy_header(f, 0, f.size(), where);
  return detail::npy_values(f, 0, h, where);
}

/// Writes a tensor (or an expression's value, or an any_tensor) as a .npy file, byte for byte as
/// numpy.save writes the same array (version 1.0, C order, little-endian). bfloat16 has no NumPy
/// dtype: dtype_error.
template <class E>
  requires(Expression<E> || std::is_same_v<E, any_tensor>)
void save_npy(const std::string& path, const E& tensor) {
  const std::string where = "save_npy: " + path;
  const any_tensor t = detail::as_any(tensor);
  if (!t.defined()) detail::io::fail(where, "the tensor is undefined");
  (void)detail::io::npy_descr(t.scalar_type(), where);  // before the file is created
  std::ofstream f = detail::open_for_writing(path, where);
  detail::npy_write(f, t, where);
  detail::finish_writing(f, where);
}

/// The arrays of a numpy.savez archive by name ("x.npy" -> "x"), in archive order. Members must be
/// stored: a compressed one (numpy.savez_compressed) is a value_error saying so. CRC-32 checked.
inline tensor_dict load_npz(const std::string& path) {
  namespace io = detail::io;
  const std::string where = "load_npz: " + path;
  io::file_reader f(path, "load_npz");
  const auto members = io::read_zip_directory(f, where);
  tensor_dict out;
  for (const auto& m : members) {
    const std::string mw = where + ": member '" + m.name + "'";
    if (m.method != 0)
      io::fail(where, "member '" + m.name + "' is compressed (" + io::zip_method_name(m.method) +
                          (m.method == 8 ? ", as numpy.savez_compressed writes" : "") +
                          "); tenet reads only stored members (numpy.savez): save with numpy.savez, or unzip the "
                          "archive and load the .npy files");
    if (m.compressed_size != m.size)
      io::fail(mw, "a stored member whose compressed size " + std::to_string(m.compressed_size) +
                       " differs from its size " + std::to_string(m.size));
    std::string key = m.name;
    if (key.size() >= 4 && key.compare(key.size() - 4, 4, ".npy") == 0) key.resize(key.size() - 4);
    if (out.contains(key)) io::fail(where, "two members give the array name '" + key + "'");
    std::uint32_t crc = 0;
    const auto h = io::read_npy_header(f, m.data_offset, m.size, mw, &crc);
    any_tensor t = detail::npy_values(f, m.data_offset, h, mw, &crc);
    if (crc != m.crc)
      io::fail(mw, "the CRC-32 of its bytes does not match the archive's (the archive is corrupt)");
    out.insert(std::move(key), std::move(t));
  }
  return out;
}

/// Writes the tensors as a numpy.savez archive (stored members "<name>.npy", readable by numpy.load;
/// up to 4 GiB). bfloat16: dtype_error.
inline void save_npz(const std::string& path, const tensor_dict& tensors) {
  const std::string where = "save_npz: " + path;
  for (const auto& [name, t] : tensors) {
    if (!t.defined()) detail::io::fail(where, "the tensor '" + name + "' is undefined");
    (void)detail::io::npy_descr(t.scalar_type(), where + ": '" + name + "'");
  }
  std::ofstream f = detail::open_for_writing(path, where);
  detail::io::zip_writer zip{{}, 0, where};
  for (const auto& [name, t] : tensors) {
    std::uint32_t crc = 0;
    const std::uint64_t size = detail::npy_size(t, &crc, where);
    const std::string local = zip.local_header(name + ".npy", crc, size);
    f.write(local.data(), static_cast<std::streamsize>(local.size()));
    detail::npy_write(f, t, where);
  }
  const std::string tail = zip.finish();
  f.write(tail.data(), static_cast<std::streamsize>(tail.size()));
  detail::finish_writing(f, where);
}

// ---------------------------------------------------------------------------------------------
// CSV

struct csv_options {
  char delimiter = ',';
  bool header = false;       // the first (non-blank) line names the columns: skip it
  std::vector<int> columns = {};  // the columns to read, by 0-based index (negative: from the end); empty: all
};

namespace detail {
inline std::string read_text(const std::string& path, const std::string& what) {
  io::file_reader f(path, what);
  return f.read_string(0, static_cast<std::size_t>(f.size()));
}
inline void split_line(std::string_view line, char delim, std::vector<std::string>& out, const std::string& where,
                       std::size_t line_no) {
  try {
    io::split_fields(line, delim, out);
  } catch (const value_error& e) {
    io::fail(where, "line " + std::to_string(line_no) + ": " + e.what());
  }
}
}  // namespace detail

/// The first non-blank line's fields (the column names); empty for an empty file.
inline std::vector<std::string> read_csv_header(const std::string& path, const csv_options& options = {}) {
  const std::string where = "read_csv_header: " + path;
  const std::string text = detail::read_text(path, "read_csv_header");
  std::vector<std::string> fields;
  detail::io::for_each_line(text, [&](std::string_view line, std::size_t no) {
    if (detail::io::is_blank_line(line)) return true;
    detail::split_line(line, options.delimiter, fields, where, no);
    return false;
  });
  return fields;
}

/// A numeric CSV file as a rows x columns Tensor<T, shape<dyn, dyn>> on the CPU. Every line must
/// have the same number of fields (value_error naming the line), every selected field must parse
/// as T (value_error naming line, column and the text). Blank lines are skipped; an empty file
/// gives a 0 x 0 tensor (a file with only a header: 0 x its column count).
template <class T>
Tensor<T, dyn_shape<2>> read_csv(const std::string& path, const csv_options& options = {}) {
  namespace io = detail::io;
  const std::string where = "read_csv: " + path;
  const std::string text = detail::read_text(path, "read_csv");
  using stored = std::conditional_t<std::is_same_v<T, bool>, unsigned char, T>;  // not std::vector<bool>
  std::vector<stored> values;
  std::vector<std::string> fields;
  std::vector<std::size_t> cols;  // the selected columns, normalized
  std::int64_t ncols = -1, rows = 0;
  std::size_t first_line = 0;
  bool header_pending = options.header;
  io::for_each_line(text, [&](std::string_view line, std::size_t no) {
    if (io::is_blank_line(line)) return true;
    detail::split_line(line, options.delimiter, fields, where, no);
    const auto n = static_cast<std::int64_t>(fields.size());
    if (ncols < 0) {
      ncols = n;
      first_line = no;
      if (options.columns.empty()) {
        for (std::int64_t c = 0; c < n; ++c) cols.push_back(static_cast<std::size_t>(c));
      } else {
        for (int c : options.columns) {
          if (c < -n || c >= n)
            throw index_error("tenet: " + where + ": column index " + std::to_string(c) + " is out of range: line " +
                              std::to_string(no) + " has " + std::to_string(n) + " columns");
          cols.push_back(static_cast<std::size_t>(c < 0 ? c + n : c));
        }
      }
    } else if (n != ncols) {
      io::fail(where, "line " + std::to_string(no) + " has " + std::to_string(n) + " fields, line " +
                          std::to_string(first_line) + " has " + std::to_string(ncols) + " (every row needs the same count)");
    }
    if (header_pending) {
      header_pending = false;
      return true;
    }
    for (std::size_t c : cols) {
      T v{};
      if (!io::parse_field(fields[c], v))
        io::fail(where, "line " + std::to_string(no) + ", column " + std::to_string(c) + ": \"" + fields[c] +
                            "\" is not " + (fields[c].empty() ? "a value (the field is empty) of " : "a value of ") +
                            name(dtype_of<T>));
      if constexpr (std::is_same_v<T, bool>) values.push_back(v ? 1 : 0);
      else values.push_back(v);
    }
    ++rows;
    return true;
  });
  const std::int64_t width = ncols < 0 ? 0 : static_cast<std::int64_t>(cols.size());
  Tensor<T, dyn_shape<2>> t({rows, width}, tenet::cpu);
  if (!values.empty()) std::memcpy(static_cast<void*>(t.data()), values.data(), values.size() * sizeof(stored));
  return t;
}

// ---------------------------------------------------------------------------------------------
// TensorDataset, DataLoader

/// torch.utils.data.TensorDataset: samples are the rows (first-dim slices) of one or more tensors
/// of the same first extent (shape_error otherwise). get(i) returns a tuple of views of row i;
/// batch(idx) a tuple of the rows idx selects, each a fresh tensor made by one index_select.
template <class... Ts>
class TensorDataset {
  static_assert(sizeof...(Ts) > 0, "tenet: TensorDataset needs at least one tensor");
  static_assert((TensorType<Ts> && ...), "tenet: TensorDataset holds Tensors (evaluate an expression first)");
  static_assert(((Ts::rank >= 1) && ...), "tenet: TensorDataset needs tensors of rank >= 1 (dim 0 indexes the samples)");

 public:
  /// The tuple batch(idx) returns: each tensor's type with its first extent dyn.
  using batch_type =
      std::tuple<Tensor<typename Ts::value_type, tenet::detail::set_extent_t<typename Ts::shape_type, 0, dyn>>...>;

  explicit TensorDataset(Ts... tensors) : tensors_(std::move(tensors)...) {
    std::int64_t n = -1;
    std::string first;
    std::size_t k = 0;
    std::apply([&](const auto&... t) {
      (([&] {
         if (!t.defined()) throw value_error("tenet: TensorDataset: tensor " + std::to_string(k) + " is undefined");
         if (n < 0) {
           n = t.size(0);
           first = tenet::detail::sizes_text(t.sizes());
         } else if (t.size(0) != n) {
           throw shape_error("tenet: TensorDataset: tensor " + std::to_string(k) + " has sizes " +
                             tenet::detail::sizes_text(t.sizes()) + ", tensor 0 has " + first +
                             ": every tensor needs the same first extent (the number of samples)");
         }
         ++k;
       }()),
       ...);
    }, tensors_);
    size_ = n;
  }
  /// The number of samples.
  std::int64_t size() const { return size_; }
  /// Row i of every tensor (views; index_error when i is out of range, negative i counts from the end).
  auto get(std::int64_t i) const {
    return std::apply([&](const auto&... t) { return std::make_tuple(t.template select<0>(i)...); }, tensors_);
  }
  /// The rows idx[0], idx[1], ... of every tensor (copies; on each tensor's device).
  batch_type batch(const Tensor<std::int64_t, shape<dyn>>& idx) const {
    return std::apply([&](const auto&... t) { return batch_type(eval(index_select<0>(t, idx.to(t.device())))...); },
                      tensors_);
  }
  const std::tuple<Ts...>& tensors() const { return tensors_; }

 private:
  std::tuple<Ts...> tensors_;
  std::int64_t size_ = 0;
};

/// The options of a DataLoader (torch.utils.data.DataLoader's names).
struct loader_options {
  std::int64_t batch_size = 1;
  bool shuffle = false;    // a new order each epoch: randperm from a generator seeded with seed + epoch
  bool drop_last = false;  // drop the last batch when it is smaller than batch_size
  std::uint64_t seed = 0;
  bool prefetch = false;   // prepare the next batch on a background thread while this one is used
};

namespace detail {
/// Where a DataLoader's epoch stands, shared by the loader and the iterator of its latest epoch
/// (state_dict() reads it while a loop runs).
struct loader_position {
  std::uint64_t generation = 0;  // the latest begin(): only its epoch writes here
  bool running = false;          // that epoch's iterator is alive and not at its end
  std::int64_t epoch = 0;        // the epoch it runs
  std::int64_t yielded = 0;      // the batches it has handed out (the one in use included)
};
/// A loader_position per DataLoader: a copied loader gets its own (no epoch of it running).
struct loader_position_handle {
  std::shared_ptr<loader_position> p = std::make_shared<loader_position>();
  loader_position_handle() = default;
  loader_position_handle(const loader_position_handle& o) : p(std::make_shared<loader_position>(*o.p)) {
    p->running = false;
  }
  loader_position_handle& operator=(const loader_position_handle& o) {
    if (this != &o) *this = loader_position_handle(o);
    return *this;
  }
  loader_position_handle(loader_position_handle&&) noexcept = default;
  loader_position_handle& operator=(loader_position_handle&&) noexcept = default;
};

inline Tensor<std::int64_t, shape<dyn>> identity_order(std::int64_t n) {
  Tensor<std::int64_t, shape<dyn>> order({n}, tenet::cpu);
  for (std::int64_t i = 0; i < n; ++i) order.data()[i] = i;
  return order;
}

/// One epoch of a DataLoader: the order, the batch being used and, with prefetch, the worker
/// thread that makes the next one. Joined when destroyed (end of the loop, break, exception).
template <class Dataset>
class loader_epoch {
 public:
  using batch_type = typename Dataset::batch_type;
  using transform_type = std::function<batch_type(batch_type)>;

  /// Batches first .. batches - 1 of the order (first > 0: an epoch resumed after that many).
  loader_epoch(const Dataset& ds, Tensor<std::int64_t, shape<dyn>> order, std::int64_t batch_size,
               std::int64_t batches, const transform_type& transform, bool prefetch, std::int64_t first,
               std::shared_ptr<loader_position> position)
      : ds_(ds), order_(std::move(order)), batch_size_(batch_size), batches_(batches), transform_(transform),
        next_(first), position_(std::move(position)), generation_(position_->generation) {
    if (prefetch && batches_ > first) worker_ = std::thread([this, first] { run(first); });
  }
  ~loader_epoch() {
    if (position_->generation == generation_) position_->running = false;
    if (worker_.joinable()) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_ = true;
      }
      cv_.notify_all();
      worker_.join();
    }
  }
  loader_epoch(const loader_epoch&) = delete;
  loader_epoch& operator=(const loader_epoch&) = delete;

  bool done() const { return next_ > batches_; }
  batch_type& current() { return *current_; }
  /// Moves to the next batch (the first, on the first call).
  void advance() {
    current_.reset();
    if (next_ >= batches_) {
      next_ = batches_ + 1;
      return;
    }
    current_ = worker_.joinable() ? take() : make(next_);
    ++next_;
    if (position_->generation == generation_) position_->yielded = next_;
  }

 private:
  batch_type make(std::int64_t k) const {
    const std::int64_t start = k * batch_size_;
    const std::int64_t len = std::min(batch_size_, order_.size(0) - start);
    batch_type b = ds_.batch(order_.template narrow<0>(start, len));
    if (transform_) b = transform_(std::move(b));
    return b;
  }
  void run(std::int64_t first) {  // the worker: batches first, first + 1, ... each made once the previous one was taken
    try {
      for (std::int64_t k = first; k < batches_; ++k) {
        {
          std::unique_lock<std::mutex> lock(mutex_);
          cv_.wait(lock, [&] { return stop_ || !slot_; });
          if (stop_) return;
        }
        batch_type b = make(k);
        {
          std::lock_guard<std::mutex> lock(mutex_);
          slot_ = std::move(b);
        }
        cv_.notify_all();
      }
    } catch (...) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        error_ = std::current_exception();
      }
      cv_.notify_all();
    }
  }
  batch_type take() {  // the consumer: the worker's next batch, or its exception
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return slot_.has_value() || error_ != nullptr; });
    if (!slot_) std::rethrow_exception(error_);
    batch_type b = std::move(*slot_);
    slot_.reset();
    lock.unlock();
    cv_.notify_all();
    return b;
  }

  Dataset ds_;  // a copy: tensor handles
  Tensor<std::int64_t, shape<dyn>> order_;
  std::int64_t batch_size_, batches_;
  transform_type transform_;
  std::int64_t next_ = 0;
  std::shared_ptr<loader_position> position_;
  std::uint64_t generation_;
  std::optional<batch_type> current_;
  std::thread worker_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::optional<batch_type> slot_;
  std::exception_ptr error_;
  bool stop_ = false;
};
}  // namespace detail

/// torch.utils.data.DataLoader over a TensorDataset (or any Dataset with size(), batch_type and
/// batch(idx)): `for (auto& [x, y] : loader)` runs one epoch of len() batches, each a tuple of
/// tensors with batch_size rows (the last one fewer unless drop_last). Each loop is a new epoch:
/// with shuffle, epoch e's order is randperm from a generator seeded with seed + e (reproducible,
/// independent of manual_seed and of the default generator, which it does not draw from).
/// `transform`, when given, maps every batch (on the worker thread with prefetch; an exception it
/// or the batching throws is rethrown by the loop at that batch). The worker is joined when the
/// loop ends, breaks or throws. The loader copies the dataset's tensor handles: changes to their
/// values show in later batches. state_dict() / load_state_dict() save and restore the position
/// (epoch and batch, also in the middle of a loop) to resume a run.
template <class Dataset>
class DataLoader {
 public:
  using batch_type = typename Dataset::batch_type;
  using transform_type = std::function<batch_type(batch_type)>;

  class iterator {
   public:
    using iterator_concept = std::input_iterator_tag;
    using value_type = batch_type;
    using difference_type = std::ptrdiff_t;
    iterator() = default;
    batch_type& operator*() const { return state_->current(); }
    batch_type* operator->() const { return &state_->current(); }
    iterator& operator++() {
      state_->advance();
      if (state_->done()) state_.reset();  // joins the worker now
      return *this;
    }
    void operator++(int) { ++*this; }
    friend bool operator==(const iterator& it, std::default_sentinel_t) { return !it.state_; }

   private:
    friend class DataLoader;
    explicit iterator(std::unique_ptr<detail::loader_epoch<Dataset>> s) : state_(std::move(s)) {}
    std::unique_ptr<detail::loader_epoch<Dataset>> state_;
  };

  DataLoader(const Dataset& dataset, loader_options options = {}, transform_type transform = {})
      : dataset_(dataset), options_(options), transform_(std::move(transform)) {
    if (options_.batch_size < 1)
      throw value_error("tenet: DataLoader: batch_size must be at least 1, got " + std::to_string(options_.batch_size));
  }

  /// The number of batches of an epoch (torch's len(loader)).
  std::int64_t len() const {
    const std::int64_t n = dataset_.size(), b = options_.batch_size;
    return options_.drop_last ? n / b : (n + b - 1) / b;
  }
  /// The epoch the next loop runs (0 first; each begin() takes one).
  std::int64_t epoch() const { return epoch_; }
  /// Sets the epoch of the next loop (to resume a run, or to replay an epoch's order); the loop
  /// starts at the epoch's first batch.
  void set_epoch(std::int64_t e) {
    epoch_ = e;
    resume_at_ = 0;
  }

  /// Where the loader stands, to resume it (torchdata's StatefulDataLoader): "epoch" and
  /// "num_yielded" (int64 scalars) are, while a loop runs, its epoch and the batches it has handed
  /// out (the one in use included), else the epoch the next loop runs and 0; "seed" (the int64 with
  /// the bits of the uint64 seed), and "batch_size", "dataset_size", "shuffle", "drop_last".
  tensor_dict state_dict() const {
    namespace f = tenet::detail;
    const auto& pos = *position_.p;
    tensor_dict d;
    d.insert("epoch", f::int_field(pos.running ? pos.epoch : epoch_));
    d.insert("num_yielded", f::int_field(pos.running ? pos.yielded : resume_at_));
    d.insert("seed", f::int_field(static_cast<std::int64_t>(options_.seed)));
    d.insert("batch_size", f::int_field(options_.batch_size));
    d.insert("dataset_size", f::int_field(dataset_.size()));
    d.insert("shuffle", f::flag_field(options_.shuffle));
    d.insert("drop_last", f::flag_field(options_.drop_last));
    return d;
  }
  /// Restores a state_dict(): the next loop runs the saved epoch from the batch after the last one
  /// handed out (the batches a loop that was not interrupted gives there, in the same order), the
  /// loops after it the following epochs; the seed is the saved one. "batch_size", "dataset_size",
  /// "shuffle" and "drop_last" must be this loader's (they decide what the position means). A
  /// missing, malformed or unexpected key, or a value that differs, is a value_error naming the
  /// key; nothing changes when a check fails.
  void load_state_dict(const tensor_dict& d) {
    const auto [e, k, seed] = read_state(d);
    epoch_ = e;
    resume_at_ = k;
    options_.seed = seed;
  }
  /// The checks of load_state_dict(d) (the same value_error), changing nothing.
  void check_state_dict(const tensor_dict& d) const { (void)read_state(d); }

  /// Starts an epoch: makes (or, with prefetch, waits for) its first batch.
  iterator begin() {
    const std::int64_t n = dataset_.size();
    const std::uint64_t e = static_cast<std::uint64_t>(epoch_++);
    const std::int64_t first = std::exchange(resume_at_, 0);
    // shuffled from a generator of the loader's own (seed + epoch): the default one does not move
    tenet::Generator g(options_.seed + e);
    Tensor<std::int64_t, shape<dyn>> order = options_.shuffle ? tenet::randperm(n, g) : detail::identity_order(n);
    auto& pos = *position_.p;
    ++pos.generation;
    pos.running = true;
    pos.epoch = static_cast<std::int64_t>(e);
    pos.yielded = first;
    iterator it(std::make_unique<detail::loader_epoch<Dataset>>(dataset_, std::move(order), options_.batch_size, len(),
                                                                transform_, options_.prefetch, first, position_.p));
    ++it;
    return it;
  }
  std::default_sentinel_t end() const { return std::default_sentinel; }

  const Dataset& dataset() const { return dataset_; }
  const loader_options& options() const { return options_; }

 private:
  struct loader_state {
    std::int64_t epoch, first;
    std::uint64_t seed;
  };
  loader_state read_state(const tensor_dict& d) const {
    tenet::detail::state_reader r(d, "DataLoader::load_state_dict");
    const std::int64_t e = r.integer("epoch"), k = r.integer("num_yielded");
    const auto seed = static_cast<std::uint64_t>(r.integer("seed"));
    const auto same = [&](const std::string& key, auto saved, auto mine) {
      const auto text = [](auto v) {
        if constexpr (std::is_same_v<decltype(v), bool>) return std::string(v ? "true" : "false");
        else return std::to_string(v);
      };
      if (saved != mine)
        r.fail("\"" + key + "\" is " + text(saved) + " in the state, " + text(mine) +
               " in this loader (the saved position would mean other batches here)");
    };
    same("batch_size", r.integer("batch_size"), options_.batch_size);
    same("dataset_size", r.integer("dataset_size"), dataset_.size());
    same("shuffle", r.flag("shuffle"), options_.shuffle);
    same("drop_last", r.flag("drop_last"), options_.drop_last);
    if (e < 0) r.fail("\"epoch\" must be non-negative, got " + std::to_string(e));
    if (k < 0 || k > len())
      r.fail("\"num_yielded\" must lie in [0, " + std::to_string(len()) + "] (the batches of an epoch), got " +
             std::to_string(k));
    r.finish();
    return {e, k, seed};
  }

  Dataset dataset_;
  loader_options options_;
  transform_type transform_;
  std::int64_t epoch_ = 0;
  std::int64_t resume_at_ = 0;  // the first batch of the next loop (a resumed epoch's)
  detail::loader_position_handle position_;
};

}  // namespace data
}  // namespace tenet
