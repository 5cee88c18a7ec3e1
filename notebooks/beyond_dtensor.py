"""Two processes, one DTensor: run with `torchrun --nproc-per-node 2 beyond_dtensor.py`.

Notebook 05 shows its output from two H200 GPUs (NCCL); without GPUs it runs on the CPU (gloo).
Each process holds one shard; a jitted function runs on the shards where it is and returns a DTensor.
"""
from __future__ import annotations

import os

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor

import jiter_magic

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # NVLink multicast off, as on the lent H200 machines
cuda = torch.cuda.is_available() and torch.cuda.device_count() >= int(os.environ.get("WORLD_SIZE", "1"))
rank = int(os.environ.get("RANK", "0"))
if cuda:
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
dist.init_process_group("nccl" if cuda else "gloo")
mesh = init_device_mesh("cuda" if cuda else "cpu", (dist.get_world_size(),))

axpy = jiter_magic.create_jit_fn("template <typename T> T axpy(T x, T y, T alpha) { return alpha * x + y; }",
                                 alpha=2.0)
axpy.def_backward("template <typename T> void axpy_bwd(T x, T y, T alpha, T g, T& gx, T& gy) "
                  "{ gx = alpha * g; gy = g; }")

full_x = torch.arange(12.0).reshape(6, 2)
x = distribute_tensor(full_x, mesh, [Shard(0)])                     # rows split over the processes
bias = distribute_tensor(torch.tensor([100.0, 200.0]), mesh, [Replicate()])
y = axpy(x, bias)
if rank == 0:
    print(f"{type(y).__name__} on {mesh.device_type} x{mesh.size()}: placements {y.placements}, "
          f"global shape {tuple(y.shape)}, local shape {tuple(y.to_local().shape)}")
full = y.full_tensor()
if rank == 0:
    print("equals the call on full tensors:", torch.equal(full.cpu(), 2 * full_x + torch.tensor([100.0, 200.0])))

# Partial (a pending sum over processes) is reduced first: an elementwise function is not linear.
partial = DTensor.from_local(torch.ones(6, 2, device=mesh.device_type), mesh, [Partial()])
z = axpy(partial, x)
first_row = z.full_tensor()[0].tolist()  # every process takes part in gathering
if rank == 0:
    print(f"from Partial: placements {z.placements}, z[0] = {first_row}")

# Gradients flow back to each shard.
leaf = distribute_tensor(full_x, mesh, [Shard(0)]).requires_grad_()
axpy(leaf, bias, alpha=3.0).sum().backward()
all_three = bool((leaf.grad.full_tensor() == 3).all())
if rank == 0:
    print(f"grad placements {leaf.grad.placements}, grad = 3 everywhere: {all_three}")
dist.destroy_process_group()
