#!/usr/bin/env python3
"""The bench/*.cpp workloads in PyTorch, eager and torch.compile, on the CPU.

Same sizes, same metrics and the same harness as bench/harness.hpp: one warm-up call, then
calls until >= 0.5 s and >= 5 runs, the median. torch.set_num_threads is the OpenMP thread
count (OMP_NUM_THREADS if set, else os.cpu_count()). Prints one JSON line per result. When
torch.compile fails for a workload, prints a JSON line with "value": null and "error" instead
of stopping.

Usage: python3 bench/torch_twin.py [--filter REGEX] [--no-compile]
(here: `source /tmp/torchenv.sh` first; on a normal machine `pip install torch` suffices)
"""
import argparse
import json
import os
import re
import statistics
import sys
import time

import torch


def measure(f, min_seconds=0.5, min_runs=5):
    f()  # warm-up (and, for torch.compile, the compilation)
    times = []
    while sum(times) < min_seconds or len(times) < min_runs:
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def report(workload, impl, metric, value, **extra):
    line = {"workload": workload, "impl": impl, "device": "cpu", "metric": metric,
            "value": None if value is None else float(f"{value:.4g}")}
    line.update(extra)
    print(json.dumps(line), flush=True)


def gelu_affine(x, a: float, b: float, c: float):
    return torch.nn.functional.gelu(x * a + b) * c


def resnet_param(seed, scale, offset, *sizes):
    """bench/resnet_stage.hpp's make_param: scale * sin(0.7853 i + 1.618 seed) + offset, as float."""
    n = 1
    for v in sizes:
        n *= v
    i = torch.arange(n, dtype=torch.float64)
    return (scale * torch.sin(0.7853 * i + 1.618 * seed) + offset).float().reshape(sizes)


def resnet_stage1_params():
    def conv_bn(seed, out, inp, k):
        return (resnet_param(seed, (2.0 / (inp * k * k)) ** 0.5, 0.0, out, inp, k, k),
                resnet_param(seed + 1, 0.25, 1.0, out, 1, 1), resnet_param(seed + 2, 0.1, 0.0, out, 1, 1))
    return [conv_bn(1, 64, 3, 7)] + [conv_bn(s, 64, 64, 3) for s in (11, 21, 31, 41)]


def resnet_stage1(x, params):
    """ResNet-18's first stage with batch norm in eval mode as x * scale + shift (bench/resnet_stage.hpp)."""
    F = torch.nn.functional
    w, sc, sh = params[0]
    y = torch.relu(F.conv2d(x, w, stride=2, padding=3) * sc + sh)
    y = F.max_pool2d(y, 3, stride=2, padding=1)
    for b in range(2):
        (w1, s1, h1), (w2, s2, h2) = params[1 + 2 * b], params[2 + 2 * b]
        z = torch.relu(F.conv2d(y, w1, padding=1) * s1 + h1)
        y = torch.relu(F.conv2d(z, w2, padding=1) * s2 + h2 + y)
    return y


def make_mlp():
    nn = torch.nn
    return nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))


def adamw_step_inputs():
    """bench/train_mlp.cpp's optimizer step: AdamW over the MLP's parameters, gradients set once."""
    model = make_mlp()
    for p in model.parameters():
        p.grad = torch.randn_like(p) * 1e-3
    return (torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01),)


def mlp_train_inputs():
    model = make_mlp()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    return model, opt, torch.randn(256, 784), torch.randint(0, 10, (256,))


def mlp_train_step(model, opt, x, y):
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss


def sdpa_inputs(grad=False):
    q, k, v = (torch.randn(4, 12, 1024, 64) for _ in range(3))
    if grad:
        return tuple(t.requires_grad_() for t in (q, k, v)) + (torch.randn(4, 12, 1024, 64),)
    return q, k, v


def sdpa_math(q, k, v):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    with sdpa_kernel(SDPBackend.MATH):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v)


def sdpa_fwd_bwd(q, k, v, g, causal):
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    (out * g).sum().backward()
    return q.grad


