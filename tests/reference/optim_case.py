"""One optimizer case for gen_optim.py and gen_optim_half.py.

Two parameters ("p0" [3, 4], "p1" [5]) and a fixed sequence of gradients ("g<step>_<i>", odd steps
scaled by 0.1), the parameters after each step ("out<step>_<i>") and the final state buffers
("state_<i>_<name>"; "state_<i>_step" as a float64 scalar). 16-bit cases draw in float32 and
convert (the values, and the scaling, in float32, then rounded once).
"""
import torch


def opt_case(ref, name, make, dtype=torch.float64, steps=6):
    g = torch.Generator().manual_seed(sum(map(ord, name)))
    wide = dtype if dtype.itemsize >= 4 else torch.float32

    def draw(shape, scale=1.0):
        t = torch.randn(shape, generator=g, dtype=wide)
        return (t * scale if scale != 1.0 else t).to(dtype)

    p0 = draw((3, 4))
    p1 = draw((5,))
    params = [p0.clone().requires_grad_(), p1.clone().requires_grad_()]
    opt = make(params)
    data = dict(p0=p0, p1=p1)
    for s in range(steps):
        for i, p in enumerate(params):
            gr = draw(p.shape, 0.1 if s % 2 else 1.0)
            p.grad = gr.clone()
            data[f"g{s}_{i}"] = gr
        opt.step()
        for i, p in enumerate(params):
            data[f"out{s}_{i}"] = p.detach().clone()
    for i, p in enumerate(params):
        for k, v in opt.state[p].items():
            if torch.is_tensor(v) and v.dim() > 0:
                data[f"state_{i}_{k}"] = v.clone()
            elif k == "step":
                data[f"state_{i}_step"] = torch.tensor(float(v), dtype=torch.float64)
    ref.case(name, **data)
