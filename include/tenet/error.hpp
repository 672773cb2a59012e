#pragma once
#define TENET_PUBLIC_HEADER_INCLUDED 1
// The exception types tenet throws. Every message names the values involved (shapes, dtypes,
// devices) and, where it can, says how to fix the problem.
#include <stdexcept>
#include <string>

namespace tenet {

struct error : std::runtime_error {
  using std::runtime_error::runtime_error;
};
/// Shapes that do not fit together (broadcasting, matmul, reshape, cat ...), checked at run time.
struct shape_error : error {
  using error::error;
};
/// An index or dimension out of range.
struct index_error : error {
  using error::error;
};
/// A dtype an op does not support.
struct dtype_error : error {
  using error::error;
};
/// Tensors on different devices, or a device that is not compiled in.
struct device_error : error {
  using error::error;
};
/// A value outside what an op accepts (negative step, empty range for randint ...).
struct value_error : error {
  using error::error;
};

/// A distributed operation that cannot complete (tenet/dist.hpp): a timeout, a rank that left the
/// process group, a collective whose ranks disagree on dtype or sizes, an MPI error. The message
/// names the operation, this rank and the rank or seconds involved.
struct dist_error : error {
  using error::error;
};

}  // namespace tenet