class Gpt2Small:
    """bench/gpt2.cpp's model: GPT-2 small as HF's GPT2LMHeadModel computes it (Conv1D as addmm with
    [in, out] weights, F.scaled_dot_product_attention as HF's default "sdpa" attention, gelu tanh,
    tied lm_head), random weights N(0, 0.02), with preallocated KV caches [1, 12, 1024, 64]."""
    V, N_CTX, C, H, L = 50257, 1024, 768, 12, 12

    def __init__(self):
        def n(*s, std=0.02):
            return torch.randn(*s) * std
        C, L = self.C, self.L
        self.wte, self.wpe = n(self.V, C), n(self.N_CTX, C, std=0.01)
        self.layers = [dict(ln1=(torch.ones(C), torch.zeros(C)), attn=(n(C, 3 * C), torch.zeros(3 * C)),
                            proj=(n(C, C, std=0.02 / (2 * L) ** 0.5), torch.zeros(C)),
                            ln2=(torch.ones(C), torch.zeros(C)), fc=(n(C, 4 * C), torch.zeros(4 * C)),
                            fc_proj=(n(4 * C, C, std=0.02 / (2 * L) ** 0.5), torch.zeros(C))) for _ in range(L)]
        self.ln_f = (torch.ones(C), torch.zeros(C))
        hd = C // self.H
        self.k_cache = [torch.zeros(1, self.H, self.N_CTX, hd) for _ in range(L)]
        self.v_cache = [torch.zeros(1, self.H, self.N_CTX, hd) for _ in range(L)]

    def forward(self, idx, pos: int = 0, use_cache: bool = False, last_only: bool = False):
        F = torch.nn.functional
        B, T = idx.shape
        C, H = self.C, self.H
        x = self.wte[idx] + self.wpe[pos:pos + T]

        def conv1d(x, wb):
            return torch.addmm(wb[1], x.view(-1, x.size(-1)), wb[0]).view(*x.shape[:-1], wb[0].size(1))
        for i, p in enumerate(self.layers):
            h = F.layer_norm(x, (C,), *p["ln1"], 1e-5)
            q, k, v = conv1d(h, p["attn"]).split(C, dim=2)
            q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))
            if use_cache:
                self.k_cache[i][:, :, pos:pos + T] = k
                self.v_cache[i][:, :, pos:pos + T] = v
                k, v = self.k_cache[i][:, :, :pos + T], self.v_cache[i][:, :, :pos + T]
            y = F.scaled_dot_product_attention(q, k, v, is_causal=pos == 0)
            x = x + conv1d(y.transpose(1, 2).reshape(B, T, C), p["proj"])
            h = F.layer_norm(x, (C,), *p["ln2"], 1e-5)
            x = x + conv1d(F.gelu(conv1d(h, p["fc"]), approximate="tanh"), p["fc_proj"])
        if last_only:
            x = x[:, -1:]
        return F.layer_norm(x, (C,), *self.ln_f, 1e-5) @ self.wte.T

    def generate(self, prompt, n, step):
        """n greedy tokens after prompt [1, P]: the prompt once, then one position per token."""
        ids = prompt
        logits = step(prompt, 0)
        out = []
        for i in range(n):
            nxt = logits[:, -1].argmax(-1, keepdim=True)
            out.append(nxt)
            if i + 1 < n:
                logits = step(nxt, prompt.size(1) + i)
        return torch.cat([ids] + out, dim=1)


def gpt2_gen(model, prompt):
    """bench/gpt2.cpp's generation: 128 greedy tokens after the prompt, eager."""
    return model.generate(prompt, 128, lambda idx, pos: model.forward(idx, pos, use_cache=True, last_only=True))


def gpt2_gen_compiled():
    """The same with the one-step forward compiled (dynamic shapes: one graph for the prefill and
    one for every position), not the loop (dynamo would unroll its 128 steps)."""
    step = torch.compile(lambda m, idx, pos: m.forward(idx, pos, use_cache=True, last_only=True), dynamic=True)
    return lambda model, prompt: model.generate(prompt, 128, lambda idx, pos: step(model, idx, pos))


gpt2_gen.compile = gpt2_gen_compiled


# workloads that need autograd (run outside inference_mode)
TRAINING = {"adamw_step_mlp784", "mlp_train_b256_adamw", "mlp_train_b256_adamw_compiled",
            "sdpa_b4h12_l1024_e64_fwdbwd", "sdpa_b4h12_l1024_e64_causal_fwdbwd",
            "func_jacrev_tanh_mlp256", "func_jacfwd_tanh_mlp256", "func_hessian_64",
            "func_per_sample_grad_mlp784_b64"}


def func_mlp256():
    """bench/func.cpp's 256 -> 256 tanh MLP and its input."""
    w1, w2 = torch.randn(256, 256) / 16, torch.randn(256, 256) / 16
    b1, b2, x = torch.randn(256), torch.randn(256), torch.randn(256)
    return (lambda v: torch.tanh(w2 @ torch.tanh(w1 @ v + b1) + b2)), x


