"""strata.data: torch.utils.data's names (strata.utils.data) and the datasets Strata reads itself."""
from strata import _C
from strata.utils.data import *  # noqa: F401,F403
from strata.utils.data import Dataset


class FashionMNIST(Dataset):
    """Fashion-MNIST from `root` (Debian's dataset-fashion-mnist by default): ds[i] is (u8 image [28, 28], int label)
    as stored, or what `transform` and `target_transform` make of them (torchvision's arguments). The files must be
    there: Strata downloads nothing, so `download` is accepted and ignored."""

    classes = _C.data.FashionMNIST.classes

    def __init__(self, root="/usr/share/datasets/fashion-mnist", train=True, transform=None, target_transform=None,
                 download=False):
        self.root = str(root)
        self.train = train
        self.transform = transform
        self.target_transform = target_transform
        self._cpp = _C.data.FashionMNIST(self.root, train)

    def _batches_in_cpp(self):
        plain = type(self) is FashionMNIST and self.transform is None and self.target_transform is None
        return self._cpp if plain else None

    @property
    def data(self):
        return self._cpp.data

    @property
    def targets(self):
        return self._cpp.targets

    def __len__(self):
        return len(self._cpp)

    def __getitem__(self, index):
        image, target = self._cpp[index]
        target = int(target.item())
        if self.transform is not None:
            image = self.transform(image)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return image, target
