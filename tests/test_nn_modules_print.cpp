// Printing modules (torch's print(model)), nn::summary and sizes as torch.Size.
// The expected texts are what PyTorch 2.15.0 prints for the same modules (print(module) on the
// torch.nn modules named in each test, and repr(float) for the numbers).
#include <catch2/catch.hpp>
#include <tenet/tenet.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

using namespace tenet;

namespace {
template <class M>
std::string printed(const M& m) {
  std::ostringstream os;
  os << m;
  return os.str();
}

struct MLP : nn::Module {  // class MLP(nn.Module) with fc1, act, fc2
  nn::Linear<784, 128> fc1;
  nn::ReLU act;
  nn::Linear<128, 10> fc2;
  MLP() {
    register_module("fc1", fc1);
    register_module("act", act);
    register_module("fc2", fc2);
  }
};

struct Net : nn::Module {
  nn::Conv2d<3, 8, 3> conv{{.padding = 1}};
  nn::BatchNorm2d<8> bn;
  nn::ReLU act;
  nn::MaxPool2d pool{2};
  nn::AdaptiveAvgPool2d gap{1};
  nn::Flatten<> flat;
  nn::Linear<8, 10> head;
  Net() {
    register_module("conv", conv);
    register_module("bn", bn);
    register_module("act", act);
    register_module("pool", pool);
    register_module("gap", gap);
    register_module("flat", flat);
    register_module("head", head);
  }
};

struct Two : nn::Module {  // a multi-line extra_repr, no children
  std::string extra_repr() const override { return "a=1\nb=2"; }
};

struct Scaled : nn::Module {  // a one-line extra_repr and a child
  nn::Linear<2, 2> lin;
  Scaled() { register_module("lin", lin); }
  std::string extra_repr() const override { return "scale=0.5"; }
};

template <int N>
struct Block : nn::Module {  // a class template: printed without its arguments
  nn::Sequential<nn::Linear<N, N>, nn::GELU<>, nn::Dropout> seq;
  nn::LayerNorm<N> norm;
  Block() {
    seq.template get<2>().p = 0.0;
    register_module("seq", seq);
    register_module("norm", norm);
  }
};

struct Renamed : nn::Module {
  std::string type_name() const override { return "MyName"; }
};

/// max |a - b| of two evaluated tensors of the same sizes.
float max_diff(const Tensor<float, shape<dyn, dyn, 8>>& a, const Tensor<float, shape<dyn, dyn, 8>>& b) {
  const Tensor<float, shape<dyn, dyn, 8>> ca = a.contiguous(), cb = b.contiguous();
  float m = 0;
  for (std::int64_t i = 0; i < ca.numel(); ++i) m = std::max(m, std::abs(ca.data()[i] - cb.data()[i]));
  return m;
}

// A program's own operator<< for a std type wins over tenet's (no ambiguity).
std::ostream& operator<<(std::ostream& os, const std::array<std::int64_t, 2>&) { return os << "mine"; }
}  // namespace

TEST_CASE("nn print: a user's model prints as torch's print(model)") {
  MLP mlp;
  CHECK(printed(mlp) == R"-(MLP(
  (fc1): Linear(in_features=784, out_features=128, bias=True)
  (act): ReLU()
  (fc2): Linear(in_features=128, out_features=10, bias=True)
))-");
  CHECK(mlp.type_name() == "MLP");  // the class's name, demangled, from an anonymous namespace
  Net net;
  CHECK(printed(net) == R"-(Net(
  (conv): Conv2d(3, 8, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))
  (bn): BatchNorm2d(8, eps=1e-05, momentum=0.1, affine=True, bias=True, track_running_stats=True)
  (act): ReLU()
  (pool): MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)
  (gap): AdaptiveAvgPool2d(output_size=1)
  (flat): Flatten(start_dim=1, end_dim=-1)
  (head): Linear(in_features=8, out_features=10, bias=True)
))-");
  CHECK(printed(Two()) == "Two(\n  a=1\n  b=2\n)");
  Scaled sc;
  CHECK(printed(sc) == R"-(Scaled(
  scale=0.5
  (lin): Linear(in_features=2, out_features=2, bias=True)
))-");
  Block<4> b;
  CHECK(printed(b) == R"-(Block(
  (seq): Sequential(
    (0): Linear(in_features=4, out_features=4, bias=True)
    (1): GELU(approximate='none')
    (2): Dropout(p=0.0, inplace=False)
  )
  (norm): LayerNorm((4,), eps=1e-05, elementwise_affine=True, bias=True)
))-");
  struct Local : nn::Module {};  // a class local to a function
  CHECK(printed(Local()) == "Local()");
  CHECK(printed(Renamed()) == "MyName()");
  CHECK(printed(nn::Module()) == "Module()");
  CHECK(mlp.repr() == printed(mlp));
  CHECK(nn::detail::readable_type_name(typeid(nn::Linear<4, 2>)) == "Linear");
}

