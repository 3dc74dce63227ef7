"""strata.data: datasets and the DataLoader (C++; batches are prepared without the GIL)."""
from strata._C.data import DataLoader, Dataset, FashionMNIST, TensorDataset  # noqa: F401
