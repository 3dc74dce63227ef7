"""strata.utils.data: as torch.utils.data (datasets, samplers, collation and the DataLoader)."""
from strata._C import Generator  # noqa: F401
from strata.utils.data.collate import default_collate, default_convert  # noqa: F401
from strata.utils.data.dataloader import DataLoader  # noqa: F401
from strata.utils.data.dataset import (ConcatDataset, Dataset, IterableDataset, Subset, TensorDataset,  # noqa: F401
                                       random_split)
from strata.utils.data.sampler import (BatchSampler, RandomSampler, Sampler, SequentialSampler,  # noqa: F401
                                       SubsetRandomSampler)
from strata.utils.data.worker import WorkerInfo, get_worker_info  # noqa: F401
from strata.utils.data.distributed import DistributedSampler  # noqa: F401
