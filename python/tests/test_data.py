import os

import pytest

import strata
from strata.data import DataLoader, FashionMNIST, TensorDataset


def test_tensor_dataset_and_loader_batches():
    ds = TensorDataset(strata.arange(10, dtype=strata.float32).reshape(10, 1), strata.arange(10))
    assert len(ds) == 10
    x, y = ds[3]
    assert x.tolist() == [3.0] and y.item() == 3
    with pytest.raises(IndexError):
        ds[10]
    loader = DataLoader(ds, batch_size=4)
    assert len(loader) == 3
    batches = [(x.shape, y.tolist()) for x, y in loader]
    assert batches == [((4, 1), [0, 1, 2, 3]), ((4, 1), [4, 5, 6, 7]), ((2, 1), [8, 9])]
    assert len(list(DataLoader(ds, batch_size=4, drop_last=True))) == 2


def test_shuffling_depends_on_seed_and_epoch_only():
    ds = TensorDataset(strata.zeros(20, 1), strata.arange(20))

    def order(epoch, prefetch):
        loader = DataLoader(ds, batch_size=20, shuffle=True, seed=5, prefetch=prefetch)
        loader.set_epoch(epoch)
        return next(iter(loader))[1].tolist()

    assert order(0, 0) == order(0, 2)
    assert order(0, 0) != order(1, 0)
    assert sorted(order(1, 0)) == list(range(20))


@pytest.mark.skipif(not os.path.exists("/usr/share/datasets/fashion-mnist"),
                    reason="Fashion-MNIST is not installed (Debian's dataset-fashion-mnist)")
def test_fashion_mnist():
    test = FashionMNIST(train=False)
    assert len(test) == 10000 and test.data.shape == (10000, 28, 28) and test.data.dtype == strata.uint8
    assert FashionMNIST.classes[9] == "Ankle boot"
    x, y = next(iter(DataLoader(test, batch_size=64, prefetch=2)))
    assert x.shape == (64, 28, 28) and x.dtype == strata.uint8 and x.tolist() == test.data[:64].tolist()
    x, y = next(iter(DataLoader(test, batch_size=64, prefetch=2, scale_bytes=True)))
    assert x.shape == (64, 28, 28) and x.dtype == strata.float32 and 0.0 <= x.min().item() <= x.max().item() <= 1.0
    assert y.shape == (64,) and y.dtype == strata.int64
    with pytest.raises(OSError):
        FashionMNIST(root="/nonexistent")


@pytest.mark.skipif(not os.path.exists("/usr/share/datasets/fashion-mnist"),
                    reason="Fashion-MNIST is not installed (Debian's dataset-fashion-mnist)")
def test_fashion_mnist_transforms_apply_through_subsets_and_the_loader():
    plain = FashionMNIST(train=False)
    image, label = plain[0]
    assert image.dtype == strata.uint8 and isinstance(label, int)
    scaled = FashionMNIST(train=False, transform=lambda x: x.unsqueeze(0).float() / 255,
                          target_transform=lambda y: y + 100)
    x, y = next(iter(DataLoader(strata.data.Subset(scaled, [0, 1]), batch_size=2)))
    assert x.shape == (2, 1, 28, 28) and x.dtype == strata.float32 and y.tolist() == [label + 100, plain[1][1] + 100]
    x, y = next(iter(DataLoader(strata.data.Subset(plain, [1, 0]), batch_size=2)))
    assert x.dtype == strata.uint8 and y.tolist() == [plain[1][1], label]