TEST_CASE("nn print: each module's text is torch's") {
  CHECK(nn::Linear<784, 128>().repr() == "Linear(in_features=784, out_features=128, bias=True)");
  CHECK(nn::Linear<3, 4, false>().repr() == "Linear(in_features=3, out_features=4, bias=False)");
  CHECK(nn::Bilinear<3, 4, 5>().repr() == "Bilinear(in1_features=3, in2_features=4, out_features=5, bias=True)");
  CHECK(nn::Bilinear<3, 4, 5, false>().repr() == "Bilinear(in1_features=3, in2_features=4, out_features=5, bias=False)");
  CHECK(nn::Embedding<10, 3>().repr() == "Embedding(10, 3)");
  CHECK(nn::Embedding<10, 3>(0).repr() == "Embedding(10, 3, padding_idx=0)");
  CHECK(nn::Embedding<10, 3>(-1).repr() == "Embedding(10, 3, padding_idx=9)");
  CHECK(nn::Identity().repr() == "Identity()");
  CHECK(nn::Flatten<>().repr() == "Flatten(start_dim=1, end_dim=-1)");
  CHECK(nn::Flatten<0, 2>().repr() == "Flatten(start_dim=0, end_dim=2)");
  CHECK(nn::Dropout().repr() == "Dropout(p=0.5, inplace=False)");
  CHECK(nn::Dropout(0.25).repr() == "Dropout(p=0.25, inplace=False)");
  // activations
  CHECK(nn::ReLU().repr() == "ReLU()");
  CHECK(nn::ReLU6().repr() == "ReLU6()");
  CHECK(nn::SiLU().repr() == "SiLU()");
  CHECK(nn::Tanh().repr() == "Tanh()");
  CHECK(nn::Sigmoid().repr() == "Sigmoid()");
  CHECK(nn::SELU().repr() == "SELU()");
  CHECK(nn::Mish().repr() == "Mish()");
  CHECK(nn::Hardswish().repr() == "Hardswish()");
  CHECK(nn::Hardsigmoid().repr() == "Hardsigmoid()");
  CHECK(nn::LogSigmoid().repr() == "LogSigmoid()");
  CHECK(nn::Softsign().repr() == "Softsign()");
  CHECK(nn::Tanhshrink().repr() == "Tanhshrink()");
  CHECK(nn::GELU<>().repr() == "GELU(approximate='none')");
  CHECK(nn::GELU<nn::gelu_approximate::tanh>().repr() == "GELU(approximate='tanh')");
  CHECK(nn::LeakyReLU().repr() == "LeakyReLU(negative_slope=0.01)");
  CHECK(nn::LeakyReLU(0.2).repr() == "LeakyReLU(negative_slope=0.2)");
  CHECK(nn::ELU().repr() == "ELU(alpha=1.0)");
  CHECK(nn::CELU().repr() == "CELU(alpha=1.0)");
  CHECK(nn::Softplus().repr() == "Softplus(beta=1.0, threshold=20.0)");
  CHECK(nn::Softplus(1e-4, -0.0).repr() == "Softplus(beta=0.0001, threshold=-0.0)");
  CHECK(nn::Hardtanh().repr() == "Hardtanh(min_val=-1.0, max_val=1.0)");
  CHECK(nn::Hardtanh(-2.5, 1e20).repr() == "Hardtanh(min_val=-2.5, max_val=1e+20)");
  CHECK(nn::Softshrink().repr() == "Softshrink(0.5)");
  CHECK(nn::Hardshrink().repr() == "Hardshrink(0.5)");
  CHECK(nn::Softmax<1>().repr() == "Softmax(dim=1)");
  CHECK(nn::LogSoftmax<-1>().repr() == "LogSoftmax(dim=-1)");
  CHECK(nn::Softmin<0>().repr() == "Softmin(dim=0)");
  // convolution and pooling
  CHECK(nn::Conv1d<3, 8, 3>().repr() == "Conv1d(3, 8, kernel_size=(3,), stride=(1,))");
  CHECK(nn::Conv1d<3, 8, 3>({.padding = conv_padding::valid}).repr() ==
        "Conv1d(3, 8, kernel_size=(3,), stride=(1,), padding=valid)");
  CHECK(nn::Conv2d<3, 8, 3>({.padding = 1}).repr() == "Conv2d(3, 8, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))");
  CHECK(nn::Conv2d<3, 8, 3>({.padding = conv_padding::same}).repr() ==
        "Conv2d(3, 8, kernel_size=(3, 3), stride=(1, 1), padding=same)");
  CHECK(nn::Conv2d<4, 8, 3, 5, 2, false>({.stride = 2, .padding = {1, 2}, .dilation = 2}).repr() ==
        "Conv2d(4, 8, kernel_size=(3, 5), stride=(2, 2), padding=(1, 2), dilation=(2, 2), groups=2, bias=False)");
  CHECK(nn::ConvTranspose2d<3, 8, 3>({.stride = 2, .output_padding = 1}).repr() ==
        "ConvTranspose2d(3, 8, kernel_size=(3, 3), stride=(2, 2), output_padding=(1, 1))");
  CHECK(nn::ConvTranspose2d<4, 8, 3, 3, 2, false>({.padding = 1, .dilation = 2}).repr() ==
        "ConvTranspose2d(4, 8, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), dilation=(2, 2), groups=2, bias=False)");
  CHECK(nn::MaxPool2d(2).repr() == "MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)");
  CHECK(nn::MaxPool2d({2, 3}, {.stride = 1, .padding = 1, .ceil_mode = true}).repr() ==
        "MaxPool2d(kernel_size=(2, 3), stride=1, padding=1, dilation=1, ceil_mode=True)");
  CHECK(nn::AvgPool2d(2).repr() == "AvgPool2d(kernel_size=2, stride=2, padding=0)");
  CHECK(nn::AvgPool2d(3, {.stride = 2, .padding = 1, .ceil_mode = true}).repr() ==
        "AvgPool2d(kernel_size=3, stride=2, padding=1)");
  CHECK(nn::AdaptiveAvgPool2d(3).repr() == "AdaptiveAvgPool2d(output_size=3)");
  CHECK(nn::AdaptiveAvgPool2d({2, 3}).repr() == "AdaptiveAvgPool2d(output_size=(2, 3))");
  // normalization
  CHECK(nn::LayerNorm<8>().repr() == "LayerNorm((8,), eps=1e-05, elementwise_affine=True, bias=True)");
  CHECK(nn::LayerNormT<float, false, 4, 8>(1e-6).repr() ==
        "LayerNorm((4, 8), eps=1e-06, elementwise_affine=False, bias=False)");
  CHECK(nn::RMSNorm<8>().repr() == "RMSNorm((8,), eps=None, elementwise_affine=True)");
  CHECK(nn::RMSNorm<2, 8>(1e-6).repr() == "RMSNorm((2, 8), eps=1e-06, elementwise_affine=True)");
  CHECK(nn::GroupNorm<2, 8>().repr() == "GroupNorm(2, 8, eps=1e-05, affine=True, bias=True)");
  CHECK(nn::GroupNorm<2, 8, false>(1e-3).repr() == "GroupNorm(2, 8, eps=0.001, affine=False, bias=False)");
  CHECK(nn::BatchNorm1d<8>().repr() ==
        "BatchNorm1d(8, eps=1e-05, momentum=0.1, affine=True, bias=True, track_running_stats=True)");
  CHECK(nn::BatchNorm2d<8, false>({.momentum = std::nullopt, .track_running_stats = false}).repr() ==
        "BatchNorm2d(8, eps=1e-05, momentum=None, affine=False, bias=False, track_running_stats=False)");
  CHECK(nn::BatchNorm2d<8>({.eps = 1e-3, .momentum = 0.01}).repr() ==
        "BatchNorm2d(8, eps=0.001, momentum=0.01, affine=True, bias=True, track_running_stats=True)");
}

