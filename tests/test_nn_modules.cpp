// nn modules against PyTorch (tests/reference/gen_nn.py): each case's torch state_dict is loaded by
// name (strict) into the tenet module and the forward compared; plus Module's registry, modes and
// state_dict checks.
#include <tenet/tenet.hpp>

#include "reference.hpp"

using namespace tenet;
using namespace tenet_test;

namespace {
const char* kFile = "nn.txt";

dtype dtype_named(const std::string& s) {
  for (dtype d : all_dtypes)
    if (s == name(d)) return d;
  throw std::runtime_error("unknown dtype " + s);
}
any_tensor to_any(const ref_tensor& r) {
  any_tensor t = any_tensor::zeros(dtype_named(r.dtype), r.sizes);
  any_tensor::visit_dtype(t.scalar_type(), [&]<class T>() {
    T* p = t.flat<T>().data();
    for (std::size_t i = 0; i < r.values.size(); ++i) p[i] = static_cast<T>(r.values[i]);
  });
  return t;
}
/// The "<prefix><name>" tensors of a case as a tensor_dict keyed by <name>.
tensor_dict dict_of(const ref_case& c, const std::string& prefix = "p:") {
  tensor_dict d;
  for (const auto& [k, v] : c)
    if (k.rfind(prefix, 0) == 0) d.insert(k.substr(prefix.size()), to_any(v));
  return d;
}
template <class M>
const ref_case& load_case(M& m, const std::string& name) {
  const auto& c = get_case(kFile, name);
  m.load_state_dict(dict_of(c));
  return c;
}
template <std::size_t R>
Tensor<float, dyn_shape<R>> input(const ref_case& c, const std::string& key = "x") {
  return make<float, dyn_shape<R>>(c.at(key));
}
/// Every tensor of the module's state_dict equals the case's "<prefix><name>" tensor.
void check_state(const nn::Module& m, const ref_case& c, const std::string& prefix) {
  for (const auto& [n, v] : m.state_dict()) {
    INFO("state " << n);
    const auto& want = c.at(prefix + n);
    if (v.scalar_type() == dtype::int64) {
      CHECK(v.flat<std::int64_t>().data()[0] == static_cast<std::int64_t>(want.values[0]));
    } else {
      Tensor<float, shape<dyn>> f = v.flat<float>();
      ref_tensor flat = want;
      flat.sizes = {static_cast<std::int64_t>(flat.values.size())};
      check_close(f, flat, 1e-5, 1e-6);
    }
  }
}
}  // namespace

TEST_CASE("nn: Module names, registry and modes") {
  nn::Sequential<nn::Linear<4, 8>, nn::ReLU, nn::Linear<8, 3, false>, nn::BatchNorm1d<3>> seq;
  std::vector<std::string> names;
  for (auto& [n, p] : seq.named_parameters()) names.push_back(n);
  CHECK(names == std::vector<std::string>{"0.weight", "0.bias", "2.weight", "3.weight", "3.bias"});
  names.clear();
  for (auto& [n, b] : seq.named_buffers()) names.push_back(n);
  CHECK(names == std::vector<std::string>{"3.running_mean", "3.running_var", "3.num_batches_tracked"});
  CHECK(seq.state_dict().keys() == std::vector<std::string>{"0.weight", "0.bias", "2.weight", "3.weight", "3.bias",
                                                            "3.running_mean", "3.running_var",
                                                            "3.num_batches_tracked"});
  CHECK(seq.num_parameters() == 8 * 4 + 8 + 3 * 8 + 3 + 3);
  CHECK(seq.parameters()[0].sizes() == std::vector<std::int64_t>{8, 4});
  CHECK(&seq.parameters()[0].get<float, shape<8, 4>>() == &seq.get<0>().weight);
  CHECK_THROWS_AS((seq.parameters()[0].get<double, shape<8, 4>>()), dtype_error);
  names.clear();
  for (auto& [n, m] : seq.named_modules()) names.push_back(n);
  CHECK(names == std::vector<std::string>{"", "0", "1", "2", "3"});
  CHECK(seq.training());
  seq.eval();
  CHECK(!seq.training());
  CHECK(!seq.get<3>().training());
  seq.train();
  CHECK(seq.get<3>().training());
  CHECK_NOTHROW(seq.to(cpu));
  CHECK_THROWS_AS(seq.to(cuda(0)), device_error);

  nn::ModuleList<nn::Linear<2, 2>> list(3);
  CHECK(list.size() == 3);
  list.append();
  CHECK(list.state_dict().keys().size() == 8);
  CHECK(list.state_dict().keys()[6] == "3.weight");
  CHECK_THROWS_AS(list[4], index_error);
  CHECK(&list[-1] == &list[3]);
}

