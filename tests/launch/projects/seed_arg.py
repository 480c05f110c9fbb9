"""A plain PyTorch loop that takes its seed on the command line and only prints its result."""

import argparse
import sys

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, required=True)
parser.add_argument("--out", required=True)
args = parser.parse_args()
torch.manual_seed(args.seed)
w = torch.randn(4)
with open(args.out, "w") as handle:
    handle.write(str(args.seed))
print(f"seen argv={sys.argv[1:]}")
print(f"result: score={float(w.sum()):.8f}")