TEST_CASE("nn print: containers") {
  CHECK(printed(nn::Sequential<nn::Linear<2, 3>, nn::ReLU>()) == R"-(Sequential(
  (0): Linear(in_features=2, out_features=3, bias=True)
  (1): ReLU()
))-");
  CHECK(printed(nn::ModuleList<nn::Linear<2, 2>>(3)) == R"-(ModuleList(
  (0-2): 3 x Linear(in_features=2, out_features=2, bias=True)
))-");
  nn::ModuleList<nn::Dropout> drops;
  drops.append(0.1);
  drops.append(0.1);
  drops.append(0.2);
  CHECK(printed(drops) == R"-(ModuleList(
  (0-1): 2 x Dropout(p=0.1, inplace=False)
  (2): Dropout(p=0.2, inplace=False)
))-");
  CHECK(printed(nn::ModuleList<nn::ReLU>()) == "ModuleList()");
}

TEST_CASE("nn print: attention and Transformer modules") {
  CHECK(printed(nn::MultiheadAttention<16, 4>()) == R"-(MultiheadAttention(
  (out_proj): NonDynamicallyQuantizableLinear(in_features=16, out_features=16, bias=True)
))-");
  CHECK(printed(nn::MultiheadAttention<16, 4, 8, 8>({.bias = false, .batch_first = true})) == R"-(MultiheadAttention(
  (out_proj): NonDynamicallyQuantizableLinear(in_features=16, out_features=16, bias=False)
))-");
  CHECK(printed(nn::TransformerEncoderLayer<16, 4, 32>()) == R"-(TransformerEncoderLayer(
  (self_attn): MultiheadAttention(
    (out_proj): NonDynamicallyQuantizableLinear(in_features=16, out_features=16, bias=True)
  )
  (linear1): Linear(in_features=16, out_features=32, bias=True)
  (dropout): Dropout(p=0.1, inplace=False)
  (linear2): Linear(in_features=32, out_features=16, bias=True)
  (norm1): LayerNorm((16,), eps=1e-05, elementwise_affine=True, bias=True)
  (norm2): LayerNorm((16,), eps=1e-05, elementwise_affine=True, bias=True)
  (dropout1): Dropout(p=0.1, inplace=False)
  (dropout2): Dropout(p=0.1, inplace=False)
))-");
  const nn::TransformerDecoderLayer<16, 4, 32> dec(
      {.dropout = 0.0, .activation = nn::transformer_activation::gelu, .bias = false});
  CHECK(printed(dec) == R"-(TransformerDecoderLayer(
  (self_attn): MultiheadAttention(
    (out_proj): NonDynamicallyQuantizableLinear(in_features=16, out_features=16, bias=False)
  )
  (multihead_attn): MultiheadAttention(
    (out_proj): NonDynamicallyQuantizableLinear(in_features=16, out_features=16, bias=False)
  )
  (linear1): Linear(in_features=16, out_features=32, bias=False)
  (dropout): Dropout(p=0.0, inplace=False)
  (linear2): Linear(in_features=32, out_features=16, bias=False)
  (norm1): LayerNorm((16,), eps=1e-05, elementwise_affine=True, bias=False)
  (norm2): LayerNorm((16,), eps=1e-05, elementwise_affine=True, bias=False)
  (norm3): LayerNorm((16,), eps=1e-05, elementwise_affine=True, bias=False)
  (dropout1): Dropout(p=0.0, inplace=False)
  (dropout2): Dropout(p=0.0, inplace=False)
  (dropout3): Dropout(p=0.0, inplace=False)
))-");
  std::vector<std::string> names;  // torch's named_modules() of nn.TransformerDecoderLayer
  for (const auto& [n, m] : dec.named_modules()) names.push_back(n);
  CHECK(names == std::vector<std::string>{"", "self_attn", "self_attn.out_proj", "multihead_attn",
                                          "multihead_attn.out_proj", "linear1", "dropout", "linear2", "norm1",
                                          "norm2", "norm3", "dropout1", "dropout2", "dropout3"});
  CHECK(printed(nn::TransformerEncoder<16, 4, 32>(2, {}, true)) == R"-(TransformerEncoder(
  (layers): ModuleList(
    (0-1): 2 x TransformerEncoderLayer(
      (self_attn): MultiheadAttention(
        (out_proj): NonDynamicallyQuantizableLinear(in_features=16, out_features=16, bias=True)
      )
      (linear1): Linear(in_features=16, out_features=32, bias=True)
      (dropout): Dropout(p=0.1, inplace=False)
      (linear2): Linear(in_features=32, out_features=16, bias=True)
      (norm1): LayerNorm((16,), eps=1e-05, elementwise_affine=True, bias=True)
      (norm2): LayerNorm((16,), eps=1e-05, elementwise_affine=True, bias=True)
      (dropout1): Dropout(p=0.1, inplace=False)
      (dropout2): Dropout(p=0.1, inplace=False)
    )
  )
  (norm): LayerNorm((16,), eps=1e-05, elementwise_affine=True, bias=True)
))-");
  CHECK(printed(nn::Transformer<16, 4, 32>({.num_encoder_layers = 1, .num_decoder_layers = 1})) == R"-(Transformer(
  (encoder): TransformerEncoder(
    (layers): ModuleList(
      (0): TransformerEncoderLayer(
        (self_attn): MultiheadAttention(
          (out_proj): NonDynamicallyQuantizableLinear(in_features=16, out_features=16, bias=True)
        )
        (linear1): Linear(in_features=16, out_features=32, bias=True)
        (dropout): Dropout(p=0.1, inplace=False)
        (linear2): Linear(in_features=32, out_features=16, bias=True)
        (norm1): LayerNorm((16,), eps=1e-05, elementwise_affine=True, bias=True)
        (norm2): LayerNorm((16,), eps=1e-05, elementwise_affine=True, bias=True)
        (dropout1): Dropout(p=0.1, inplace=False)
        (dropout2): Dropout(p=0.1, inplace=False)
      )
    )
    (norm): LayerNorm((16,), eps=1e-05, elementwise_affine=True, bias=True)
  )
  (decoder): TransformerDecoder(
    (layers): ModuleList(
      (0): TransformerDecoderLayer(
        (self_attn): MultiheadAttention(
          (out_proj): NonDynamicallyQuantizableLinear(in_features=16, out_features=16, bias=True)
        )
        (multihead_attn): MultiheadAttention(
          (out_proj): NonDynamicallyQuantizableLinear(in_features=16, out_features=16, bias=True)
        )
        (linear1): Linear(in_features=16, out_features=32, bias=True)
        (dropout): Dropout(p=0.1, inplace=False)
        (linear2): Linear(in_features=32, out_features=16, bias=True)
        (norm1): LayerNorm((16,), eps=1e-05, elementwise_affine=True, bias=True)
        (norm2): LayerNorm((16,), eps=1e-05, elementwise_affine=True, bias=True)
        (norm3): LayerNorm((16,), eps=1e-05, elementwise_affine=True, bias=True)
        (dropout1): Dropout(p=0.1, inplace=False)
        (dropout2): Dropout(p=0.1, inplace=False)
        (dropout3): Dropout(p=0.1, inplace=False)
      )
    )
    (norm): LayerNorm((16,), eps=1e-05, elementwise_affine=True, bias=True)
  )
))-");
}

