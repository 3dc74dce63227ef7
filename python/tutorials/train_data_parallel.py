"""Data-parallel training from Python, as with torch.distributed: mpirun starts the ranks, each trains the same small
network on its shard of every batch (DistributedSampler), and DistributedDataParallel averages the gradients during
backward. Two ranks with 32 examples a step each see the same 64 examples per step as one process with 64, so both
end with the same weights, to rounding (python/tests/test_distributed.py checks it). From the build tree:

    PYTHONPATH=build/cpu/python mpirun -np 2 python3 <this> [--out weights.pt]   (as root: --allow-run-as-root)
    PYTHONPATH=build/cpu/python python3 <this>                                              (one process)
"""
import argparse

import strata
import strata.distributed as dist
from strata import nn
from strata.nn import functional as F
from strata.nn.parallel import DistributedDataParallel as DDP
from strata.utils.data import DataLoader, TensorDataset
from strata.utils.data.distributed import DistributedSampler

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--global-batch", type=int, default=64, help="examples per step over all ranks")
parser.add_argument("--out", help="where rank 0 saves the trained weights")
args = parser.parse_args()

dist.init_process_group()  # the world mpirun launched; without mpirun, a world of one
rank, world_size = dist.get_rank(), dist.get_world_size()

# A synthetic problem, the same on every rank: 1024 points in 8 dimensions, 4 classes cut by a random linear map.
strata.manual_seed(0)
x = strata.randn(1024, 8)
y = (x @ strata.randn(8, 4)).argmax(1)
dataset = TensorDataset(x, y)
sampler = DistributedSampler(dataset, shuffle=True, seed=0)  # this rank's shard; num_replicas and rank from dist
loader = DataLoader(dataset, batch_size=args.global_batch // world_size, sampler=sampler)

strata.manual_seed(1)  # the same start on every rank (DDP broadcasts rank 0's weights anyway)
model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4))
ddp = DDP(model)
optimizer = strata.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)

for epoch in range(args.epochs):
    sampler.set_epoch(epoch)  # a new order each epoch, the same on every rank
    for images, labels in loader:
        loss = F.cross_entropy(ddp(images), labels)
        optimizer.zero_grad()
        loss.backward()  # the gradients arrive averaged over the ranks
        optimizer.step()
    mean = loss.detach().clone()
    dist.all_reduce(mean, op=dist.ReduceOp.AVG)
    if rank == 0:
        print(f"epoch {epoch + 1}: loss {mean.item():.4f} (the last step's, averaged over a world of {world_size})")

if rank == 0 and args.out:
    strata.save(model.state_dict(), args.out)
dist.destroy_process_group()
