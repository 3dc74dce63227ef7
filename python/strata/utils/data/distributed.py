"""strata.utils.data.distributed: DistributedSampler, as torch.utils.data.distributed's."""

from strata import _C
from strata.utils.data.sampler import Sampler


class DistributedSampler(Sampler):
    """One rank's shard of a dataset, a new order each epoch (call set_epoch): every rank draws the same permutation
    from (seed, epoch) and takes every num_replicas-th index from its rank on, padded with the order's beginning to a
    multiple of num_replicas (or, with drop_last, cut), so every rank runs the same number of steps. The order is
    strata-train's (strata/data/distributed_sampler.h), not PyTorch's. num_replicas and rank default to
    strata.distributed's."""

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0, drop_last=False):
        from strata import distributed
        if num_replicas is None:
            num_replicas = distributed.get_world_size()
        if rank is None:
            rank = distributed.get_rank()
        if not isinstance(num_replicas, int) or num_replicas < 1:
            raise ValueError(f"DistributedSampler: num_replicas must be a positive integer, not {num_replicas!r}")
        if not isinstance(rank, int) or rank < 0 or rank >= num_replicas:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.shuffle = shuffle
        self.seed = seed
        self.drop_last = drop_last
        self.epoch = 0
        self.num_samples = _C._distributed.sampler_size(len(dataset), num_replicas, rank, drop_last)
        self.total_size = self.num_samples * num_replicas

    def __iter__(self):
        return iter(_C._distributed.sampler_indices(len(self.dataset), self.num_replicas, self.rank, self.shuffle,
                                                     self.seed, self.drop_last, self.epoch))

    def __len__(self):
        return self.num_samples

    def set_epoch(self, epoch):
        """The next iteration visits epoch `epoch`'s order."""
        self.epoch = epoch