TEST_CASE("nn print: a Transformer layer's Dropout modules are the ones its forward applies") {
  manual_seed(0);
  nn::TransformerEncoderLayer<8, 2, 16> layer({.dropout = 0.5, .batch_first = true});
  const Tensor<float, shape<dyn, dyn, 8>> x = randn<float, shape<2, 3, 8>>();
  layer.eval();
  const Tensor<float, shape<dyn, dyn, 8>> want = layer(x);
  layer.train();
  layer.self_attn.options.dropout = 0.0;
  const Tensor<float, shape<dyn, dyn, 8>> dropped = layer(x);
  CHECK(max_diff(dropped, want) > 1e-3f);
  layer.dropout.p = layer.dropout1.p = layer.dropout2.p = 0.0;  // training mode, no dropout left
  const Tensor<float, shape<dyn, dyn, 8>> got = layer(x);
  CHECK(max_diff(got, want) < 1e-6f);
  layer.dropout1.p = 0.5;
  layer.dropout1.eval();  // a Dropout module in eval mode drops nothing, as torch's
  CHECK(max_diff(layer(x), want) < 1e-6f);
}

TEST_CASE("nn print: floats as Python's repr") {
  using nn::detail::py_float;
  CHECK(py_float(1e-5) == "1e-05");
  CHECK(py_float(1e-4) == "0.0001");
  CHECK(py_float(1e16) == "1e+16");
  CHECK(py_float(123456789012345678.0) == "1.2345678901234568e+17");
  CHECK(py_float(0.1) == "0.1");
  CHECK(py_float(-0.0) == "-0.0");
  CHECK(py_float(1.5e-7) == "1.5e-07");
  CHECK(py_float(100.0) == "100.0");
  CHECK(py_float(1e22) == "1e+22");
  CHECK(py_float(9999999999999998.0) == "9999999999999998.0");
  CHECK(py_float(0.3) == "0.3");
  CHECK(py_float(2.5e-310) == "2.5e-310");
  CHECK(py_float(1.0 / 3.0) == "0.3333333333333333");
  CHECK(py_float(-20.0) == "-20.0");
}

