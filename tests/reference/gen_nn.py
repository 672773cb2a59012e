#!/usr/bin/env python3
"""Writes nn.txt: PyTorch torch.nn modules' state_dicts (keys "p:<name>", torch's dotted names),
inputs "x" and outputs "y" (tests/test_nn_modules.cpp loads each state_dict by name into the tenet
module and compares the forward). BatchNorm cases also hold the running statistics after the
training-mode forward ("after:<name>") and an eval-mode output "y_eval".

    python3 tests/reference/gen_nn.py [output path]
"""
import torch
import torch.nn as nn

from reference_writer import ReferenceFile

ref = ReferenceFile()
torch.manual_seed(0)


def case(name, module, *inputs, train=False, extra=None):
    module.train(train)
    sd = {f"p:{k}": v.detach().clone() for k, v in module.state_dict().items()}
    ins = {("x" if i == 0 else f"x{i + 1}"): t for i, t in enumerate(inputs)}
    with torch.no_grad():
        y = module(*inputs)
    out = dict(sd, **ins, y=y)
    if extra:
        out.update(extra(module))
    ref.case(name, **out)


def randomize(m):
    # non-trivial affine parameters and running stats, so that loading by name is tested
    with torch.no_grad():
        for k, v in m.state_dict().items():
            if v.dtype.is_floating_point:
                v.copy_(torch.rand_like(v) + 0.5 if "var" in k or "weight" in k else torch.randn_like(v))


case("linear", nn.Linear(5, 3), torch.randn(4, 5))
case("linear_nobias", nn.Linear(5, 3, bias=False), torch.randn(4, 5))
case("bilinear", nn.Bilinear(3, 4, 2), torch.randn(5, 3), torch.randn(5, 4))
emb = nn.Embedding(6, 3, padding_idx=1)
case("embedding", emb, torch.tensor([[0, 1, 5], [2, 2, 4]]))
ln = nn.LayerNorm(6)
randomize(ln)
case("layer_norm", ln, torch.randn(3, 6))
rms = nn.RMSNorm(6)
randomize(rms)
case("rms_norm", rms, torch.randn(3, 6))
gn = nn.GroupNorm(2, 4)
randomize(gn)
case("group_norm", gn, torch.randn(3, 4, 5))
for nm, bn, x in (("batch_norm1d", nn.BatchNorm1d(3), torch.randn(6, 3)),
                  ("batch_norm1d_3d", nn.BatchNorm1d(3), torch.randn(4, 3, 5)),
                  ("batch_norm2d", nn.BatchNorm2d(2), torch.randn(3, 2, 4, 5))):
    randomize(bn)
    def after(m, x=x):
        d = {f"after:{k}": v.clone() for k, v in m.state_dict().items()}
        m.eval()
        with torch.no_grad():
            d["y_eval"] = m(x)
        return d
    case(nm, bn, x, train=True, extra=after)
bn = nn.BatchNorm1d(3, momentum=None)
randomize(bn)
def twice(m):
    x2 = torch.randn(6, 3)
    with torch.no_grad():
        y2 = m(x2)
    return {"x_second": x2, "y_second": y2, **{f"after:{k}": v.clone() for k, v in m.state_dict().items()}}
case("batch_norm1d_cumulative", bn, torch.randn(6, 3), train=True, extra=twice)
case("conv1d", nn.Conv1d(4, 6, 3, stride=2, padding=1, groups=2), torch.randn(2, 4, 9))
case("conv2d", nn.Conv2d(3, 4, (3, 2), stride=(2, 1), padding=(1, 0), dilation=(1, 2)), torch.randn(2, 3, 7, 8))
case("conv_transpose2d", nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2),
     torch.randn(2, 4, 3, 5))
case("max_pool2d", nn.MaxPool2d(3, stride=2, padding=1), torch.randn(2, 3, 7, 6))
case("avg_pool2d", nn.AvgPool2d(2, ceil_mode=True, count_include_pad=False), torch.randn(2, 3, 5, 7))
case("adaptive_avg_pool2d", nn.AdaptiveAvgPool2d((3, 2)), torch.randn(2, 3, 7, 5))
case("flatten", nn.Flatten(), torch.randn(2, 3, 2, 2))
case("sequential", nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 3), nn.LogSoftmax(dim=1)), torch.randn(5, 4))
x = torch.randn(4, 5) * 3
for nm, m in (("relu", nn.ReLU()), ("gelu_tanh", nn.GELU(approximate="tanh")), ("silu", nn.SiLU()),
              ("tanh", nn.Tanh()), ("sigmoid", nn.Sigmoid()), ("leaky_relu", nn.LeakyReLU(0.2)),
              ("elu", nn.ELU(0.7)), ("softplus", nn.Softplus(2.0, 5.0)), ("hardtanh", nn.Hardtanh(-0.5, 2.0)),
              ("mish", nn.Mish()), ("softmax", nn.Softmax(dim=1))):
    case("act_" + nm, m, x)
ref.write("nn.txt")