TEST_CASE("nn: state_dict shares storage; load_state_dict checks keys, dtypes and sizes") {
  nn::Linear<3, 2> a, b;
  auto sd = a.state_dict();
  CHECK(sd.at("weight").raw_data() == static_cast<const void*>(a.weight.data()));
  b.load_state_dict(sd);
  CHECK(b.weight(1, 2) == a.weight(1, 2));
  CHECK(b.bias(1) == a.bias(1));
  CHECK(b.weight.data() != a.weight.data());  // copied, not aliased

  tensor_dict missing;
  missing.insert("weight", sd.at("weight"));
  try {
    b.load_state_dict(missing);
    FAIL("expected an error");
  } catch (const value_error& e) {
    CHECK(std::string(e.what()).find("missing key(s): \"bias\"") != std::string::npos);
  }
  auto [miss, unexp] = b.load_state_dict(missing, false);
  CHECK(miss == std::vector<std::string>{"bias"});
  CHECK(unexp.empty());

  tensor_dict extra = sd;
  extra.insert("scale", sd.at("bias"));
  try {
    b.load_state_dict(extra);
    FAIL("expected an error");
  } catch (const value_error& e) {
    CHECK(std::string(e.what()).find("unexpected key(s): \"scale\"") != std::string::npos);
  }

  const float before = b.bias(0);
  tensor_dict wrong_shape;
  wrong_shape.insert("weight", sd.at("weight"));
  wrong_shape.insert("bias", any_tensor::zeros(dtype::float32, {3}));
  try {
    b.load_state_dict(wrong_shape);
    FAIL("expected an error");
  } catch (const shape_error& e) {
    CHECK(std::string(e.what()).find("size mismatch for \"bias\"") != std::string::npos);
    CHECK(std::string(e.what()).find("shape<3>") != std::string::npos);
  }
  CHECK(b.bias(0) == before);  // nothing loaded

  tensor_dict wrong_dtype;
  wrong_dtype.insert("weight", any_tensor::zeros(dtype::float64, {2, 3}));
  wrong_dtype.insert("bias", sd.at("bias"));
  CHECK_THROWS_AS(b.load_state_dict(wrong_dtype), dtype_error);
}

TEST_CASE("nn: Linear, Bilinear, Embedding against torch") {
  {
    nn::Linear<5, 3> m;
    const auto& c = load_case(m, "linear");
    check_close(Tensor<float, dyn_shape<2>>(m(input<2>(c))), c.at("y"));
  }
  {
    nn::Linear<5, 3, false> m;
    const auto& c = load_case(m, "linear_nobias");
    check_close(Tensor<float, dyn_shape<2>>(m(input<2>(c))), c.at("y"));
  }
  {
    nn::Bilinear<3, 4, 2> m;
    const auto& c = load_case(m, "bilinear");
    check_close(Tensor<float, dyn_shape<2>>(m(input<2>(c), input<2>(c, "x2"))), c.at("y"), 1e-5, 1e-5);
  }
  {
    nn::Embedding<6, 3> fresh(1);
    CHECK(fresh.weight(1, 0) == 0.0f);  // the padding row starts at zero
    CHECK_THROWS_AS((nn::Embedding<6, 3>(6)), index_error);
    nn::Embedding<6, 3> m(1);
    const auto& c = load_case(m, "embedding");
    auto idx = make<std::int64_t, dyn_shape<2>>(c.at("x"));
    check_close(Tensor<float, dyn_shape<3>>(m(idx)), c.at("y"));
  }
}