TEST_CASE("nn::summary") {
  MLP mlp;
  CHECK(nn::summary(mlp) == R"-(Module  Type    Parameters                     Param #
======================================================
(root)  MLP     --                                  --
fc1     Linear  weight [128, 784], bias [128]  100,480
act     ReLU    --                                  --
fc2     Linear  weight [10, 128], bias [10]      1,290
======================================================
Total params: 101,770
Trainable params: 101,770
Non-trainable params: 0
Buffer elements: 0
Params + buffers size (MB): 0.41
======================================================
)-");
  std::ostringstream os;
  os << nn::summary(mlp);
  CHECK(os.str() == nn::summary(mlp));

  Net net;  // torch: 330 parameters, 17 buffer elements (running_mean, running_var, num_batches_tracked)
  net.conv.requires_grad_(false);
  const std::string s = nn::summary(net);
  CHECK(s.find("conv    Conv2d             weight [8, 3, 3, 3], bias [8]      224\n") != std::string::npos);
  CHECK(s.find("bn      BatchNorm2d        weight [8], bias [8]                16\n") != std::string::npos);
  CHECK(s.find("Total params: 330\nTrainable params: 106\nNon-trainable params: 224\nBuffer elements: 17\n") !=
        std::string::npos);
  // (330 + 16) float32 elements and one int64: 1392 bytes
  CHECK(s.find("Params + buffers size (MB): 0.00\n") != std::string::npos);
}

TEST_CASE("sizes print as torch.Size") {
  const Tensor<float, shape<2, 3>> t = zeros<float, shape<2, 3>>();
  CHECK(to_string(t.sizes()) == "torch.Size([2, 3])");
  const Tensor<float, shape<>> s = zeros<float, shape<>>();
  CHECK(to_string(s.sizes()) == "torch.Size([])");
  const Tensor<float, shape<dyn, 4, 5>> u = zeros<float, shape<dyn, 4, 5>>(2);
  std::ostringstream os;
  os << u.sizes() << " " << s.sizes();
  CHECK(os.str() == "torch.Size([2, 4, 5]) torch.Size([])");
  nn::Linear<4, 2> lin;
  std::ostringstream os2;
  os2 << lin.weight.sizes() << " ";  // std::array<int64_t, 2>: this file's own operator<< wins
  os2 << lin.parameters()[0].sizes();  // tensor_ref::sizes(): std::vector<int64_t>
  CHECK(os2.str() == "mine torch.Size([2, 4])");
  CHECK(to_string(lin.weight.sizes()) == "torch.Size([2, 4])");
  CHECK(sizes_to_string(std::vector<std::int64_t>{7}) == "torch.Size([7])");
}
