#pragma once
#define TENET_PUBLIC_HEADER_INCLUDED 1
// Activation modules (torch.nn.ReLU, GELU, ...): each forwards to tenet's functional op and holds
// the op's options as public members.
#include <string>

#include <tenet/activations.hpp>
#include <tenet/nn_functional.hpp>
#include <tenet/nn/module.hpp>
#include <tenet/ops.hpp>

namespace tenet::nn {

#define TENET_NN_ACTIVATION(Name, fn)                              \
  class Name : public Module {                                     \
   public:                                                         \
    template <Expression X>                                        \
    auto operator()(const X& x) const {                            \
      return fn(x);                                                \
    }                                                              \
    std::string type_name() const override { return #Name; }      \
  };
TENET_NN_ACTIVATION(ReLU, relu)
TENET_NN_ACTIVATION(ReLU6, relu6)
TENET_NN_ACTIVATION(SiLU, silu)
TENET_NN_ACTIVATION(Tanh, tanh)
TENET_NN_ACTIVATION(Sigmoid, sigmoid)
TENET_NN_ACTIVATION(SELU, selu)
TENET_NN_ACTIVATION(Mish, mish)
TENET_NN_ACTIVATION(Hardswish, hardswish)
TENET_NN_ACTIVATION(Hardsigmoid, hardsigmoid)
TENET_NN_ACTIVATION(LogSigmoid, logsigmoid)
TENET_NN_ACTIVATION(Softsign, softsign)
TENET_NN_ACTIVATION(Tanhshrink, tanhshrink)
#undef TENET_NN_ACTIVATION

enum class gelu_approximate { none, tanh };
/// GELU<> (exact, erf) or GELU<gelu_approximate::tanh>.
template <gelu_approximate A = gelu_approximate::none>
class GELU : public Module {
 public:
  template <Expression X>
  auto operator()(const X& x) const {
    if constexpr (A == gelu_approximate::none) return gelu(x);
    else return gelu(x, approximate_tanh);
  }
  std::string type_name() const override { return "GELU"; }
  std::string extra_repr() const override {
    return A == gelu_approximate::none ? "approximate='none'" : "approximate='tanh'";
  }
};

class LeakyReLU : public Module {
 public:
  double negative_slope = 0.01;
  explicit LeakyReLU(double slope = 0.01) : negative_slope(slope) {}
  template <Expression X>
  auto operator()(const X& x) const {
    return leaky_relu(x, negative_slope);
  }
  std::string type_name() const override { return "LeakyReLU"; }
  std::string extra_repr() const override { return "negative_slope=" + detail::py_float(negative_slope); }
};
class ELU : public Module {
 public:
  double alpha = 1.0;
  explicit ELU(double a = 1.0) : alpha(a) {}
  template <Expression X>
  auto operator()(const X& x) const {
    return elu(x, alpha);
  }
  std::string type_name() const override { return "ELU"; }
  std::string extra_repr() const override { return "alpha=" + detail::py_float(alpha); }
};
class CELU : public Module {
 public:
  double alpha = 1.0;
  explicit CELU(double a = 1.0) : alpha(a) {}
  template <Expression X>
  auto operator()(const X& x) const {
    return celu(x, alpha);
  }
  std::string type_name() const override { return "CELU"; }
  std::string extra_repr() const override { return "alpha=" + detail::py_float(alpha); }
};
class Softplus : public Module {
 public:
  double beta = 1.0, threshold = 20.0;
  explicit Softplus(double b = 1.0, double t = 20.0) : beta(b), threshold(t) {}
  template <Expression X>
  auto operator()(const X& x) const {
    return softplus(x, beta, threshold);
  }
  std::string type_name() const override { return "Softplus"; }
  std::string extra_repr() const override {
    return "beta=" + detail::py_float(beta) + ", threshold=" + detail::py_float(threshold);
  }
};
class Hardtanh : public Module {
 public:
  double min_val = -1.0, max_val = 1.0;
  explicit Hardtanh(double lo = -1.0, double hi = 1.0) : min_val(lo), max_val(hi) {}
  template <Expression X>
  auto operator()(const X& x) const {
    return hardtanh(x, min_val, max_val);
  }
  std::string type_name() const override { return "Hardtanh"; }
  std::string extra_repr() const override {
    return "min_val=" + detail::py_float(min_val) + ", max_val=" + detail::py_float(max_val);
  }
};
class Softshrink : public Module {
 public:
  double lambd = 0.5;
  explicit Softshrink(double l = 0.5) : lambd(l) {}
  template <Expression X>
  auto operator()(const X& x) const {
    return softshrink(x, lambd);
  }
  std::string type_name() const override { return "Softshrink"; }
  std::string extra_repr() const override { return detail::py_float(lambd); }
};
class Hardshrink : public Module {
 public:
  double lambd = 0.5;
  explicit Hardshrink(double l = 0.5) : lambd(l) {}
  template <Expression X>
  auto operator()(const X& x) const {
    return hardshrink(x, lambd);
  }
  std::string type_name() const override { return "Hardshrink"; }
  std::string extra_repr() const override { return detail::py_float(lambd); }
};
template <std::int64_t Dim>
class Softmax : public Module {
 public:
  template <Expression X>
  auto operator()(const X& x) const {
    return softmax<Dim>(x);
  }
  std::string type_name() const override { return "Softmax"; }
  std::string extra_repr() const override { return "dim=" + std::to_string(Dim); }
};
template <std::int64_t Dim>
class LogSoftmax : public Module {
 public:
  template <Expression X>
  auto operator()(const X& x) const {
    return log_softmax<Dim>(x);
  }
  std::string type_name() const override { return "LogSoftmax"; }
  std::string extra_repr() const override { return "dim=" + std::to_string(Dim); }
};
template <std::int64_t Dim>
class Softmin : public Module {
 public:
  template <Expression X>
  auto operator()(const X& x) const {
    return softmin<Dim>(x);
  }
  std::string type_name() const override { return "Softmin"; }
  std::string extra_repr() const override { return "dim=" + std::to_string(Dim); }
};

}  // namespace tenet::nn
