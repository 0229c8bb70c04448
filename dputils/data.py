"""Small data sets available offline, and a CIFAR-10 loader for a local copy.

* :func:`gaussian_blobs`: a synthetic classification task (class means on a sphere, isotropic noise),
  as numpy arrays, deterministic in ``seed``; :func:`train_test_split` splits it.
* :func:`load_cifar10`: reads the standard "CIFAR-10 python version" folder (``data_batch_1`` ...
  ``data_batch_5``, ``test_batch``; pickled dicts with ``b"data"`` (N x 3072 uint8, channel-major
  32x32) and ``b"labels"``).  Nothing is downloaded.
* :func:`write_cifar10_like`: writes a tiny folder in that format (for tests and offline demos).
* :func:`synthetic_images`: CIFAR-shaped (3x32x32) classification data generated offline, for runs of the image
  models when no CIFAR-10 copy is at hand (same shapes and scale, so speed and memory are representative).
* :func:`image_data`: CIFAR-10 from a folder when it holds one, otherwise :func:`synthetic_images`, saying which.
* :func:`read_idx` / :func:`write_idx`: the IDX format of (Fashion-)MNIST, gzip-compressed or plain.
* :func:`fashion_mnist`: Fashion-MNIST from a local folder of IDX files (Debian's ``dataset-fashion-mnist`` puts
  them in ``/usr/share/datasets/fashion-mnist``); nothing is downloaded.
* :func:`sklearn_digits`: scikit-learn's handwritten digits (1797 8x8 images, 10 classes), shipped inside the
  scikit-learn wheel (no download), when scikit-learn is importable.
* :func:`fashion_mnist_data`: training and test data for the small classification runs, from the best data at hand:
  Fashion-MNIST (flattened) when the files are there, else scikit-learn's digits, else :func:`gaussian_blobs`,
  with a ``source`` string saying which data were used. :func:`classification_kind` says which of the three a
  run would get, and :func:`fit_split` / :func:`classification_plan` choose sizes that fit those data.
"""

from __future__ import annotations

import gzip
import math
import os
import pickle
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import DPValueError, check_positive, check_positive_int

__all__ = [
    "gaussian_blobs",
    "train_test_split",
    "load_cifar10",
    "write_cifar10_like",
    "synthetic_images",
    "image_data",
    "CIFAR10_TRAIN_FILES",
    "read_idx",
    "write_idx",
    "fashion_mnist",
    "fashion_mnist_available",
    "fashion_mnist_root",
    "fashion_mnist_data",
    "FASHION_MNIST_DIR",
    "FASHION_MNIST_FILES",
    "sklearn_digits",
    "digits_available",
    "classification_kind",
    "classification_label",
    "fit_split",
    "classification_plan",
    "DataPlan",
    "DATA_KINDS",
    "DIGITS_SIZE",
]

CIFAR10_TRAIN_FILES = tuple(f"data_batch_{i}" for i in range(1, 6))


def gaussian_blobs(
    n: int, dim: int = 20, n_classes: int = 2, separation: float = 2.0, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """``n`` points in ``R^dim``: label y uniform on ``n_classes``; x = mean_y + N(0, I), where the class means
    are random orthogonal vectors of length ``separation/sqrt(2)``, so every two means are exactly
    ``separation`` apart (requires ``n_classes <= dim``).
    Returns (X float32 of shape (n, dim), y int64)."""
    n = check_positive_int("n", n)
    dim = check_positive_int("dim", dim)
    k = check_positive_int("n_classes", n_classes)
    if k < 2:
        raise DPValueError(f"n_classes must be >= 2, got {k}")
    sep = check_positive("separation", separation)
    if k > dim:
        raise DPValueError(f"n_classes must be <= dim ({dim}), got {k}")
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.standard_normal((dim, k)))
    means = (sep / math.sqrt(2)) * q.T  # orthonormal directions: every pair of means is `separation` apart
    y = rng.integers(0, k, size=n)
    X = means[y] + rng.standard_normal((n, dim))
    return X.astype(np.float32), y.astype(np.int64)


