"""The models of a folder and the role of each: onnxruntime-genai's genai_config.json names a
file per part of a pipeline (``decoder``, ``encoder``, ``vision``, ``speech``, ``embedding``),
optimum's seq2seq folder holds ``encoder_model.onnx`` beside its decoder. ``ortlab.load(folder)``
loads the text decoder and says what else is there; ``ortlab.load(folder, part=...)`` loads
another part, which every verb then benchmarks, profiles and places as any model."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ortlab.core.decoder import decoder_file
from ortlab.core.errors import InvalidModelError

__all__ = ["FolderPart", "folder_line", "folder_parts", "part_file"]

SECTIONS = ("decoder", "encoder", "vision", "speech", "embedding")
"""genai_config.json's model sections that name a file, the text decoder first."""

_ROLES = {
    "decoder": "the text decoder",
    "vision": "the vision encoder: images in, embeddings for the decoder out",
    "speech": "the speech encoder: audio in, embeddings for the decoder out",
    "embedding": "the embedding: token ids and the encoders' features in, the decoder's input out",
}
OPTIMUM_ENCODER = "encoder_model.onnx"


@dataclass(frozen=True)
class FolderPart:
    """One model of a folder: the config's name for it, its file, and what it does."""

    section: str
    """'decoder', 'encoder', 'vision', 'speech' or 'embedding'."""
    file: str
    role: str


def folder_parts(folder: Path, loaded: Path | None = None) -> tuple[FolderPart, ...]:
    """The models ``folder`` holds, in genai_config.json's order (the text decoder first), each
    whose file is there; optimum's encoder beside ``loaded`` (its decoder). Empty for a folder
    of one model."""
    try:
        config = json.loads((folder / "genai_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        config = {}
    model = config.get("model") if isinstance(config, dict) else None
    parts: list[FolderPart] = []
    if isinstance(model, dict):
        kind = str(model.get("type") or "")
        for section in SECTIONS:
            entry = model.get(section)
            name = entry.get("filename") if isinstance(entry, dict) else None
            if isinstance(name, str) and (folder / name).is_file():
                parts.append(FolderPart(section, name, _role(section, kind)))
    elif loaded is not None and (folder / OPTIMUM_ENCODER).is_file():
        parts = [
            FolderPart("decoder", loaded.name, _ROLES["decoder"]),
            FolderPart("encoder", OPTIMUM_ENCODER, "the encoder: its states feed the decoder"),
        ]
    return tuple(parts) if len(parts) > 1 else ()


def _role(section: str, kind: str) -> str:
    if section == "encoder":
        audio = kind == "whisper"
        return (
            "the audio encoder: log-mel features in, states and cross-attention K/V out"
            if audio
            else "the encoder: its states feed the decoder"
        )
    return _ROLES[section]


def folder_line(parts: tuple[FolderPart, ...], loaded: str) -> str:
    """'a folder of 2 models: decoder.onnx, the text decoder (loaded); encoder.onnx, the audio
    encoder: … (part="encoder")' ('' for a folder of one)."""
    if not parts:
        return ""
    said = [
        f"{p.file}, {p.role} ({'loaded' if p.file == loaded else f'part={p.section!r}'})"
        for p in parts
    ]
    return f"a folder of {len(parts)} models: " + "; ".join(said)


def part_file(folder: Path, part: str) -> Path:
    """The file of ``part`` (a section name or a file name) in ``folder``; an
    InvalidModelError naming the parts there when it holds no such part."""
    if not folder.is_dir():
        raise InvalidModelError(
            f"part={part!r} picks one model of a folder, and {folder} is not a folder: load "
            "the file without part=, or pass the folder."
        )
    parts = folder_parts(folder, decoder_file(folder))
    for p in parts:
        if part in (p.section, p.file):
            return folder / p.file
    if not parts:
        raise InvalidModelError(
            f"{folder} holds one model only: load the folder without part= (--part on the "
            "command line)."
        )
    held = ", ".join(f'"{p.section}" ({p.file})' for p in parts)
    raise InvalidModelError(
        f"{folder} has no part {part!r}: it holds {held}. Pass one of those as part= (--part "
        "on the command line), or load the folder without it for its text decoder."
    )
