"""PyTorch's twin of bench/first_call.cpp: a fresh process's first, second and steady (median of
200) inference calls of the digits CNN (conv 1->8, relu, max pool, conv 8->16, relu, max pool,
flatten, linear; batch 64 of 1x8x8) and the MLP 64 -> 128 -> 10 (batch 64), in microseconds, with
their minor page faults, under torch.no_grad(). JSON lines as the other benchmarks.

    python3 bench/first_call_torch.py [--threads N]
"""
import argparse
import json
import resource
import time

import torch


def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


class CNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 8, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(8, 16, 3, padding=1)
        self.fc = torch.nn.Linear(16 * 2 * 2, 10)

    def forward(self, x):
        h = torch.max_pool2d(torch.relu(self.conv1(x)), 2)
        h = torch.max_pool2d(torch.relu(self.conv2(h)), 2)
        return self.fc(h.flatten(1))


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(64, 128)
        self.fc2 = torch.nn.Linear(128, 10)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    for workload, model, x in [("first_call_cnn", CNN(), torch.randn(64, 1, 8, 8)),
                               ("first_call_mlp", MLP(), torch.randn(64, 64))]:
        model.eval()
        calls = []
        with torch.no_grad():
            for _ in range(202):
                f0 = faults()
                t0 = time.perf_counter()
                model(x)
                t1 = time.perf_counter()
                calls.append(((t1 - t0) * 1e6, faults() - f0))
        steady = sorted(c[0] for c in calls[2:])[100]
        for name, (us, fl) in (("first", calls[0]), ("second", calls[1])):
            print(json.dumps({"workload": workload, "impl": "torch eager " + name, "metric": "us", "value": us}))
            print(json.dumps({"workload": workload, "impl": "torch eager " + name, "metric": "minor_faults",
                              "value": fl}))
        print(json.dumps({"workload": workload, "impl": "torch eager steady", "metric": "us", "value": steady}))


if __name__ == "__main__":
    main()