def func_hessian_inputs():
    w, x = torch.randn(64, 64) * 0.125, torch.randn(64)
    return (lambda v: (torch.tanh(w @ v) ** 2).sum() + (v ** 4).sum()), x


def func_per_sample_inputs():
    """bench/func.cpp's MLP 784 -> 512 -> 10, 64 samples: vmap(grad) over the batch."""
    model = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
    params = {k: v.detach() for k, v in model.named_parameters()}
    xs, ys = torch.randn(64, 784), torch.randint(0, 10, (64,))

    def loss(p, x, y):
        out = torch.func.functional_call(model, p, (x.unsqueeze(0),))
        return torch.nn.functional.cross_entropy(out, y.unsqueeze(0))

    per_sample = torch.func.vmap(torch.func.grad(loss), in_dims=(None, 0, 0))
    return per_sample, params, xs, ys


# workloads timed over fewer runs than 5 (a run takes seconds), as their bench/*.cpp
MIN_RUNS = {"gpt2_small_gen128_p16": 3}


def workloads():
    """(name, metric, make_inputs() -> args, fn, amount) where metric = amount / t."""
    n = 16 * 1024 * 1024
    yield ("gelu_affine_16Mi", "GB/s",
           lambda: (torch.randn(n), 1.5, 0.25, 0.5), gelu_affine, 8.0 * n / 1e9)
    n = 64 * 1024 * 1024
    yield ("sum_64Mi", "GB/s", lambda: (torch.rand(n),), lambda x: x.sum(), 4.0 * n / 1e9)
    n = 4096
    yield ("softmax_4096x4096", "GB/s", lambda: (torch.randn(n, n),),
           lambda x: torch.softmax(x, dim=-1), 8.0 * n * n / 1e9)
    yield ("var_4096x4096", "GB/s", lambda: (torch.randn(n, n),),
           lambda x: torch.var(x, dim=-1), 4.0 * n * n / 1e9)
    n = 2048
    yield ("sgemm_2048", "GFLOP/s", lambda: (torch.randn(n, n), torch.randn(n, n)),
           lambda a, b: a @ b, 2.0 * n ** 3 / 1e9)
    F = torch.nn.functional
    rows, cols = 8192, 1024
    yield ("layer_norm_8192x1024", "GB/s",
           lambda: (torch.randn(rows, cols), torch.randn(cols), torch.randn(cols)),
           lambda x, w, b: F.layer_norm(x, (cols,), w, b), 8.0 * rows * cols / 1e9)
    n, d, h = 512, 1024, 4096
    yield ("mlp_block_512x1024_h4096", "GFLOP/s",
           lambda: (torch.randn(n, d), torch.randn(h, d) * 0.03, torch.randn(h), torch.randn(d, h) * 0.015,
                    torch.randn(d)),
           lambda x, w1, b1, w2, b2: x + F.linear(F.gelu(F.linear(x, w1, b1)), w2, b2), 4.0 * n * d * h / 1e9)
    n = 2048
    yield ("linear_bias_gelu_2048", "GFLOP/s",
           lambda: (torch.randn(n, n), torch.randn(n, n) * 0.02, torch.randn(n)),
           lambda x, w, b: F.gelu(F.linear(x, w, b)), 2.0 * n ** 3 / 1e9)
    yield ("adamw_step_mlp784", "steps/s", adamw_step_inputs, lambda opt: opt.step(), 1.0)
    yield ("mlp_train_b256_adamw", "steps/s", mlp_train_inputs, mlp_train_step, 1.0)
    # the same step; tenet's row is its compiled training step (compile + backward_of)
    yield ("mlp_train_b256_adamw_compiled", "steps/s", mlp_train_inputs, mlp_train_step, 1.0)
    # bench/sdpa.cpp: nominal FLOPs 4 B H L S E (halved when causal); forward + backward 3.5 times that
    sdpa_flops = 4.0 * 4 * 12 * 1024 * 1024 * 64 / 1e9
    yield ("sdpa_b4h12_l1024_e64", "GFLOP/s", sdpa_inputs,
           lambda q, k, v: F.scaled_dot_product_attention(q, k, v), sdpa_flops)
    yield ("sdpa_b4h12_l1024_e64_causal", "GFLOP/s", sdpa_inputs,
           lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), sdpa_flops / 2)
    yield ("sdpa_b4h12_l1024_e64_math", "GFLOP/s", sdpa_inputs, sdpa_math, sdpa_flops)
    yield ("sdpa_b4h12_l1024_e64_fwdbwd", "GFLOP/s", lambda: sdpa_inputs(True),
           lambda q, k, v, g: sdpa_fwd_bwd(q, k, v, g, False), 3.5 * sdpa_flops)
    yield ("sdpa_b4h12_l1024_e64_causal_fwdbwd", "GFLOP/s", lambda: sdpa_inputs(True),
           lambda q, k, v, g: sdpa_fwd_bwd(q, k, v, g, True), 3.5 * sdpa_flops / 2)
    # bench/gpt2.cpp: GPT-2 small, random weights; tokens/s
    yield ("gpt2_small_fwd_b1_t256", "tokens/s", lambda: (Gpt2Small(), torch.randint(0, Gpt2Small.V, (1, 256))),
           lambda model, idx: model.forward(idx), 256.0)
    yield ("gpt2_small_gen128_p16", "tokens/s", lambda: (Gpt2Small(), torch.randint(0, Gpt2Small.V, (1, 16))),
           gpt2_gen, 128.0)
    yield ("func_jacrev_tanh_mlp256", "jacobians/s", func_mlp256, lambda f, x: torch.func.jacrev(f)(x), 1.0)
    yield ("func_jacfwd_tanh_mlp256", "jacobians/s", func_mlp256, lambda f, x: torch.func.jacfwd(f)(x), 1.0)
    yield ("func_hessian_64", "hessians/s", func_hessian_inputs, lambda f, x: torch.func.hessian(f)(x), 1.0)
    yield ("func_per_sample_grad_mlp784_b64", "batches/s", func_per_sample_inputs,
           lambda fn, p, xs, ys: fn(p, xs, ys), 1.0)
    # bench/conv.cpp: GFLOP/s counted as direct convolution
    yield ("conv3x3_64_56_b8", "GFLOP/s", lambda: (torch.randn(8, 64, 56, 56), torch.randn(64, 64, 3, 3) * 0.1),
           lambda x, w: F.conv2d(x, w, padding=1), 2.0 * 8 * 64 * 56 * 56 * 64 * 9 / 1e9)
    yield ("conv7x7s2_stem_b8", "GFLOP/s", lambda: (torch.randn(8, 3, 224, 224), torch.randn(64, 3, 7, 7) * 0.1),
           lambda x, w: F.conv2d(x, w, stride=2, padding=3), 2.0 * 8 * 64 * 112 * 112 * 3 * 49 / 1e9)
    params = resnet_stage1_params()
    yield ("resnet18_stage1_b8", "img/s", lambda: (resnet_param(0, 1.0, 0.0, 8, 3, 224, 224),),
           lambda x: resnet_stage1(x, params), 8.0)
    yield ("resnet18_stage1_b1", "img/s", lambda: (resnet_param(0, 1.0, 0.0, 1, 3, 224, 224),),
           lambda x: resnet_stage1(x, params), 1.0)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--filter", default="", help="regex on the workload name")
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    args = parser.parse_args()

    threads = int(os.environ.get("OMP_NUM_THREADS", os.cpu_count() or 1))
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    pattern = re.compile(args.filter)

    for name, metric, make_inputs, fn, amount in workloads():
        if not pattern.search(name):
            continue
        inputs = make_inputs()
        mode = torch.enable_grad if name in TRAINING else torch.inference_mode
        runs = MIN_RUNS.get(name, 5)
        with mode():
            t = measure(lambda: fn(*inputs), min_runs=runs)
        report(name, "torch-eager", metric, amount / t)
        if args.no_compile:
            continue
        try:
            torch._dynamo.reset()
            # a workload may say how it is compiled (gpt2 generation: the step, not the loop)
            compiled = fn.compile() if hasattr(fn, "compile") else torch.compile(fn)
            with mode():
                t = measure(lambda: compiled(*inputs), min_runs=runs)
            report(name, "torch-compile", metric, amount / t)
        except Exception as e:  # noqa: BLE001 - any compile failure is "missing", not fatal
            msg = f"{type(e).__name__}: {e}".splitlines()[0][:300]
            report(name, "torch-compile", metric, None, error=msg)
            print(f"torch_twin: torch.compile failed for {name}: {msg}", file=sys.stderr)


if __name__ == "__main__":
    main()
