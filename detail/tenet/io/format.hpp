#pragma once
#include <tenet/detail_check.hpp>
#include <tenet/config.hpp>
// Tensor printing that matches PyTorch 2.x's str(tensor) character for character (the rules of
// torch/_tensor_str.py: _Formatter, _vector_str, _tensor_str_with_formatter, get_summarized_data,
// _add_suffixes), for dense tensors of real and boolean dtypes.
//
// The rules, with PyTorch's default options (precision 4, threshold 1000, edgeitems 3, linewidth 80):
// - summarize when numel > threshold: every dimension longer than 2 * edgeitems shows its first and
//   last edgeitems entries around "..." (" ..." inside a row);
// - the formatter looks only at the shown elements. Integer and bool dtypes: every element takes the
//   width of the widest. Floating dtypes, over the shown nonzero finite values (none: "0." style):
//   int_mode when all are integers ("1.,  2."); sci_mode when max|v| / min|v| > 1000, max|v| > 1e8 or
//   min|v| < 1e-4 ("1.0000e+00"); otherwise fixed with `precision` decimals; all right-aligned to one
//   width (nan and inf do not count towards it);
// - a row holds max(1, (linewidth - indent) / (width + 2)) elements; rows wrap with indent + 1 spaces;
//   slices of a k-dimensional tensor are separated by "," and k - 1 newlines;
// - suffixes (device, size for empty tensors, dtype) go on the last line while it stays within
//   linewidth, else on a new line indented by len("tensor(").
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace tenet::detail {

/// torch.set_printoptions. sci_mode: -1 automatic (PyTorch's None), 0 never, 1 always.
struct print_options {
  int precision = 4;
  std::int64_t threshold = 1000;
  std::int64_t edgeitems = 3;  // >= 1
  int linewidth = 80;
  int sci_mode = -1;
};

namespace format_impl {

template <class T>
inline constexpr bool is_floating = !std::is_integral_v<T>;  // float, double, bfloat16, float16

/// v in `form` with `precision` digits, correctly rounded as Python's format() and printf are
/// (std::to_chars: tenet's printing needs no fmt, whose header-only formatting code cost every
/// printing unit about 2.4 s of g++ at -O2). "1.2346e+00", "-0", "inf" as printf writes them.
inline std::string number_string(double v, std::chars_format form, int precision) {
  char small[128];
  if (auto r = std::to_chars(small, small + sizeof small, v, form, precision); r.ec == std::errc{})
    return std::string(small, r.ptr);
  // fixed notation of a large magnitude: up to 309 digits before the point, then the precision
  std::string big(static_cast<std::size_t>(std::max(precision, 0)) + 400, '\0');
  auto r = std::to_chars(big.data(), big.data() + big.size(), v, form, precision);
  big.resize(static_cast<std::size_t>(r.ptr - big.data()));
  return big;
}

template <class T>
double as_double(const T& v) {
  if constexpr (std::is_arithmetic_v<T>) {
    return static_cast<double>(v);
  } else {
    return static_cast<double>(static_cast<float>(v));
  }
}

// Python's str() of an element of tolist(): int, or True / False.
template <class T>
std::string int_string(const T& v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v ? "True" : "False";
  } else if constexpr (std::is_signed_v<T>) {
    return std::to_string(static_cast<std::int64_t>(v));
  } else {
    return std::to_string(static_cast<std::uint64_t>(v));
  }
}

// Python's str(tuple): "(0, 3)", "(0,)".
inline std::string tuple_string(std::span<const std::int64_t> sizes) {
  std::string s = "(";
  for (std::size_t d = 0; d < sizes.size(); ++d) {
    if (d > 0) s += ", ";
    s += std::to_string(sizes[d]);
  }
  if (sizes.size() == 1) s += ",";
  return s + ")";
}

// The indices shown along one dimension: all, or the first and last edgeitems when summarizing.
inline std::vector<std::int64_t> shown_indices(std::int64_t size, bool summarize, std::int64_t edgeitems) {
  std::vector<std::int64_t> idx;
  if (summarize && size > 2 * edgeitems) {
    for (std::int64_t i = 0; i < edgeitems; ++i) idx.push_back(i);
    for (std::int64_t i = size - edgeitems; i < size; ++i) idx.push_back(i);
  } else {
    for (std::int64_t i = 0; i < size; ++i) idx.push_back(i);
  }
  return idx;
}

// _Formatter: one width and one notation for every element printed.
struct element_formatter {
  bool floating = false;
  bool int_mode = true;
  bool sci_mode = false;
  std::size_t max_width = 1;
  int precision = 4;

  std::string format_float(double v) const {
    std::string s;
    if (std::isnan(v)) {
      s = "nan";  // Python drops the sign of a NaN
    } else if (sci_mode) {
      s = number_string(v, std::chars_format::scientific, precision);
    } else if (int_mode) {
      s = number_string(v, std::chars_format::fixed, 0);
      if (std::isfinite(v)) s += '.';
    } else {
      s = number_string(v, std::chars_format::fixed, precision);
    }
    return s;
  }

  std::string pad(std::string s) const {
    if (s.size() < max_width) s.insert(0, max_width - s.size(), ' ');
    return s;
  }
};

template <class T>
element_formatter make_formatter(const std::vector<T>& shown, const print_options& opt) {
  element_formatter f;
  f.precision = opt.precision;
  if constexpr (!is_floating<T>) {
    for (const T& v : shown) f.max_width = std::max(f.max_width, int_string(v).size());
    return f;
  } else {
    f.floating = true;
    std::vector<double> vals;
    for (const T& v : shown) {
      const double d = as_double(v);
      if (std::isfinite(d) && d != 0.0) vals.push_back(d);
    }
    if (vals.empty()) return f;
    double lo = std::fabs(vals[0]), hi = lo;
    for (double d : vals) {
      lo = std::min(lo, std::fabs(d));
      hi = std::max(hi, std::fabs(d));
      if (d != std::ceil(d)) f.int_mode = false;
    }
    f.sci_mode = opt.sci_mode < 0 ? (hi / lo > 1000.0 || hi > 1.0e8 || lo < 1.0e-4) : opt.sci_mode == 1;
    for (double d : vals) {
      std::size_t w;
      if (f.sci_mode) {
        w = number_string(d, std::chars_format::scientific, opt.precision).size();
      } else if (f.int_mode) {
        w = number_string(d, std::chars_format::fixed, 0).size() + 1;
      } else {
        w = number_string(d, std::chars_format::fixed, opt.precision).size();
      }
      f.max_width = std::max(f.max_width, w);
    }
    return f;
  }
}

template <class T, class Get>
struct printer {
  std::span<const std::int64_t> sizes;
  std::vector<std::int64_t> strides;  // row-major
  Get& get;
  element_formatter formatter;
  bool summarize;
  const print_options& opt;

  std::string element(std::int64_t flat) const {
    const T v = get(flat);
    if constexpr (is_floating<T>) {
      return formatter.pad(formatter.format_float(as_double(v)));
    } else {
      return formatter.pad(int_string(v));
    }
  }

  // _tensor_str_with_formatter for the slice starting at `base` with dims [dim, ndim).
  std::string slice(std::size_t dim, std::int64_t base, std::size_t indent) const {
    const std::size_t ndim = sizes.size();
    const std::vector<std::int64_t> idx = shown_indices(sizes[dim], summarize, opt.edgeitems);
    const bool cut = idx.size() < static_cast<std::size_t>(sizes[dim]);
    if (dim + 1 == ndim) {  // _vector_str
      const std::int64_t element_length = static_cast<std::int64_t>(formatter.max_width) + 2;
      const std::int64_t room = static_cast<std::int64_t>(opt.linewidth) - static_cast<std::int64_t>(indent);
      const std::int64_t per_line = std::max<std::int64_t>(1, room >= 0 ? room / element_length : -1);
      std::vector<std::string> data;
      for (std::size_t j = 0; j < idx.size(); ++j) {
        if (cut && j == idx.size() / 2) data.emplace_back(" ...");
        data.push_back(element(base + idx[j] * strides[dim]));
      }
      std::string s = "[";
      for (std::size_t j = 0; j < data.size(); ++j) {
        if (j > 0) {
          s += ',';
          if (static_cast<std::int64_t>(j) % per_line == 0) {
            s += '\n';
            s.append(indent + 1, ' ');
          } else {
            s += ' ';
          }
        }
        s += data[j];
      }
      return s + "]";
    }
    std::string sep = ",";
    sep.append(ndim - dim - 1, '\n');
    sep.append(indent + 1, ' ');
    std::string s = "[";
    for (std::size_t j = 0; j < idx.size(); ++j) {
      if (j > 0) s += sep;
      if (cut && j == idx.size() / 2) s += "..." + sep;
      s += slice(dim + 1, base + idx[j] * strides[dim], indent + 1);
    }
    return s + "]";
  }
};

// _add_suffixes (its quirk included: with no newline, the "last line" counts two extra characters).
inline std::string add_suffixes(std::string s, const std::vector<std::string>& suffixes, std::size_t indent,
                                int linewidth) {
  const auto nl = s.rfind('\n');
  std::int64_t last_line_len = static_cast<std::int64_t>(s.size()) -
                               (nl == std::string::npos ? -1 : static_cast<std::int64_t>(nl)) + 1;
  for (const std::string& suffix : suffixes) {
    const auto len = static_cast<std::int64_t>(suffix.size());
    if (last_line_len + len + 2 > linewidth) {
      s += ",\n";
      s.append(indent, ' ');
      s += suffix;
      last_line_len = static_cast<std::int64_t>(indent) + len;
    } else {
      s += ", ";
      s += suffix;
      last_line_len += len + 2;
    }
  }
  return s + ")";
}

}  // namespace format_impl