TEST_CASE("nn: normalization modules against torch") {
  {
    nn::LayerNorm<6> m;
    const auto& c = load_case(m, "layer_norm");
    check_close(Tensor<float, dyn_shape<2>>(m(input<2>(c))), c.at("y"), 1e-5, 1e-5);
  }
  {
    nn::RMSNorm<6> m;
    const auto& c = load_case(m, "rms_norm");
    check_close(Tensor<float, dyn_shape<2>>(m(input<2>(c))), c.at("y"), 1e-5, 1e-5);
  }
  {
    nn::GroupNorm<2, 4> m;
    const auto& c = load_case(m, "group_norm");
    check_close(Tensor<float, dyn_shape<3>>(m(input<3>(c))), c.at("y"), 1e-5, 1e-5);
  }
  {
    nn::BatchNorm1d<3> m;
    const auto& c = load_case(m, "batch_norm1d");
    check_close(Tensor<float, dyn_shape<2>>(m(input<2>(c))), c.at("y"), 1e-5, 1e-5);
    check_state(m, c, "after:");
    m.eval();
    check_close(Tensor<float, dyn_shape<2>>(m(input<2>(c))), c.at("y_eval"), 1e-5, 1e-5);
  }
  {
    nn::BatchNorm1d<3> m;
    const auto& c = load_case(m, "batch_norm1d_3d");
    check_close(Tensor<float, dyn_shape<3>>(m(input<3>(c))), c.at("y"), 1e-5, 1e-5);
    check_state(m, c, "after:");
    m.eval();
    check_close(Tensor<float, dyn_shape<3>>(m(input<3>(c))), c.at("y_eval"), 1e-5, 1e-5);
  }
  {
    nn::BatchNorm2d<2> m;
    const auto& c = load_case(m, "batch_norm2d");
    check_close(Tensor<float, dyn_shape<4>>(m(input<4>(c))), c.at("y"), 1e-5, 1e-5);
    check_state(m, c, "after:");
    m.eval();
    check_close(Tensor<float, dyn_shape<4>>(m(input<4>(c))), c.at("y_eval"), 1e-5, 1e-5);
  }
  {
    nn::BatchNorm1d<3> m({.momentum = std::nullopt});
    const auto& c = load_case(m, "batch_norm1d_cumulative");
    check_close(Tensor<float, dyn_shape<2>>(m(input<2>(c))), c.at("y"), 1e-5, 1e-5);
    check_close(Tensor<float, dyn_shape<2>>(m(input<2>(c, "x_second"))), c.at("y_second"), 1e-5, 1e-5);
    check_state(m, c, "after:");
  }
}

TEST_CASE("nn: convolution and pooling modules against torch") {
  {
    nn::Conv1d<4, 6, 3, 2> m({.stride = 2, .padding = 1});
    const auto& c = load_case(m, "conv1d");
    check_close(Tensor<float, dyn_shape<3>>(m(input<3>(c))), c.at("y"), 1e-5, 1e-5);
  }
  {
    nn::Conv2d<3, 4, 3, 2> m({.stride = {2, 1}, .padding = {1, 0}, .dilation = {1, 2}});
    const auto& c = load_case(m, "conv2d");
    check_close(Tensor<float, dyn_shape<4>>(m(input<4>(c))), c.at("y"), 1e-5, 1e-5);
  }
  {
    nn::ConvTranspose2d<4, 6, 3, 3, 2> m({.stride = 2, .padding = 1, .output_padding = 1});
    const auto& c = load_case(m, "conv_transpose2d");
    check_close(Tensor<float, dyn_shape<4>>(m(input<4>(c))), c.at("y"), 1e-5, 1e-5);
  }
  {
    nn::MaxPool2d m(3, {.stride = 2, .padding = 1});
    const auto& c = get_case(kFile, "max_pool2d");
    check_close(Tensor<float, dyn_shape<4>>(m(input<4>(c))), c.at("y"));
  }
  {
    nn::AvgPool2d m(2, {.ceil_mode = true, .count_include_pad = false});
    const auto& c = get_case(kFile, "avg_pool2d");
    check_close(Tensor<float, dyn_shape<4>>(m(input<4>(c))), c.at("y"));
  }
  {
    nn::AdaptiveAvgPool2d m({3, 2});
    const auto& c = get_case(kFile, "adaptive_avg_pool2d");
    check_close(Tensor<float, dyn_shape<4>>(m(input<4>(c))), c.at("y"));
  }
  {
    nn::Flatten<> m;
    const auto& c = get_case(kFile, "flatten");
    check_close(Tensor<float, dyn_shape<2>>(m(input<4>(c))), c.at("y"));
  }
}