def train_test_split(X: np.ndarray, y: np.ndarray, n_train: int, seed: int = 0):
    """A random split with ``n_train`` training points; returns (X_train, y_train, X_test, y_test)."""
    n_train = check_positive_int("n_train", n_train)
    if n_train >= len(X):
        raise DPValueError(f"n_train must be < number of points ({len(X)}), got {n_train}")
    perm = np.random.default_rng(seed).permutation(len(X))
    a, b = perm[:n_train], perm[n_train:]
    return X[a], y[a], X[b], y[b]


def _read_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    with open(path, "rb") as fh:
        d = pickle.load(fh, encoding="bytes")
    data = d.get(b"data", d.get("data"))
    labels = d.get(b"labels", d.get("labels"))
    if data is None or labels is None:
        raise DPValueError(f"{path}: not a CIFAR-10 python batch (needs 'data' and 'labels')")
    data = np.asarray(data, dtype=np.uint8)
    if data.ndim != 2 or data.shape[1] != 3072:
        raise DPValueError(f"{path}: data must have shape (n, 3072), got {data.shape}")
    return data.reshape(-1, 3, 32, 32), np.asarray(labels, dtype=np.int64)


def load_cifar10(folder: str | Path, train: bool = True, normalize: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Images (n, 3, 32, 32) and labels (n,) from a local CIFAR-10 python folder (no download).

    ``normalize`` scales to [0, 1] and standardises each channel with the *public* CIFAR-10 statistics
    (so no private statistic of the training data is computed)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise DPValueError(f"folder must be an existing directory with CIFAR-10 batches, got {str(folder)!r}")
    names = CIFAR10_TRAIN_FILES if train else ("test_batch",)
    files = [folder / n for n in names if (folder / n).is_file()]
    if not files:
        raise DPValueError(f"folder {str(folder)!r} has none of {', '.join(names)}")
    parts = [_read_batch(p) for p in files]
    X = np.concatenate([p[0] for p in parts])
    y = np.concatenate([p[1] for p in parts])
    if not normalize:
        return X, y
    mean = np.array([0.4914, 0.4822, 0.4465], dtype=np.float32)[None, :, None, None]
    std = np.array([0.2470, 0.2435, 0.2616], dtype=np.float32)[None, :, None, None]
    return ((X.astype(np.float32) / 255.0 - mean) / std).astype(np.float32), y


def write_cifar10_like(folder: str | Path, n_per_batch: int = 10, seed: int = 0, batches: int = 1) -> Path:
    """Write ``batches`` training files and a test file in the CIFAR-10 python format (random pixels)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    n = check_positive_int("n_per_batch", n_per_batch)
    for name in list(CIFAR10_TRAIN_FILES[: check_positive_int("batches", batches)]) + ["test_batch"]:
        d = {
            b"data": rng.integers(0, 256, size=(n, 3072), dtype=np.uint8),
            b"labels": rng.integers(0, 10, size=n).tolist(),
        }
        with open(folder / name, "wb") as fh:
            pickle.dump(d, fh)
    return folder


def synthetic_images(
    n: int, n_classes: int = 10, separation: float = 2.0, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """``n`` standardised 3x32x32 "images": label y uniform on ``n_classes``; x = pattern_y + N(0, I), with smooth
    random class patterns (8x8 noise upsampled 4x, so convolutions have spatial structure to find) scaled so that
    every pattern has norm ``separation / sqrt(2)``. Returns (X float32 (n, 3, 32, 32), y int64)."""
    n = check_positive_int("n", n)
    k = check_positive_int("n_classes", n_classes)
    if k < 2:
        raise DPValueError(f"n_classes must be >= 2, got {k}")
    sep = check_positive("separation", separation)
    rng = np.random.default_rng(seed)
    coarse = rng.standard_normal((k, 3, 8, 8))
    patterns = np.repeat(np.repeat(coarse, 4, axis=2), 4, axis=3).reshape(k, -1)
    patterns *= (sep / math.sqrt(2)) / np.linalg.norm(patterns, axis=1, keepdims=True)
    y = rng.integers(0, k, size=n)
    X = (patterns[y] + rng.standard_normal((n, 3 * 32 * 32))).reshape(n, 3, 32, 32)
    return X.astype(np.float32), y.astype(np.int64)


def image_data(folder: str | Path | None, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, str]:
    """The first ``n`` CIFAR-10 training images of ``folder`` if it is a CIFAR-10 python folder, else ``n``
    :func:`synthetic_images`. Returns ``(X, y, source)`` with ``source`` naming what was used, so a run can report
    honestly which data it trained on."""
    n = check_positive_int("n", n)
    if folder is not None and Path(folder).is_dir() and any((Path(folder) / f).is_file() for f in CIFAR10_TRAIN_FILES):
        X, y = load_cifar10(folder)
        if n > len(X):
            raise DPValueError(f"n must be <= the {len(X)} CIFAR-10 training images in {str(folder)!r}, got {n}")
        return X[:n], y[:n], f"cifar10:{folder}"
    X, y = synthetic_images(n, seed=seed)
    return X, y, "synthetic-images"


# ---------------------------------------------------------------------------------------------------------------
# IDX files and Fashion-MNIST

FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist"  # Debian's dataset-fashion-mnist
FASHION_MNIST_FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
_IDX_DTYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def read_idx(path: str | Path) -> np.ndarray:
    """The array stored in an IDX file (the format of MNIST and Fashion-MNIST), gzip-compressed or plain
    (recognised by its first two bytes, not by the name).

    Layout: two zero bytes, a type code (0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32, 0x0D float32,
    0x0E float64), the number of dimensions, then each dimension as a big-endian uint32, then the data
    (big-endian, row-major)."""
    path = Path(path)
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _IDX_DTYPES:
        raise DPValueError(f"{path}: not an IDX file (bad magic number {raw[:4].hex() or 'empty'})")
    ndim = raw[3]
    head = 4 + 4 * ndim
    if len(raw) < head:
        raise DPValueError(f"{path}: truncated IDX header")
    shape = tuple(int(d) for d in np.frombuffer(raw, dtype=">u4", count=ndim, offset=4))
    dtype = np.dtype(_IDX_DTYPES[raw[2]])
    count = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if len(raw) - head != count * dtype.itemsize:
        raise DPValueError(
            f"{path}: IDX header says {shape} of {dtype.name} ({count * dtype.itemsize} bytes), "
            f"the file has {len(raw) - head} bytes of data"
        )
    return np.frombuffer(raw, dtype=dtype, count=count, offset=head).reshape(shape).astype(dtype.newbyteorder("="))


def write_idx(path: str | Path, array: np.ndarray, compress: bool | None = None) -> Path:
    """Write ``array`` as an IDX file (gzip-compressed when ``compress`` is true, or by default when the
    name ends in ``.gz``). For tests and offline demos."""
    path = Path(path)
    a = np.asarray(array)
    codes = {np.dtype(v).newbyteorder("="): k for k, v in _IDX_DTYPES.items()}
    code = codes.get(a.dtype)
    if code is None:
        raise DPValueError(f"dtype {a.dtype} has no IDX type code")
    big = a.astype(np.dtype(_IDX_DTYPES[code]))
    raw = bytes([0, 0, code, a.ndim]) + np.asarray(a.shape, dtype=">u4").tobytes() + big.tobytes()
    if compress is None:
        compress = path.name.endswith(".gz")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(raw) if compress else raw)
    return path


def fashion_mnist_root(root: str | Path | None = None) -> Path:
    """The folder searched for Fashion-MNIST: ``root``, else ``$DPBOOK_FASHION_MNIST``, else
    ``/usr/share/datasets/fashion-mnist``."""
    if root is not None:
        return Path(root)
    return Path(os.environ.get("DPBOOK_FASHION_MNIST") or FASHION_MNIST_DIR)


def _idx_file(folder: Path, stem: str) -> Path | None:
    for name in (stem + ".gz", stem):
        if (folder / name).is_file():
            return folder / name
    return None


def fashion_mnist_available(root: str | Path | None = None) -> bool:
    """Whether the four Fashion-MNIST IDX files (gzip or plain) are in the folder of :func:`fashion_mnist_root`."""
    folder = fashion_mnist_root(root)
    return all(_idx_file(folder, stem) is not None for pair in FASHION_MNIST_FILES.values() for stem in pair)


def fashion_mnist(split: str = "train", root: str | Path | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Fashion-MNIST images and labels from local IDX files (no download).

    ``split`` is ``"train"`` (60000 images: ``train-images-idx3-ubyte[.gz]``, ``train-labels-idx1-ubyte[.gz]``)
    or ``"test"`` (10000: ``t10k-...``); ``root`` defaults to :func:`fashion_mnist_root`.
    Returns ``(X, y)``: X float32 of shape (n, 28, 28) with the pixels scaled to [0, 1] (byte / 255),
    y int64 in 0..9."""
    if split not in FASHION_MNIST_FILES:
        raise DPValueError(f"split must be 'train' or 'test', got {split!r}")
    folder = fashion_mnist_root(root)
    paths = [_idx_file(folder, stem) for stem in FASHION_MNIST_FILES[split]]
    missing = [stem for stem, p in zip(FASHION_MNIST_FILES[split], paths) if p is None]
    if missing:
        raise DPValueError(
            f"folder {str(folder)!r} has no {', '.join(m + '[.gz]' for m in missing)} "
            "(Debian: apt-get install dataset-fashion-mnist)"
        )
    images, labels = read_idx(paths[0]), read_idx(paths[1])
    if images.ndim != 3 or images.dtype != np.uint8:
        raise DPValueError(
            f"{paths[0]}: expected uint8 images of shape (n, rows, cols), got {images.dtype} {images.shape}"
        )
    if labels.ndim != 1 or len(labels) != len(images):
        raise DPValueError(f"{paths[1]}: expected {len(images)} labels, got shape {labels.shape}")
    if labels.size and (labels.min() < 0 or labels.max() > 9):
        raise DPValueError(f"{paths[1]}: labels must lie in 0..9")
    return (images.astype(np.float32) / np.float32(255.0)), labels.astype(np.int64)


# ---------------------------------------------------------------------------------------------------------------
# The data of the small classification runs: Fashion-MNIST, else scikit-learn's digits, else Gaussian blobs

DATA_KINDS = ("fashion-mnist", "sklearn-digits", "synthetic-blobs")  # best first
DIGITS_SIZE = 1797  # images in scikit-learn's handwritten digits (one pool; no fixed train/test split)
_DIMS = {"fashion-mnist": (784, 10), "sklearn-digits": (64, 10)}
_LABELS = {
    "fashion-mnist": "Fashion-MNIST",
    "sklearn-digits": "scikit-learn's handwritten digits (8x8)",
    "synthetic-blobs": "synthetic Gaussian blobs",
}


def sklearn_digits() -> tuple[np.ndarray, np.ndarray] | None:
    """scikit-learn's handwritten digits, or None when scikit-learn cannot be imported.

    The set ships inside the scikit-learn wheel (``sklearn.datasets.load_digits``; nothing is downloaded):
    1797 images of 8x8 pixels with integer grey levels 0..16, labels 0..9. Returns ``(X, y)``: X float32 of
    shape (1797, 64) with the pixels scaled to [0, 1] (level / 16, row-major), y int64."""
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        return None
    d = load_digits()
    X = np.asarray(d.data, dtype=np.float64)
    y = np.asarray(d.target, dtype=np.int64)
    if X.shape != (DIGITS_SIZE, 64) or y.shape != (DIGITS_SIZE,) or X.min() < 0 or X.max() > 16:
        raise DPValueError(
            f"sklearn.datasets.load_digits returned data of shape {X.shape}, levels "
            f"{X.min()}..{X.max()}; expected ({DIGITS_SIZE}, 64) in 0..16"
        )
    return (X / 16.0).astype(np.float32), y


def digits_available() -> bool:
    """Whether scikit-learn (and so its digits) can be imported."""
    try:
        import sklearn.datasets  # noqa: F401
    except ImportError:
        return False
    return True


def _sklearn_version() -> str:
    import sklearn

    return str(getattr(sklearn, "__version__", "?"))


def classification_kind(root: str | Path | None = None) -> str:
    """Which data :func:`fashion_mnist_data` would use now: ``"fashion-mnist"`` when the four IDX files are in
    :func:`fashion_mnist_root` (``root``, ``$DPBOOK_FASHION_MNIST`` or Debian's folder), else
    ``"sklearn-digits"`` when scikit-learn is importable, else ``"synthetic-blobs"``."""
    if fashion_mnist_available(root):
        return "fashion-mnist"
    if digits_available():
        return "sklearn-digits"
    return "synthetic-blobs"


def classification_label(kind: str) -> str:
    """A reader's name for a data kind of :data:`DATA_KINDS` (for tables and warnings)."""
    if kind not in _LABELS:
        raise DPValueError(f"kind must be one of {', '.join(DATA_KINDS)}, got {kind!r}")
    return _LABELS[kind]


def fit_split(n_train: int, n_test: int, kind: str, multiple: int = 1) -> tuple[int, int]:
    """Training and test sizes that the data of ``kind`` can supply, equal to the requested ones when they fit.

    Fashion-MNIST has separate pools of 60000 training and 10000 test images and blobs are unlimited: the sizes
    are returned unchanged (the loader refuses sizes beyond the pools). scikit-learn's digits are one pool of
    N = 1797 images split at random, so ``n_train + n_test <= N`` is needed; when the request is larger both are
    scaled by ``f = N / (n_train + n_test)``: ``n_train' = multiple * floor(f n_train / multiple)`` (kept a
    multiple of ``multiple``, e.g. the batch size, and at least ``multiple``) and the rest of the pool,
    ``n_test' = N - n_train'``, is the test set."""
    n_train = check_positive_int("n_train", n_train)
    n_test = check_positive_int("n_test", n_test)
    multiple = check_positive_int("multiple", multiple)
    if kind not in DATA_KINDS:
        raise DPValueError(f"kind must be one of {', '.join(DATA_KINDS)}, got {kind!r}")
    if kind != "sklearn-digits" or n_train + n_test <= DIGITS_SIZE:
        return n_train, n_test
    if multiple >= DIGITS_SIZE:
        raise DPValueError(f"multiple must be < the {DIGITS_SIZE} digits images, got {multiple}")
    f = DIGITS_SIZE / (n_train + n_test)
    new_train = max(multiple, multiple * math.floor(f * n_train / multiple))
    return new_train, DIGITS_SIZE - new_train


@dataclass(frozen=True)
class DataPlan:
    """What a small classification run will train on (:func:`classification_plan`)."""

    kind: str  # one of DATA_KINDS
    n_train: int
    n_test: int
    dim: int  # input features
    n_classes: int
    requested: tuple[int, int]  # (n_train, n_test) asked for

    @property
    def resized(self) -> bool:
        """Whether the sizes differ from the requested ones (the data could not supply them)."""
        return (self.n_train, self.n_test) != self.requested

    @property
    def label(self) -> str:
        """E.g. ``"scikit-learn's handwritten digits (8x8), 1700 training / 97 test images"``."""
        unit = "points" if self.kind == "synthetic-blobs" else "images"
        return f"{classification_label(self.kind)}, {self.n_train} training / {self.n_test} test {unit}"


def classification_plan(
    n_train: int,
    n_test: int,
    root: str | Path | None = None,
    multiple: int = 1,
    fallback_dim: int = 20,
    fallback_classes: int = 2,
) -> DataPlan:
    """The data :func:`fashion_mnist_data` will use (:func:`classification_kind`) with sizes that fit them
    (:func:`fit_split`) and their input dimension and number of classes (784 and 10 for Fashion-MNIST, 64 and
    10 for the digits, ``fallback_dim`` and ``fallback_classes`` for the blobs)."""
    kind = classification_kind(root)
    a, b = fit_split(n_train, n_test, kind, multiple)
    dim, k = _DIMS.get(
        kind,
        (check_positive_int("fallback_dim", fallback_dim), check_positive_int("fallback_classes", fallback_classes)),
    )
    return DataPlan(kind=kind, n_train=a, n_test=b, dim=dim, n_classes=k, requested=(int(n_train), int(n_test)))


def fashion_mnist_data(
    n_train: int,
    n_test: int,
    root: str | Path | None = None,
    seed: int = 0,
    fallback_dim: int = 20,
    fallback_classes: int = 2,
    fallback_separation: float = 2.0,
):
    """Training and test data for a small classification run from the best data at hand, saying which.

    1. With the Fashion-MNIST files present (:func:`fashion_mnist_available`): ``n_train`` images drawn at random
       without replacement (``seed``) from the 60000 training images and ``n_test`` from the 10000 test images,
       flattened to 784 features in [0, 1]; ``source`` is ``"fashion-mnist:<folder>"``.
    2. Otherwise, when scikit-learn is importable: its handwritten digits
       (:func:`sklearn_digits`, 64 features in [0, 1], 10 classes), a random permutation (``seed``) of the 1797
       images split into ``n_train`` training and the next ``n_test`` test images (disjoint; ``n_train + n_test
       <= 1797``, see :func:`fit_split`); ``source`` is ``"sklearn-digits:scikit-learn <version>"``.
    3. Otherwise :func:`gaussian_blobs` (``fallback_dim`` features, ``fallback_classes`` classes, split by
       :func:`train_test_split`) with ``source = "synthetic-blobs"``.

    The caller must report a fallback. Returns ``(X_train, y_train, X_test, y_test, source)``."""
    n_train = check_positive_int("n_train", n_train)
    n_test = check_positive_int("n_test", n_test)
    folder = fashion_mnist_root(root)
    if fashion_mnist_available(folder):
        rng = np.random.default_rng(seed)
        out = []
        for split, n in (("train", n_train), ("test", n_test)):
            X, y = fashion_mnist(split, folder)
            if n > len(X):
                raise DPValueError(f"n_{split} must be <= the {len(X)} Fashion-MNIST {split} images, got {n}")
            idx = np.sort(rng.choice(len(X), size=n, replace=False))
            out += [X[idx].reshape(n, -1), y[idx]]
        return (*out, f"fashion-mnist:{folder}")
    digits = sklearn_digits()
    if digits is not None:
        X, y = digits
        if n_train + n_test > len(X):
            raise DPValueError(
                f"n_train + n_test must be <= the {len(X)} images of scikit-learn's digits, got "
                f"{n_train} + {n_test} (dputils.data.fit_split chooses sizes that fit)"
            )
        perm = np.random.default_rng(seed).permutation(len(X))
        a, b = np.sort(perm[:n_train]), np.sort(perm[n_train : n_train + n_test])
        return X[a], y[a], X[b], y[b], f"sklearn-digits:scikit-learn {_sklearn_version()}"
    X, y = gaussian_blobs(
        n_train + n_test, dim=fallback_dim, n_classes=fallback_classes, separation=fallback_separation, seed=seed
    )
    return (*train_test_split(X, y, n_train, seed=seed), "synthetic-blobs")