/// str(tensor) as PyTorch 2.x prints it.
///
/// sizes:            the shape (empty for a 0-dim tensor);
/// get(k):           element k in row-major order, as T (called only for the elements shown);
/// dtype_torch_name: "torch.float64", "torch.int32", ... (printed in the dtype suffix);
/// default_dtype:    true for float32, int64 and bool, whose non-empty tensors print no dtype suffix
///                   (empty tensors print it for every dtype but float32, decided from the name);
/// device_suffix:    "" for the CPU, else the device as torch names it ("cuda:0").
/// T decides the notation: integral types (bool included) print as integers, every other type
/// (float, double, bfloat16, float16: anything convertible to float) as floating point.
template <class T, class Get>
std::string format_tensor(std::span<const std::int64_t> sizes, Get&& get, std::string_view dtype_torch_name,
                          bool default_dtype, std::string_view device_suffix, const print_options& opt = {}) {
  constexpr std::string_view prefix = "tensor(";
  const std::size_t indent = prefix.size();
  std::vector<std::string> suffixes;
  if (!device_suffix.empty()) suffixes.push_back("device='" + std::string(device_suffix) + "'");

  std::int64_t numel = 1;
  for (std::int64_t s : sizes) numel *= s;

  std::string body;
  if (numel == 0) {
    if (sizes.size() != 1) suffixes.push_back("size=" + format_impl::tuple_string(sizes));
    if (dtype_torch_name != "torch.float32") suffixes.push_back("dtype=" + std::string(dtype_torch_name));
    body = "[]";
  } else {
    if (!default_dtype) suffixes.push_back("dtype=" + std::string(dtype_torch_name));
    const bool summarize = numel > opt.threshold;
    const std::size_t ndim = sizes.size();
    std::vector<std::int64_t> strides(ndim, 1);
    for (std::size_t d = ndim; d-- > 1;) strides[d - 1] = strides[d] * sizes[d];

    // The elements get_summarized_data keeps: the product of the shown indices of each dimension.
    std::vector<T> shown;
    {
      std::vector<std::vector<std::int64_t>> idx;
      for (std::size_t d = 0; d < ndim; ++d) idx.push_back(format_impl::shown_indices(sizes[d], summarize, opt.edgeitems));
      std::vector<std::size_t> pos(ndim, 0);
      while (true) {
        std::int64_t flat = 0;
        for (std::size_t d = 0; d < ndim; ++d) flat += idx[d][pos[d]] * strides[d];
        shown.push_back(static_cast<T>(get(flat)));
        std::size_t d = ndim;
        while (d > 0 && ++pos[d - 1] == idx[d - 1].size()) pos[--d] = 0;
        if (d == 0) break;
      }
    }
    format_impl::printer<T, std::remove_reference_t<Get>> p{
        sizes, strides, get, format_impl::make_formatter(shown, opt), summarize, opt};
    body = ndim == 0 ? p.element(0) : p.slice(0, 0, indent);
  }
  return format_impl::add_suffixes(std::string(prefix) + body, suffixes, indent, opt.linewidth);
}

}  // namespace tenet::detail