TEST_CASE("nn: static-option conv and pool modules: the run-time ones' values and gradients, exactly") {
  // the static shapes are views (reshape_ to the same sizes): the forward and the backward run the
  // same kernels as with run-time options
  manual_seed(37);
  nn::Conv2d<2, 4, 3, conv2d_options{.stride = 2, .padding = 1}> cs;
  nn::StaticMaxPool2d<2, max_pool2d_options{.stride = 1}> ps;
  nn::StaticAvgPool2d<2, avg_pool2d_options{.ceil_mode = true}> as;
  nn::Conv2d<2, 4, 3> cr({.stride = 2, .padding = 1});
  {
    no_grad guard;
    cr.weight.copy_(cs.weight);
    cr.bias.copy_(cs.bias);
  }
  const Tensor<float, shape<dyn, 2, 9, 9>> x0 = randn<float, shape<dyn, 2, 9, 9>>(2);
  Tensor<float, shape<dyn, 2, 9, 9>> xs = x0.clone(), xr = x0.clone();
  xs.requires_grad_();
  xr.requires_grad_();
  const Tensor<float, shape<dyn, 4, 2, 2>> ys = as(ps(relu(cs(xs))));
  const Tensor<float, dyn_shape<4>> yr = avg_pool2d(max_pool2d(relu(cr(xr)), 2, {.stride = 1}), 2, {.ceil_mode = true});
  const auto seed = randn<float, dyn_shape<4>>(2, 4, 2, 2);
  ys.backward(seed);
  yr.backward(seed);
  auto same = [](const auto& a, const auto& b) {
    const auto ac = a.contiguous();
    const auto bc = b.contiguous();
    if (ac.sizes() != bc.sizes()) return false;
    for (std::int64_t i = 0; i < ac.numel(); ++i)
      if (ac.data()[i] != bc.data()[i]) return false;
    return true;
  };
  CHECK(same(ys, yr));
  CHECK(same(xs.grad(), xr.grad()));
  CHECK(same(cs.weight.grad(), cr.weight.grad()));
  CHECK(same(cs.bias.grad(), cr.bias.grad()));
}

TEST_CASE("nn: Sequential and activation modules against torch") {
  {
    nn::Sequential<nn::Linear<4, 8>, nn::GELU<>, nn::Linear<8, 3>, nn::LogSoftmax<1>> m;
    const auto& c = load_case(m, "sequential");
    check_close(Tensor<float, dyn_shape<2>>(m(input<2>(c))), c.at("y"), 1e-5, 1e-5);
  }
  auto act = [](const std::string& name, const auto& m) {
    INFO(name);
    const auto& c = get_case(kFile, "act_" + name);
    check_close(Tensor<float, dyn_shape<2>>(m(input<2>(c))), c.at("y"), 1e-5, 1e-6);
  };
  act("relu", nn::ReLU{});
  act("gelu_tanh", nn::GELU<nn::gelu_approximate::tanh>{});
  act("silu", nn::SiLU{});
  act("tanh", nn::Tanh{});
  act("sigmoid", nn::Sigmoid{});
  act("leaky_relu", nn::LeakyReLU(0.2));
  act("elu", nn::ELU(0.7));
  act("softplus", nn::Softplus(2.0, 5.0));
  act("hardtanh", nn::Hardtanh(-0.5, 2.0));
  act("mish", nn::Mish{});
  act("softmax", nn::Softmax<1>{});
}

TEST_CASE("nn: Dropout follows the mode") {
  nn::Dropout d(0.5);
  auto x = ones<float, shape<dyn>>(1000);
  Tensor<float, shape<dyn>> y = d(x);
  std::int64_t zeros = 0;
  for (std::int64_t i = 0; i < 1000; ++i) {
    CHECK((y(i) == 0.0f || y(i) == 2.0f));
    zeros += y(i) == 0.0f;
  }
  CHECK(zeros > 400);
  CHECK(zeros < 600);
  d.eval();
  Tensor<float, shape<dyn>> z = d(x);
  for (std::int64_t i = 0; i < 1000; ++i) CHECK(z(i) == 1.0f);
  CHECK_THROWS_AS(nn::Dropout(1.5), value_error);
}
